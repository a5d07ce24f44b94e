#!/usr/bin/env bash
# Forwarding cost of the nsperf lab emulator, side by side with the kernel paths it replaces:
#   veth  two namespaces joined by a plain veth pair (the kernel's own speed),
#   tbf   the same veth pair with a tbf qdisc on both ends at 20 Gbit/s (a kernel shaper
#         that does not limit: what a netem-less kernel offers),
#   lab   `nsperf lab up` with no impairment (the userspace emulator, TUN + offloads).
# For each path and MTU (1500, 9000): TCP throughput (iperf3, 3 s), UDP packets/s
# (iperf3 -u -b 0 -l 64, 2 s, packets received), and ping RTT (200 pings, 5 ms apart).
# Paths alternate veth tbf lab veth tbf lab ...; RUNS (default 5) runs each; medians.
# Then two rows of the lab alone:
#   idle  the CPU an up lab costs with no traffic: the emulator process's CPU time
#         (utime + stime, /proc/PID/stat) over IDLE_S (default 10) seconds, after 2 s to
#         settle, in percent of one core; RUNS labs, median;
#   lfn   a long fat network, 1 Gbit/s x 200 ms (queue 16500 packets: one BDP, memory
#         512 MiB): TCP (iperf3, reno, 20 s, the first 10 s omitted) with BDP buffers
#         (tcp_rmem/tcp_wmem raised to 62.5 MB in both sites, autotuning), payload rate in
#         percent of the configured 1 Gbit/s (the TCP payload ceiling is 95.6 %); RUNS runs,
#         median.
# PARTS (default paths,idle,lfn) picks what runs. NSPERF_B=/path/to/another/nsperf adds a
# path "lab-b" to the table, alternating with the others: A/B of two builds side by side.
# Needs root, iproute2, iperf3, python3. Run it under the machine's benchmark lock:
#   flock /work/bench.lock bench/wan-forwarding.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
IDLE_S=${IDLE_S:-10}
PARTS=${PARTS:-paths,idle,lfn}
NSPERF=${NSPERF:-target/release/nsperf}
[ -x "$NSPERF" ] || cargo build --release -q
OUT=$(mktemp -d)
P=bwf$$
cleanup() {
  ip netns del "$P-va" 2>/dev/null || true
  ip netns del "$P-vb" 2>/dev/null || true
  "$NSPERF" lab down "$P" 2>/dev/null || true
  rm -rf "$OUT"
}
trap cleanup EXIT

veth_up() { # $1 mtu, $2 tbf|none
  ip netns add "$P-va"; ip netns add "$P-vb"
  ip link add "${P}x" netns "$P-va" type veth peer name "${P}y" netns "$P-vb"
  ip -n "$P-va" link set "${P}x" name eth0; ip -n "$P-vb" link set "${P}y" name eth0
  for s in a b; do
    ip -n "$P-v$s" link set lo up
    ip -n "$P-v$s" link set eth0 mtu "$1" up
    if [ "$2" = tbf ]; then
      ip netns exec "$P-v$s" tc qdisc add dev eth0 root tbf rate 20gbit burst 16mb latency 50ms
    fi
  done
  ip -n "$P-va" addr add 10.88.0.1/24 dev eth0; ip -n "$P-vb" addr add 10.88.0.2/24 dev eth0
  A="ip netns exec $P-va"; B="ip netns exec $P-vb"; DST=10.88.0.2
}
veth_down() { ip netns del "$P-va"; ip netns del "$P-vb"; }
lab_up() { # $1 mtu, $2 the nsperf binary (default $NSPERF)
  LAB_BIN=${2:-$NSPERF}
  "$LAB_BIN" lab up "$P" --mtu "$1" >/dev/null
  A="$LAB_BIN lab exec $P a --"; B="$LAB_BIN lab exec $P b --"; DST=10.77.0.2
}
lab_down() { "${LAB_BIN:-$NSPERF}" lab down "$P"; }

