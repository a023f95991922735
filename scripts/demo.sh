#!/bin/bash
# SPDX-License-Identifier: MIT
# Builds uraid, creates a 4-member RAID5 of 1 GiB sparse files under ./demo/,
# serves it with nbdkit on a unix socket, and prints how to attach to it,
# how to see its status and how to stop it; starts `uraid monitor` in the
# background, its event lines in ./demo/monitor.log. Safe to run again: it reuses the
# array and the server it finds.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
# The tool and the plugin only (about half of the whole build's time);
# scripts/test.sh builds the rest.
./scripts/build.sh uraid nbdkit-uraid-plugin

URAID=build/tools/uraid
DEMO=demo
SOCK="$PWD/$DEMO/uraid.sock"
PIDFILE="$PWD/$DEMO/uraid.pid"
CONTROL="$PWD/$DEMO/control.sock"
MONITOR_PIDFILE="$PWD/$DEMO/monitor.pid"
MONITOR_LOG="$PWD/$DEMO/monitor.log"
MEMBERS=("$DEMO"/m0.img "$DEMO"/m1.img "$DEMO"/m2.img "$DEMO"/m3.img)
URI="nbd+unix:///?socket=$SOCK"

mkdir -p "$DEMO"
for m in "${MEMBERS[@]}"; do
  [[ -e "$m" ]] || truncate -s 1G "$m"
done

if "$URAID" detail "${MEMBERS[@]}" >/dev/null 2>&1; then
  echo "demo: reusing the array already in $DEMO/"
elif "$URAID" examine "${MEMBERS[@]}" >/dev/null 2>&1; then
  # Superblocks that do not form an array: do not guess, do not overwrite.
  echo "demo: $DEMO/ holds md members that do not assemble:" >&2
  "$URAID" detail "${MEMBERS[@]}" >&2 || true
  echo "demo: remove $DEMO/ to start over (rm -rf $DEMO)" >&2
  exit 1
else
  # Freshly truncated files read as zeros, and zeros are valid parity, so
  # the initial sync would only rewrite zeros: --assume-clean skips it and
  # keeps the files sparse.
  "$URAID" create --force --assume-clean --name demo "${MEMBERS[@]}"
fi

# The live pid in pid file $1 (default: nbdkit's), or failure.
running_pid() {
  local file=${1:-$PIDFILE}
  [[ -s "$file" ]] || return 1
  local pid
  pid=$(cat "$file")
  kill -0 "$pid" 2>/dev/null && echo "$pid"
}

if pid=$(running_pid); then
  echo "demo: nbdkit already serving (pid $pid)"
else
  # nbdkit daemonises and writes the pid file once it accepts connections.
  "$URAID" serve --socket "$SOCK" --pidfile "$PIDFILE" --control "$CONTROL" \
    "${MEMBERS[@]}"
  for _ in $(seq 1 100); do
    [[ -s "$PIDFILE" ]] && break
    sleep 0.1
  done
  if ! pid=$(running_pid); then
    echo "demo: nbdkit did not start (no live pid in $PIDFILE)" >&2
    exit 1
  fi
  echo "demo: nbdkit serving (pid $pid)"
fi

# The monitor: every event of the array (a failure, a rebuild's progress,
# the server going away) as a line in $MONITOR_LOG. A real setup would add
# --mail, --program or --syslog (README: Monitoring).
if mpid=$(running_pid "$MONITOR_PIDFILE"); then
  echo "demo: uraid monitor already running (pid $mpid)"
else
  setsid "$URAID" monitor --control "$CONTROL" >>"$MONITOR_LOG" 2>&1 \
    </dev/null &
  echo $! >"$MONITOR_PIDFILE"
  for _ in $(seq 1 50); do
    grep -q NewArray "$MONITOR_LOG" 2>/dev/null && break
    sleep 0.1
  done
  echo "demo: uraid monitor running (pid $(cat "$MONITOR_PIDFILE")), events in $DEMO/monitor.log:"
  tail -n 3 "$MONITOR_LOG"
fi

echo
nbdinfo "$URI"

EXT4=$("$URAID" detail --json "${MEMBERS[@]}" | jq -r .mkfs.ext4)
XFS=$("$URAID" detail --json "${MEMBERS[@]}" | jq -r .mkfs.xfs)

cat <<EOT

The array is served at:  $URI

Attach it
  1. Look at it (no root needed):
       nbdinfo "$URI"
  2. As a file with nbdfuse, then a loop device with a filesystem (root):
       mkdir -p $DEMO/fuse $DEMO/mnt
       nbdfuse -P $DEMO/fuse.pid $DEMO/fuse/disk.img --unix $SOCK &
       # wait until $DEMO/fuse.pid exists, then:
       LOOP=\$(losetup -f --show --sector-size 4096 --direct-io=on $DEMO/fuse/disk.img)
       $EXT4 \$LOOP      # or: $XFS \$LOOP
       mount \$LOOP $DEMO/mnt
       # ... and to undo, in this order:
       umount $DEMO/mnt; losetup -d \$LOOP; fusermount3 -u $DEMO/fuse
  3. As /dev/nbd0 with nbd-client (root; needs the nbd kernel module and the
     nbd-client package, neither of which every container has):
       modprobe nbd
       nbd-client -b 4096 -unix $SOCK /dev/nbd0
       nbd-client -d /dev/nbd0          # to detach

Status (live, through the control socket)
  $URAID status --control $CONTROL             # /proc/mdstat's view
  $URAID detail --control $CONTROL
  $URAID detail --control $CONTROL --watch     # progress of a rebuild/check
  $URAID check --control $CONTROL --wait       # scrub parity
  $URAID fail --control $CONTROL $DEMO/m1.img  # try a failure...
  truncate -s 1G $DEMO/spare.img && $URAID add --control $CONTROL --watch \
      $PWD/$DEMO/spare.img                     # ...and a rebuild onto a spare
Events (uraid monitor, started above; try the fail and add lines above)
  tail -f $DEMO/monitor.log
  $URAID monitor --control $CONTROL --oneshot   # current problems; exit 1 if any
  $URAID detail --test --control $CONTROL       # exit 0 healthy, 1 degraded, 2 failed
Status (offline, from the superblocks)
  $URAID detail ${MEMBERS[*]}
  $URAID examine ${MEMBERS[*]}

Stop it (flush, superblocks marked clean, nbdkit gone)
  kill \$(cat $DEMO/monitor.pid); $URAID stop $CONTROL
EOT
