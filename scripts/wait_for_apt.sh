#!/bin/bash
# SPDX-License-Identifier: MIT
# Waits until no process holds apt's and dpkg's locks, up to TIMEOUT
# seconds (default $URAID_APT_LOCK_TIMEOUT, else 600), saying who holds
# them. setup.sh runs it before apt-get: a fresh Debian machine runs
# unattended-upgrades at boot, and apt-get gives up at once on a held lock
# ("Could not get lock /var/lib/dpkg/lock-frontend").
#
#   wait_for_apt.sh [TIMEOUT]
#
# Exit 0 once the locks are free (at once when they are), 1 when one is
# still held after TIMEOUT seconds. apt and dpkg take these locks with
# fcntl (POSIX record locks), so /proc/locks names the holder without
# taking the lock, which could race with the apt-get that follows.
# URAID_APT_LOCKS (space-separated paths) replaces the list of lock files,
# and URAID_PROC_LOCKS the table read instead of /proc/locks, for tests.
set -euo pipefail

timeout=${1:-${URAID_APT_LOCK_TIMEOUT:-600}}
read -ra locks <<<"${URAID_APT_LOCKS:-/var/lib/dpkg/lock-frontend \
/var/lib/dpkg/lock /var/lib/apt/lists/lock /var/cache/apt/archives/lock}"

# "PID COMMAND LINE" of the first process holding a lock on one of the
# files, or nothing.
holder() {
  local f dev major minor ino
  for f in "${locks[@]}"; do
    [[ -e $f ]] || continue
    read -r dev ino < <(stat -L -c '%d %i' "$f")
    # The filesystem's device number, split as the kernel's new_decode_dev.
    major=$(((dev >> 8) & 0xfff))
    minor=$(((dev & 0xff) | ((dev >> 12) & 0xfff00)))
    # /proc/locks: "1: POSIX  ADVISORY  WRITE 1234 fd:01:5678 0 EOF";
    # a waiter's line has "->" after the number, and is not a holder. A
    # line read while a lock comes or goes can be cut short (the kernel
    # rebuilds the table between two reads): one that is not whole is
    # skipped, where `set -u` made it kill the wait ("$2: unbound
    # variable", seen when apt-get let go of its lock mid-read).
    local -a w
    while read -r -a w; do
      ((${#w[@]} >= 6)) || continue
      [[ ${w[1]} == "->" ]] && continue
      local pid=${w[4]} dev_ino=${w[5]} m n i
      [[ $pid =~ ^-?[0-9]+$ && $dev_ino =~ ^[0-9a-f]+:[0-9a-f]+:[0-9]+$ ]] ||
        continue
      IFS=: read -r m n i <<<"$dev_ino"
      if ((16#$m == major && 16#$n == minor && i == ino)); then
        local cmd
        cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)
        echo "$pid ${cmd:-(gone)}"
        return 0
      fi
    done <"${URAID_PROC_LOCKS:-/proc/locks}"
  done
}

who=$(holder)
[[ -z $who ]] && exit 0
start=$SECONDS
said=
while [[ -n $who ]]; do
  waited=$((SECONDS - start))
  if ((waited >= timeout)); then
    echo "setup: the package lock is still held by pid ${who%% *}" \
      "(${who#* }) after ${waited} s; try again when it is done" >&2
    exit 1
  fi
  if [[ $who != "$said" ]]; then
    echo "setup: waiting for the package lock, held by pid ${who%% *}" \
      "(${who#* }); up to $timeout s (URAID_APT_LOCK_TIMEOUT)" >&2
    said=$who
  fi
  sleep 1
  who=$(holder)
done
echo "setup: the package lock is free after $((SECONDS - start)) s" >&2
