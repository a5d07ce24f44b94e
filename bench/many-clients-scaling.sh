#!/bin/sh
# How many client sites one machine carries (issue 21 item 6): a star lab whose server site
# holds nsperf's embedded NFS server behind one $PORT port (1gbit; 10gbit to find the
# machine's limit rather than the port's), N client sites reading their
# own files at once (1 MiB requests, 8 in flight, 5 s, 0 ms), for N in $SITES. One row per N:
# the aggregate against the port, Jain's index, the start skew, the clients' step processes'
# CPU (summed, % of one core), the busiest core the clients saw, the server host's cores, and
# the server's count against the clients' sum. Root; the files go to $DIR in the server site.
#
#   bench/many-clients-scaling.sh                 # SITES="8 20 50"
#   SITES="8 20" NSPERF=target/release/nsperf bench/many-clients-scaling.sh
set -eu
NSPERF=${NSPERF:-target/release/nsperf}
SITES=${SITES:-8 20 50}
DIR=${DIR:-/var/tmp}
PORT=${PORT:-1gbit}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
cat > "$work/row.py" <<'PY'
import json, sys
r = json.load(sys.stdin)["runs"][0]
m = r["metrics"]
def g(k, f="{:.1f}"):
    return f.format(m[k]) if k in m else "-"
watch = ("hosts_cpu_busy", "server_host_busy", "above_port_rate", "server_count_differs")
warn = ", ".join(f"{f['id']} ({f['severity']})" for f in r["findings"] if f["id"] in watch) or "-"
cells = [
    sys.argv[1], f"{r['value'] / 1048576:.1f} MiB/s", g("port.payload_pct") + " %",
    g("fairness_jain", "{:.3f}"), f"{m.get('start_skew_ns', 0) / 1e6:.1f} ms",
    g("hosts.cpu_pct", "{:.0f}") + " % of a core", g("hosts.busiest_core_pct_mean", "{:.0f}") + " %",
    g("server.cores_mean_busy_pct", "{:.0f}") + " %", g("server_vs_clients_pct", "{:+.1f}") + " %",
    warn,
]
print("| " + " | ".join(cells) + " |")
PY
echo "| client sites | aggregate | port used | Jain | start skew | clients' processes | clients' busiest core | server host cores | server vs clients | CPU and count findings |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for n in $SITES; do
    cat > "$work/p.toml" <<EOF
name = "scaling-$n"
repetitions = 1
[lab]
sites = ["srv"]
clients = $n
topology = "star"
rate = "$PORT"
access_rate = "$PORT"
[[service]]
name = "nas"
site = "srv"
dir = "$DIR"
[[step]]
name = "read"
type = "io"
on = "clients"
service = "nas"
workload = "seqread"
size = "32m"
bs = "1m"
iodepth = 8
time = "5s"
EOF
    "$NSPERF" run "$work/p.toml" --db "$work/s.db" --no-report > "$work/out.txt" 2>&1 ||
        { cat "$work/out.txt" >&2; exit 1; }
    "$NSPERF" results show latest --db "$work/s.db" --json --runs | python3 "$work/row.py" "$n"
    rm -f "$work/s.db"
done
