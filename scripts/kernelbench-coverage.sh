#!/usr/bin/env bash
# Static coverage of a KernelBench level by the lowering and the fusion planner, on this machine
# (no GPU, no PyTorch): imports the level's problem files into a temporary suite, lowers every
# task (`kblaster tasks lower`) and counts, from each task's lowered/lowering.json, the problems
# lowered whole (one kernel: a family rule or a fused anchor with its epilogue), the problems
# lowered as a chain of several kernels in one candidate (rule "<anchor>|<step>|..."), the
# problems the fusion planner splits into several kernels that are not lowered, and the rest (no
# plan), with the ops that most often stop them.
#
#   scripts/kernelbench-coverage.sh KB_LEVEL_DIR [--json OUT.json] [--kblaster PATH]
set -euo pipefail
dir="${1:?usage: $0 KB_LEVEL_DIR [--json OUT.json] [--kblaster PATH]}"
shift
json_out=""
kblaster="$(dirname "$0")/../build/release/kblaster"
while [ $# -gt 0 ]; do
  case "$1" in
    --json) json_out="$2"; shift 2 ;;
    --kblaster) kblaster="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$kblaster" tasks import --suite coverage --out "$tmp/tasks" "$dir"/*.py > "$tmp/import.log" 2>&1 ||
  { cat "$tmp/import.log" >&2; exit 1; }
"$kblaster" --tasks "$tmp/tasks" tasks lower > "$tmp/lower.log" 2>&1 || true
python3 - "$tmp/tasks" "$json_out" <<'PY'
import collections, glob, json, os, sys
rows, missing = [], collections.Counter()
for rec in sorted(glob.glob(os.path.join(sys.argv[1], "*", "lowered", "lowering.json"))):
    r = json.load(open(rec))
    plan = r.get("plan", {})
    if "rule" in r:
        status, why = ("chained" if "|" in r["rule"] else "lowered"), r["rule"]
    elif plan.get("coverage") == "split":
        status = "split"
        second = next(s for s in plan["steps"] if s["kernel"] == 1)
        why = f'{plan["kernels"]} kernels; kernel 2 starts at {second["ops"][0]} ({second["reason"]})'
        missing.update(s["rule"] for s in plan["steps"] if s["kernel"] > 0 and s["kind"] != "epilogue")
    else:
        status = "not_lowered"
        why = "; ".join(f'{i["op"]}: {i["reason"]}' for i in r.get("issues", []))
        missing.update(r.get("unsupported_ops", []))
    rows.append({"task": r["task"], "status": status, "detail": why})
count = collections.Counter(r["status"] for r in rows)
for r in rows:
    print(f'{r["task"]:<52} {r["status"]:<12} {r["detail"]}')
print(f'\n{len(rows)} problems: {count["lowered"]} lowered whole (one kernel), '
      f'{count["chained"]} lowered in several kernels (one candidate), '
      f'{count["split"]} planned in several kernels (not lowered), {count["not_lowered"]} not planned')
print("top missing (kernels after the first, and ops that stop a plan):")
for op, n in missing.most_common(15):
    print(f"  {n:3d}  {op}")
if sys.argv[2]:
    json.dump({"problems": len(rows), "lowered": count["lowered"], "chained": count["chained"],
               "split": count["split"],
               "not_lowered": count["not_lowered"], "missing": missing.most_common(),
               "rows": rows}, open(sys.argv[2], "w"), indent=1)
PY
