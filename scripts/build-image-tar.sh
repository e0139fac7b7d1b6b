#!/usr/bin/env bash
# Produces the root filesystem tar of the default image from Debian packages with
# mmdebstrap, cached outside the build tree keyed by the suite, the package list and
# this script. Prints the path of the tar. The tar is never unpacked on the host:
# `airlock image import` turns it into a read-only ext4 image with libarchive + libext2fs.
set -euo pipefail
suite=${1:-bookworm}
packages=${2:-python3}
cache=${AIRLOCK_CACHE:-/var/cache/airlock}
key=$( { echo "$suite"; echo "$packages"; cat "$0"; } | sha256sum | cut -c1-16)
out="$cache/rootfs/$key.tar"
if [ -f "$out" ]; then echo "$out"; exit 0; fi
mkdir -p "$cache/rootfs"
# Use the host's own apt sources when it has them, so a site with a local mirror works.
mirror=()
for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
  if [ -s "$f" ]; then mirror=("$f"); break; fi
done
echo "build-image-tar: mmdebstrap $suite minbase + $packages" >&2
mmdebstrap --quiet --variant=minbase --include="$packages" --format=tar \
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  "$suite" "$out.tmp" "${mirror[@]}" >&2
sync -f "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
