#!/usr/bin/env bash
# Peak RSS of `nsperf trace` against the number of sequential connections in a capture
# (memory bounded by the live connections), without a series and with `--bin 100us` (the
# series bounded too). Usage: flock /work/bench.lock bench/trace-memory.sh
set -euo pipefail
cargo build --release -q -p nsperf -p nsperf-trace --example connections
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
echo "| connections | capture MB | peak RSS MiB (--json) | peak RSS MiB (human) | wall s | peak RSS MiB (--bin 100us --json) | bins used | wall s |"
echo "|---|---|---|---|---|---|---|---|"
for n in 1000 10000 20000 100000; do
  target/release/examples/connections "$n" "$dir/c.pcap"
  mb=$(du -m "$dir/c.pcap" | cut -f1)
  /usr/bin/time -f "%M %e" -o "$dir/t" target/release/nsperf trace "$dir/c.pcap" --json > /dev/null
  read -r kb wall < "$dir/t"
  /usr/bin/time -f "%M" -o "$dir/h" target/release/nsperf trace "$dir/c.pcap" > /dev/null
  /usr/bin/time -f "%M %e" -o "$dir/b" target/release/nsperf trace "$dir/c.pcap" --json --bin 100us > "$dir/b.json"
  read -r bkb bwall < "$dir/b"
  used=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]["series"]; print("%.0f us" % (s["used_s"] * 1e6))' "$dir/b.json")
  echo "| $n | $mb | $(( kb / 1024 )) | $(( $(cat "$dir/h") / 1024 )) | $wall | $(( bkb / 1024 )) | $used | $bwall |"
done
