#!/usr/bin/env bash
# Configures a build tree with the compiler cache in /var/cache/airlock/ccache (outside the
# build tree, keyed by content, so a fresh clone in another folder builds from it), unless it
# is configured that way already. Usage: scripts/configure.sh BUILD_DIR [CMAKE_ARGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1
shift
ccache_dir=${AIRLOCK_CACHE:-/var/cache/airlock}/ccache
if [ -f "$dir/build.ninja" ] && grep -qx "AIRLOCK_CCACHE_DIR:PATH=$ccache_dir" "$dir/CMakeCache.txt"; then
  exit 0
fi
mkdir -p "$ccache_dir"
# Two builds (plain and sanitized) of the whole tree fit with room for a few revisions.
CCACHE_DIR=$ccache_dir ccache --max-size=6G >/dev/null
cmake -S . -B "$dir" -G Ninja -DAIRLOCK_CCACHE_DIR="$ccache_dir" "$@" >/dev/null
