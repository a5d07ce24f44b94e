#!/usr/bin/env bash
# Compares full `nsperf trace` analysis with tcptrace (-l -r) and tshark (-q -z conv,tcp plus
# counting tcp.analysis.retransmission) on a capture of >= 1 million real-sized packets.
#
# The capture is a tcpdump (snaplen 96) of an iperf3 transfer between two network namespaces
# joined by a veth pair with segmentation offloads off (so every packet on the wire is a
# real MTU-sized packet), rate-limited with tbf so tcpdump keeps up.
#
# Usage (root): flock /work/bench.lock bench/trace-vs-peers.sh [RUNS] [BYTES]
#   RUNS  runs of each tool, alternating (default 5); BYTES transferred (default 1500M)
# Needs: iproute2, ethtool, tcpdump, iperf3, tcptrace, tshark, GNU time.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
BYTES=${2:-1500M}
NSPERF=${NSPERF:-target/release/nsperf}
WORK=${WORK:-/tmp/nsperf-trace-bench}
CAP=$WORK/bulk.pcap
A=nsptb-a-$$ B=nsptb-b-$$

cleanup() {
  ip netns del "$A" 2>/dev/null || true
  ip netns del "$B" 2>/dev/null || true
}
trap cleanup EXIT

[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 4; }
for p in tcpdump iperf3 tcptrace tshark ethtool /usr/bin/time; do
  command -v "$p" >/dev/null || { echo "missing $p"; exit 9; }
done
[ -x "$NSPERF" ] || cargo build --release -q -p nsperf
mkdir -p "$WORK"

if [ ! -s "$CAP" ]; then
  echo "== building the capture ($BYTES through veth, offloads off, tbf 1 Gbit/s)"
  ip netns add "$A"; ip netns add "$B"
  ip link add va netns "$A" type veth peer name vb netns "$B"
  ip -n "$A" addr add 10.99.0.1/24 dev va; ip -n "$B" addr add 10.99.0.2/24 dev vb
  ip -n "$A" link set va up; ip -n "$B" link set vb up
  ip -n "$A" link set lo up; ip -n "$B" link set lo up
  for ns_dev in "$A va" "$B vb"; do
    set -- $ns_dev
    ip netns exec "$1" ethtool -K "$2" tso off gso off gro off tx off rx off >/dev/null 2>&1 || true
  done
  ip netns exec "$A" tc qdisc add dev va root tbf rate 1gbit burst 256k latency 20ms
  ip netns exec "$B" iperf3 -s -1 -D -B 10.99.0.2 >/dev/null
  sleep 0.5
  ip netns exec "$A" tcpdump -i va -s 96 -B 262144 -w "$CAP" -n tcp 2>"$WORK/tcpdump.log" &
  TD=$!
  sleep 1
  ip netns exec "$A" iperf3 -c 10.99.0.2 -n "$BYTES" >"$WORK/iperf3.log"
  sleep 1
  kill -INT "$TD"; wait "$TD" || true
  cat "$WORK/tcpdump.log" | grep -E "captured|dropped" || true
fi
PACKETS=$(capinfos -c -M "$CAP" 2>/dev/null | awk '/Number of packets/ {print $NF}')
SIZE=$(stat -c %s "$CAP")
echo "capture: $CAP, $PACKETS packets, $SIZE bytes"

# One run: prints "wall_seconds max_rss_kib cpu_seconds" (wall from the ns clock; CPU is
# user + system, less sensitive to other load on the machine).
measure() {
  local t0 t1
  t0=$(date +%s.%N)
  /usr/bin/time -f "%M %U %S" -o "$WORK/time.txt" "$@" >/dev/null 2>"$WORK/err.txt" || {
    echo "failed: $*" >&2; cat "$WORK/err.txt" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" '{ printf "%.3f %d %.2f\n", b - a, $1, $2 + $3 }' "$WORK/time.txt"
}

declare -A T M C
for i in $(seq 1 "$RUNS"); do
  sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
  cat "$CAP" >/dev/null # same warm page cache for every tool
  for tool in nsperf tcptrace tshark; do
    case $tool in
      nsperf) r=$(measure "$NSPERF" trace "$CAP" --json) ;;
      tcptrace) r=$(measure tcptrace -l -r "$CAP") ;;
      tshark) r=$(measure tshark -n -r "$CAP" -q -z conv,tcp -z io,stat,0,tcp.analysis.retransmission) ;;
    esac
    read -r wall rss cpu <<<"$r"
    T[$tool]+="$wall "; M[$tool]+="$rss "; C[$tool]+="$cpu "
    echo "run $i $tool: $wall s wall, $cpu s CPU, $rss KiB peak RSS"
  done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
echo "| tool | median wall s | packets/s (wall) | median CPU s | speed vs tcptrace (wall / CPU) | peak RSS MiB | memory vs tshark |"
echo "|---|---|---|---|---|---|---|"
tt=$(echo "${T[tcptrace]}" | median); tc=$(echo "${C[tcptrace]}" | median); tm=$(echo "${M[tshark]}" | median)
for tool in nsperf tcptrace tshark; do
  s=$(echo "${T[$tool]}" | median); m=$(echo "${M[$tool]}" | median); c=$(echo "${C[$tool]}" | median)
  awk -v t="$tool" -v s="$s" -v m="$m" -v c="$c" -v p="$PACKETS" -v tt="$tt" -v tc="$tc" -v tm="$tm" 'BEGIN {
    printf "| %s | %.3f | %.0f | %.2f | %.2fx / %.2fx | %.1f | %.4f |\n", t, s, p/s, c, tt/s, (c > 0 ? tc/c : 0), m/1024, m/tm }'
done
