#!/usr/bin/env bash
# The raw archives of the GPU runs (each run's *.tar.gz of every evaluation's JSON and log, the
# stores, and the every-sample bench.json.gz of the RMSNorm case) are kept in git's history, not
# in the tree: the tree holds each run's summaries (README, report, tables, JSON under 5 MB).
# evidence/ARCHIVES.tsv lists every archive that left the tree: its path, size, SHA-256 and the
# commit that holds it. This command lists them and puts them back from that history.
#   scripts/evidence-archive.sh list [PATH-PREFIX]     the archives (under a folder, if given)
#   scripts/evidence-archive.sh where PATH             the commit that holds PATH and its README
#   scripts/evidence-archive.sh restore PATH|all ...   write PATH back from history, checking its
#                                                      SHA-256 (a folder restores what is under it)
# A restored archive is ignored by git (.gitignore), so it is not committed again. New runs write
# their archives under $OUT (docs/gpu.md); commit the summaries, keep the archive outside git and
# add its line here with `scripts/evidence-archive.sh add PATH COMMIT` when a commit holds it.
set -euo pipefail
cd "$(dirname "$0")/.."
LIST=evidence/ARCHIVES.tsv

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

# The manifest's rows (no header) whose path starts with $1.
rows() { awk -F'\t' -v p="$1" 'NR > 1 && index($1, p) == 1' "$LIST"; }

restore_one() {
  local path=$1 bytes=$2 sha=$3 commit=$4 tmp
  if [ -f "$path" ] && [ "$(sha256sum "$path" | cut -d' ' -f1)" = "$sha" ]; then
    echo "present  $path"
    return 0
  fi
  if ! git cat-file -e "$commit:$path" 2>/dev/null; then
    echo "evidence-archive: $path: commit $commit is not in this clone (git fetch, or a full clone)" >&2
    return 1
  fi
  mkdir -p "$(dirname "$path")"
  tmp="$path.part"
  git cat-file blob "$commit:$path" >"$tmp"
  if [ "$(sha256sum "$tmp" | cut -d' ' -f1)" != "$sha" ] || [ "$(stat -c %s "$tmp")" != "$bytes" ]; then
    rm -f "$tmp"
    echo "evidence-archive: $path: the blob at $commit does not match its SHA-256" >&2
    return 1
  fi
  mv -f "$tmp" "$path"
  echo "restored $path ($bytes bytes, from $commit)"
}

cmd=${1:-}
[ -n "$cmd" ] || usage
shift
case "$cmd" in
  list)
    rows "${1:-}" | awk -F'\t' '{ printf "%10d  %s  %s\n", $2, substr($4, 1, 10), $1; n++; s += $2 }
      END { printf "%d archives, %.1f MB\n", n, s / 1e6 }'
    ;;
  where)
    [ $# -eq 1 ] || usage
    row=$(awk -F'\t' -v p="$1" 'NR > 1 && $1 == p' "$LIST")
    [ -n "$row" ] || { echo "evidence-archive: $1 is not in $LIST" >&2; exit 1; }
    IFS=$'\t' read -r path bytes sha commit <<<"$row"
    echo "$path: $bytes bytes, sha256 $sha"
    echo "  held by commit $(git log -1 --format='%h %s' "$commit" 2>/dev/null || echo "$commit (not in this clone)")"
    [ -f "$(dirname "$path")/README.md" ] && echo "  described in $(dirname "$path")/README.md"
    ;;
  restore)
    [ $# -ge 1 ] || usage
    status=0
    for arg in "$@"; do
      [ "$arg" = all ] && arg=""
      found=0
      while IFS=$'\t' read -r path bytes sha commit; do
        found=1
        restore_one "$path" "$bytes" "$sha" "$commit" || status=1
      done < <(rows "${arg%/}")
      [ $found = 1 ] || { echo "evidence-archive: nothing in $LIST under $arg" >&2; status=1; }
    done
    exit $status
    ;;
  add)
    [ $# -eq 2 ] || usage
    path=$1 commit=$2
    git cat-file -e "$commit:$path" || { echo "evidence-archive: $commit does not hold $path" >&2; exit 1; }
    bytes=$(git cat-file -s "$commit:$path")
    sha=$(git cat-file blob "$commit:$path" | sha256sum | cut -d' ' -f1)
    { head -1 "$LIST"; { tail -n +2 "$LIST" | awk -F'\t' -v p="$path" '$1 != p'
      printf '%s\t%s\t%s\t%s\n' "$path" "$bytes" "$sha" "$(git rev-parse "$commit")"; } | sort; } >"$LIST.new"
    mv -f "$LIST.new" "$LIST"
    echo "added $path ($bytes bytes, $commit)"
    ;;
  *) usage ;;
esac
