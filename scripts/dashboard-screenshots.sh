#!/usr/bin/env bash
# Screenshots of the dashboard's main pages (runs, a run, a search, a candidate, a roofline, the
# suite) from a store, for the README: docs/screenshots/*.png. Starts `kblaster serve` on a free
# loopback port and drives headless Chromium with the browser test's code
# (tests/browser/dashboard.mjs), which also checks each screenshot for gross breakage.
#   scripts/dashboard-screenshots.sh STORE_DIR [BENCH_JSON]
# e.g. on the store of an H200 run:
#   gunzip -k evidence/h200/core10/bench.json.gz
#   scripts/dashboard-screenshots.sh ~/.local/share/kblaster evidence/h200/core10/bench.json
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $# -lt 1 || ! -d "$1" ]]; then
  echo "usage: scripts/dashboard-screenshots.sh STORE_DIR [BENCH_JSON]" >&2
  exit 64
fi
store=$(realpath "$1")
bench=()
if [[ $# -ge 2 ]]; then bench=(--bench "$(realpath "$2")"); fi
[[ -d web/node_modules/playwright-core ]] || (cd web && npm ci --no-audit --no-fund --loglevel=error)
[[ -x build/release/kblaster-serve ]] || cmake --build --preset release --target kblaster kblaster-serve
node tests/browser/dashboard.mjs screenshots --bin build/release --store "$store" \
  --out docs/screenshots "${bench[@]}"
{
  echo "Screenshots taken $(date -u +%Y-%m-%dT%H:%MZ) by scripts/dashboard-screenshots.sh from the store $store"
  echo "(newest runs below; the pages show the newest optimize run and its task with the most evaluations)."
  build/release/kblaster --store "$store" runs list --limit 5
} > docs/screenshots/SOURCE
echo "docs/screenshots/: $(ls docs/screenshots | tr '\n' ' ')"
