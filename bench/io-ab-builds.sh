#!/usr/bin/env bash
# Two nsperf builds side by side on the same io workloads, alternating A B A B ... per case,
# RUNS rounds; prints medians (IOPS) and the ratio B/A. The null engine measures the
# harness's own per-op cost; the others go through the page cache of one directory.
#
#   flock /work/bench.lock bench/io-ab-builds.sh OLD_BINARY NEW_BINARY [RUNS=7] [SECONDS=2]
#
# Build the old one from a worktree, e.g.
#   git worktree add /tmp/old HEAD~1 && (cd /tmp/old && cargo build --release -p nsperf)
#   bench/io-ab-builds.sh /tmp/old/target/release/nsperf target/release/nsperf
# Cases (|-separated `nsperf io run` flags): override with CASES=...
set -euo pipefail
A=${1:?old nsperf binary}
B=${2:?new nsperf binary}
RUNS=${3:-7}
SECS=${4:-2}
DIR=${BENCH_DIR:-/var/tmp/nsperf-ab-io}
IFS='|' read -r -a CASES <<<"${CASES:--w randread -b 4k -e null|-w randread -b 4k|-w randread -b 4k -e uring --iodepth 32|-w randrw -b 4k|-w seqread -b 1m}"
mkdir -p "$DIR"
trap 'rm -rf "$DIR"' EXIT INT TERM

iops() { # BINARY FLAGS...
  local bin=$1; shift
  "$bin" io run "$DIR" -s 256m --time "${SECS}s" --json "$@" | python3 -c '
import json, sys
print(json.load(sys.stdin)["summary"]["iops"])'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "| case ($RUNS rounds of ${SECS} s, alternating, medians) | A IOPS | B IOPS | B/A |"
echo "|---|---|---|---|"
for c in "${CASES[@]}"; do
  a=() b=()
  for ((i = 1; i <= RUNS; i++)); do
    # shellcheck disable=SC2086
    a+=("$(iops "$A" $c)")
    # shellcheck disable=SC2086
    b+=("$(iops "$B" $c)")
  done
  am=$(printf '%s\n' "${a[@]}" | median)
  bm=$(printf '%s\n' "${b[@]}" | median)
  echo "$c: A ${a[*]} | B ${b[*]}" >&2
  python3 -c "print(f'| \`$c\` | {$am/1e3:.1f} k | {$bm/1e3:.1f} k | {$bm/$am:.3f} |')"
done
