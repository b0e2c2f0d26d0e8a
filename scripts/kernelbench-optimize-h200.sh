#!/usr/bin/env bash
# Imports the KernelBench problems of one level, lowers them onto the op families and optimizes
# each with the built-in proposer on the GPU machine, then writes the per-problem summary.
#   scripts/kernelbench-optimize-h200.sh KB_DIR [LEVEL] [--budget 45s] [--only REGEX]
# KB_DIR is a KernelBench checkout (KernelBench/level1/*.py under it); nothing of it is copied
# into the repository, only the results. Uses the build in build/release. Resumable: a problem
# whose result is under $WORK/results is not run again, so a pass can span several calls.
#
#   1. `kblaster tasks import` (static; the files it cannot read are executed by
#      scripts/pytorch_oracle.py resolve and imported from that analysis) -> $WORK/tasks
#   2. `kblaster tasks lower` -> $WORK/lower.json (the rule per task, or the unsupported ops)
#   3. per task: `kblaster --tasks $WORK/tasks optimize --task T --proposer builtin --budget B`
#      -> $WORK/results/T.json (and the store's run)
#   4. scripts/pytorch_baselines.py over the tasks: eager, torch.compile and max-autotune under
#      the Core 10 bench's rules -> $WORK/pytorch.json
#   5. scripts/kernelbench_optimize_summary.py -> $OUT/summary.json
# METHODS (default eager,compile,max-autotune) names the PyTorch methods of step 4; PYTORCH=0
# skips step 4 (a pass spread over several calls times PyTorch once, in its last call).
# DEADLINE (seconds since the epoch) stops the pass before a task that could not finish by then;
# the next call resumes at that task. RESUME_FROM names a folder of results kept in the tree
# (scripts/kernelbench_keep_results.py keep): those measured on this device are taken as done, so
# a pass resumes on a fresh machine. AGAIN=1 measures the problems --only selects again: their
# results (seeded or in $WORK) move to $WORK/results/replaced/ first (a judge fixed, a problem
# to measure on a newer build).
set -uo pipefail
cd "$(dirname "$0")/.."
KB_DIR=${1:?usage: scripts/kernelbench-optimize-h200.sh KB_DIR [LEVEL] [--budget 45s] [--only REGEX]}
shift
LEVEL=1
if [ $# -gt 0 ] && [[ $1 =~ ^[123]$ ]]; then LEVEL=$1; shift; fi
BUDGET=45s
ONLY=""
while [ $# -gt 0 ]; do
  case $1 in
    --budget) BUDGET=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 64 ;;
  esac
done
OUT=${OUT:-$PWD/evidence/h200/kernelbench/optimize-l$LEVEL}
WORK=${WORK:-$HOME/kb-optimize-l$LEVEL}
K=$PWD/build/release/kblaster
SUITE=kernelbench
mkdir -p "$OUT" "$WORK/results"
export KBLASTER_GENERATOR_LIB=$PWD/build/release/lib/libkblaster_generator.so
# The problem files run by this script (resolve, pytorch_baselines.py) get an explicit
# environment, never this shell's; they are trusted code by this script's purpose, so the
# import trusts them (--trust) for the optimize steps.
source scripts/lib/module_env.sh
. scripts/lib/bwrap.sh
install_carried_bwrap # the sandbox: the candidates compile and run in it

src=$(find "$KB_DIR" -path "*/level$LEVEL/*.py" -type f | sort -V)
[ -n "$src" ] || { echo "no level$LEVEL/*.py under $KB_DIR" >&2; exit 65; }
python3 scripts/pytorch_oracle.py probe || { echo "no PyTorch" >&2; exit 3; }
python3 - "$WORK/env.json" <<'PY'
import json, subprocess, sys
def run(*a):
    try:
        return subprocess.run(a, capture_output=True, text=True, check=True).stdout.strip()
    except Exception:  # noqa: BLE001
        return None
smi = (run("nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader") or ",").split("\n")[0]
name, driver = [x.strip() for x in (smi.split(",") + [""])[:2]]
nvcc = run("nvcc", "--version") or ""
# The build's own record of its commit (scripts/stage-build.sh) where it travelled staged.
try:
    build = open("build/release/SOURCE").readline().strip() or None
except OSError:
    build = None
json.dump({"device": name, "driver": driver,
           "toolkit": nvcc.strip().splitlines()[-1] if nvcc else None,
           "commit": run("git", "rev-parse", "HEAD"), "build": build},
          open(sys.argv[1], "w"), indent=1)
PY

# 1. Import once (an existing $WORK/tasks is kept: the pass resumes on the same contracts).
if [ ! -f "$WORK/import.json" ]; then
  # shellcheck disable=SC2086
  $K tasks import --trust --suite $SUITE --out "$WORK/tasks" $src >"$WORK/import.txt" 2>&1
  cp "$WORK/tasks/import.json" "$WORK/import.json"
  pending=$(python3 -c 'import json,sys; print(" ".join(r["file"] for r in json.load(open(sys.argv[1])) if r["status"] == "needs_gpu_evaluation"))' "$WORK/import.json")
  if [ -n "$pending" ]; then
    # shellcheck disable=SC2086
    "${MODULE_ENV[@]}" python3 scripts/pytorch_oracle.py resolve $pending --out "$WORK/resolved-analysis.json"
    RES=$(mktemp -d /tmp/kb-resolved.XXXXXX)
    $K tasks import --trust --suite $SUITE --out "$RES" --analysis "$WORK/resolved-analysis.json" \
      >"$WORK/import-resolved.txt" 2>&1
    cp "$RES/import.json" "$WORK/import-resolved.json"
    for d in "$RES"/*/; do
      [ -f "$d/task.toml" ] && rm -rf "$WORK/tasks/$(basename "$d")" && cp -r "$d" "$WORK/tasks/"
    done
  fi
fi

# A pass resumed on another machine (or by another user) finds the tasks imported but their
# modules not in this machine's trust file: the script trusts them again, as the import did.
for d in "$WORK"/tasks/*/; do
  [ -f "$d/model.py" ] && $K tasks trust "$d" >/dev/null
done

# 2. The lowering of every task (CPU only; cheap, so always again).
$K --tasks "$WORK/tasks" tasks lower --suite $SUITE --json "$WORK/lower.json" | tail -3

if [ -n "${RESUME_FROM:-}" ]; then
  python3 scripts/kernelbench_keep_results.py seed "$RESUME_FROM" "$WORK" \
    "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
fi

# 3. The search, one task at a time, skipping those with a result. Each optimize takes the
#    preflight's GPU checks from the last one of this store on this device if it finished in the
#    last 15 minutes (--reuse-preflight): about 7 s a problem.
ids=$($K --tasks "$WORK/tasks" tasks list --suite $SUITE --json |
  python3 -c 'import json,re,sys; only=sys.argv[1]
for t in json.load(sys.stdin):
    if not only or re.search(only, t["id"]) or re.search(only, t.get("kernelbench", "")):
        print(t["id"])' "$ONLY")
budget_s=$(python3 -c 'import re,sys; m=re.fullmatch(r"(\d+)(s|m|min)?", sys.argv[1]); print(int(m[1]) * (60 if m[2] in ("m", "min") else 1) if m else 600)' "$BUDGET")
if [ "${AGAIN:-0}" = 1 ]; then
  [ -n "$ONLY" ] || { echo "AGAIN=1 needs --only" >&2; exit 64; }
  mkdir -p "$WORK/results/replaced"
  for id in $ids; do
    [ -f "$WORK/results/$id.json" ] && mv "$WORK/results/$id.json" "$WORK/results/replaced/"
  done
fi
for id in $ids; do
  [ -f "$WORK/results/$id.json" ] && continue
  if [ -n "${DEADLINE:-}" ] && [ $(($(date +%s) + budget_s * 3 / 2 + 30)) -gt "$DEADLINE" ]; then
    echo "== $id and later: not started (DEADLINE)"
    break
  fi
  echo "== $id"
  $K --tasks "$WORK/tasks" optimize --task "$id" --proposer builtin --budget "$BUDGET" \
    --reuse-preflight 900 \
    --json "$WORK/results/$id.json.part" 2>&1 | tail -4
  # A blocked run (the preflight found the machine unfit: no sandbox, a timing path that failed)
  # says nothing about the problem: kept aside, and the problem runs again on the next call.
  if [ -f "$WORK/results/$id.json.part" ]; then
    if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["tasks"][0]["outcome"] == "blocked" else 1)' \
      "$WORK/results/$id.json.part" 2>/dev/null; then
      mv "$WORK/results/$id.json.part" "$WORK/results/$id.blocked.json"
    else
      mv "$WORK/results/$id.json.part" "$WORK/results/$id.json"
    fi
  fi
done

# 4. The PyTorch methods (eager, compile, max-autotune) on the same tasks, resumable per run.
if [ "${PYTORCH:-1}" != 0 ] && [ ! -f "$WORK/pytorch.json" ]; then
  $K --tasks "$WORK/tasks" tasks list --suite $SUITE --json >"$WORK/tasks.json"
  limit=()
  [ -n "${DEADLINE:-}" ] && limit=(timeout --kill-after=10 $((DEADLINE - $(date +%s))))
  "${limit[@]}" "${MODULE_ENV[@]}" PYTHONUNBUFFERED=1 python3 scripts/pytorch_baselines.py --tasks "$WORK/tasks.json" \
    --out "$WORK/pytorch.json.part" --methods "${METHODS:-eager,compile,max-autotune}" \
    --module-dir "$WORK/modules" >"$WORK/pytorch.txt" 2>&1 &&
    mv "$WORK/pytorch.json.part" "$WORK/pytorch.json"
fi

# 5. The summary.
python3 scripts/kernelbench_optimize_summary.py "$WORK" "$OUT/summary.json"
cp "$WORK/lower.json" "$OUT/lower.json"
