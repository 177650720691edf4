# The Debian packages a script needs, installed when a command of theirs is missing. Source this file.
#   install_missing COMMAND[:PACKAGE]…   each COMMAND not on the PATH: its PACKAGE (the command's name if none given)
#                                        installed with apt-get, all in one call
install_missing() {
  local want entry
  want=()
  for entry in "$@"; do
    command -v "${entry%%:*}" >/dev/null 2>&1 || want+=("${entry#*:}")
  done
  [ ${#want[@]} -eq 0 ] && return 0
  echo "installing ${want[*]}…" >&2
  apt-get update -qq && apt-get install -y -qq "${want[@]}" >/dev/null
}
