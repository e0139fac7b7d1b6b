#!/usr/bin/env bash
# Dockerfile builds against baselines measured in the same run, on a private airlockd:
#   a cold build (--no-cache) of a small app (WORKDIR, COPY of the app and 200 small files, two
#   RUNs, CMD) against the same steps done by hand in one session (create, write the files in,
#   run the two commands, remove): what the build's VMs, layers and image cost beyond the work
#   a rebuild with every step cached, against `airlock run IMAGE -- true` (a user's next step)
# Usage: bench/dockerfile_bench.sh [ROUNDS]   (after scripts/setup.sh; as root)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
. bench/private_home.sh
. bench/timing.sh

ctx=$home/context
mkdir -p "$ctx/data"
for i in $(seq 200); do echo "row $i" > "$ctx/data/f$i.txt"; done
echo 'import os; print(len(os.listdir("data")), open("built.txt").read())' > "$ctx/app.py"
cat > "$ctx/Dockerfile" <<'EOF'
FROM airlock/bookworm-python
WORKDIR /srv/app
COPY app.py ./
COPY data/ data/
RUN python3 -c "open('built.txt', 'w').write('built')"
RUN python3 -m compileall -q /srv/app
CMD ["python3", "app.py"]
EOF
$airlock rm "$($airlock session create)" >/dev/null   # the default image's template, made once

cold=(); by_hand=(); cached=(); run=()
for _ in $(seq "$rounds"); do
  t0=$(now_ms); $airlock image build --no-cache -t bench/app "$ctx" >/dev/null 2>&1; t1=$(now_ms)
  cold+=($((t1 - t0)))
  t0=$(now_ms); $airlock image build -t bench/app "$ctx" >/dev/null 2>&1; t1=$(now_ms)
  cached+=($((t1 - t0)))
  t0=$(now_ms); $airlock run bench/app -- true; t1=$(now_ms); run+=($((t1 - t0)))
  t0=$(now_ms)
  id=$($airlock session create)
  $airlock exec "$id" -- mkdir -p /srv/app/data
  $airlock file write "$id" /srv/app/app.py < "$ctx/app.py"
  tar -C "$ctx" -cf - data | $airlock exec -i "$id" -- tar -C /srv/app -xf -
  $airlock exec -w /srv/app "$id" -- python3 -c "open('built.txt', 'w').write('built')"
  $airlock exec "$id" -- python3 -m compileall -q /srv/app
  $airlock rm "$id" >/dev/null
  t1=$(now_ms); by_hand+=($((t1 - t0)))
done

printf '%-62s %9s %9s %7s\n' "measure (ms, median of $rounds)" "build" "baseline" "ratio"
printf '%-62s %9s %9s %7s\n' "cold build (--no-cache) vs the same steps by hand in a session" \
  "$(med "${cold[@]}")" "$(med "${by_hand[@]}")" "$(ratio "$(med "${cold[@]}")" "$(med "${by_hand[@]}")")"
printf '%-62s %9s %9s %7s\n' "rebuild, every step cached vs airlock run IMAGE -- true" \
  "$(med "${cached[@]}")" "$(med "${run[@]}")" "$(ratio "$(med "${cached[@]}")" "$(med "${run[@]}")")"