measure() { # $1 path $2 mtu $3 run
  $B iperf3 -s -D -1 -p 5999 >/dev/null; sleep 0.3
  tcp=$($A iperf3 -c $DST -p 5999 -t 3 -J | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])')
  $B iperf3 -s -D -1 -p 5999 >/dev/null; sleep 0.3
  pps=$($A iperf3 -c $DST -p 5999 -u -b 0 -l 64 -t 2 -J | python3 -c '
import json,sys; s=json.load(sys.stdin)["end"]["sum"]; print((s["packets"]-s["lost_packets"])/s["seconds"])')
  rtt=$($A ping -c 200 -i 0.005 -W 1 $DST | python3 -c '
import sys,re,statistics; v=[float(m) for m in re.findall(r"time=([0-9.]+) ms", sys.stdin.read())]; print(statistics.median(v)*1000)')
  echo "$1 $2 $3 $tcp $pps $rtt" | tee -a "$OUT/raw"
}

part() { case ",$PARTS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# CPU ticks (utime + stime) of process $1.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

idle() { # $1 run
  "$NSPERF" lab up "$P" >/dev/null
  local pid
  pid=$("$NSPERF" lab list --json | python3 -c '
import json,sys; print([l for l in json.load(sys.stdin)["summary"]["labs"] if l["name"]==sys.argv[1]][0]["emulator_pid"])' "$P")
  sleep 2
  local t0 t1
  t0=$(ticks "$pid"); sleep "$IDLE_S"; t1=$(ticks "$pid")
  lab_down
  echo "idle $1 $(python3 -c "import os,sys; print((int(sys.argv[2])-int(sys.argv[1]))/os.sysconf('SC_CLK_TCK')/float(sys.argv[3])*100)" "$t0" "$t1" "$IDLE_S")" | tee -a "$OUT/extra"
}

lfn() { # $1 run
  "$NSPERF" lab up "$P" --rate 1g --rtt 200ms --queue 16500 --memory 512m >/dev/null
  for s in a b; do
    "$NSPERF" lab exec "$P" "$s" -- sysctl -qw "net.ipv4.tcp_rmem=4096 131072 62500000" "net.ipv4.tcp_wmem=4096 131072 62500000"
  done
  B="$NSPERF lab exec $P b --"; A="$NSPERF lab exec $P a --"
  $B iperf3 -s -D -1 -p 5999 >/dev/null; sleep 0.3
  local bps
  bps=$($A iperf3 -c 10.77.0.2 -p 5999 -C reno -t 20 -O 10 -J | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])')
  lab_down
  echo "lfn $1 $(python3 -c "import sys; print(float(sys.argv[1])/1e9*100)" "$bps")" | tee -a "$OUT/extra"
}

if part idle || part lfn; then
  echo "# row run value (idle: % of a core; lfn: % of 1 Gbit/s)"
  for run in $(seq 1 "$RUNS"); do
    if part idle; then idle "$run"; fi
    if part lfn; then lfn "$run"; fi
  done
  python3 - "$OUT/extra" <<'PY'
import sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    row, _, v = l.split()
    rows.setdefault(row, []).append(float(v))
print()
if "idle" in rows:
    v = rows["idle"]
    print(f"idle lab: {st.median(v):.2f} % of a core (median of {len(v)}; min {min(v):.2f}, max {max(v):.2f})")
if "lfn" in rows:
    v = rows["lfn"]
    print(f"long fat network 1 Gbit/s x 200 ms: {st.median(v):.1f} % of the rate (median of {len(v)}; min {min(v):.1f}, max {max(v):.1f}; TCP payload ceiling 95.6 %)")
PY
fi
part paths || exit 0

echo "# path mtu run tcp_bps udp_pps rtt_median_us"
for mtu in 1500 9000; do
  for run in $(seq 1 "$RUNS"); do
    veth_up "$mtu" none; measure veth "$mtu" "$run"; veth_down
    veth_up "$mtu" tbf;  measure tbf "$mtu" "$run";  veth_down
    lab_up "$mtu";       measure lab "$mtu" "$run";  lab_down
    if [ -n "${NSPERF_B:-}" ]; then
      lab_up "$mtu" "$NSPERF_B"; measure lab-b "$mtu" "$run"; lab_down
    fi
  done
done

python3 - "$OUT/raw" <<'PY'
import sys, statistics as st
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for path, mtu, _, tcp, pps, rtt in rows:
    med.setdefault((path, mtu), []).append((float(tcp), float(pps), float(rtt)))
print()
print("| path | MTU | TCP Gbit/s (median) | vs veth | UDP 64 B packets/s (median) | vs veth | ping RTT µs (median) | added one-way µs |")
print("|---|---|---|---|---|---|---|---|")
for mtu in ("1500", "9000"):
    base = [st.median(x) for x in zip(*med[("veth", mtu)])]
    for path in [p for p in ("veth", "tbf", "lab", "lab-b") if (p, mtu) in med]:
        t, p, r = [st.median(x) for x in zip(*med[(path, mtu)])]
        print(f"| {path} | {mtu} | {t/1e9:.2f} | {t/base[0]:.2f} | {p/1e3:.0f} k | {p/base[1]:.2f} | {r:.0f} | {(r-base[2])/2:.0f} |")
PY
