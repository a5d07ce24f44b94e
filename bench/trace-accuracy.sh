#!/usr/bin/env bash
# nsperf trace against tcptrace and tshark on the lab captures of the live vantage-point test
# (crates/nsperf/tests/trace/trace_live.rs). Usage, as root:
#   NSPERF_KEEP_CAPTURES=/tmp/trace-acc cargo test --release -p nsperf --test trace trace_live::
#   bench/trace-accuracy.sh /tmp/trace-acc
# Prints a markdown table: per capture, the bulk connection's figures a->b (data sender).
set -euo pipefail
dir=${1:?captures directory}
nsperf=${NSPERF:-target/release/nsperf}
echo "| capture | data pkts nsperf / tcptrace | rexmit nsperf / tcptrace / tshark (+ tshark out-of-order) | lost (incl. holes filled) nsperf | zero-win adv nsperf / tcptrace / tshark | zwnd probes nsperf / tcptrace / tshark | RTT min a>b nsperf / tcptrace ms | path RTT min ms | vantage | verdict |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for f in "$dir"/*.pcap; do
  name=$(basename "$f" .pcap)
  j=$("$nsperf" trace "$f" --json)
  read -r dp rx zwa zwp rtt lost path vant lim < <(echo "$j" | python3 -c '
import json,sys
j=json.load(sys.stdin)
c=max(j["summary"]["connections"], key=lambda c: c["a_to_b"]["unique_bytes"])
a,b,d=c["a_to_b"],c["b_to_a"],c["diagnosis"]
print(a["data_packets"], a["retransmitted_packets"], b["zero_window_adverts"], a["zero_window_probes"],
      "%.2f" % (a["rtt"]["min_ns"]/1e6), round(d["loss_rate"]*a["data_packets"]),
      "%.2f" % (d["path_rtt"]["min_ns"]/1e6), d["vantage"], d["limit"])')
  tt=$(tcptrace -l -r -n "$f" 2>/dev/null)
  # the bulk connection is the one with most data packets a->b
  tdp=$(echo "$tt" | awk '/actual data pkts:/ {print $4}' | sort -n | tail -1)
  block=$(echo "$tt" | awk -v n="$tdp" 'BEGIN{RS="================================"} $0 ~ "actual data pkts: +"n" " {print}')
  trx=$(echo "$block" | awk '/rexmt data pkts:/ {print $4; exit}')
  tzwa=$(echo "$block" | awk '/zero win adv:/ {print $9; exit}')
  tzwp=$(echo "$block" | awk '/zwnd probe pkts:/ {print $4; exit}')
  trtt=$(echo "$block" | awk '/RTT min:/ {print $3; exit}')
  srx=$(tshark -n -r "$f" -Y "tcp.analysis.retransmission or tcp.analysis.fast_retransmission" 2>/dev/null | wc -l)
  sooo=$(tshark -n -r "$f" -Y "tcp.analysis.out_of_order" 2>/dev/null | wc -l)
  szwa=$(tshark -n -r "$f" -Y "tcp.analysis.zero_window" 2>/dev/null | wc -l)
  szwp=$(tshark -n -r "$f" -Y "tcp.analysis.zero_window_probe" 2>/dev/null | wc -l)
  echo "| $name | $dp / $tdp | $rx / $trx / $srx (+$sooo) | $lost | $zwa / $tzwa / $szwa | $zwp / $tzwp / $szwp | $rtt / $trtt | $path | $vant | $lim |"
done
