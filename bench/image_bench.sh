#!/usr/bin/env bash
# Pulling an image of about 100 MB from a registry on loopback (Debian's docker-registry) and
# converting it to ext4, against baselines measured in the same run: fetching the same blobs
# with curl (the transfer floor) and reading them through gunzip + tar (the decompression
# floor). Then the first `airlock run` of the freshly pulled image (cold boot + template) and
# the second (template restore), next to `airlock run` of the default image.
# Usage: bench/image_bench.sh [ROUNDS]   (after scripts/setup.sh; runs its own registry and airlockd)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
root=$PWD
airlock=$root/build/airlock
kernel=$(readlink -f "${AIRLOCK_KERNEL:-/var/lib/airlock/kernel/vmlinux}")
host_images=${AIRLOCK_HOME:-/var/lib/airlock}/images
rootfs_tar=$(ls /var/cache/airlock/rootfs/debian-*.tar 2>/dev/null | head -1)
[ -n "$rootfs_tar" ] || { echo "image_bench: run scripts/setup.sh first" >&2; exit 1; }

. bench/timing.sh

work=$(mktemp -d /var/tmp/airlock-imagebench-XXXXXX)
chmod 755 "$work"  # QEMU runs unprivileged and must reach the images
registry_pid= daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  [ -n "$registry_pid" ] && kill "$registry_pid" 2>/dev/null && wait "$registry_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The registry, on a free loopback port.
port=$((20000 + RANDOM % 20000))
cat > "$work/registry.yml" <<EOF
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $work/registry
http:
  addr: 127.0.0.1:$port
EOF
/usr/bin/docker-registry serve "$work/registry.yml" >>"$work/registry.log" 2>&1 &
registry_pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v2/" >/dev/null && break; sleep 0.1; done
kill -0 "$registry_pid" 2>/dev/null || { cat "$work/registry.log" >&2; exit 1; }

# The image: the default image's root filesystem and 40 MB of incompressible data, gzipped
# as registries serve layers, as an OCI layout archive.
layout=$work/layout
mkdir -p "$layout/blobs/sha256"
blob() {  # blob FILE MEDIATYPE -> a descriptor, the file moved into the layout
  local digest size
  digest=$(sha256sum "$1" | cut -d' ' -f1); size=$(stat -c %s "$1")
  mv "$1" "$layout/blobs/sha256/$digest"
  printf '{"mediaType":"%s","digest":"sha256:%s","size":%s}' "$2" "$digest" "$size"
}
gzip -1 -c "$rootfs_tar" > "$work/base.tar.gz"
mkdir -p "$work/data/srv" && head -c 40000000 /dev/urandom > "$work/data/srv/noise"
tar -C "$work/data" -czf "$work/data.tar.gz" .
gz=application/vnd.oci.image.layer.v1.tar+gzip
layers="$(blob "$work/base.tar.gz" $gz),$(blob "$work/data.tar.gz" $gz)"
printf '{"architecture":"amd64","os":"linux","config":{"Cmd":["true"]},"rootfs":{"type":"layers"}}' > "$work/config.json"
config=$(blob "$work/config.json" application/vnd.oci.image.config.v1+json)
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":%s,"layers":[%s]}' \
  "$config" "$layers" > "$work/manifest.json"
manifest=$(blob "$work/manifest.json" application/vnd.oci.image.manifest.v1+json)
printf '{"schemaVersion":2,"manifests":[%s]}' "$manifest" > "$layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' > "$layout/oci-layout"
tar -C "$layout" -cf "$work/image.tar" .
ref=localhost:$port/bench/image:1
$airlock image push "$work/image.tar" "$ref" >/dev/null
layer_digests=$(grep -o 'sha256:[0-9a-f]*' <<<"$layers")
compressed=0
for d in $layer_digests; do compressed=$((compressed + $(stat -c %s "$layout/blobs/sha256/${d#sha256:}"))); done

