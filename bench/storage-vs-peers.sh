#!/usr/bin/env bash
# NFS through a lab link: nsperf's user-space nfs engine against libnfs's nfs-cp, both
# reading and writing a 1 GiB file on nfs-ganesha, and against the raw TCP throughput
# `nsperf net` measures on the same link; then NFS reads through an emulated T3
# (45 Mbit/s, 50 ms RTT) against the link rate.
#
#   flock /work/bench.lock bench/storage-vs-peers.sh [RUNS]   # as root; RUNS defaults to 5
#
# Lab: sites a (client) and b (server), unimpaired userspace link. Server: nfs-ganesha
# (`nsperf lab serve … --server ganesha`) exporting a directory on the disk; its page cache
# holds the files (remote-warm: written, then read once before each read pass).
# Alternates nsperf and nfs-cp run by run and prints medians and ratios.
#   read:  nsperf io run URL -w seqread  -s 1g -b 1m --iodepth 8   (the measured pass)
#          nfs-cp URL/bench-1g /dev/shm/out                         (wall time, mount included;
#          the local copy lands in tmpfs: nfs-cp cannot write to /dev/null)
#   write: nsperf io run URL -w seqwrite -s 1g -b 1m --iodepth 8 --fsync end  (UNSTABLE + COMMIT)
#          nfs-cp /dev/shm/src-1g URL/dst                           (libnfs: UNSTABLE 1 MiB WRITEs + COMMIT)
#
# SMB (PARTS=smb, or PARTS="nfs smb", the default): Samba's smbd in site b (`nsperf lab
# serve … smb`), nsperf's smb engine against smbclient's get/put of a 1 GiB file, both as
# the lab user (credentials file from `lab serve`), alternating, wall time for smbclient
# (log-on included, as nsperf's connect is not in its measured pass: a few ms):
#   read:  nsperf io run URL -w seqread  -s 1g -b 1m --iodepth 8 -A CREDS   (signed: its
#          default, ?signing=required) and URL?signing=if_required (unsigned: Samba does not
#          require signing)
#          smbclient //10.77.0.2/SHARE -A CREDS -c 'get bench-1g /dev/null'  (its default:
#          unsigned) and the same with --option='client signing=required'
#          (signed against signed, unsigned against unsigned)
#   write: nsperf … -w seqwrite --fsync end (FLUSH at the end); smbclient put from /dev/shm
#
# fio's libnfs engine (PARTS=fio; in the default): fio 3.42 built by ../shared/peers/build.sh
# (FIO=path, default /opt/peers/bin/fio, built there when missing), against nsperf's embedded
# NFS server in site c (`nsperf lab serve … nfs DIR`), one RPC in flight (fio's nfs engine
# hangs at --iodepth above 1), alternating, each tool's own figure:
#   write: fio --ioengine=nfs --nfs_url=nfs://10.77.0.3/DIR --filename=fio-1g --rw=write --bs=1m --size=1g --iodepth=1
#          (UNSTABLE WRITEs; libnfs's close sends a COMMIT after fio's clock stopped)
#          nsperf io run URL -w seqwrite -s 1g -b 1m --iodepth 1   (UNSTABLE, COMMIT at close, untimed:
#          the same work; and --fsync end, the COMMIT timed, for reference)
#   read:  fio … --rw=read (the file fio just wrote: in the server's cache)
#          nsperf io run URL -w seqread -s 1g -b 1m --iodepth 1  (remote-warm)
#          Each read starts after a sync too: fio's read follows its write, whose gigabyte
#          the server's host was still writing back (fio's read medians moved from 927 to
#          1858 MiB/s run to run before this, 2026-12-07).
#
# NFSv4 (PARTS=nfs4, not in the default): on the ganesha of site b, nsperf's NFSv4.1 and 4.0
# (URL?version=4.1, ?version=4.0) against nfs-cp's NFSv4 (URL/FILE?version=4: libnfs speaks
# 4.0) and nsperf's NFSv3, reads and writes of 1 GiB, 8 in flight, alternating.
#
# NFSCP=path picks the nfs-cp of every NFS part (default: the system's, Debian's libnfs 4.0.0,
# whose NFSv4 writes all fail); bench/build-libnfs.sh builds upstream libnfs beside it, e.g.
#   bench/build-libnfs.sh /work/.mirror/sahlberg+libnfs/repo   # -> /opt/peers/libnfs
#   PARTS=nfs4 NFSCP=/opt/peers/libnfs/bin/nfs-cp flock /work/bench.lock bench/storage-vs-peers.sh 5
# The output names the libnfs that nfs-cp loads.
set -euo pipefail
RUNS=${1:-${RUNS:-5}}
PARTS=${PARTS:-nfs smb fio}
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "needs root (lab namespaces)" >&2; exit 1; }
for p in ganesha.nfsd rpcbind nfs-cp smbd smbclient; do
  command -v "$p" >/dev/null || { export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; apt-get install -y -qq nfs-ganesha nfs-ganesha-vfs rpcbind libnfs-utils samba smbclient >/dev/null; break; }
