#!/usr/bin/env bash
# Two nsperf builds' SMB clients side by side against one Samba smbd in a lab (sites a and b,
# `nsperf lab serve LAB b smb DIR` of the first build, as the lab user: signed), alternating
# A B A B ... per case, RUNS rounds; medians of throughput and of the client's CPU time.
# For changes to the SMB data path (crates/nsperf-smb). Root, smbd and perf needed.
#
#   flock /work/bench.lock bench/smb-ab-builds.sh OLD_BINARY NEW_BINARY [RUNS=5]
#
# CPU time is what load on a shared machine distorts least: `perf stat -e task-clock` of the
# client process alone (run inside the lab's site a; the whole run: log-on, the file written
# or read once to warm the server, the measured pass) per GiB the measured pass moved, and the
# measured pass's own (summary.cpu_process_pct x its duration) per GiB.
# Cases (|-separated `nsperf io run` flags): override with CASES=...
set -euo pipefail
A=${1:?old nsperf binary}
B=${2:?new nsperf binary}
RUNS=${3:-5}
LAB=sab$$
D=$(mktemp -d /var/tmp/nsperf-smb-ab.XXXXXX)
cleanup() {
  "$A" lab down "$LAB" >/dev/null 2>&1 || true
  rm -rf "$D"
}
trap cleanup EXIT INT TERM
"$A" lab up "$LAB" --sites a,b >/dev/null
mkdir -p "$D/smb"
CREDS=$("$A" lab serve "$LAB" b smb "$D/smb" | sed -n 's/^credentials: \([^ ]*\).*/\1/p')
URL=smb://10.77.0.2/smb
IFS='|' read -r -a CASES <<<"${CASES:--w seqread -s 1g -b 1m --iodepth 8|-w seqwrite -s 1g -b 1m --iodepth 8 --fsync end}"
one() { # BINARY FLAGS... -> "MiB/s task-clock-s/GiB pass-cpu-s/GiB"
  local bin=$1; shift
  "$A" lab exec "$LAB" a -- perf stat -x, -e task-clock -o "$D/perf" \
    "$bin" io run "$URL" -A "$CREDS" --json "$@" >"$D/json"
  python3 - "$D/json" "$D/perf" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
ms = next(float(l.split(",")[0]) for l in open(sys.argv[2]) if "task-clock" in l)
gib = s["bytes"] / 2**30
rate = s["throughput_bytes_per_s"]
pass_cpu = s["cpu_process_pct"] / 100 * s["bytes"] / rate
print(rate / 2**20, ms / 1000 / gib, pass_cpu / gib)
EOF
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
col() { cut -d' ' -f"$1" | median; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| case ($RUNS rounds, alternating, medians) | A MiB/s | B MiB/s | B/A | A CPU s/GiB (process) | B CPU s/GiB (process) | B/A | A CPU s/GiB (measured pass) | B CPU s/GiB (measured pass) | B/A |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for c in "${CASES[@]}"; do
  a=() b=()
  for ((i = 1; i <= RUNS; i++)); do
    # shellcheck disable=SC2086
    a+=("$(one "$A" $c)")
    # shellcheck disable=SC2086
    b+=("$(one "$B" $c)")
    echo "  run $i: A ${a[-1]}  B ${b[-1]}" >&2
  done
  row="| \`$c\` |"
  for k in 1 2 3; do
    am=$(printf '%s\n' "${a[@]}" | col $k)
    bm=$(printf '%s\n' "${b[@]}" | col $k)
    row+=$(python3 -c "print(f' {$am:.3g} | {$bm:.3g} | {$bm / $am:.2f}x |')")
  done
  echo "$row"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
