#!/usr/bin/env bash
# Sets up Airlock on Debian 12, as root: installs the Debian packages it needs, builds the guest
# kernel (cached in /var/cache/airlock keyed by its inputs), builds Airlock (through a compiler
# cache in /var/cache/airlock/ccache, so a fresh clone builds in a minute), links `airlock`
# into /usr/local/bin, and builds the default image. Idempotent, and quick when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "setup.sh: run as root (it installs packages)" >&2; exit 1; }

packages=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev clang-format
  libabsl-dev libgtest-dev libext2fs-dev libarchive-dev libssl-dev nlohmann-json3-dev libcli11-dev
  qemu-system-x86 linux-source-6.1 bc bison flex libelf-dev xz-utils mmdebstrap e2fsprogs
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libsqlite3-dev sqlite3
  openssl git libcurl4-openssl-dev docker-registry libevent-dev libhttp-parser-dev libcpp-httplib-dev
  python3-grpcio python3-protobuf golang-go golang-google-grpc-dev golang-google-protobuf-dev
  golang-github-golang-protobuf-1-5-dev protoc-gen-go protoc-gen-go-grpc
  bubblewrap ccache publicsuffix
  librust-h2-dev librust-http-dev librust-prost-dev librust-prost-build-dev librust-tokio-dev
  librust-bytes-dev librust-futures-util-dev librust-rustls-dev librust-tokio-rustls-dev
  librust-rustls-pemfile-dev librust-libc-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# The MCP tests drive `airlock mcp` with the official MCP SDK client, which runs on Node.js.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: installing nodejs npm" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm >&2
fi

# The Rust SDK builds offline against Debian's crates (above) with any cargo from rustc 1.63 on:
# the machine's own if it has one, else Debian's.
if ! command -v cargo >/dev/null; then
  echo "setup: installing cargo" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cargo >&2
fi

# Members of this group may use airlockd's socket (each sees only their own sessions).
getent group airlock >/dev/null || groupadd --system airlock

kernel=$(scripts/build-kernel.sh)

# What a user runs: the CLI and its helpers, airlockd and the guest's initramfs (the tests and
# the SDKs are built by scripts/test.sh).
# The unit tests run in scripts/test.sh's sanitized build (build-asan), not in this one.
scripts/configure.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAIRLOCK_UNIT_TESTS=OFF >&2
ninja --quiet -C build airlock airlockd airlock-tools airlock-dashboard initramfs >&2
ln -sfn "$PWD/build/airlock" /usr/local/bin/airlock
ln -sfn "$PWD/build/airlockd" /usr/local/bin/airlockd  # packaging/airlockd.service runs this

home=${AIRLOCK_HOME:-/var/lib/airlock}
mkdir -p "$home/kernel"
ln -sfn "$kernel" "$home/kernel/vmlinux"

# The default image, from Debian packages (its root filesystem is cached in /var/cache/airlock).
# pip installs into the (disposable) guest's system Python; git, curl and the tools agents
# reach for (ps, free, top, less, unzip, jq) for their work.
build/airlock image build --debian bookworm \
  --packages python3,python3-pip,git,ca-certificates,curl,procps,less,unzip,jq \
  --env PIP_BREAK_SYSTEM_PACKAGES=1 --tag airlock/bookworm-python >&2
echo "setup: ready" >&2
