#!/usr/bin/env bash
# Installs what KernelBlaster needs to build and test on Debian 12 (run as root). The CUDA toolkit
# (nvcc 13.0) is expected under /usr/local/cuda. With --tests, also what the tests need beyond
# the build: node, npm and Chromium for the dashboard's browser tests, Debian's CPU PyTorch for
# the tests of pytorch tasks, and clang-format 14 for the format check.
set -euo pipefail
packages=(
  build-essential cmake ninja-build git pkg-config
  libsqlite3-dev libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libfmt-dev libcli11-dev
  libtomlplusplus-dev libcpp-httplib-dev libgtest-dev bubblewrap python3
  # The services the postgres and slurm tests run against (scripts/services.sh starts them).
  # libpq5 is loaded at run time for postgresql:// stores; kblaster does not link it.
  libpq5 postgresql postgresql-client slurm-wlm munge
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The dashboard (kblaster serve): npm fetches its browser libraries at build time
# (web/package-lock.json; without npm the pages have no charts); its tests drive Debian's Chromium
# headless with node. Commands are checked, not packages: a node from elsewhere bundles npm.
if [[ "${1:-}" == "--tests" ]]; then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  command -v chromium >/dev/null || missing+=(chromium)
  # clang-format 14 for scripts/check-format.sh (another version formats some constructs
  # differently).
  command -v clang-format-14 >/dev/null || missing+=(clang-format-14)
  # PyTorch on the CPU (Debian's python3-torch, for /usr/bin/python3): the tests of pytorch tasks
  # run their module as the CPU oracle through the embedded interpreter (libpython3.11).
  dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed" ||
    missing+=(python3-torch libpython3.11)
fi
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "install-deps: nvcc not found at /usr/local/cuda/bin/nvcc; install the CUDA toolkit 13.0" >&2
  exit 1
fi
