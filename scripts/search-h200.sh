#!/usr/bin/env bash
# The search's evidence on the GPU machine, for evidence/h200/search/:
#   (a) table:      the outcome table of core10 and the test tasks (every table point, once);
#   (b) experiment: the leave-one-out memory experiment replayed from that table (CPU only);
#   (c) optimize:   `kblaster optimize --proposer builtin` per core10 task, with screening, and a
#                   short run without screening on the same tasks for candidates per minute.
#   (d) summary:    each optimize task's best against the best known kernel for it (the portfolio's
#                   in ../core10/bench.json.gz, or the table's best point), as speedups over the
#                   baseline measured within each run: optimize/summary.json (CPU only).
#   scripts/search-h200.sh [table|experiment|optimize|noscreen|summary|all]   (default: all)
# Every step is resumable: the table keeps what it has, and a task whose JSON exists is skipped,
# so the script can be rerun within per-command time limits until everything is there. A table
# committed under evidence/h200/search/ (RESUME, set empty for none) seeds a new OUT, so a run on
# another day goes on from the points already recorded.
# Environment: OUT (default out/search-h200), MAX_POINTS (6), SEEDS (5), BUDGET (9m per task: the
# search's wall-clock limit, under the ten minutes a task is allowed, so that one task's search
# with its preflight, baseline and confirmation fits a ten-minute command), TASKS (core10 ids),
# NOSCREEN_BUDGET (3m), NOSCREEN_TASKS (019 036 047), CALL_LIMIT (seconds this command may run, 0
# for no limit: optimize then starts a task only with MIN_TASK seconds (240) left, its budget cut
# to what is left less a minute; a task whose search ends on a cut budget is set aside as
# optimize/ID.cut.json and runs again with the whole budget in the next call, so several tasks
# that end early share one call).
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/pack.sh
OUT=${OUT:-$PWD/out/search-h200}
mkdir -p "$OUT"
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
K=$PWD/build/release/kblaster
step=${1:-all}
MAX_POINTS=${MAX_POINTS:-6}
SEEDS=${SEEDS:-5}
BUDGET=${BUDGET:-9m}
NOSCREEN_BUDGET=${NOSCREEN_BUDGET:-3m}
TASKS=${TASKS:-004 007 019 023 026 036 040 047 088 095}
CALL_LIMIT=${CALL_LIMIT:-0}
MIN_TASK=${MIN_TASK:-240}
rc=0

# "9m", "540s", "1h" -> seconds
to_seconds() {
  case "$1" in
  *h) echo $((${1%h} * 3600)) ;;
  *m) echo $((${1%m} * 60)) ;;
  *s) echo "${1%s}" ;;
  *) echo "$1" ;;
  esac
}

RESUME=${RESUME-evidence/h200/search}
for f in table.json optimize noscreen screen; do
  if [ -n "$RESUME" ] && [ -e "$RESUME/$f" ] && [ ! -e "$OUT/$f" ]; then
    cp -a "$RESUME/$f" "$OUT/$f"
  fi
done

if [ "$step" = table ] || [ "$step" = all ]; then
  $K experiment record-table --suite core10 --task-dir tests/data/tasks \
    --max-points "$MAX_POINTS" --out "$OUT/table.json" 2>&1 | tee -a "$OUT/table.log"
  rc=$((rc | PIPESTATUS[0]))
fi

if [ "$step" = experiment ] || [ "$step" = all ]; then
  $K experiment memory --table "$OUT/table.json" --seeds "$SEEDS" --out "$OUT/memory" 2>&1 |
    tee "$OUT/memory.log"
  rc=$((rc | PIPESTATUS[0]))
fi

if [ "$step" = optimize ] || [ "$step" = all ]; then
  mkdir -p "$OUT/optimize"
  full=$(to_seconds "$BUDGET")
  for t in $TASKS; do
    [ -s "$OUT/optimize/$t.json" ] && continue
    budget=$full
    if [ "$CALL_LIMIT" -gt 0 ]; then
      left=$((CALL_LIMIT - SECONDS - 60))
      if [ "$left" -lt "$MIN_TASK" ]; then
        echo "optimize: ${left}s left in this call; $t and the tasks after it wait for the next"
        break
      fi
      [ "$left" -lt "$budget" ] && budget=$left
    fi
    $K optimize --task "$t" --proposer builtin --budget "${budget}s" --seed 1 \
      --json "$OUT/optimize/$t.json" 2>&1 | tee "$OUT/optimize/$t.log"
    rc=$((rc | PIPESTATUS[0]))
    if [ "$budget" -lt "$full" ] && [ -s "$OUT/optimize/$t.json" ] &&
      python3 - "$OUT/optimize/$t.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
