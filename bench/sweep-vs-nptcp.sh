#!/usr/bin/env bash
# nsperf's message-size sweep (`net --sweep`) against NPtcp (Debian netpipe-tcp) on a lab link:
# NPtcp's receiver and `nsperf server` in site b, the transmitters in site a; per message size
# NPtcp (`-l S -u S -p 0`) and nsperf (`--sweep S..S -t 1`) alternate ROUNDS times; prints,
# per size, the median one-way throughput of each (size / (RTT/2), bits per second in SI
# units: NPtcp's own "Mbps" are 2^20 bit/s) and the ratio nsperf / NPtcp. Root.
#
#   flock /work/bench.lock bench/sweep-vs-nptcp.sh [NSPERF=target/release/nsperf] \
#       [RATE=1gbit] [ROUNDS=3]
# SIZES="1 1024 16384" overrides the sizes (default: powers of two, 1 B to 4 MiB).
set -euo pipefail
NS=$(realpath "${1:-target/release/nsperf}")
RATE=${2:-1gbit}
ROUNDS=${3:-3}
SIZES=${SIZES:-$(python3 -c 'print(*(2**i for i in range(23)))')}
command -v NPtcp >/dev/null || { echo "NPtcp is missing: apt-get install netpipe-tcp" >&2; exit 1; }
LAB=sw$$
DIR=$(mktemp -d /tmp/nsperf-sweep.XXXXXX)
cleanup() {
  "$NS" lab down "$LAB" >/dev/null 2>&1 || true
  rm -rf "$DIR"
}
trap cleanup EXIT INT TERM
"$NS" lab up "$LAB" --sites a,b --rate "$RATE" >/dev/null
ex() { local site=$1; shift; "$NS" lab exec "$LAB" "$site" -- "$@"; }

# Size by size, the two tools alternating, so a change of load hits both alike.
for size in $SIZES; do
  for r in $(seq 1 "$ROUNDS"); do
    ex b NPtcp -l "$size" -u "$size" -p 0 -o "$DIR/recv.out" >/dev/null 2>&1 &
    sleep 0.3
    ex a NPtcp -h 10.77.0.2 -l "$size" -u "$size" -p 0 -o "$DIR/np.out" >/dev/null 2>&1
    wait
    cat "$DIR/np.out" >>"$DIR/np$r.out"
    ex b "$NS" server --one-off -q >/dev/null 2>&1 &
    sleep 0.3
    ex a "$NS" net 10.77.0.2 --sweep "$size..$size" -t 1 --json \
      | python3 -c 'import json,sys; [print(p["size_bytes"], p["throughput_bps"]) for p in json.load(sys.stdin)["summary"]["sweep"]]' \
      >>"$DIR/ns$r.txt"
    wait
  done
done
echo "load average at the end: $(cut -d" " -f1-3 /proc/loadavg) on $(nproc) cores"
python3 - "$DIR" "$ROUNDS" "$RATE" <<'EOF'
import json, statistics, sys
d, rounds, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
np, ns = {}, {}
for r in range(1, rounds + 1):
    for line in open(f"{d}/np{r}.out"):
        f = line.split()
        size, half_rtt = int(f[0]), float(f[2])
        np.setdefault(size, []).append(size * 8 / half_rtt)
    for line in open(f"{d}/ns{r}.txt"):
        size, bps = line.split()
        ns.setdefault(int(size), []).append(float(bps))
def rate_txt(b):
    for u, s in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if b >= u:
            return f"{b / u:.3g} {s}"
    return f"{b:.3g} bit/s"
print(f"lab link {rate}, {rounds} rounds, medians")
print(f"{'bytes':>8}  {'NPtcp':>12}  {'nsperf':>12}  nsperf/NPtcp")
worst = 0.0
for s in sorted(set(np) & set(ns)):
    a, b = statistics.median(np[s]), statistics.median(ns[s])
    worst = max(worst, abs(b / a - 1))
    print(f"{s:>8}  {rate_txt(a):>12}  {rate_txt(b):>12}  {b / a:.2f}")
print(f"largest difference {100 * worst:.0f} %; highest nsperf figure "
      f"{rate_txt(max(max(v) for v in ns.values()))}")
EOF