done

NFSCP=${NFSCP:-$(command -v nfs-cp)}
[ -x "$NFSCP" ] || { echo "NFSCP=$NFSCP: no such program (bench/build-libnfs.sh builds one)" >&2; exit 1; }
# The libnfs behind $NFSCP: the VERSION file bench/build-libnfs.sh leaves in its prefix, or
# the Debian package owning the library it loads.
libnfs_version() {
  local lib pkg
  if [ -f "$(dirname "$(dirname "$NFSCP")")/VERSION" ]; then
    echo "$(cat "$(dirname "$(dirname "$NFSCP")")/VERSION") ($(dirname "$(dirname "$NFSCP")"))"; return
  fi
  lib=$(ldd "$NFSCP" | sed -n 's/^\s*libnfs\.so[^ ]* => \([^ ]*\).*/\1/p')
  pkg=$(dpkg -S "$(readlink -f "$lib")" 2>/dev/null | cut -d: -f1) || true
  if [ -n "$pkg" ]; then echo "libnfs $(dpkg-query -W -f '${Version}' "$pkg") (Debian $pkg)"; else echo "libnfs of $lib"; fi
}
LIBNFS=$(libnfs_version)
echo "peer: $NFSCP, $LIBNFS" >&2

cargo build --release -q
NS=$PWD/target/release/nsperf
LAB=sb$$
DIR=/var/tmp/nsperf-storage-bench-$$
SHM=/dev/shm/nsperf-storage-bench-$$
cleanup() {
  "$NS" lab down "$LAB" 2>/dev/null || true
  rm -rf "$DIR" "$SHM"
}
trap cleanup EXIT INT TERM
mkdir -p "$DIR" "$SHM"
"$NS" lab up "$LAB" --sites a,b,c >/dev/null
A() { "$NS" lab exec "$LAB" a -- "$@"; }
json() { python3 -c "import json,sys; j=json.load(sys.stdin); print($1)"; }
timed() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null; t1=$(date +%s%N); python3 -c "print($((1 << 30)) / (($t1 - $t0) / 1e9))"; }
# Every write starts on a clean disk: what earlier runs left dirty (a layout, a peer's file)
# is written back first, so neither tool's COMMIT or FLUSH pays for the other's data.
settle() { sync; sleep 1; }
head -c $((1 << 30)) /dev/urandom > "$SHM/src-1g"

