#!/usr/bin/env bash
# nsperf net vs iperf3 and netperf on loopback, same settings, run alternately.
#
#   flock /work/bench.lock bench/net-vs-peers.sh [RUNS=5] [SECONDS=5]
#
# Cases: TCP 128 KiB messages, TCP 1 KiB messages, TCP 4 streams, TCP zero copy
# (sendfile), UDP 1400-byte datagrams at unlimited rate (datagrams/s received and loss),
# request/response 1 byte (transactions/s). Each case runs every tool once per round, the
# order rotating per round, RUNS rounds; prints the medians and the ratios as a Markdown
# table. Installs iperf3 and netperf when missing (netperf is in Debian's non-free component,
# which is added to the apt sources if absent).
set -euo pipefail
RUNS=${1:-5}
SECS=${2:-5}
cd "$(dirname "$0")/.."

need_install=()
command -v iperf3 >/dev/null || need_install+=(iperf3)
command -v netperf >/dev/null || need_install+=(netperf)
if [ ${#need_install[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "need root to install ${need_install[*]}" >&2
    exit 1
  fi
  # netperf lives in non-free: add the component to the Debian sources when missing.
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    if ! grep -q '^Components:.*non-free\( \|$\)' /etc/apt/sources.list.d/debian.sources; then
      sed -i '/^Components:/ s/$/ non-free/' /etc/apt/sources.list.d/debian.sources
    fi
  elif [ -f /etc/apt/sources.list ] && ! grep -qE '^deb .* non-free( |$)' /etc/apt/sources.list; then
    sed -i -E '/^deb .*debian/ s/( main)( |$)/\1 non-free\2/' /etc/apt/sources.list
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_install[@]}" >/dev/null
fi

cargo build --release -q
NSPERF=$PWD/target/release/nsperf
WORK=$(mktemp -d /tmp/nsperf-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
NS_PORT=$(free_port); IP_PORT=$(free_port); NP_PORT=$(free_port)
"$NSPERF" server -B 127.0.0.1 -p "$NS_PORT" -q & PIDS+=($!)
iperf3 -s -B 127.0.0.1 -p "$IP_PORT" >/dev/null 2>&1 & PIDS+=($!)
netserver -D -L 127.0.0.1 -p "$NP_PORT" >/dev/null 2>&1 & PIDS+=($!)
sleep 1
# netperf wants a file larger than its send ring (send width × message size).
head -c $((16 * 1024 * 1024)) /dev/zero > "$WORK/sendfile"

json() { python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }

# Each function prints one figure.
ns()  { "$NSPERF" net 127.0.0.1 -p "$NS_PORT" -t "$SECS" --json "$@"; }
ns_tcp() { ns "$@" | json "j['summary']['throughput_bps']"; }
ns_udp() { ns -u -b 0 -l 1400 "$@" | json "'%f %f' % (j['summary']['udp']['received_datagrams_per_s'], j['summary']['udp']['loss_pct'])"; }
ns_rr() { ns --rr 1 | json "j['summary']['transactions_per_s']"; }
ip_tcp() { iperf3 -c 127.0.0.1 -p "$IP_PORT" -t "$SECS" -J "$@" | json "j['end']['sum_received']['bits_per_second']"; }
ip_udp() {
  iperf3 -c 127.0.0.1 -p "$IP_PORT" -t "$SECS" -u -b 0 -l 1400 -J |
    json "'%f %f' % ((j['end']['sum']['packets']-j['end']['sum']['lost_packets'])/j['end']['sum']['seconds'], j['end']['sum']['lost_percent'])"
}
np() { netperf -H 127.0.0.1 -p "$NP_PORT" -l "$SECS" -P 0 "$@"; }
np_stream() { np -t TCP_STREAM -- -m "$1" -o THROUGHPUT | awk '{printf "%f\n", $1 * 1e6}'; }
np_stream4() {
  for i in 1 2 3 4; do np -t TCP_STREAM -- -m 131072 -o THROUGHPUT > "$WORK/np$i" & done
  wait
  cat "$WORK"/np[1-4] | awk '{s += $1} END {printf "%f\n", s * 1e6}'
}
np_sendfile() { np -t TCP_SENDFILE -F "$WORK/sendfile" -- -m 131072 | awk 'NF {v=$NF} END {printf "%f\n", v * 1e6}'; }
np_rr() { np -t TCP_RR -- -r 1,1 -o THROUGHPUT | awk '{printf "%f\n", $1}'; }

# case|tool|command
CASES=(
  "tcp_128k|nsperf|ns_tcp -l 128k"
  "tcp_128k|iperf3|ip_tcp -l 128k"
  "tcp_128k|netperf|np_stream 131072"
  "tcp_1k|nsperf|ns_tcp -l 1k"
  "tcp_1k|iperf3|ip_tcp -l 1k"
  "tcp_1k|netperf|np_stream 1024"
  "tcp_4streams|nsperf|ns_tcp -P 4"
  "tcp_4streams|iperf3|ip_tcp -P 4"
  "tcp_4streams|netperf|np_stream4"
  "tcp_zerocopy|nsperf|ns_tcp -Z"
  "tcp_zerocopy|iperf3|ip_tcp -Z"
  "tcp_zerocopy|netperf|np_sendfile"
  "udp_1400|nsperf|ns_udp"
  "udp_1400|iperf3|ip_udp"
  "rr_1|nsperf|ns_rr"
  "rr_1|netperf|np_rr"
)

OUT=$WORK/results
: > "$OUT"
echo "nsperf vs peers on loopback: $RUNS rounds of ${SECS} s runs, $(nproc) CPUs, $(uname -r)" >&2
for round in $(seq 1 "$RUNS"); do
  for c in tcp_128k tcp_1k tcp_4streams tcp_zerocopy udp_1400 rr_1; do
    mapfile -t rows < <(printf '%s\n' "${CASES[@]}" | grep "^$c|")
    n=${#rows[@]}
    for k in $(seq 0 $((n - 1))); do
      row=${rows[$(((k + round) % n))]}
      IFS='|' read -r case tool cmd <<<"$row"
      val=$($cmd 2>/dev/null | tail -n 1 || true)
      [ -n "$val" ] || val=nan
      echo "$case $tool $val" >> "$OUT"
      echo "round $round: $case $tool $val" >&2
    done
  done
done

python3 - "$OUT" <<'EOF'
import sys, statistics, math
rows = [l.split() for l in open(sys.argv[1]) if len(l.split()) >= 3]
vals, loss = {}, {}
for r in rows:
    case, tool = r[0], r[1]
    try:
        v = float(r[2])
    except ValueError:
        continue
    if math.isnan(v) or v <= 0:
        continue
    vals.setdefault((case, tool), []).append(v)
    if len(r) > 3:
        loss.setdefault((case, tool), []).append(float(r[3]))
med = {k: statistics.median(v) for k, v in vals.items()}
def fmt(case, v):
    if case == "rr_1":
        return f"{v/1e3:.1f} k trans/s"
    if case == "udp_1400":
        return f"{v/1e3:.0f} k datagrams/s"
    return f"{v/1e9:.2f} Gbit/s"
print("| case | nsperf | iperf3 | netperf | nsperf/iperf3 | nsperf/netperf | target |")
print("|---|---|---|---|---|---|---|")
targets = {"udp_1400": "≥ 1.5× iperf3 at no more loss", "rr_1": "≥ 1.0× netperf"}
for case in ["tcp_128k", "tcp_1k", "tcp_4streams", "tcp_zerocopy", "udp_1400", "rr_1"]:
    n = med.get((case, "nsperf"))
    cells = []
    for tool in ["nsperf", "iperf3", "netperf"]:
        v = med.get((case, tool))
        s = fmt(case, v) if v is not None else "–"
        if v is not None and (case, tool) in loss:
            s += f" ({statistics.median(loss[(case, tool)]):.2f} % loss)"
        cells.append(s)
    ratios = []
    for tool in ["iperf3", "netperf"]:
        v = med.get((case, tool))
        ratios.append(f"{n / v:.2f}" if n and v else "–")
    print(f"| {case} | " + " | ".join(cells) + " | " + " | ".join(ratios) + f" | {targets.get(case, '≥ 1.0× the better peer')} |")
print()
print("runs per case and tool: " + ", ".join(f"{c}/{t} {len(v)}" for (c, t), v in sorted(vals.items())))
EOF
