# Sourced by the GPU scripts. build_commit: the commit of the build that runs, as
# scripts/stage-build.sh recorded it in build/release/SOURCE (the GPU machine's copy of the tree
# may hold an older .git), else this checkout's HEAD.
build_commit() {
  if [ -f build/release/SOURCE ]; then
    sed -n 's/^commit //p' build/release/SOURCE
  else
    git rev-parse HEAD 2>/dev/null || echo unknown
  fi
}