if [[ " $PARTS " == *" smb "* ]]; then
  SDIR=$DIR/smb
  mkdir -p "$SDIR"
  CREDS=$("$NS" lab serve "$LAB" b smb "$SDIR" | sed -n 's/^credentials: \([^ ]*\).*/\1/p')
  SURL=smb://10.77.0.2/smb
  SC() { A smbclient //10.77.0.2/smb -A "$CREDS" "$@"; }
  SC -c "put $SHM/src-1g bench-1g" >/dev/null
  smb_ns() { A "$NS" io run "$SURL" -A "$CREDS" -s 1g -b 1m --iodepth 8 --json "$@" | json "j['summary']['throughput_bytes_per_s']"; }
  smb_get() { SC "$@" -c 'get bench-1g /dev/null' >/dev/null; timed SC "$@" -c 'get bench-1g /dev/null'; }
  smb_put() { timed SC "$@" -c "put $SHM/src-1g .nsperf-put"; rm -f "$SDIR/.nsperf-put"; }
  smb_nsu() { SURL="$SURL?signing=if_required" smb_ns "$@"; }
  declare -a SNR SNW SGD SPD SGS SPS SUR SUW
  SIGN=(--option='client signing=required')
  for i in $(seq 1 "$RUNS"); do
    SNR+=("$(smb_ns -w seqread)"); SGS+=("$(smb_get "${SIGN[@]}")"); SUR+=("$(smb_nsu -w seqread)"); SGD+=("$(smb_get)")
    SPS+=("$(settle; smb_put "${SIGN[@]}")"); SNW+=("$(settle; smb_ns -w seqwrite --fsync end)")
    SPD+=("$(settle; smb_put)"); SUW+=("$(settle; smb_nsu -w seqwrite --fsync end)")
    echo "smb run $i: read nsperf ${SNR[-1]} smbclient signed ${SGS[-1]} nsperf unsigned ${SUR[-1]} smbclient ${SGD[-1]}  write nsperf ${SNW[-1]} smbclient signed ${SPS[-1]} nsperf unsigned ${SUW[-1]} smbclient ${SPD[-1]} B/s" >&2
  done
  python3 - "${SNR[*]}" "${SGS[*]}" "${SUR[*]}" "${SGD[*]}" "${SNW[*]}" "${SPS[*]}" "${SUW[*]}" "${SPD[*]}" <<'PY'
import statistics as st, sys
nr, gs, ur, gd, nw, ps, uw, pd = ([float(x) for x in a.split()] for a in sys.argv[1:])
m = st.median
mib = lambda x: f"{x / 2**20:.0f} MiB/s"
print("| figure | nsperf smb, signed (median) | smbclient signed (median) | ratio | nsperf ?signing=if_required, unsigned (median) | smbclient default, unsigned (median) | ratio |")
print("|---|---|---|---|---|---|---|")
print(f"| seq read 1 GiB, 1 MiB requests, 8 in flight | {mib(m(nr))} | get {mib(m(gs))} | {m(nr)/m(gs):.2f}x | {mib(m(ur))} | get {mib(m(gd))} | {m(ur)/m(gd):.2f}x |")
print(f"| seq write 1 GiB + FLUSH | {mib(m(nw))} | put {mib(m(ps))} | {m(nw)/m(ps):.2f}x | {mib(m(uw))} | put {mib(m(pd))} | {m(uw)/m(pd):.2f}x |")
r = lambda v: [round(x / 2**20) for x in v]
print(f"smb runs: {len(nr)}; per run read nsperf {r(nr)} smbclient signed {r(gs)} nsperf unsigned {r(ur)} smbclient {r(gd)}; write nsperf {r(nw)} smbclient signed {r(ps)} nsperf unsigned {r(uw)} smbclient {r(pd)} (MiB/s)")
PY
fi
if [[ " $PARTS " == *" fio "* ]]; then
  FIO=${FIO:-/opt/peers/bin/fio}
  [ -x "$FIO" ] || ../shared/peers/build.sh "$(dirname "$(dirname "$FIO")")" >/dev/null
  "$FIO" --enghelp=nfs >/dev/null 2>&1 || { echo "$FIO has no nfs engine (build it with ../shared/peers/build.sh)" >&2; exit 1; }
  EDIR=$DIR/embedded
  mkdir -p "$EDIR"
  "$NS" lab serve "$LAB" c nfs "$EDIR" >/dev/null   # one NFS server per site: b has ganesha
  EURL=nfs://10.77.0.3$EDIR
  fio_nfs() {
    A "$FIO" --name=nfs --ioengine=nfs --nfs_url="$EURL" --filename=fio-1g --bs=1m --size=1g \
      --iodepth=1 --output-format=json "$@" | json "max(j['jobs'][0]['write']['bw_bytes'], j['jobs'][0]['read']['bw_bytes'])"
  }
  ns_nfs() { A "$NS" io run "$EURL" -s 1g -b 1m --iodepth 1 --json "$@" | json "j['summary']['throughput_bytes_per_s']"; }
  declare -a FW FR EW EE ER
  for i in $(seq 1 "$RUNS"); do
    # fio's file goes with rm on this host: the server closes it within 200 ms (its
    # housekeeping), before the next run starts.
    FW+=("$(settle; fio_nfs --rw=write)"); FR+=("$(settle; fio_nfs --rw=read)"); rm -f "$EDIR/fio-1g"; sleep 1
    EW+=("$(settle; ns_nfs -w seqwrite)"); EE+=("$(settle; ns_nfs -w seqwrite --fsync end)"); ER+=("$(settle; ns_nfs -w seqread)")
    echo "fio run $i: write fio ${FW[-1]} nsperf ${EW[-1]} (--fsync end ${EE[-1]})  read fio ${FR[-1]} nsperf ${ER[-1]} B/s" >&2
  done
  python3 - "${EW[*]}" "${EE[*]}" "${FW[*]}" "${ER[*]}" "${FR[*]}" <<'PY'
import statistics as st, sys
ew, ee, fw, er, fr = ([float(x) for x in a.split()] for a in sys.argv[1:])
m = st.median
mib = lambda x: f"{x / 2**20:.0f} MiB/s"
print("| embedded server, 1 GiB, 1 MiB RPCs, one in flight | nsperf nfs (median) | fio --ioengine=nfs (median) | ratio |")
print("|---|---|---|---|")
print(f"| seq write, UNSTABLE + COMMIT at close (untimed) | {mib(m(ew))} | {mib(m(fw))} | {m(ew)/m(fw):.2f}x |")
print(f"| seq write, nsperf --fsync end (COMMIT timed) | {mib(m(ee))} | {mib(m(fw))} | {m(ee)/m(fw):.2f}x |")
print(f"| seq read (server cache warm) | {mib(m(er))} | {mib(m(fr))} | {m(er)/m(fr):.2f}x |")
print(f"fio runs: {len(ew)}; per run write nsperf {[round(x/2**20) for x in ew]} --fsync end {[round(x/2**20) for x in ee]} fio {[round(x/2**20) for x in fw]}; read nsperf {[round(x/2**20) for x in er]} fio {[round(x/2**20) for x in fr]} (MiB/s)")
PY
fi
[[ " $PARTS " == *" nfs "* || " $PARTS " == *" nfs4 "* ]] || exit 0

"$NS" lab serve "$LAB" b nfs "$DIR" --server ganesha >/dev/null
URL=nfs://10.77.0.2$DIR
A "$NFSCP" "$SHM/src-1g" "$URL/bench-1g" >/dev/null

if [[ " $PARTS " == *" nfs4 "* ]]; then
  # NFSv4.1 (nsperf, ?version=4) against NFSv4 (libnfs's nfs-cp, ?version=4) and against
  # nsperf's own NFSv3, on the same ganesha; nfs-cp's wall time, a write counted only when the
  # whole file arrived (Debian's libnfs 4.0.0 fails NFSv4 writes: then the row says so).
  ns4() { A "$NS" io run "$URL$1" -s 1g -b 1m --iodepth 8 --json "${@:2}" | json "j['summary']['throughput_bytes_per_s']"; }
  cp4_read() {
    A "$NFSCP" "$URL/bench-1g?version=4" "$SHM/warm" >/dev/null; rm -f "$SHM/warm"
    timed A "$NFSCP" "$URL/bench-1g?version=4" "$SHM/out"; rm -f "$SHM/out"
  }
  cp4_write() {
    local t0 t1 ok=0
    t0=$(date +%s%N)
    A "$NFSCP" "$SHM/src-1g" "$URL/dst4-$1?version=4" >/dev/null 2>&1 && ok=1
    t1=$(date +%s%N)
    [ "$ok" = 1 ] && [ "$(stat -c %s "$DIR/dst4-$1" 2>/dev/null)" = $((1 << 30)) ] || ok=0
    rm -f "$DIR/dst4-$1"
    if [ "$ok" = 1 ]; then python3 -c "print($((1 << 30)) / (($t1 - $t0) / 1e9))"; else echo nan; fi
  }
  declare -a R4 R40 R3 C4R W4 W40 W3 C4W
  for i in $(seq 1 "$RUNS"); do
    R4+=("$(ns4 '?version=4.1' -w seqread)"); C4R+=("$(cp4_read)"); R40+=("$(ns4 '?version=4.0' -w seqread)"); R3+=("$(ns4 '?version=3' -w seqread)")
    # nfs-cp's write comes last in a round: the write right after it ran at about half speed
    # on this ganesha, whichever tool or version (the server still holds nfs-cp's file open;
    # nsperf removes its own), and with nfs-cp in the middle of a fixed order that was always
    # nsperf's v4.0 (289 MiB/s against v4.1's 505). nsperf's three take turns at going first.
    for k in 0 1 2; do
      case $(( (k + i) % 3 )) in
        0) W4+=("$(settle; ns4 '?version=4.1' -w seqwrite --fsync end)") ;;
        1) W40+=("$(settle; ns4 '?version=4.0' -w seqwrite --fsync end)") ;;
        2) W3+=("$(settle; ns4 '?version=3' -w seqwrite --fsync end)") ;;
      esac
    done
    C4W+=("$(settle; cp4_write "$i")")
    echo "nfs4 run $i: read nsperf v4.1 ${R4[-1]} nfs-cp v4 ${C4R[-1]} nsperf v4.0 ${R40[-1]} v3 ${R3[-1]}  write nsperf v4.1 ${W4[-1]} nfs-cp v4 ${C4W[-1]} nsperf v4.0 ${W40[-1]} v3 ${W3[-1]} B/s" >&2
  done
  python3 - "$LIBNFS" "${R4[*]}" "${C4R[*]}" "${R40[*]}" "${R3[*]}" "${W4[*]}" "${C4W[*]}" "${W40[*]}" "${W3[*]}" <<'PY'
