# SPDX-License-Identifier: MIT
# bash completion for uraid(8); installed as
# share/bash-completion/completions/uraid.
#
# Command and option names come from the tool itself (`uraid --help`,
# `uraid COMMAND --help`, asked once per shell and kept), so the completion
# never falls behind the tool. Option values it knows (layouts, levels,
# policies, chunk sizes, --update and --log words, groups, the run
# directory's control sockets) are offered; stop, serve, readonly and
# readwrite offer the ARRAY
# names of the config (the --config on the line, else $URAID_CONFIG or
# /etc/uraid/uraid.conf) and of the served arrays. Members, sockets and
# files complete as paths.

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

  # The config this command line names (-c/--config, where -c is not
  # --chunk), for ARRAY names.
  local conf=${URAID_CONFIG:-/etc/uraid/uraid.conf}
  for ((i = 2; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in
      --config) conf=${COMP_WORDS[i+1]} ;;
      --config=*) conf=${COMP_WORDS[i]#--config=} ;;
      -c) [[ " create grow map " != *" $cmd "* ]] && conf=${COMP_WORDS[i+1]} ;;
    esac
  done

  # Option values. Letters mean what they mean in mdadm's matching mode:
  # -c is --chunk for create/grow/map and --config elsewhere; -p is
  # --layout for create/grow/map, --program for monitor, --port for serve.
  case $prev in
    -p)
      case $cmd in
        create | grow | map) prev=--layout ;;
        monitor) prev=--program ;;
        *) prev=--port ;;
      esac
      ;;
    -c) [[ " create grow map " == *" $cmd "* ]] && prev=--chunk || prev=--config ;;
    -C) prev=--control ;;
    -l) prev=--level ;;
    -k) prev=--consistency-policy ;;
    -b) prev=--bitmap ;;
    -G) prev=--control-group ;;
  esac
  case $prev in
    --layout)
      COMPREPLY=($(compgen -W "left-asymmetric right-asymmetric
        left-symmetric right-symmetric parity-first parity-last" -- "$cur"))
      return 0
      ;;
    --level)
      COMPREPLY=($(compgen -W "4 5" -- "$cur"))
      return 0
      ;;
    --consistency-policy)
      if [[ $cmd == grow ]]; then
        COMPREPLY=($(compgen -W "ppl resync" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "bitmap resync ppl" -- "$cur"))
      fi
      return 0
      ;;
    --chunk)
      # md's chunk sizes, with the unit a size needs.
      COMPREPLY=($(compgen -W "4K 8K 16K 32K 64K 128K 256K 512K 1M 2M 4M
        8M 16M" -- "$cur"))
      return 0
      ;;
    --bitmap)
      COMPREPLY=($(compgen -f -- "$cur"))
      [[ $cmd == create ]] &&
        COMPREPLY+=($(compgen -W "internal none" -- "$cur"))
      compopt -o filenames 2>/dev/null
      return 0
      ;;
    --update)
      COMPREPLY=($(compgen -W "bbl no-bbl force-no-bbl" -- "$cur"))
      return 0
      ;;
    --log)
      COMPREPLY=($(compgen -W "auto stderr syslog journal" -- "$cur"))
      return 0
      ;;
    --tls)
      COMPREPLY=($(compgen -W "off on require" -- "$cur"))
      return 0
      ;;
    --control-group)
      COMPREPLY=($(compgen -g -- "$cur"))
      return 0
      ;;
    --control)
      # The served arrays' sockets in the run directory, and paths.
      local run=${URAID_RUN_DIR:-/run/uraid} f
      for f in "$run"/*.ctl; do
        [[ -S $f ]] && COMPREPLY+=("$f")
      done
      COMPREPLY=($(compgen -W "${COMPREPLY[*]}" -- "$cur")
        $(compgen -f -- "$cur"))
      compopt -o filenames 2>/dev/null
      return 0
      ;;
    --program)
      COMPREPLY=($(compgen -c -- "$cur"))
      return 0
      ;;
    --bitmap-chunk | --size | -z | --data-offset | --cache | --port | \
      --raid-devices | -n | --speed-min | --speed-max | --busy-share | \
      --disks | --spares | --timeout | --cache-age | --delay | -d | \
      --ipaddr | -i | --mail | -m | --name | -N | --program-timeout)
      return 0  # a number, size or word of the user's: nothing to offer
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
  # stop, serve, readonly and readwrite take ARRAY names: the config's (the one named on this
  # line, else $URAID_CONFIG or the default) and the served ones (the run
  # directory's NAME.ctl), besides paths.
  if [[ $cmd == stop || $cmd == serve || $cmd == readonly ||
    $cmd == readwrite ]]; then
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
