#!/usr/bin/env bash
# Builds upstream libnfs with its utilities (nfs-cp, nfs-cat, nfs-ls, nfs-stat) into a prefix,
# beside the system's libnfs and without touching it: the utilities find the prefix's
# libnfs by their rpath.
#
#   bench/build-libnfs.sh SRC [PREFIX]   # PREFIX defaults to /opt/peers/libnfs
#
# SRC: a git directory of libnfs (its newest libnfs-X.Y.Z tag is built), a source tarball,
# or an unpacked source tree. Needs cmake and a C compiler (apt-get install cmake).
# Writes PREFIX/VERSION (the version built, e.g. "libnfs-7.0.0") for the benchmarks to
# report; bench/storage-vs-peers.sh takes PREFIX/bin/nfs-cp as NFSCP.
set -euo pipefail
SRC=${1:?usage: bench/build-libnfs.sh SRC_GIT_DIR_OR_TARBALL_OR_TREE [PREFIX]}
PREFIX=${2:-/opt/peers/libnfs}
command -v cmake >/dev/null || { echo "needs cmake (apt-get install cmake)" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
  TAG=$(git -C "$SRC" tag --list 'libnfs-*' | sort -V | tail -1)
  [ -n "$TAG" ] || { echo "$SRC: no libnfs-* tag" >&2; exit 1; }
  git -C "$SRC" archive "$TAG" | tar -x -C "$WORK/src"
  VERSION=$TAG
elif [ -f "$SRC" ]; then
  tar -xf "$SRC" -C "$WORK/src" --strip-components=1
  VERSION=$(basename "$SRC" | sed 's/\.tar.*$//; s/\.tgz$//')
elif [ -f "$SRC/CMakeLists.txt" ]; then
  cp -a "$SRC/." "$WORK/src"
  VERSION=$(basename "$(cd "$SRC" && pwd)")
else
  echo "$SRC: not a git directory, tarball or libnfs source tree" >&2; exit 1
fi
cmake -S "$WORK/src" -B "$WORK/build" -DCMAKE_BUILD_TYPE=Release -DENABLE_UTILS=ON \
  -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_INSTALL_LIBDIR=lib \
  -DCMAKE_INSTALL_RPATH="$PREFIX/lib" -DCMAKE_BUILD_WITH_INSTALL_RPATH=ON >"$WORK/cmake.log" 2>&1 \
  || { tail -20 "$WORK/cmake.log" >&2; exit 1; }
cmake --build "$WORK/build" -j "$(nproc)" >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log" >&2; exit 1; }
cmake --install "$WORK/build" >/dev/null
echo "$VERSION" > "$PREFIX/VERSION"
# The utility must load the prefix's library, not the system's.
LIB=$(ldd "$PREFIX/bin/nfs-cp" | sed -n 's/^\s*libnfs\.so[^ ]* => \([^ ]*\).*/\1/p')
case "$LIB" in
  "$PREFIX"/*) ;;
  *) echo "$PREFIX/bin/nfs-cp loads libnfs from '$LIB', not from $PREFIX/lib" >&2; exit 1 ;;
esac
echo "$PREFIX: $(cat "$PREFIX/VERSION"), nfs-cp loads $LIB"