sys.exit(0 if any(t.get("stopped_because") == "wall_budget" for t in d.get("tasks", [])) else 1)
PY
      echo "optimize: $t ended on a budget cut to ${budget}s; it runs again with ${full}s"
      mv "$OUT/optimize/$t.json" "$OUT/optimize/$t.cut.json"
      mv "$OUT/optimize/$t.log" "$OUT/optimize/$t.cut.log"
      break
    fi
  done
fi

if [ "$step" = noscreen ] || [ "$step" = all ]; then
  # Candidates per minute with and without screening, same tasks and seed, a shorter budget.
  mkdir -p "$OUT/noscreen" "$OUT/screen"
  for t in ${NOSCREEN_TASKS:-019 036 047}; do
    [ -s "$OUT/noscreen/$t.json" ] ||
      $K optimize --task "$t" --budget "$NOSCREEN_BUDGET" --seed 1 --no-screen \
        --json "$OUT/noscreen/$t.json" 2>&1 | tee "$OUT/noscreen/$t.log"
    [ -s "$OUT/screen/$t.json" ] ||
      $K optimize --task "$t" --budget "$NOSCREEN_BUDGET" --seed 1 \
        --json "$OUT/screen/$t.json" 2>&1 | tee "$OUT/screen/$t.log"
  done
fi

if [ "$step" = summary ] || [ "$step" = all ]; then
  python3 - "$OUT" "${BENCH:-evidence/h200/core10/bench.json.gz}" <<'PY' | tee "$OUT/summary.log"
import glob, gzip, json, os, sys
out, bench_path = sys.argv[1], sys.argv[2]
known = {}  # task -> (speedup over its baseline, where from)
if os.path.exists(bench_path):
    opener = gzip.open if bench_path.endswith(".gz") else open
    for row in json.load(opener(bench_path, "rt"))["rows"]:
        task = os.path.basename(row["file"]).split("_")[0]
        if row.get("verdict") == "improved":
            known[task] = (row["statistics"]["speedup"], "portfolio " + row["file"])
table_path = os.path.join(out, "table.json")
if os.path.exists(table_path):
    for e in json.load(open(table_path))["entries"]:
        if e.get("verdict") == "improved" and e["speedup"] > known.get(e["task"], (0, ""))[0]:
            known[e["task"]] = (e["speedup"], "table " + e["strategy"] + " " + json.dumps(e["params"], sort_keys=True))
rows = []
for f in sorted(glob.glob(os.path.join(out, "optimize", "*.json"))):
    if f.endswith(".cut.json") or f.endswith("summary.json"):
        continue
    for t in json.load(open(f)).get("tasks", []):
        k = known.get(t["task"])
        steps = t.get("steps", [])
        rows.append({
            "task": t["task"], "outcome": t["outcome"], "reason": t["reason"],
            "stopped_because": t.get("stopped_because"), "speedup": t.get("speedup"),
            "best_seconds": t.get("best_seconds"), "baseline_seconds": t.get("baseline_seconds"),
            "best_strategy": t.get("best_strategy"), "evaluations": t.get("evaluations"),
            "wall_seconds": t.get("wall_seconds"),
            "candidates_per_minute": t.get("candidates_per_minute"),
            "steps": len(steps),
            "steps_with_state": sum(1 for s in steps if (s.get("why") or {}).get("state", {}).get("state")),
            "best_known_speedup": k[0] if k else None, "best_known_from": k[1] if k else None,
            "fraction_of_best_known": (t["speedup"] / k[0]) if k and t.get("speedup") else None,
        })
reached = [r for r in rows if r["fraction_of_best_known"] is not None and r["fraction_of_best_known"] >= 0.9]
summary = {"tasks": rows, "at_least_90_percent": len(reached), "of": len(rows),
           "improved": sum(1 for r in rows if r["outcome"] == "improved"),
           "every_step_has_state": all(r["steps"] == r["steps_with_state"] for r in rows)}
json.dump(summary, open(os.path.join(out, "optimize", "summary.json"), "w"), indent=1)
print(f"{'task':5} {'outcome':9} {'stopped':12} {'speedup':>8} {'best known':>10} {'fraction':>8} {'evals':>5} {'cand/min':>8}  states")
for r in rows:
    fr = r["fraction_of_best_known"]
    bk = r["best_known_speedup"]
    print(f"{r['task']:5} {r['outcome']:9} {str(r['stopped_because']):12} {r['speedup'] or 0:8.3f} "
          f"{(bk or 0):10.3f} {(fr or 0):8.3f} {r['evaluations']:5} {r['candidates_per_minute'] or 0:8.2f}  "
          f"{r['steps_with_state']}/{r['steps']}")
print(f"at least 90% of the best known: {summary['at_least_90_percent']} of {summary['of']}; "
      f"improved {summary['improved']}; every step with its state: {summary['every_step_has_state']}")
PY
  rc=$((rc | PIPESTATUS[0]))
fi

pack "$OUT" search --exclude=store
exit "$rc"
