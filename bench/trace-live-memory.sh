#!/usr/bin/env bash
# `nsperf trace -i` running for a long time against traffic across an `nsperf lab` T3
# (45 Mbit/s, 50 ms RTT): one bulk transfer for the whole run and short `nsperf net -t 1s`
# tests back to back (two new connections each, closed a second later), so connections open,
# close and are released all along; with `churn`, also two loops of HTTP requests, one
# connection each (python's http.server and urllib), many more connections. The trace
# process's RSS is sampled every 10 s.
# Root. Usage: flock /work/bench.lock bench/trace-live-memory.sh [SECONDS [churn]]
#   (default 600 s, no churn)
set -euo pipefail
secs=${1:-600}
churn=${2:-}
cargo build --release -q -p nsperf
B=$PWD/target/release/nsperf
lab=tlm$$
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  "$B" lab down "$lab" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$B" lab up "$lab" --rate 45mbit --rtt 50ms >/dev/null
a=nsp-$lab-a; b=nsp-$lab-b
ip netns exec "$b" "$B" server -p 5301 >/dev/null 2>&1 & pids+=($!)
ip netns exec "$b" "$B" server -p 5302 >/dev/null 2>&1 & pids+=($!)
echo hello > "$dir/index.html"
(cd "$dir" && exec ip netns exec "$b" python3 -m http.server 8000 --bind 10.77.0.2 >/dev/null 2>&1) & pids+=($!)
sleep 1
ip netns exec "$a" "$B" trace -i wan0 -t "${secs}s" --interval 10s --json-stream \
  > "$dir/live.jsonl" 2> "$dir/live.err" &
tr=$!
sleep 1
ip netns exec "$a" "$B" net 10.77.0.2 -p 5301 -t "$((secs - 15))s" -q > /dev/null 2>&1 & pids+=($!)
(
  end=$((SECONDS + secs - 15))
  while [ "$SECONDS" -lt "$end" ]; do
    ip netns exec "$a" "$B" net 10.77.0.2 -p 5302 -t 1s -q > /dev/null 2>&1 || true
  done
) & pids+=($!)
for _ in $([ "$churn" = churn ] && echo 1 2); do
  ip netns exec "$a" python3 -c '
import sys, time, urllib.request
end = time.time() + float(sys.argv[1])
while time.time() < end:
    try:
        urllib.request.urlopen("http://10.77.0.2:8000/index.html", timeout=5).read()
    except OSError:
        time.sleep(0.1)
' "$((secs - 15))" > /dev/null 2>&1 & pids+=($!)
done
rss() { awk '/^VmRSS/ {print $2}' "/proc/$tr/status" 2>/dev/null || echo 0; }
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$tr/stat" 2>/dev/null || echo 0; }
echo "| t s | RSS MiB |"
echo "|---|---|"
samples=()
t=0
while kill -0 "$tr" 2>/dev/null && [ "$t" -le "$secs" ]; do
  kb=$(rss)
  samples+=("$kb")
  printf '| %d | %.1f |\n' "$t" "$(echo "$kb / 1024" | bc -l)"
  last_cpu=$(cpu)
  sleep 10
  t=$((t + 10))
done
wait "$tr"
echo "CPU time of trace -i: $last_cpu s at $((t - 10)) s"
python3 - "$dir/live.jsonl" "${samples[@]}" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rss = [int(x) / 1024 for x in sys.argv[2:] if int(x) > 0]
final = lines[-1]["summary"]
ivs = [l for l in lines[:-1] if l.get("event") == "interval"]
print("intervals printed: %d; live connections per interval: max %d" % (
    len(ivs), max((i["live_connections"] for i in ivs), default=0)))
print("RSS MiB: start %.1f (first sample), peak %.1f, end %.1f" % (rss[0], max(rss), rss[-1]))
print("final summary: %d packets, %d TCP connections, %d aged out, %d dropped by the kernel, %.0f s of capture" % (
    final["packets"], final["connection_count"], final["connections_aged_out"],
    final["capture"].get("kernel_dropped", -1), final["capture_duration_ns"] / 1e9))
EOF
