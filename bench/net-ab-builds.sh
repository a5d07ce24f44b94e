#!/usr/bin/env bash
# Two nsperf builds side by side on loopback: each build's client against its own server,
# alternating A B A B ... per case, RUNS rounds; prints the medians and the ratio B/A.
#
#   flock /work/bench.lock bench/net-ab-builds.sh OLD_BINARY NEW_BINARY [RUNS=6] [SECONDS=3]
#
# Build the old one from a worktree, e.g.
#   git worktree add /tmp/old HEAD~1 && (cd /tmp/old && cargo build --release -p nsperf)
#   bench/net-ab-builds.sh /tmp/old/target/release/nsperf target/release/nsperf
# Cases: CASES="-l 128k|-l 1k|-P 4|-Z" (override with a |-separated list of net flags).
set -euo pipefail
A=${1:?old nsperf binary}
B=${2:?new nsperf binary}
RUNS=${3:-6}
SECS=${4:-3}
IFS='|' read -r -a CASES <<<"${CASES:--l 128k|-l 1k|-P 4|-Z}"

PIDS=()
OUT=$(mktemp /tmp/nsperf-ab.XXXXXX)
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -f "$OUT"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PA=$(free_port)
PB=$(free_port)
"$A" server -B 127.0.0.1 -p "$PA" -q & PIDS+=($!)
"$B" server -B 127.0.0.1 -p "$PB" -q & PIDS+=($!)
sleep 0.5

bps() { python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["throughput_bps"])'; }
for round in $(seq 1 "$RUNS"); do
  for c in "${CASES[@]}"; do
    # shellcheck disable=SC2086 # the case is a list of flags
    a=$("$A" net 127.0.0.1 -p "$PA" -t "$SECS" $c --json | bps)
    # shellcheck disable=SC2086
    b=$("$B" net 127.0.0.1 -p "$PB" -t "$SECS" $c --json | bps)
    printf '%s\t%s\t%s\n' "$c" "$a" "$b" >> "$OUT"
    awk -v r="$round" -v c="$c" -v a="$a" -v b="$b" \
      'BEGIN { printf "round %s: [%s] A %.2f B %.2f Gbit/s\n", r, c, a / 1e9, b / 1e9 }' >&2
  done
done

python3 - "$OUT" <<'EOF'
import sys, statistics
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
cases = []
for r in rows:
    if r[0] not in cases:
        cases.append(r[0])
print("| case | A | B | B/A |")
print("|---|---|---|---|")
for c in cases:
    a = statistics.median(float(r[1]) for r in rows if r[0] == c)
    b = statistics.median(float(r[2]) for r in rows if r[0] == c)
    print(f"| `{c}` | {a/1e9:.2f} Gbit/s | {b/1e9:.2f} Gbit/s | {b/a:.2f} |")
EOF
