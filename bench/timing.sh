# Sourced by the benchmarks: wall-clock helpers in milliseconds.
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
# median < numbers, one per line
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# time_ms CMD...: runs it quietly, prints its wall time
time_ms() { local t0; t0=$(now_ms); "$@" >/dev/null; echo $(( $(now_ms) - t0 )); }
# med N...: the median of its arguments
med() { printf '%s\n' "$@" | median; }
# ratio A B: A/B with two decimals (0 when B is 0)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
