#!/usr/bin/env bash
# The LLM path end to end on the GPU machine, against the loopback model of tests/llm_double
# (scripted answers: correct, not compiling, wrong, cheating): `kblaster optimize --proposer llm`
# on each task (prompt, answer parsing, compile, repair, verification, timing, memory on the real
# device), then the same run replayed from its record with the model stopped.
#   scripts/llm-h200.sh [tasks, default "019 095"]
# Output under $OUT (default out/llm-h200): the runs' JSON and logs, the model's request log,
# summary.txt (each answer kind and what the harness made of it), llm.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/pack.sh
OUT=${OUT:-$PWD/out/llm-h200}
TASKS=${1:-019 095}
mkdir -p "$OUT"
export KBLASTER_LLM_API_KEY=double
. scripts/lib/bwrap.sh
gpu_script_env "$OUT"
K=$PWD/build/release/kblaster
python3 tests/llm_double/server.py --log "$OUT/requests.jsonl" >"$OUT/server.out" 2>&1 &
server=$!
for _ in $(seq 50); do grep -q "^listening on " "$OUT/server.out" && break; sleep 0.1; done
URL=$(awk '/^listening on /{print $3}' "$OUT/server.out")
[ -n "$URL" ] || { echo "the loopback model did not start"; cat "$OUT/server.out"; exit 70; }
rc=0
for t in $TASKS; do
  $K optimize --task "$t" --proposer llm --llm-base-url "$URL" --llm-model double --steps 3 \
    --rollouts 2 --budget 4m --seed 1 --json "$OUT/live-$t.json" 2>&1 | tee "$OUT/live-$t.log"
  rc=$((rc | PIPESTATUS[0]))
done
kill "$server" 2>/dev/null
wait "$server" 2>/dev/null
# The record alone, the model gone: the same proposals, so the same decisions.
for t in $TASKS; do
  run=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["run"])' "$OUT/live-$t.json") ||
    { rc=70; continue; }
  $K optimize --task "$t" --proposer llm --replay "$run" --llm-base-url "$URL" --llm-model double \
    --steps 3 --rollouts 2 --budget 4m --seed 1 --json "$OUT/replay-$t.json" 2>&1 |
    tee "$OUT/replay-$t.log"
  rc=$((rc | PIPESTATUS[0]))
done
python3 - "$OUT" $TASKS <<'PY' | tee "$OUT/summary.txt"
import json, sys
out, tasks = sys.argv[1], sys.argv[2:]
kind_of = {}
try:
    requests = open(f"{out}/requests.jsonl").readlines()
except FileNotFoundError:
    requests = []
print(f"the loopback model answered {len(requests)} requests")
bad = 0 if requests else 1  # a run that never asked the model tested nothing
for line in requests:
    r = json.loads(line)
    for a in r["answers"]:
        if "strategy" in a:
            kind_of[a["strategy"]] = a["kind"]
# What each kind must come to. A cheating candidate may also be stopped by the short screening
# timing before it reaches the rules that reject it; then it is never the best either.
expected = {"correct": lambda s: s["verdict"] not in ("rejected", "error"),
            "broken": lambda s: s["reason"].startswith("build."),
            "wrong": lambda s: s["verdict"] == "rejected" and s["reason"].startswith("verify."),
            "cheating": lambda s: s["verdict"] == "rejected" or
                        (s.get("stage", {}).get("stage_reached") == "screen" and s["verdict"] != "improved")}
for t in tasks:
    live = json.load(open(f"{out}/live-{t}.json"))
    try:
        replay = json.load(open(f"{out}/replay-{t}.json"))
    except FileNotFoundError:
        print(f"task {t}: no replay")
        bad += 1
        continue
    for mode, doc in (("live", live), ("replay", replay)):
        for task in doc["tasks"]:
            print(f"{mode:6s} task {task['task']}: {task['outcome']} ({task['reason']}), "
                  f"{task['evaluations']} evaluations")
            for s in task.get("steps", []):
                if "proposal_failure" in s:
                    # Every scripted answer holds a candidate: none may be lost before its build.
                    bad += 1
                    print(f"         proposal failed: {s['proposal_failure']}: {s.get('message', '')} MISMATCH")
                    continue
                kind = kind_of.get(s["strategy"], "?")
                ok = expected.get(kind, lambda _: False)(s)
                bad += 0 if ok else 1
                print(f"         {s['strategy']:26s} {kind:9s} {s['verdict']:9s} {s['reason']:36s} "
                      f"{'as expected' if ok else 'MISMATCH'}")
    decisions = lambda d: [(s.get("strategy"), s.get("verdict")) for t in d["tasks"] for s in t.get("steps", [])]
    same = decisions(live) == decisions(replay)
    bad += 0 if same else 1
    print(f"task {t}: replay {'makes the same decisions' if same else 'DIFFERS'}")
print("all as expected" if bad == 0 else f"{bad} MISMATCH(ES)")
PY
pack "$OUT" llm --exclude=store
exit "$rc"
