# SPDX-License-Identifier: MIT
# bash completion for uraid(8); installed as
# share/bash-completion/completions/uraid.
#
# Command and option names come from the tool itself (`uraid --help`,
# `uraid COMMAND --help`, asked once per shell and kept), so the completion
# never falls behind the tool. Members, sockets and files complete as
# paths.

_uraid_words() {
  # The option or command names in a CLI11 help text on stdin.
  sed -n 's/^  \{1,\}\(-[^ ]*\).*/\1/p' | tr ',' '\n' | sed -n 's/^\(--\{0,1\}[A-Za-z][-A-Za-z0-9]*\).*/\1/p'
}

_uraid() {
  local cur prev cmd i
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD-1]}
  local tool=${COMP_WORDS[0]}

  # The command: the first word after the tool that is not an option.
  cmd=
  for ((i = 1; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} != -* ]]; then
      cmd=${COMP_WORDS[i]}
      break
    fi
  done

  if [[ -z $cmd ]]; then
    if [[ -z ${_uraid_commands-} ]]; then
      _uraid_commands=$("$tool" --help 2>/dev/null |
        sed -n '/^Subcommands:/,$s/^  \([a-z][-a-z]*\) .*/\1/p')
    fi
    if [[ $cur == -* ]]; then
      COMPREPLY=($(compgen -W "--help --version" -- "$cur"))
    else
      COMPREPLY=($(compgen -W "$_uraid_commands" -- "$cur"))
    fi
    return 0
  fi

  case $prev in
    --layout | -p)
      COMPREPLY=($(compgen -W "left-asymmetric right-asymmetric
        left-symmetric right-symmetric parity-first parity-last" -- "$cur"))
      return 0
      ;;
    --level | -l)
      COMPREPLY=($(compgen -W "4 5" -- "$cur"))
      return 0
      ;;
    --consistency-policy | -k)
      COMPREPLY=($(compgen -W "bitmap resync ppl" -- "$cur"))
      return 0
      ;;
    --log)
      COMPREPLY=($(compgen -W "auto stderr syslog journal" -- "$cur"))
      return 0
      ;;
    --control-group | -G)
      COMPREPLY=($(compgen -g -- "$cur"))
      return 0
      ;;
    --chunk | -c | --bitmap-chunk | --size | -z | --cache | --port | \
      --raid-devices | -n | --speed-min | --speed-max | --busy-share | \
      --disks | --spares | --timeout | --cache-age | --delay | -d)
      return 0  # a number or size: nothing to offer
      ;;
  esac

  if [[ $cur == -* ]]; then
    local var=_uraid_opts_${cmd//-/_}
    if [[ -z ${!var-} ]]; then
      printf -v "$var" '%s' "$("$tool" "$cmd" --help 2>/dev/null |
        _uraid_words)"
    fi
    COMPREPLY=($(compgen -W "${!var}" -- "$cur"))
    return 0
  fi
  # stop and serve take ARRAY names: the config's and the served ones
  # (the run directory's NAME.ctl), besides paths.
  if [[ $cmd == stop || $cmd == serve ]]; then
    local conf=${URAID_CONFIG:-/etc/uraid/uraid.conf}
    local run=${URAID_RUN_DIR:-/run/uraid} names f
    names=$(sed -n 's/^[Aa][Rr][Rr][A-Za-z]*[[:space:]]\{1,\}\(\/dev\/md\/\)\{0,1\}\([^[:space:]]*\).*/\2/p' \
      "$conf" 2>/dev/null)
    for f in "$run"/*.ctl; do
      [[ -S $f ]] && names+=" $(basename "$f" .ctl)"
    done
    COMPREPLY=($(compgen -W "$names" -- "$cur"))
  fi
  # Members, sockets, bitmap and pid files: paths.
  COMPREPLY+=($(compgen -f -- "$cur"))
  compopt -o filenames 2>/dev/null
  return 0
}

complete -F _uraid uraid
