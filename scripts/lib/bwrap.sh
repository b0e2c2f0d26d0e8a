# Sourced by the GPU scripts. The sandbox needs bubblewrap; a machine without it gets the Debian
# binary carried in the build, where it may write /usr/local/bin.
#   install_carried_bwrap [build folder, default build/release]
install_carried_bwrap() {
  local from=${1:-build/release}/bwrap
  if ! command -v bwrap >/dev/null && [ -x "$from" ] && [ -w /usr/local/bin ]; then
    install -m 0755 "$from" /usr/local/bin/bwrap
  fi
}

# What every GPU script sets up before its first kblaster command: the compile cache (kept when
# already set), the store under OUT (kept when KBLASTER_HOME is set) and the sandbox.
#   gpu_script_env OUT
gpu_script_env() {
  export KBLASTER_CACHE=${KBLASTER_CACHE:-/tmp/kblaster-cache}
  export KBLASTER_HOME=${KBLASTER_HOME:-$1/store}
  install_carried_bwrap
}
