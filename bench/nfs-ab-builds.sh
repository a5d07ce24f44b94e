#!/usr/bin/env bash
# Two nsperf builds' NFS clients side by side against one embedded NFS server on loopback
# (`nsperf lab nfsd`, of the first build), alternating A B A B ... per case, RUNS rounds;
# prints median MiB/s and the ratio B/A. For changes to the user-space NFS data path
# (crates/nsperf-nfs pipeline and its send queue).
#
#   flock /work/bench.lock bench/nfs-ab-builds.sh OLD_BINARY NEW_BINARY [RUNS=5]
#
# Cases (|-separated `nsperf io run` flags): override with CASES=...
set -euo pipefail
A=${1:?old nsperf binary}
B=${2:?new nsperf binary}
RUNS=${3:-5}
D=$(mktemp -d /var/tmp/nsperf-nfs-ab.XXXXXX)
exec 3< <(exec "$A" lab nfsd "$D")
SRV=$!
trap 'kill $SRV 2>/dev/null; rm -rf "$D"' EXIT INT TERM
read -r line <&3
URL=${line#ready }
IFS='|' read -r -a CASES <<<"${CASES:--w seqread -b 1m -s 1g --time 3s|-w seqwrite -b 1m -s 1g --time 3s|-w randread -b 4k -s 256m --iodepth 32 --time 3s|-w randwrite -b 4k -s 256m --iodepth 32 --time 3s}"
mib() { # BINARY FLAGS...
  local bin=$1; shift
  "$bin" io run "$URL" --json "$@" | python3 -c '
import json, sys
print(json.load(sys.stdin)["summary"]["throughput_bytes_per_s"] / 1048576)'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "| case ($RUNS rounds, alternating, medians) | A MiB/s | B MiB/s | B/A |"
echo "|---|---|---|---|"
for c in "${CASES[@]}"; do
  a=() b=()
  for ((i = 1; i <= RUNS; i++)); do
    # shellcheck disable=SC2086
    a+=("$(mib "$A" $c)")
    # shellcheck disable=SC2086
    b+=("$(mib "$B" $c)")
  done
  am=$(printf '%s\n' "${a[@]}" | median)
  bm=$(printf '%s\n' "${b[@]}" | median)
  printf '| `%s` | %.0f | %.0f | %.3f |\n' "$c" "$am" "$bm" "$(awk -v a="$am" -v b="$bm" 'BEGIN {print b / a}')"
done
