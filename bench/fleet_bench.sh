#!/usr/bin/env bash
# Handing a 512 MiB session between two hosts of a fleet (README, "Many hosts") against the same
# bytes moved by a plain copy, all in this run: a blob store directory and an etcd on loopback,
# host A pausing (snapshot + upload) and host B resuming (download + verify + restore), beside
# one host alone pausing and resuming, and `cp --sparse=always` of that host's snapshot files
# into and out of the same store's filesystem; and `airlock ls` on each (the fleet's from the
# session index in etcd).
# The guest holds 128 MiB of random data in RAM, so the snapshot has that much to move; the same
# session with a volume holding 64 MiB of random data shows what a volume adds to the hand-off.
# Usage: bench/fleet_bench.sh [ROUNDS]   (after scripts/test.sh has installed etcd-server)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
. bench/private_daemon.sh
. bench/timing.sh
. bench/loopback_etcd.sh

fleet=(--blob-store "file://$work/blobs" --etcd "$etcd_url" --host-lease-ttl 5)

# A session holding 128 MiB of random data in its RAM (tmpfs); prints its id.
filled_session() {
  local id
  id=$($airlock session create --idle-timeout 0)
  $airlock exec "$id" -- sh -c 'head -c 134217728 /dev/urandom > /dev/shm/data' >/dev/null
  echo "$id"
}

solo_pause=() solo_resume=() copy_in=() copy_out=() up=() down=() solo_ls=() fleet_ls=()
vol_up=() vol_down=()
for round in $(seq "$rounds"); do
  # One host: pause and resume, and a plain copy of its snapshot out and back.
  start_daemon "solo$round" --pool 0
  id=$(filled_session)
  solo_pause+=("$(time_ms $airlock pause "$id")")
  snap=$AIRLOCK_HOME/sessions/$id/snapshot
  t0=$(now_ms); mkdir -p "$work/copy$round"
  cp --sparse=always "$snap"/* "$work/copy$round/"; sync -f "$work/copy$round"
  copy_in+=($(( $(now_ms) - t0 )))
  t0=$(now_ms); mkdir -p "$work/back$round"
  cp --sparse=always "$work/copy$round"/* "$work/back$round/"; sync -f "$work/back$round"
  copy_out+=($(( $(now_ms) - t0 )))
  solo_resume+=("$(time_ms $airlock resume "$id")")
  solo_ls+=("$(time_ms $airlock ls)")
  $airlock rm "$id" >/dev/null
  rm -rf "$work/copy$round" "$work/back$round"

  # Two hosts: A pauses (and uploads), B resumes (downloads, verifies, restores).
  start_daemon "a$round" --pool 0 "${fleet[@]}" --host-id "a$round"
  id=$(filled_session)
  up+=("$(time_ms $airlock pause "$id")")
  $airlock volume create "data$round" --size 256m >/dev/null
  vid=$($airlock session create --idle-timeout 0 --volume "data$round:/data")
  $airlock exec "$vid" -- sh -c 'head -c 134217728 /dev/urandom > /dev/shm/data &&
    head -c 67108864 /dev/urandom > /data/f && sync' >/dev/null
  vol_up+=("$(time_ms $airlock pause "$vid")")
  mkdir -p "$work/b$round"
  cp "$AIRLOCK_HOME/host.key" "$work/b$round/host.key"
  start_daemon "b$round" --pool 0 "${fleet[@]}" --host-id "b$round"
  down+=("$(time_ms $airlock resume "$id")")
  fleet_ls+=("$(time_ms $airlock ls)")  # the fleet's index, read from etcd
  vol_down+=("$(time_ms $airlock resume "$vid")")
  $airlock rm "$id" >/dev/null; $airlock rm "$vid" >/dev/null
done

m() { printf '%s\n' "$@" | median; }
sp=$(m "${solo_pause[@]}") sr=$(m "${solo_resume[@]}") ci=$(m "${copy_in[@]}") co=$(m "${copy_out[@]}")
u=$(m "${up[@]}") d=$(m "${down[@]}") sl=$(m "${solo_ls[@]}") fl=$(m "${fleet_ls[@]}")
vu=$(m "${vol_up[@]}") vd=$(m "${vol_down[@]}")
stored=$(du -sm "$work/blobs" | cut -f1)
row() { printf '%-52s %10s   %s\n' "$1" "$2" "$3"; }
row "measure ($accel, 512 MiB guest, median of $rounds)" "measured" "ratio"
row "one host: pause" "$sp ms" "-"
row "one host: resume" "$sr ms" "-"
row "plain copy of its snapshot files into the store" "$ci ms" "-"
row "plain copy of them back out" "$co ms" "-"
row "fleet: pause + upload (host A)" "$u ms" "$(ratio "$u" $((sp + ci)))x pause + copy"
row "fleet: download + resume (host B)" "$d ms" "$(ratio "$d" $((co + sr)))x copy + resume"
row "fleet: pause + upload, with a 64 MiB-filled volume" "$vu ms" "$(ratio "$vu" "$u")x without"
row "fleet: download + resume, with that volume" "$vd ms" "$(ratio "$vd" "$d")x without"
row "one host: airlock ls" "$sl ms" "-"
row "fleet: airlock ls (every host's sessions, from etcd)" "$fl ms" "$(ratio "$fl" "$sl")x one host"
row "blob store after $rounds rounds" "$stored MiB" "-"
