#!/usr/bin/env bash
# nsperf's message-size sweep (`net --sweep`) against NPtcp (Debian netpipe-tcp) on a lab link:
# NPtcp's receiver and `nsperf server` in site b, the transmitters in site a; per message size
# NPtcp (`-l S -u S -p 0`) and nsperf (`--sweep S..S`) alternate ROUNDS times; prints, per
# size, the median one-way throughput of each (size / (RTT/2), bits per second in SI units:
# NPtcp's own "Mbps" are 2^20 bit/s), the ratio nsperf / NPtcp, and each tool's median trial
# length. Root.
#
# Both take the best of three trials, and for small messages the trial length decides the
# figure: a ping-pong whose two ends still share one CPU is about twice as fast as one spread
# over two, and the scheduler spreads them within a few thousand round trips. NPtcp sizes its
# trials from its own first estimate (tens of ms here, varying run to run), so each nsperf
# run is given NPtcp's trial length of that round: `-t` = 3 x NPtcp's round trips per trial
# x its round trip.
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
    # "  0:     256 bytes   4503 times -->    229.83 Mbps in       8.50 usec"
    line=$(ex a NPtcp -h 10.77.0.2 -l "$size" -u "$size" -p 0 -o "$DIR/np.out" 2>&1 \
      | grep -E '^ *[0-9]+: +[0-9]+ bytes')
    wait
    read -r times usec < <(awk '{print $4, $(NF-1)}' <<<"$line")
    cat "$DIR/np.out" >>"$DIR/np$r.out"
    # NPtcp's trial (times round trips of 2 x usec); nsperf's -t holds three trials.
    t=$(python3 -c "print(f'{3 * $times * 2 * $usec / 1e6:.4f}')")
    echo "$size $(python3 -c "print($times * 2 * $usec / 1e3)")" >>"$DIR/npt$r.txt"
    ex b "$NS" server --one-off -q >/dev/null 2>&1 &
    sleep 0.3
    ex a "$NS" net 10.77.0.2 --sweep "$size..$size" -t "$t" --json \
      | python3 -c 'import json,sys; [print(p["size_bytes"], p["throughput_bps"], p["round_trips"] / 3 * p["rtt_mean_ns"] / 1e6) for p in json.load(sys.stdin)["summary"]["sweep"]]' \
      >>"$DIR/ns$r.txt"
    wait
  done
done
echo "load average at the end: $(cut -d" " -f1-3 /proc/loadavg) on $(nproc) cores"
python3 - "$DIR" "$ROUNDS" "$RATE" <<'EOF'
import json, statistics, sys
d, rounds, rate = sys.argv[1], int(sys.argv[2]), sys.argv[3]
np, ns, npt, nst = {}, {}, {}, {}
for r in range(1, rounds + 1):
    for line in open(f"{d}/np{r}.out"):
        f = line.split()
        size, half_rtt = int(f[0]), float(f[2])
        np.setdefault(size, []).append(size * 8 / half_rtt)
    for line in open(f"{d}/npt{r}.txt"):
        size, ms = line.split()
        npt.setdefault(int(size), []).append(float(ms))
    for line in open(f"{d}/ns{r}.txt"):
        size, bps, ms = line.split()
        ns.setdefault(int(size), []).append(float(bps))
        nst.setdefault(int(size), []).append(float(ms))
def rate_txt(b):
    for u, s in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if b >= u:
            return f"{b / u:.3g} {s}"
    return f"{b:.3g} bit/s"
print(f"lab link {rate}, {rounds} rounds, medians")
print(f"{'bytes':>8}  {'NPtcp':>12}  {'nsperf':>12}  nsperf/NPtcp  trial ms NPtcp  nsperf"
      "  spread NPtcp  nsperf")
worst = 0.0
for s in sorted(set(np) & set(ns)):
    a, b = statistics.median(np[s]), statistics.median(ns[s])
    worst = max(worst, abs(b / a - 1))
    ta, tb = statistics.median(npt[s]), statistics.median(nst[s])
    # Each tool's own run-to-run spread: (largest - smallest) / median.
    sa, sb = (max(np[s]) - min(np[s])) / a, (max(ns[s]) - min(ns[s])) / b
    print(f"{s:>8}  {rate_txt(a):>12}  {rate_txt(b):>12}  {b / a:12.2f}  {ta:14.1f}  {tb:6.1f}"
          f"  {100 * sa:10.0f} %  {100 * sb:4.0f} %")
print(f"largest difference {100 * worst:.0f} %; highest nsperf figure "
      f"{rate_txt(max(max(v) for v in ns.values()))}")
EOF
