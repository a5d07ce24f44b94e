#!/usr/bin/env bash
# Exercises the binaries dist/build.sh made: each must be static (no program interpreter,
# ldd calls it not dynamic), print its version, measure TCP over loopback for a second and
# run an io workload in a temporary directory. A foreign architecture runs under qemu-user
# (Debian package qemu-user). Skips a binary, saying why, when it cannot be run here.
set -euo pipefail
cd "$(dirname "$0")/out"
[ -f SHA256SUMS ] || { echo "dist/check.sh: no dist/out/SHA256SUMS: run dist/build.sh first" >&2; exit 1; }
sha256sum -c SHA256SUMS
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "dist/check.sh: $*" >&2; exit 1; }
host=$(uname -m)
for bin in nsperf-*-*; do
  arch=${bin#nsperf-*-}
  arch=${arch%%-*}
  if [ "$arch" = "$host" ]; then
    run=("./$bin")
  elif command -v "qemu-$arch" >/dev/null; then
    run=("qemu-$arch" "./$bin")
  else
    echo "skip $bin: no qemu-$arch to run a $arch binary (apt-get install qemu-user)"
    continue
  fi
  echo "== $bin (${run[*]})"
  if readelf -l "$bin" 2>/dev/null | grep -q INTERP; then fail "$bin asks for a program interpreter: not static"; fi
  if readelf -S "$bin" 2>/dev/null | grep -q '\.symtab'; then fail "$bin is not stripped (a .symtab is left)"; fi
  if [ "$arch" = "$host" ]; then
    ldd "./$bin" 2>&1 | tee "$tmp/ldd" || true
    grep -Eq "not a dynamic executable|statically linked" "$tmp/ldd" || fail "$bin: ldd does not call it static"
  fi
  "${run[@]}" --version | tee "$tmp/version"
  grep -q "^nsperf " "$tmp/version" || fail "$bin --version printed no version"
  "${run[@]}" net --loopback -t 1 --json > "$tmp/net.json"
  grep -Eq '"throughput_bps": *[1-9]' "$tmp/net.json" || fail "$bin net --loopback measured nothing"
  mkdir -p "$tmp/io"
  "${run[@]}" io run "$tmp/io" --size 8m --bs 64k --json > "$tmp/io.json"
  grep -Eq '"throughput_bytes_per_s": *[1-9]' "$tmp/io.json" || fail "$bin io run measured nothing"
  [ -z "$(ls -A "$tmp/io")" ] || fail "$bin io run left files behind"
  echo "ok $bin"
done
