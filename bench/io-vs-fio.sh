#!/usr/bin/env bash
# nsperf io against fio (and iozone for the auto matrix), side by side on this machine.
#
#   flock /work/bench.lock bench/io-vs-fio.sh [RUNS]      # as root; RUNS defaults to 5
#
# Runs both tools alternately (fio, nsperf, fio, nsperf, ...) on the same 1 GiB file, which
# nsperf reaches with `--device FILE --destructive` (it never writes a file it did not create
# otherwise). Before each warm run the file is read once with dd: a kernel reclaim daemon
# evicts page-cache pages idle for ~60 s, and fio's default invalidate=1 would turn a warm run
# into a disk read (so warm fio runs use --invalidate=0). Prints medians and nsperf/fio ratios
# (throughput or IOPS; for the matrix, wall time nsperf/iozone, lower is better).
set -euo pipefail
RUNS=${1:-${RUNS:-5}}
DIR=${BENCH_DIR:-/var/tmp/nsperf-bench}
cd "$(dirname "$0")/.."

install_peers() {
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    return
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! command -v fio >/dev/null; then
    apt-get update -qq && apt-get install -y -qq fio >/dev/null
  fi
  if ! command -v iozone >/dev/null; then
    # iozone3 is in Debian's non-free component: enable it on the existing sources.
    local src=/etc/apt/sources.list.d/debian.sources
    if [ -f "$src" ] && ! grep -q 'non-free' "$src"; then
      sed -i -E 's/^Components: main$/Components: main non-free/' "$src"
    fi
    if [ -f /etc/apt/sources.list ] && ! grep -q 'non-free' /etc/apt/sources.list; then
      sed -i -E 's/^(deb [^#]* main)$/\1 non-free/' /etc/apt/sources.list
    fi
    apt-get update -qq && apt-get install -y -qq iozone3 >/dev/null || echo "iozone3 not installable: matrix comparison skipped"
  fi
}
install_peers
command -v fio >/dev/null || { echo "fio is not installed" >&2; exit 1; }

