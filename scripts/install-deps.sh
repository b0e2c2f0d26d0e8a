#!/usr/bin/env bash
# Installs what KernelBlaster needs to build and test on Debian 12 (run as root). The CUDA toolkit
# (nvcc 13.0) is expected under /usr/local/cuda.
#   scripts/install-deps.sh               what the build needs (and node and npm, which fetch the
#                                         dashboard's browser libraries at build time, and
#                                         clang-format 14 for scripts/check-format.sh)
#   scripts/install-deps.sh --tests       that, and what the tests need beyond the build
#   scripts/install-deps.sh --tests-only  what the tests need beyond the build: the services the
#                                         postgres and slurm tests run against, Chromium for the
#                                         dashboard's browser tests, Debian's CPU PyTorch for the
#                                         tests of pytorch tasks. scripts/test.sh installs these
#                                         while the build runs (apt runs one install at a time).
set -euo pipefail
mode=${1:-}
build_packages=(
  build-essential cmake ninja-build git pkg-config
  libsqlite3-dev libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libfmt-dev libcli11-dev
  libtomlplusplus-dev libcpp-httplib-dev libgtest-dev bubblewrap python3
  # clang-format 14 for scripts/check-format.sh (another version formats some constructs
  # differently).
  clang-format-14
)
test_packages=(
  # The services the postgres and slurm tests run against (scripts/services.sh starts them).
  # libpq5 is loaded at run time for postgresql:// stores; kblaster does not link it.
  libpq5 postgresql postgresql-client slurm-wlm munge
  # PyTorch on the CPU (Debian's python3-torch, for /usr/bin/python3): the tests of pytorch tasks
  # run their module as the CPU oracle through the embedded interpreter (libpython3.11).
  python3-torch libpython3.11
)
wanted=()
case $mode in
  "") wanted=("${build_packages[@]}") ;;
  --tests) wanted=("${build_packages[@]}" "${test_packages[@]}") ;;
  --tests-only) wanted=("${test_packages[@]}") ;;
  *) echo "usage: scripts/install-deps.sh [--tests | --tests-only]" >&2; exit 64 ;;
esac
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Commands are checked, not packages: a node from elsewhere bundles npm. The dashboard
# (kblaster serve): npm fetches its browser libraries at build time (web/package-lock.json;
# without npm the pages have no charts); its tests drive Debian's Chromium headless with node.
if [[ $mode != --tests-only ]]; then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi
if [[ $mode != "" ]]; then
  command -v chromium >/dev/null || missing+=(chromium)
fi
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  # The package lists are fetched once an hour: the tests' install, right after the build's,
  # uses the lists the first fetched.
  if [[ -z $(find /tmp/kblaster-apt-updated -mmin -60 2>/dev/null) ]]; then
    apt-get update -qq
    touch /tmp/kblaster-apt-updated
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [[ $mode != --tests-only && ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "install-deps: nvcc not found at /usr/local/cuda/bin/nvcc; install the CUDA toolkit 13.0" >&2
  exit 1
fi
