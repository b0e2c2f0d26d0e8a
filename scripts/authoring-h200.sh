#!/usr/bin/env bash
# Verifies task authoring on the GPU machine, with the build in build/release:
#   1. docs/task-format.md's walk-through as written, including its GPU step (optimize);
#   2. the pointwise losses generated from [loss] (tests/data/tasks 910, 911): check (baseline
#      A/A on the GPU) and a short optimize, where the strategy loss.pointwise is tried;
#   3. the strategy GPU tests (they include 910 and 911).
#   scripts/authoring-h200.sh        -> $OUT (default out/authoring): logs and JSON per step
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out/authoring}
mkdir -p "$OUT"
export PATH=$PWD/build/release:$PATH
export KBLASTER_HOME=${KBLASTER_HOME:-$OUT/store}
export KBLASTER_CACHE=${KBLASTER_CACHE:-/tmp/kblaster-cache}
status=0

# 1. The walk-through, every ```sh block in order, in a fresh folder.
TASKS=$(mktemp -d /tmp/kb-walk.XXXXXX)
python3 - docs/task-format.md >"$OUT/walkthrough.sh" <<'EOF'
import sys
doc = open(sys.argv[1]).read()
w = doc[doc.index("<!-- walkthrough -->"):doc.index("<!-- /walkthrough -->")]
blocks, i = [], w.find("```sh\n")
while i != -1:
    e = w.find("\n```", i + 6)
    blocks.append(w[i + 6:e + 1])
    i = w.find("```sh\n", e + 4)
print("".join(blocks))
EOF
TASKS=$TASKS bash -euo pipefail "$OUT/walkthrough.sh" >"$OUT/walkthrough.log" 2>&1 || status=1
echo "walkthrough: $(tail -1 "$OUT/walkthrough.log")"

# 2. Pointwise losses: baseline A/A (exit 0 expected), then a short search.
kblaster --tasks tests/data/tasks check --task 910 --task 911 --json "$OUT/check-loss.json" \
  >"$OUT/check-loss.log" 2>&1 || status=1
kblaster --tasks tests/data/tasks optimize --task 910 --steps 3 --budget 10m \
  --json "$OUT/optimize-910.json" >"$OUT/optimize-910.log" 2>&1 || true
tail -3 "$OUT/optimize-910.log"

# 3. The strategy GPU tests.
ctest --test-dir build/release -L gpu -R strateg --output-on-failure >"$OUT/ctest-strategies.log" 2>&1 || status=1
tail -3 "$OUT/ctest-strategies.log"
rm -rf "$TASKS"
exit $status
