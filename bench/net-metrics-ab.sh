#!/usr/bin/env bash
# Usage: bench/net-metrics-ab.sh [NSPERF] [ROUNDS] [SECONDS]; run under `flock /work/bench.lock`.
# A B A B: nsperf net --loopback without and with --metrics-listen (scraped 10 times a
# second during the run), both run the same way (in the background, JSON to a file, the
# shell polling every 0.1 s); medians of the throughput.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bin=${1:-./target/release/nsperf}
rounds=${2:-5}
t=${3:-5}
a=(); b=()
tp() { python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["throughput_bps"])' < "$1"; }
one() { # $1: with metrics (1) or not (0); prints the scrape count
  local args=(net --loopback -t "$t" --json) n=0
  [ "$1" = 1 ] && args+=(--metrics-listen 127.0.0.1:19470)
  "$bin" "${args[@]}" > "$tmp/r.json" 2>/dev/null &
  local pid=$!
  while kill -0 $pid 2>/dev/null; do
    if [ "$1" = 1 ]; then curl -s -o /dev/null http://127.0.0.1:19470/metrics && n=$((n+1)); fi
    sleep 0.1
  done
  wait $pid
  echo $n
}
for i in $(seq 1 "$rounds"); do
  one 0 >/dev/null; a+=("$(tp "$tmp/r.json")")
  n=$(one 1); b+=("$(tp "$tmp/r.json")")
  echo "round $i: without ${a[-1]} with ${b[-1]} ($n scrapes)  load $(cut -d' ' -f1-3 /proc/loadavg)"
done
python3 - "${a[*]}" "${b[*]}" <<'PY'
import sys, statistics as st
a=[float(x) for x in sys.argv[1].split()]; b=[float(x) for x in sys.argv[2].split()]
ma, mb = st.median(a), st.median(b)
print(f"median without {ma/1e9:.2f} Gbit/s, with {mb/1e9:.2f} Gbit/s, ratio {mb/ma:.3f}")
PY
