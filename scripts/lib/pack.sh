# Sourced by the GPU scripts. pack OUT NAME [tar options]: the contents of OUT into
# OUT/NAME.tar.gz (the archive itself and the options' exclusions left out). The archive is
# written beside OUT and then moved in: one growing inside the folder it packs makes tar report
# the folder as changed and exit 1.
pack() {
  local out=$1 name=$2
  shift 2
  tar -czf "$out.$name.tar.gz.part" -C "$out" --exclude="$name.tar.gz" "$@" . &&
    mv -f "$out.$name.tar.gz.part" "$out/$name.tar.gz"
}