# Baselines: the same blobs with curl; the same layers through gunzip + tar.
fetch=() unpack=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms)
  for d in $layer_digests; do curl -sf -o /dev/null "http://127.0.0.1:$port/v2/bench/image/blobs/$d"; done
  fetch+=($(( $(now_ms) - t0 )))
  t0=$(now_ms)
  for d in $layer_digests; do gzip -dc "$layout/blobs/sha256/${d#sha256:}" | tar -tf - >/dev/null; done
  unpack+=($(( $(now_ms) - t0 )))
done

# An airlockd of its own for a fresh home (pulls run in airlockd), on its own socket.
start_daemon() {
  export AIRLOCK_HOME=$1 AIRLOCK_SOCKET=$1/airlockd.sock
  mkdir -p "$AIRLOCK_HOME/kernel"
  ln -sf "$kernel" "$AIRLOCK_HOME/kernel/vmlinux"
  "$root/build/airlockd" --socket "$AIRLOCK_SOCKET" 2>>"$work/airlockd.log" &
  daemon_pid=$!
  for _ in $(seq 100); do [ -S "$AIRLOCK_SOCKET" ] && break; sleep 0.05; done
}
stop_daemon() { kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true; daemon_pid=; }

# airlock image pull into an empty store, each round; then once more into a full one.
pull=()
for i in $(seq "$rounds"); do
  [ -z "$daemon_pid" ] || stop_daemon
  start_daemon "$work/home-$i"
  pull+=("$(time_ms $airlock image pull "$ref")")
done
again=$(time_ms $airlock image pull "$ref")
size_mib=$(( $(stat -c %s "$(ls "$AIRLOCK_HOME"/images/blobs/*/rootfs.ext4)") / 1048576 ))

# First and second `airlock run` of the pulled image, and of the default image (the host's
# store, linked in), through the daemon of this home.
cp "$host_images"/refs/* "$AIRLOCK_HOME/images/refs/"
for b in "$host_images"/blobs/*; do
  [ -e "$AIRLOCK_HOME/images/blobs/$(basename "$b")" ] || ln -s "$b" "$AIRLOCK_HOME/images/blobs/"
done
first=$(time_ms $airlock run "$ref")
$airlock run -- true >/dev/null  # the default image's template
second=() default=()
for _ in $(seq "$rounds"); do
  second+=("$(time_ms $airlock run "$ref")")
  default+=("$(time_ms $airlock run -- true)")
done

m() { printf '%s\n' "$@" | median; }
fetch_ms=$(m "${fetch[@]}") unpack_ms=$(m "${unpack[@]}") pull_ms=$(m "${pull[@]}")
second_ms=$(m "${second[@]}") default_ms=$(m "${default[@]}")
mb=$(awk -v b="$compressed" 'BEGIN {printf "%.1f", b / 1e6}')
row() { printf '%-52s %10s   %s\n' "$1" "$2" "$3"; }
row "measure (median of $rounds; image $mb MB compressed, ext4 $size_mib MiB)" "measured" ""
row "curl fetch of the layers (transfer floor)" "$fetch_ms ms" ""
row "gunzip + tar -t of the layers (decompression floor)" "$unpack_ms ms" ""
row "airlock image pull, empty store (pull + convert)" "$pull_ms ms" \
  "$(awk -v b="$compressed" -v t="$pull_ms" 'BEGIN {printf "%.1f MB/s compressed", b / 1e3 / t}')"
row "airlock image pull, already there" "$again ms" ""
row "first airlock run of it (cold boot + template)" "$first ms" ""
row "second airlock run of it (template restore)" "$second_ms ms" ""
row "airlock run -- true, default image (template)" "$default_ms ms" ""
printf '%-52s %10s\n' "ratio pull / (fetch + decompression)" \
  "$(awk -v a="$pull_ms" -v b="$fetch_ms" -v c="$unpack_ms" 'BEGIN {printf "%.2f", a / (b + c)}')"
printf '%-52s %10s\n' "ratio second run / default image run" \
  "$(awk -v a="$second_ms" -v b="$default_ms" 'BEGIN {printf "%.2f", a / b}')"
