#!/usr/bin/env bash
# Strips a release binary for TARGET in place and checks that no symbol table is left:
#
#   dist/strip.sh x86_64-unknown-linux-musl dist/out/nsperf-0.1.0-x86_64-unknown-linux-musl
#
# dist/build.sh calls it on every binary. The dist profile's `strip = true` does not take on
# every path: built with Debian's musl-gcc (no cargo-zigbuild), the x86_64 binary kept its
# symbol table, 9,612,640 bytes instead of 7,998,968, over the 8 MB limit (issue 20). So the
# binary is stripped here whatever built it, with a strip that knows the target's
# architecture: llvm-strip, the target's binutils strip, or the host's for a native target.
set -euo pipefail
t=$1
bin=$2
arch=${t%%-*}
tool=
for s in llvm-strip "$arch-linux-gnu-strip"; do
  if command -v "$s" >/dev/null; then
    tool=$s
    break
  fi
done
if [ -z "$tool" ] && [ "$arch" = "$(uname -m)" ] && command -v strip >/dev/null; then
  tool=strip
fi
if [ -n "$tool" ]; then
  "$tool" --strip-all "$bin"
fi
if ! command -v readelf >/dev/null; then
  echo "dist/strip.sh: readelf is missing: cannot check that $bin is stripped" >&2
  exit 1
fi
if readelf -S "$bin" | grep -q '\.symtab'; then
  echo "dist/strip.sh: $bin still has its symbol table (install llvm-strip or binutils)" >&2
  exit 1
fi
