#!/bin/bash
# Builds uraid, creates a 4-member RAID5 of 1 GiB sparse files under ./demo/,
# serves it with nbdkit on a unix socket, and prints how to attach to it,
# how to see its status and how to stop it. Safe to run again: it reuses the
# array and the server it finds.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/setup.sh
./scripts/build.sh

URAID=build/tools/uraid
DEMO=demo
SOCK="$PWD/$DEMO/uraid.sock"
PIDFILE="$PWD/$DEMO/uraid.pid"
CONTROL="$PWD/$DEMO/control.sock"
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

running_pid() {
  [[ -s "$PIDFILE" ]] || return 1
  local pid
  pid=$(cat "$PIDFILE")
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
  $URAID detail --control $CONTROL
  $URAID detail --control $CONTROL --watch     # progress of a rebuild/check
  $URAID check --control $CONTROL --wait       # scrub parity
  $URAID fail --control $CONTROL $DEMO/m1.img  # try a failure...
  truncate -s 1G $DEMO/spare.img && $URAID add --control $CONTROL --watch \
      $PWD/$DEMO/spare.img                     # ...and a rebuild onto a spare
Status (offline, from the superblocks)
  $URAID detail ${MEMBERS[*]}
  $URAID examine ${MEMBERS[*]}

Stop it
  kill \$(cat $DEMO/uraid.pid)
EOT
