#!/usr/bin/env bash
# Builds the guest kernel (vmlinux, PVH-bootable) from Debian's linux-source-6.1 with
# kernel/airlock.config, and caches it outside the build tree keyed by a hash of the
# config, this script and the source package version. Prints the path of the vmlinux.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cache=${AIRLOCK_CACHE:-/var/cache/airlock}
src_tar=/usr/src/linux-source-6.1.tar.xz
[ -f "$src_tar" ] || { echo "build-kernel: $src_tar missing; run scripts/setup.sh (installs linux-source-6.1)" >&2; exit 1; }
version=$(dpkg-query -W -f='${Version}' linux-source-6.1)
key=$( { echo "$version"; cat "$here/kernel/airlock.config" "$0"; } | sha256sum | cut -c1-16)
out="$cache/kernel/$key"
if [ -f "$out/vmlinux" ]; then echo "$out/vmlinux"; exit 0; fi
work="$cache/kernel/build-$key"
rm -rf "$work"; mkdir -p "$work"
echo "build-kernel: building guest kernel $key (linux-source $version); takes several minutes" >&2
tar -xJf "$src_tar" -C "$work"
srcdir="$work/linux-source-6.1"
make -C "$srcdir" -s ARCH=x86_64 KCONFIG_ALLCONFIG="$here/kernel/airlock.config" allnoconfig >&2
# Every option we asked for must have survived dependency resolution.
missing=0
while IFS= read -r line; do
  case "$line" in CONFIG_*=y) grep -qx "$line" "$srcdir/.config" || { echo "build-kernel: $line did not take" >&2; missing=1; };; esac
done < "$here/kernel/airlock.config"
[ "$missing" = 0 ] || exit 1
make -C "$srcdir" -s ARCH=x86_64 -j"$(nproc)" vmlinux >&2
mkdir -p "$out.tmp"
cp "$srcdir/vmlinux" "$out.tmp/vmlinux"
cp "$srcdir/.config" "$out.tmp/config"
make -C "$srcdir" -s ARCH=x86_64 kernelrelease > "$out.tmp/release"
sync -f "$out.tmp/vmlinux"
rm -rf "$out"; mv "$out.tmp" "$out"
rm -rf "$work"
echo "$out/vmlinux"