cargo build --release -q
NS=$PWD/target/release/nsperf
mkdir -p "$DIR"
F=$DIR/bench-1g.dat
cleanup() { rm -f "$F" "$DIR"/iozone.tmp "$DIR"/*.fio.tmp; rmdir "$DIR" 2>/dev/null || true; }
trap cleanup EXIT
dd if=/dev/urandom of="$F" bs=1M count=1024 status=none
sync

warm() { dd if="$F" of=/dev/null bs=1M status=none; }
none() { :; }

# fio_val METRIC ARGS... / ns_val METRIC ARGS...: one figure per run. METRIC: throughput
# (bytes/s) or iops of the direction that moved data, or read_iops / write_iops of a mixed
# workload, or read_p50_us / write_p50_us (median completion latency of each direction).
fio_val() {
  local metric=$1; shift
  fio --output-format=json --name=job --filename="$F" --size=1g "$@" | python3 -c '
import json, sys
m = sys.argv[1]
j = json.load(sys.stdin)["jobs"][0]
if m.startswith(("read_", "write_")):
    d = j[m.split("_")[0]]
    print(d["iops"] if m.endswith("iops") else d["clat_ns"]["percentile"]["50.000000"] / 1e3)
else:
    d = j["read"] if j["read"]["io_bytes"] > 0 else j["write"]
    print(d["bw_bytes"] if m == "throughput" else d["iops"])' "$metric"
}
ns_val() {
  local metric=$1; shift
  "$NS" io run --device "$F" --destructive -s 1g --json "$@" | python3 -c '
import json, sys
m = sys.argv[1]
s = json.load(sys.stdin)["summary"]
if m.startswith(("read_", "write_")):
    d = s[m.split("_")[0]]
    print(d["iops"] if m.endswith("iops") else d["latency"]["p50_ns"] / 1e3)
else:
    print(s["throughput_bytes_per_s"] if m == "throughput" else s["iops"])' "$metric"
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
fmt() {
  python3 -c '
import sys
m, v = sys.argv[1], float(sys.argv[2])
print(f"{v/2**30:.2f} GiB/s" if m == "throughput" else f"{v:.1f} us" if m.endswith("_us") else f"{v/1e3:.1f} k IOPS")' "$1" "$2"
}

RESULTS=()
bench() { # NAME METRIC PREP "FIO ARGS" "NSPERF ARGS"
  local name=$1 metric=$2 prep=$3 fargs=$4 nargs=$5 a=() b=()
  for ((i = 1; i <= RUNS; i++)); do
    $prep; a+=("$(fio_val "$metric" $fargs)")
    $prep; b+=("$(ns_val "$metric" $nargs)")
  done
  local fm nm
  fm=$(printf '%s\n' "${a[@]}" | median)
  nm=$(printf '%s\n' "${b[@]}" | median)
  local ratio
  ratio=$(python3 -c "print(f'{$nm/$fm:.2f}')")
  RESULTS+=("| $name | $(fmt "$metric" "$fm") | $(fmt "$metric" "$nm") | $ratio |")
  echo "$name: fio ${a[*]} | nsperf ${b[*]} | ratio $ratio" >&2
}

bench "seq read 1 MiB, warm" throughput warm \
  "--rw=read --bs=1m --ioengine=psync --invalidate=0" \
  "-w seqread -b 1m"
bench "seq write 1 MiB, end fsync" throughput none \
  "--rw=write --bs=1m --ioengine=psync --end_fsync=1" \
  "-w seqwrite -b 1m --fsync end"
bench "rand read 4 KiB, warm, psync" iops warm \
  "--rw=randread --bs=4k --ioengine=psync --invalidate=0" \
  "-w randread -b 4k"
bench "rand read 4 KiB, warm, io_uring depth 32" iops warm \
  "--rw=randread --bs=4k --ioengine=io_uring --iodepth=32 --invalidate=0" \
  "-w randread -b 4k -e uring --iodepth 32"
bench "rand read 4 KiB, O_DIRECT, 5 s" iops none \
  "--rw=randread --bs=4k --ioengine=psync --direct=1 --time_based --runtime=5" \
  "-w randread -b 4k --cache direct --time 5s"
# fio habits (issue #14): the same fio flags on both sides.
bench "rand rw 70/30 4 KiB, O_DIRECT, 5 s: read IOPS" read_iops none \
  "--rw=randrw --rwmixread=70 --bs=4k --ioengine=psync --direct=1 --time_based --runtime=5" \
  "--rw randrw --rwmixread 70 -b 4k --direct --runtime 5 --time_based"
bench "rand rw 70/30 4 KiB, O_DIRECT, 5 s: write IOPS" write_iops none \
  "--rw=randrw --rwmixread=70 --bs=4k --ioengine=psync --direct=1 --time_based --runtime=5" \
  "--rw randrw --rwmixread 70 -b 4k --direct --runtime 5 --time_based"
bench "rand read 4 KiB, warm, --rate_iops 5000, 3 s" iops warm \
  "--rw=randread --bs=4k --ioengine=psync --invalidate=0 --rate_iops=5000 --time_based --runtime=3" \
  "--rw randread -b 4k --rate_iops 5000 --runtime 3 --time_based"
bench "seq write 1 MiB, verify crc32 (write pass)" throughput none \
  "--rw=write --bs=1m --ioengine=psync --verify=crc32 --do_verify=1 --verify_state_save=0" \
  "--rw write -b 1m --verify crc32"

echo
echo "| workload ($RUNS runs each, alternating, medians) | fio | nsperf | nsperf/fio |"
echo "|---|---|---|---|"
printf '%s\n' "${RESULTS[@]}"

if command -v iozone >/dev/null; then
  io=() ns=()
  for ((i = 1; i <= RUNS; i++)); do
    t0=$(date +%s.%N)
    iozone -a -z -n 64k -g 64m -y 4k -q 16m -i 0 -i 1 -i 2 -i 3 -i 4 -i 5 -f "$DIR/iozone.tmp" >/dev/null
    t1=$(date +%s.%N)
    "$NS" io auto "$DIR" --max-file 64m --json >/dev/null
    t2=$(date +%s.%N)
    io+=("$(python3 -c "print($t1-$t0)")")
    ns+=("$(python3 -c "print($t2-$t1)")")
  done
  im=$(printf '%s\n' "${io[@]}" | median)
  nm=$(printf '%s\n' "${ns[@]}" | median)
  echo "auto: iozone ${io[*]} | nsperf ${ns[*]}" >&2
  echo
  echo "| matrix 64 KiB..64 MiB × 4 KiB..16 MiB, 9 tests ($RUNS runs, medians) | iozone | nsperf | nsperf/iozone (time) |"
  echo "|---|---|---|---|"
  python3 -c "print(f'| wall time | {$im:.2f} s | {$nm:.2f} s | {$nm/$im:.2f} |')"
fi
