#!/usr/bin/env bash
# The cost of nsperf's mirror itself (issue 26): the same write workload run natively and
# mirrored to an `nsperf io peer` on loopback, both copies in tmpfs so that no disk and no
# link is the limit, only the mirror's own work (a writev per write, the peer's read and
# write, the ack, the wake-ups). Each run is `io run --replicate-compare`: the native pass
# and the mirrored pass back to back, so each pair shares the machine's state. RUNS rounds,
# the protocols alternating inside each round; medians of the per-run ratios.
#
#   flock /work/bench.lock bench/mirror-overhead.sh [NSPERF=target/release/nsperf] [RUNS=5]
#
# Cases (|-separated `nsperf io run` flags): override with CASES=...
set -euo pipefail
BIN=${1:-target/release/nsperf}
RUNS=${2:-5}
BASE=${BENCH_DIR:-/dev/shm/nsperf-mirror-bench}
IFS='|' read -r -a CASES <<<"${CASES:--w seqwrite -b 1m -s 512m|-w randwrite -b 4k -s 64m --time 3s|-w randwrite -b 4k -s 64m --time 3s --iodepth 8}"
PROTOS=(A B C)
mkdir -p "$BASE/local" "$BASE/peer"
PORT=$((20000 + RANDOM % 20000))
"$BIN" io peer "$BASE/peer" -l "127.0.0.1:$PORT" -q &
PEER=$!
trap 'kill $PEER 2>/dev/null; wait $PEER 2>/dev/null; rm -rf "$BASE"' EXIT INT TERM
for _ in $(seq 50); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
  sleep 0.1
done

# One run: prints "native_bps mirrored_bps native_iops mirrored_iops native_p50 mirrored_p50".
pair() { # PROTOCOL FLAGS...
  local proto=$1; shift
  "$BIN" io run "$BASE/local" --replicate "127.0.0.1:$PORT" --replicate-protocol "$proto" \
    --replicate-compare --json "$@" | python3 -c '
import json, sys
s = json.load(sys.stdin)["summary"]
n = s["replication"]["native"]
print(n["throughput_bytes_per_s"], s["throughput_bytes_per_s"], n["iops"], s["iops"],
      n["lat_p50_ns"], s["lat_p50_ns"])'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "| case ($RUNS rounds, medians) | protocol | native MiB/s | mirrored MiB/s | mirrored/native | native p50 µs | mirrored p50 µs |"
echo "|---|---|---|---|---|---|---|"
for c in "${CASES[@]}"; do
  declare -A rows=()
  for ((i = 1; i <= RUNS; i++)); do
    for p in "${PROTOS[@]}"; do
      # shellcheck disable=SC2086
      rows[$p]+="$(pair "$p" $c)"$'\n'
    done
  done
  for p in "${PROTOS[@]}"; do
    col() { printf '%s' "${rows[$p]}" | awk -v k="$1" 'NF {print $k}' | median; }
    ratio=$(printf '%s' "${rows[$p]}" | awk 'NF {print $2 / $1}' | median)
    printf '| %s | %s | %.0f | %.0f | %.3f | %.1f | %.1f |\n' "$c" "$p" \
      "$(col 1 | awk '{print $1 / 1048576}')" "$(col 2 | awk '{print $1 / 1048576}')" \
      "$ratio" "$(col 5 | awk '{print $1 / 1000}')" "$(col 6 | awk '{print $1 / 1000}')"
  done
  unset rows
done