import math, statistics as st, sys
libnfs = sys.argv[1]
r4, c4r, r40, r3, w4, c4w, w40, w3 = ([float(x) for x in a.split()] for a in sys.argv[2:])
m = lambda xs: st.median([x for x in xs if not math.isnan(x)]) if any(not math.isnan(x) for x in xs) else float("nan")
mib = lambda x: "n/a" if math.isnan(x) else f"{x / 2**20:.0f} MiB/s"
ratio = lambda a, b: "n/a" if math.isnan(a) or math.isnan(b) else f"{a / b:.2f}x"
failed = sum(math.isnan(x) for x in c4w)
print(f"peer: nfs-cp of {libnfs}, NFSv4.0 (libnfs's ?version=4)")
print("| ganesha, 1 GiB, 1 MiB requests, 8 in flight | nsperf NFSv4.1 | nfs-cp NFSv4 (libnfs: 4.0) | 4.1 / nfs-cp | nsperf NFSv4.0 | 4.0 / nfs-cp | nsperf NFSv3 | 4.1 / v3 |")
print("|---|---|---|---|---|---|---|---|")
print(f"| seq read (server cache warm) | {mib(m(r4))} | {mib(m(c4r))} | {ratio(m(r4), m(c4r))} | {mib(m(r40))} | {ratio(m(r40), m(c4r))} | {mib(m(r3))} | {ratio(m(r4), m(r3))} |")
note = f" (nfs-cp failed {failed} of {len(c4w)} writes)" if failed else ""
print(f"| seq write + COMMIT{note} | {mib(m(w4))} | {mib(m(c4w))} | {ratio(m(w4), m(c4w))} | {mib(m(w40))} | {ratio(m(w40), m(c4w))} | {mib(m(w3))} | {ratio(m(w4), m(w3))} |")
r = lambda xs: [None if math.isnan(x) else round(x / 2**20) for x in xs]
print(f"nfs4 runs (medians above): {len(r4)}; per run read v4.1 {r(r4)} nfs-cp v4 {r(c4r)} v4.0 {r(r40)} v3 {r(r3)}; write v4.1 {r(w4)} nfs-cp v4 {r(c4w)} v4.0 {r(w40)} v3 {r(w3)} (MiB/s)")
PY
fi
[[ " $PARTS " == *" nfs "* ]] || exit 0

