#!/usr/bin/env bash
# On the 2-GPU H200 machine (nvidia-h200-x2): the same optimization (suite, steps, rollouts,
# evaluation limit) with one GPU worker and with two (`--gpus 1`, `--gpus 2`), each in a fresh
# store. Writes evidence/h200-x2/multi-gpu.json: evaluations per minute for each, their ratio
# (target >= 1.8), and the outcomes of both runs side by side (they must be the same; timing noise
# can flip a close verdict, and every difference is listed).
# Usage: scripts/multi-gpu-h200.sh [OUT_DIR]   env: SUITE (core10), STEPS (2), ROLLOUTS (2),
#        MAX_EVALS (4), KBLASTER (build/release/kblaster)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-evidence/h200-x2}
kb=$(realpath "${KBLASTER:-build/release/kblaster}")
suite=${SUITE:-core10}
steps=${STEPS:-2}
rollouts=${ROLLOUTS:-2}
max_evals=${MAX_EVALS:-4}
mkdir -p "$out"
nvidia-smi -L | tee "$out/gpus.txt"
[[ $(nvidia-smi -L | grep -c '^GPU ') -ge 2 ]] || { echo "multi-gpu-h200: needs 2 GPUs" >&2; exit 1; }

for g in 1 2; do
  store=$(mktemp -d /tmp/kb-multigpu-$g.XXXXXX)
  start=$(date +%s.%N)
  "$kb" --store "$store" optimize --suite "$suite" --steps "$steps" --rollouts "$rollouts" \
    --max-evals "$max_evals" --budget 2h --gpus "$g" --json "$out/optimize-gpus$g.json" \
    2>&1 | tee "$out/optimize-gpus$g.log" || true
  end=$(date +%s.%N)
  run=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$out/optimize-gpus$g.json")
  "$kb" --store "$store" evidence export "$run" --out "$out/evidence-gpus$g" >/dev/null
  echo "$start $end" >"$out/wall-gpus$g.txt"
done

python3 - "$out" <<'PY'
import json, sys, os
out = sys.argv[1]
runs = {}
for g in (1, 2):
    start, end = map(float, open(f"{out}/wall-gpus{g}.txt").read().split())
    rows = json.load(open(f"{out}/evidence-gpus{g}/rows.json"))["tables"]
    evals = rows.get("evaluations", [])
    opt = json.load(open(f"{out}/optimize-gpus{g}.json"))
    runs[g] = {"gpus": g, "wall_seconds": round(end - start, 2), "evaluations": len(evals),
               "evaluations_per_minute": round(60 * len(evals) / (end - start), 2),
               "outcomes": {t["task"]: {k: t.get(k) for k in
                            ("final", "reason", "evaluations", "best_strategy", "best_params")}
                            for t in opt["tasks"]},
               "verdicts": sorted((e["candidate"], e["baseline"], e["verdict"]) for e in evals)}
diff = [{"task": t, "gpus1": runs[1]["outcomes"][t], "gpus2": runs[2]["outcomes"].get(t)}
        for t in runs[1]["outcomes"] if runs[1]["outcomes"][t] != runs[2]["outcomes"].get(t)]
verdicts1 = {}
for g in (1, 2):
    runs[g]["verdict_counts"] = {}
    for _, _, v in runs[g]["verdicts"]:
        runs[g]["verdict_counts"][v] = runs[g]["verdict_counts"].get(v, 0) + 1
    del runs[g]["verdicts"]
ratio = runs[2]["evaluations_per_minute"] / max(runs[1]["evaluations_per_minute"], 1e-9)
doc = {"format": "kblaster-multi-gpu", "format_version": 1, "runs": [runs[1], runs[2]],
       "throughput_ratio": round(ratio, 3), "target_ratio": 1.8,
       "outcomes_identical": not diff, "outcome_differences": diff}
json.dump(doc, open(f"{out}/multi-gpu.json", "w"), indent=2)
print(json.dumps({k: doc[k] for k in ("throughput_ratio", "outcomes_identical")}))
PY
