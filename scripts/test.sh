#!/usr/bin/env bash
# Installs dependencies, builds, and runs the tests that need no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --tests
# The dashboard's libraries and its browser test driver, exactly as the lockfile names them.
(cd web && npm ci --no-audit --no-fund --loglevel=error)
cmake --preset release
cmake --build --preset release
ctest --preset cpu