ns_read() { A "$NS" io run "$URL" -w seqread -s 1g -b 1m --iodepth 8 --json "$@" | json "j['summary']['throughput_bytes_per_s']"; }
ns_write() { A "$NS" io run "$URL" -w seqwrite -s 1g -b 1m --iodepth 8 --fsync end --json | json "j['summary']['throughput_bytes_per_s']"; }
cp_read() {
  A "$NFSCP" "$URL/bench-1g" "$SHM/warm" >/dev/null; rm -f "$SHM/warm"   # server cache warm, as nsperf's remote-warm
  timed A "$NFSCP" "$URL/bench-1g" "$SHM/out"; rm -f "$SHM/out"
}
cp_write() { timed A "$NFSCP" "$SHM/src-1g" "$URL/dst-$1"; rm -f "$DIR/dst-$1"; }
# Raw TCP in the direction of the NFS read's data (server to client: -R), 5 s.
net_tcp() { A "$NS" net 10.77.0.2 -R -t 5 --json | json "j['summary']['throughput_bps'] / 8"; }

"$NS" lab exec "$LAB" b -- "$NS" server -B 10.77.0.2 -q &
SRV=$!
sleep 1
declare -a NR NW CR CW TCP
for i in $(seq 1 "$RUNS"); do
  # nfs-cp's written file goes with rm on this host while ganesha may still hold it open:
  # nsperf's read comes next, whose unmeasured layout absorbs whatever the server does when
  # it lets the file go (nsperf's own files go with REMOVE after its passes).
  CW+=("$(settle; cp_write "$i")"); NR+=("$(ns_read)")
  CR+=("$(cp_read)"); NW+=("$(settle; ns_write)")
  TCP+=("$(net_tcp)")
  echo "run $i: read nsperf ${NR[-1]} nfs-cp ${CR[-1]}  write nsperf ${NW[-1]} nfs-cp ${CW[-1]}  tcp ${TCP[-1]} B/s" >&2
