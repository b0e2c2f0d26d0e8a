# Sourced by the GPU scripts. The sandbox needs bubblewrap; a machine without it gets the Debian
# binary carried in the build, where it may write /usr/local/bin.
#   install_carried_bwrap [build folder, default build/release]
install_carried_bwrap() {
  local from=${1:-build/release}/bwrap
  if ! command -v bwrap >/dev/null && [ -x "$from" ] && [ -w /usr/local/bin ]; then
    install -m 0755 "$from" /usr/local/bin/bwrap
  fi
}
