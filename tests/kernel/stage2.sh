#!/bin/sh
# SPDX-License-Identifier: MIT
# Stage 2 of the guest (see vm.py): runs on the overlay root (the host's /
# read-only under tmpfs). Mounts the kernel file systems and the shares,
# loads virtio_blk, refuses to go on if the guest has any network
# interface, runs /mnt/uraidctl/run.sh with bash, and reports its status in
# /mnt/uraidctl/rc and as "URAID-VM-EXIT <status>" on the console; then
# powers off (qemu runs with -no-reboot, so any reboot ends it too).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root LANG=C.UTF-8 TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
# /tmp stays the host's, seen through the overlay (writes land in its tmpfs
# upper layer): a checkout or build under the host's /tmp (a CI clone) must
# be reachable in the guest. A checkout under /run or /dev cannot be.
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /dev/pts /dev/shm /run/lock
mount -t devpts devpts /dev/pts
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mkdir -p /mnt/uraidctl
mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 uraidctl /mnt/uraidctl
CTL=/mnt/uraidctl

finish() {
  echo "$1" > $CTL/rc
  sync
  echo "URAID-VM-EXIT $1"
  echo o > /proc/sysrq-trigger
  sleep 10 2>/dev/null
}

while read -r tag path; do
  mkdir -p "$path"
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=524288 "$tag" "$path" ||
    { echo "stage2: cannot mount share $tag at $path"; finish 126; }
done < $CTL/mounts

# No network device, ever: only lo may exist.
for dev in /sys/class/net/*; do
  name=${dev##*/}
  if [ "$name" != lo ] && [ -e "$dev" ]; then
    echo "stage2: the guest has a network interface ($name): refusing to run"
    finish 126
  fi
done

modprobe virtio_blk || { echo "stage2: modprobe virtio_blk failed"; finish 126; }
# Every disk qemu was given, before the script looks for them (probing
# many under TCG beside a loaded host may lag the module's load).
want=$(cat $CTL/ndisks 2>/dev/null || echo 0)
for i in $(seq 300); do
  have=$(ls -d /sys/block/vd* 2>/dev/null | wc -l)
  [ "$have" -ge "$want" ] && break
  sleep 0.1
done
[ "$have" -ge "$want" ] ||
  echo "stage2: $have of the $want disks after 30 s; going on without the rest"
# Disks by serial (no udev here): "serial /dev/vdX" a line.
: > /run/uraid-disks
for s in /sys/block/vd*/serial; do
  [ -e "$s" ] || continue
  dev=${s%/serial}; dev=/dev/${dev##*/}
  echo "$(cat "$s") $dev" >> /run/uraid-disks
done
hostname uraid-guest
ip link set lo up 2>/dev/null

bash $CTL/run.sh < /dev/null
finish $?
