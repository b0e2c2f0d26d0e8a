#!/usr/bin/env bash
# Installs dependencies, builds, and runs the tests that need no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
# No tracked file over 5 MB, the tracked tree under 48 MB (it travels to the GPU machine).
scripts/check-tree-size.sh
scripts/install-deps.sh
# What only the tests need (services, Chromium, PyTorch) installs while the build runs.
tests_deps_log=$(mktemp /tmp/kblaster-test-deps.XXXXXX)
scripts/install-deps.sh --tests-only >"$tests_deps_log" 2>&1 &
tests_deps=$!
# The sources it checks are clang-format clean (it lists those that are not).
scripts/check-format.sh
# docs/include-graph.md is the include graph the sources have now.
scripts/include-graph.py --check
# No function of src/ over 200 lines (tables written as initialisers are data, not counted).
scripts/long-functions.py --check 200
# The dashboard's libraries and its browser test driver, exactly as the lockfile names them.
(cd web && npm ci --no-audit --no-fund --loglevel=error)
# A unity build (CMakeLists.txt, KBLASTER_UNITY): the same sources, compiled in batches.
cmake --preset release -DKBLASTER_UNITY=ON
cmake --build --preset release
if ! wait "$tests_deps"; then
  cat "$tests_deps_log" >&2
  echo "test.sh: installing what the tests need failed" >&2
  exit 1
fi
# PostgreSQL and a single-node Slurm for the `postgres` and `slurm` tests; their settings
# (KBLASTER_TEST_POSTGRES, SLURM_CONF, KBLASTER_TEST_SLURM) come back in services.env.
scripts/services.sh start
# shellcheck disable=SC1091
source "${KBLASTER_SERVICES_DIR:-/tmp/kblaster-services}/services.env"
trap 'scripts/services.sh stop' EXIT
ctest --preset cpu