done
kill $SRV 2>/dev/null || true

# The T3: 45 Mbit/s, 50 ms RTT, a queue of one BDP and a half.
"$NS" lab set "$LAB" --rate 45mbit --rtt 50ms --queue 420k
declare -a WAN
for i in $(seq 1 "$RUNS"); do
  WAN+=("$(A "$NS" io run "$URL" -w seqread -s 64m -b 1m --iodepth 16 --json | json "j['summary']['throughput_bytes_per_s']")")
  echo "t3 run $i: nfs read ${WAN[-1]} B/s" >&2
done

echo "peer: nfs-cp of $LIBNFS"
python3 - "${NR[*]}" "${CR[*]}" "${NW[*]}" "${CW[*]}" "${TCP[*]}" "${WAN[*]}" <<'PY'
import statistics as st, sys
nr, cr, nw, cw, tcp, wan = ([float(x) for x in a.split()] for a in sys.argv[1:])
m = st.median
mib = lambda x: f"{x / 2**20:.0f} MiB/s"
print("| figure | nsperf nfs (median) | peer (median) | ratio | goal |")
print("|---|---|---|---|---|")
print(f"| seq read 1 GiB, 1 MiB RPCs | {mib(m(nr))} | nfs-cp {mib(m(cr))} | {m(nr)/m(cr):.2f}x | >= 1.0x |")
print(f"| seq write 1 GiB, 1 MiB RPCs + COMMIT | {mib(m(nw))} | nfs-cp {mib(m(cw))} | {m(nw)/m(cw):.2f}x | >= 1.0x |")
print(f"| seq read vs raw TCP server to client (nsperf net -R) | {mib(m(nr))} | TCP {mib(m(tcp))} | {m(nr)/m(tcp)*100:.0f} % | >= 80 % |")
link = 45e6 / 8
print(f"| T3 45 Mbit/s 50 ms, 16 RPCs in flight | {m(wan)/1e6:.2f} MB/s | link {link/1e6:.3f} MB/s | {m(wan)/link*100:.1f} % | >= 90 % |")
print(f"runs: {len(nr)}; per run read nsperf {[round(x/2**20) for x in nr]} nfs-cp {[round(x/2**20) for x in cr]}; write nsperf {[round(x/2**20) for x in nw]} nfs-cp {[round(x/2**20) for x in cw]}; tcp {[round(x/2**20) for x in tcp]}; t3 {[round(x/1e6,2) for x in wan]} (MiB/s, t3 MB/s)")
PY
