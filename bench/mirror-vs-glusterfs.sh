#!/usr/bin/env bash
# nsperf's mirror (protocol C) beside a real replicated file system across the same lab link
# (issue 26, item 5): GlusterFS replica 2 (Debian's glusterfs-server; both bricks in site b,
# mounted over FUSE in site a, write-behind off so that a write returns when both bricks
# have it, as protocol C), against `nsperf io run --replicate` from site a to `nsperf io
# peer` in site b. Each at 0, 10 and 50 ms RTT on a 100 Mbit/s link, 4 KiB random writes
# and 64 KiB sequential writes, one in flight, 3 s each.
#
#   flock /work/bench.lock bench/mirror-vs-glusterfs.sh [NSPERF=target/release/nsperf]
#
# Needs root, glusterfs-server and glusterfs-client (apt-get install -y glusterfs-server
# glusterfs-client). Leaves nothing behind: the volume, the daemons, the lab, the bricks.
set -euo pipefail
BIN=$(realpath "${1:-target/release/nsperf}")
LAB=glb$$
W=$(mktemp -d /var/tmp/nsperf-gluster.XXXXXX)
mkdir -p "$W/b1" "$W/b2" "$W/mnt" "$W/local" "$W/peer"
cleanup() {
  "$BIN" lab exec "$LAB" b -- gluster --mode=script volume stop gv 2>/dev/null >&2 || true
  "$BIN" lab exec "$LAB" b -- gluster --mode=script volume delete gv 2>/dev/null >&2 || true
  # lab down stops every process left in the lab's sites: glusterd, its bricks, the
  # FUSE client, the peer.
  "$BIN" lab down "$LAB" --force >/dev/null 2>&1 || true
  rm -rf "$W"
}
trap cleanup EXIT INT TERM
command -v glusterd >/dev/null || { echo "glusterd is not installed" >&2; exit 1; }
"$BIN" lab up "$LAB" --sites a,b --rate 100mbit >/dev/null
"$BIN" lab exec "$LAB" b -- glusterd --log-file="$W/glusterd.log"
for _ in $(seq 50); do
  "$BIN" lab exec "$LAB" b -- gluster --mode=script volume list >/dev/null 2>&1 && break
  sleep 0.2
done
"$BIN" lab exec "$LAB" b -- gluster --mode=script volume create gv replica 2 \
  "10.77.0.2:$W/b1" "10.77.0.2:$W/b2" force >/dev/null
"$BIN" lab exec "$LAB" b -- gluster --mode=script volume set gv performance.write-behind off >/dev/null
"$BIN" lab exec "$LAB" b -- gluster --mode=script volume start gv >/dev/null
"$BIN" lab exec "$LAB" b -- "$BIN" io peer "$W/peer" -l 10.77.0.2:7789 -q >/dev/null 2>&1 &

figures() { python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
print("%.3f %.2f" % (s["throughput_bytes_per_s"] / 1048576, s["lat_p50_ns"] / 1e6))' "$1"; }
# The mount lives in the site's own mount namespace: mount, run and unmount in one exec.
gluster_run() {
  "$BIN" lab exec "$LAB" a -- sh -c "mount -t glusterfs 10.77.0.2:/gv '$W/mnt' && '$BIN' io run '$W/mnt' $* --json > '$W/g.json'; umount '$W/mnt'"
  figures "$W/g.json"
}
mirror_run() {
  # shellcheck disable=SC2068
  "$BIN" lab exec "$LAB" a -- "$BIN" io run "$W/local" $@ --replicate 10.77.0.2:7789 \
    --replicate-protocol C --replicate-congestion cubic --json > "$W/m.json"
  figures "$W/m.json"
}

echo "| RTT | writes | GlusterFS replica 2 MiB/s | p50 ms | nsperf mirror C MiB/s | p50 ms |"
echo "|---|---|---|---|---|---|"
for rtt in 0 10 50; do
  "$BIN" lab set "$LAB" --rtt "${rtt}ms"
  for w in "-w randwrite -b 4k -s 4m --time 3s" "-w seqwrite -b 64k -s 8m --time 3s"; do
    read -r gt gl <<<"$(gluster_run "$w")"
    read -r mt ml <<<"$(mirror_run "$w")"
    echo "| $rtt ms | $w | $gt | $gl | $mt | $ml |"
  done
done
