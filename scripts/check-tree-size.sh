#!/usr/bin/env bash
# Keeps the tracked tree small enough to travel: fails when a tracked file is over 5 MB or the
# tracked tree is over 48 MB in all (the GPU machine takes the tree and the staged build,
# scripts/stage-build.sh, in one 64 MiB carry). Sizes are those of the blobs in git's index, so
# the check sees what a commit would hold, not what lies untracked or ignored beside it. Raw
# archives belong outside the tree (scripts/evidence-archive.sh).
#   scripts/check-tree-size.sh [--file-limit BYTES] [--tree-limit BYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
FILE_LIMIT=5000000
TREE_LIMIT=48000000
while [ $# -gt 0 ]; do
  case "$1" in
    --file-limit) FILE_LIMIT=$2; shift 2 ;;
    --tree-limit) TREE_LIMIT=$2; shift 2 ;;
    *) echo "usage: $0 [--file-limit BYTES] [--tree-limit BYTES]" >&2; exit 2 ;;
  esac
done

# mode object stage<TAB>path for every tracked entry; submodules (160000) hold no blob here.
git ls-files -s -z | tr '\0' '\n' | awk '$1 != "160000"' |
  awk '{ split($0, a, "\t"); print $2, a[2] }' |
  git cat-file --batch-check='%(objectsize) %(rest)' |
  awk -v fl="$FILE_LIMIT" -v tl="$TREE_LIMIT" '
    { size = $1; path = substr($0, length($1) + 2); total += size; n++
      if (size > fl) { printf "check-tree-size: %s is %.1f MB (limit %.1f MB)\n", path, size / 1e6, fl / 1e6; bad = 1 } }
    END {
      printf "check-tree-size: %d tracked files, %.1f MB (limit %.1f MB)\n", n, total / 1e6, tl / 1e6
      if (total > tl) { print "check-tree-size: the tracked tree is over its limit"; bad = 1 }
      exit bad }'
