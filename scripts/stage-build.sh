#!/usr/bin/env bash
# Stages what a GPU machine needs from build/release (binaries, runtime libraries, bwrap, the GPU
# test binary and CTest's files; no objects, no caches) into one folder that travels with the
# working tree, and prints the command that puts it back in place over there.
#   scripts/stage-build.sh [folder, default .xfer/release]
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.xfer/release}
B=build/release
rm -rf "$DEST"
mkdir -p "$DEST/tests"
cp -a $B/kblaster $B/lib $B/bwrap $B/CTestTestfile.cmake "$DEST/"
[ -d $B/generated ] && cp -a $B/generated "$DEST/"
cp -a $B/tests/kblaster_gpu_tests $B/tests/CTestTestfile.cmake "$DEST/tests/"
cp -a $B/tests/kblaster_gpu_tests*.cmake "$DEST/tests/"
# CTest includes every test binary's list; the others are replaced by empty lists.
for f in $B/tests/*_include.cmake; do
  n=$(basename "$f")
  case "$n" in kblaster_gpu_tests*) ;; *) : >"$DEST/tests/$n" ;; esac
done
# What was built: the commit (and whether the tree had changes), for the evidence's provenance.
{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- src include portfolio tasks scripts tests CMakeLists.txt 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "staged $(date -u +%FT%TZ)"
} >"$DEST/SOURCE"
du -sh "$DEST"
# What travels: the tracked tree (scripts/check-tree-size.sh keeps it under 48 MB) and this stage,
# within the GPU machine's 64 MiB carry; nothing has to be moved out of the tree first.
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
stage=$(du -sb "$DEST" | cut -f1)
echo "tree $((tree / 1000000)) MB + stage $((stage / 1000000)) MB = $(((tree + stage) / 1000000)) MB (carry limit 67 MB, 64 MiB)"
[ $((tree + stage)) -le $((64 * 1024 * 1024)) ] ||
  echo "stage-build: the tree and the stage are over 64 MiB together; see scripts/check-tree-size.sh" >&2
echo "on the GPU machine: mkdir -p build && rm -rf $B && cp -a $DEST $B"
