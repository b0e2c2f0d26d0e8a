#!/usr/bin/env bash
# Every candidate variant against its task's baseline, on the GPU machine, in one run: each file
# portfolio/variants/<task>_<idea>.cu (and, for comparison, the task's current portfolio kernel)
# goes through `kblaster eval` (full verification, timing gate) at the official shape, then one
# table: task, variant, median ms, speedup over the baseline with its interval, verdict.
#   scripts/perf-variants.sh [task ...]        (default: every task that has a variant)
# Environment: OUT (default out/perf-variants), SHAPE (default official), VARIANTS (folder).
# Writes $OUT/<task>/<file>.json (the evaluation records), $OUT/table.md, $OUT/table.csv and
# $OUT/eval.log, packed into $OUT/perf-variants.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/pack.sh
OUT=${OUT:-$PWD/out/perf-variants}
SHAPE=${SHAPE:-official}
VARIANTS=${VARIANTS:-portfolio/variants}
K=$PWD/build/release/kblaster
[ -x "$K" ] || { echo "perf-variants: $K not built (cmake --build --preset release --target kblaster)" >&2; exit 2; }
mkdir -p "$OUT"
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"

if [ $# -gt 0 ]; then
  tasks=("$@")
else
  mapfile -t tasks < <(ls "$VARIANTS"/*.cu 2>/dev/null | xargs -n1 basename | cut -d_ -f1 | sort -u)
fi
[ ${#tasks[@]} -gt 0 ] || { echo "perf-variants: no variants under $VARIANTS" >&2; exit 2; }

: >"$OUT/eval.log"
for t in "${tasks[@]}"; do
  mkdir -p "$OUT/$t"
  files=()
  for f in portfolio/*/"${t}"_*.cu; do
    case "$f" in "$VARIANTS"/* | portfolio/variants/*) continue ;; esac
    [ -f "$f" ] && files+=("$f")
  done
  for f in "$VARIANTS/${t}"_*.cu; do
    [ -f "$f" ] && files+=("$f")
  done
  for f in "${files[@]}"; do
    kind=variant
    case "$f" in "$VARIANTS"/*) ;; *) kind=portfolio ;; esac
    name=$(basename "$f" .cu)
    echo "== $t $kind $name" | tee -a "$OUT/eval.log"
    "$K" -q eval --task "$t" --candidate "$f" --shape "$SHAPE" --json "$OUT/$t/$kind-$name.json" \
      >>"$OUT/eval.log" 2>&1
    echo "   exit $?" >>"$OUT/eval.log"
  done
done

python3 - "$OUT" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
rows = []
for path in sorted(glob.glob(os.path.join(out, "*", "*.json"))):
    task = os.path.basename(os.path.dirname(path))
    kind, _, name = os.path.basename(path)[:-5].partition("-")
    try:
        d = json.load(open(path))
    except (OSError, ValueError) as e:
        rows.append((task, kind, name, None, None, None, None, f"unreadable: {e}"))
        continue
    s = d.get("gate") or {}
    med = s.get("median_candidate_s")
    base = s.get("median_baseline_s")
    ci = s.get("speedup_ci") or [None, None]
    verdict = d.get("verdict", "?") + (f" ({d.get('reason')})" if d.get("reason") else "")
    rows.append((task, kind, name, med, base, s.get("speedup"), ci, verdict))

def ms(v):
    return f"{v * 1e3:.4f}" if isinstance(v, (int, float)) else "-"

lines = ["| task | kind | file | median ms | baseline ms | speedup [95%] | verdict | best of task |",
         "|---|---|---|--:|--:|--:|---|---|"]
best = {}
for r in rows:
    verified = r[7].split(" ")[0] in ("improved", "same", "regressed", "inconclusive")
    if r[3] is not None and verified:
        if r[0] not in best or r[3] < best[r[0]][3]:
            best[r[0]] = r
csv = ["task,kind,file,median_s,baseline_s,speedup,speedup_low,speedup_high,verdict"]
for r in rows:
    task, kind, name, med, base, sp, ci, verdict = r
    spd = f"{sp:.3f}x [{ci[0]:.3f}, {ci[1]:.3f}]" if isinstance(sp, (int, float)) and ci and ci[0] is not None else "-"
    mark = "best" if best.get(task) is r else ""
    lines.append(f"| {task} | {kind} | {name} | {ms(med)} | {ms(base)} | {spd} | {verdict} | {mark} |")
    csv.append(",".join(str(x) for x in (task, kind, name, med if med is not None else "", base if base is not None else "",
                                         sp if sp is not None else "", ci[0] if ci and ci[0] is not None else "",
                                         ci[1] if ci and ci[1] is not None else "", verdict.replace(",", ";"))))
open(os.path.join(out, "table.md"), "w").write("\n".join(lines) + "\n")
open(os.path.join(out, "table.csv"), "w").write("\n".join(csv) + "\n")
print("\n".join(lines))
print("\nbest per task (lowest median among verified kernels):")
for task, r in sorted(best.items()):
    print(f"  {task}: {r[1]} {r[2]} {ms(r[3])} ms")
EOF
pack "$OUT" perf-variants --exclude=store
