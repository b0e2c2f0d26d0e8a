#!/usr/bin/env bash
# Installs dependencies, builds, and runs the tests that need no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release
ctest --preset cpu
