# SPDX-License-Identifier: MIT
"""A throw-away guest that runs one script as root under Debian's own kernel,
so that the real md (raid456) and the real NBD client can judge uraid.

The guest's root is the host's `/`, shared read-only over virtio-9p, with a
tmpfs overlay on top: it sees the host's mdadm, nbdkit, nbd-client, python3
and whichever uraid build the test was given, and can write anywhere without
touching the host. A small initramfs generated here (busybox-static plus the
9p, virtio and overlay modules of the kernel package) mounts that root and
switches to it; stage2.sh (beside this file) then runs the script.

Contract of run():
  - disks go in as virtio-blk devices, in order, each with a serial; the
    guest finds them as /dev/vdX (stage2 exports URAID_DISK_<serial>=/dev/vdX
    and writes /run/uraid-disks: one "serial /dev/vdX" a line);
  - shares go in as writable 9p mounts at the guest path asked for;
  - the script's output (and the guest console) is streamed to `out` as it
    comes, and returned;
  - the result is the script's exit status, or None if the guest ended
    without one (crashed, rebooted with sysrq-b, killed at the timeout;
    `timed_out` says which);
  - qemu is killed by its pid at the timeout and whatever happens; nothing
    is left running.
The guest has no network device at all: -nodefaults (no default NIC) and
-nic none, and stage2 refuses to run the script if any interface other
than lo exists.

Accelerator: KVM where it really boots this kernel, else TCG. A paravirtual
KVM (/sys/module/kvm_pvm: no VMX/SVM for the guest) cannot boot an
unmodified kernel, so it is not even tried there; elsewhere a short probe
boot under KVM decides. URAID_VM_ACCEL=kvm|tcg overrides.

Missing pieces (qemu, the kernel package, busybox-static, root) raise
Unavailable: callers turn that into a skip (exit 77), never a pass.
"""

import glob
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STAGE2 = os.path.join(HERE, "stage2.sh")
EXIT_MARK = "URAID-VM-EXIT"
QEMU = "qemu-system-x86_64"
BUSYBOX = "/bin/busybox"
# Modules the initramfs loads before the 9p root can be mounted (their
# dependencies are resolved from modules.dep).
INITRD_MODULES = ["virtio_pci", "9pnet_virtio", "9p", "overlay"]


class Unavailable(Exception):
    """The guest cannot be booted here; the message says what is missing."""


def kernel():
    """(vmlinuz, modules dir, version) of the newest installed Debian kernel
    package whose modules are present."""
    found = []
    for vmlinuz in glob.glob("/boot/vmlinuz-*"):
        version = vmlinuz[len("/boot/vmlinuz-"):]
        mods = f"/lib/modules/{version}"
        if os.path.exists(os.path.join(mods, "modules.dep")):
            found.append((vmlinuz, mods, version))
    if not found:
        raise Unavailable("no kernel in /boot with modules in /lib/modules "
                          "(apt-get install linux-image-amd64)")
    def key(v):
        return [int(x) if x.isdigit() else x
                for x in re.split(r"[.-]", v[2])]
    return sorted(found, key=key)[-1]



def owned_tempdir(prefix):
    """mkdtemp on /dev/shm with an owner.pid naming this process, which
    scripts/test.sh reads to remove the directory once its owner is gone
    (a test killed before its cleanup leaves member images in memory)."""
    tmp = tempfile.mkdtemp(prefix=prefix, dir="/dev/shm")
    with open(os.path.join(tmp, "owner.pid"), "w") as f:
        f.write(f"{os.getpid()}\n")
    return tmp

def check_available():
    """Raises Unavailable naming the first thing missing."""
    if os.geteuid() != 0:
        raise Unavailable("needs root (the guest's 9p root is the host's /)")
    if not shutil.which(QEMU):
        raise Unavailable(f"{QEMU} not found (apt-get install qemu-system-x86)")
    if not os.access(BUSYBOX, os.X_OK):
        raise Unavailable(f"{BUSYBOX} not found (apt-get install busybox-static)")
    kernel()


# --- initramfs -----------------------------------------------------------

def _cpio_newc(entries):
    """A newc cpio archive of (name, mode, data) entries; device entries
    carry (major, minor) as data."""
    out = bytearray()
    ino = 1
    for name, mode, data in entries + [("TRAILER!!!", 0, b"")]:
        rdev = (0, 0)
        if stat.S_ISCHR(mode):
            rdev, data = data, b""
        namez = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08x}" for v in (
            ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1],
            len(namez), 0))
        out += hdr.encode() + namez
        out += b"\0" * (-len(out) % 4)
        out += data
        out += b"\0" * (-len(out) % 4)
        ino += 1
    return bytes(out)


def _module_closure(mods_dir, names):
    """Module paths (relative to mods_dir) for `names` and their
    dependencies, each after what it depends on."""
    deps = {}
    with open(os.path.join(mods_dir, "modules.dep")) as f:
        for line in f:
            path, _, rest = line.partition(":")
            deps[path] = rest.split()
    by_name = {}
    for path in deps:
        base = os.path.basename(path).split(".ko")[0]
        by_name[base.replace("-", "_")] = path
    order = []

    def add(path):
        if path in order:
            return
        for d in deps.get(path, []):
            add(d)
        order.append(path)
    for n in names:
        if n not in by_name:
            raise Unavailable(f"module {n} not in {mods_dir}")
        add(by_name[n])
    return order


INIT = r"""#!/bin/busybox sh
# Stage 1 (initramfs): mount the host's / (9p, read-only) under a tmpfs
# overlay and switch to it; stage2.sh does the rest.
B=/bin/busybox
$B mkdir -p /proc /sys /dev /lower /rw /newroot
$B mount -t proc proc /proc
$B mount -t sysfs sysfs /sys
$B mount -t devtmpfs devtmpfs /dev
for m in $($B cat /modules.list); do
  $B insmod /$m || echo "stage1: insmod $m failed"
done
$B mount -t 9p -o trans=virtio,version=9p2000.L,ro,msize=524288,cache=loose \
  uraidroot /lower || { echo "stage1: cannot mount the 9p root"; $B poweroff -f; }
$B mount -t tmpfs -o size=75%,mode=0755 tmpfs /rw
$B mkdir -p /rw/upper /rw/work
$B mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work \
  overlay /newroot || { echo "stage1: overlay mount failed"; $B poweroff -f; }
$B mount --move /dev /newroot/dev
$B umount /proc /sys
exec $B switch_root /newroot /bin/sh __STAGE2__
"""


def build_initramfs(path, mods_dir):
    mods = _module_closure(mods_dir, INITRD_MODULES)
    entries = [("bin", stat.S_IFDIR | 0o755, b""),
               ("dev", stat.S_IFDIR | 0o755, b""),
               ("dev/console", stat.S_IFCHR | 0o600, (5, 1))]
    with open(BUSYBOX, "rb") as f:
        entries.append(("bin/busybox", stat.S_IFREG | 0o755, f.read()))
    entries.append(("bin/sh", stat.S_IFLNK | 0o777, b"busybox"))
    dirs = set()
    for m in mods:
        d = os.path.dirname(m)
        parts = d.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub not in dirs:
                dirs.add(sub)
                entries.append((sub, stat.S_IFDIR | 0o755, b""))
        with open(os.path.join(mods_dir, m), "rb") as f:
            entries.append((m, stat.S_IFREG | 0o644, f.read()))
    entries.append(("modules.list", stat.S_IFREG | 0o644,
                    ("\n".join(mods) + "\n").encode()))
    init = INIT.replace("__STAGE2__", STAGE2).encode()
    entries.append(("init", stat.S_IFREG | 0o755, init))
    with open(path, "wb") as f:
        f.write(_cpio_newc(entries))


# --- accelerator ---------------------------------------------------------

_ACCEL = None


def _kvm_usable_hint():
    """None if KVM should be probed, else the reason not to."""
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return "no usable /dev/kvm"
    if os.path.exists("/sys/module/kvm_pvm"):
        return ("/dev/kvm is a paravirtual KVM (kvm_pvm), which does not boot "
                "an unmodified kernel")
    return None


def accel(log=sys.stderr):
    """'kvm' or 'tcg', decided once per process by what works."""
    global _ACCEL
    if _ACCEL:
        return _ACCEL
    forced = os.environ.get("URAID_VM_ACCEL")
    if forced in ("kvm", "tcg"):
        _ACCEL = forced
        print(f"vm: accelerator {forced} (URAID_VM_ACCEL)", file=log)
        return _ACCEL
    why = _kvm_usable_hint()
    if why is None:
        _ACCEL = "kvm"
        try:
            r = run("echo probe-ok", timeout=60, out=None, quiet=True)
            ok = r.status == 0 and "probe-ok" in r.output
        except Exception as e:  # qemu refusing -accel kvm, etc.
            ok, r = False, e
        if ok:
            print(f"vm: accelerator kvm (probe boot took {r.seconds:.1f}s)",
                  file=log)
            return _ACCEL
        why = "a probe boot under KVM did not reach the guest script"
    _ACCEL = "tcg"
    print(f"vm: accelerator tcg ({why})", file=log)
    return _ACCEL


# --- running a guest -----------------------------------------------------

class Disk:
    def __init__(self, path, serial):
        assert re.fullmatch(r"[A-Za-z0-9_]{1,20}", serial), serial
        self.path, self.serial = path, serial


class Share:
    """A host directory, writable in the guest at `guest_path`."""

    def __init__(self, host_path, guest_path, tag=None):
        self.host_path, self.guest_path = host_path, guest_path
        self.tag = tag


class Result:
    def __init__(self, status, output, seconds, timed_out):
        self.status, self.output = status, output
        self.seconds, self.timed_out = seconds, timed_out


def qemu_command(vmlinuz, initrd, ctl_dir, disks, shares, memory, cpus,
                 accel_name, quiet):
    cmd = [QEMU, "-nodefaults", "-no-user-config", "-nic", "none",
           "-machine", "pc", "-m", str(memory), "-smp", str(cpus),
           "-display", "none", "-vga", "none", "-monitor", "none",
           "-serial", "stdio", "-no-reboot",
           "-kernel", vmlinuz, "-initrd", initrd]
    if accel_name == "kvm":
        cmd += ["-accel", "kvm", "-cpu", "host"]
    else:
        cmd += ["-accel", "tcg,thread=multi", "-cpu", "max"]
    loglevel = 1 if quiet else 4
    cmd += ["-append",
            f"console=ttyS0 loglevel={loglevel} panic=-1 rdinit=/init "
            f"8250.nr_uarts=1 tsc=reliable mitigations=off"]
    fsdevs = [("uraidroot", "/", True), ("uraidctl", ctl_dir, False)]
    for i, s in enumerate(shares):
        s.tag = f"share{i}"
        fsdevs.append((s.tag, s.host_path, False))
    slot = 3
    for tag, path, ro in fsdevs:
        cmd += ["-fsdev", f"local,id={tag},path={path},security_model=none,"
                f"multidevs=remap{',readonly=on' if ro else ''}",
                "-device", f"virtio-9p-pci,fsdev={tag},mount_tag={tag},"
                f"addr={slot:#x}"]
        slot += 1
    # Disks: eight functions a PCI slot, so that many arrays fit one boot.
    for i, d in enumerate(disks):
        s, fn = slot + i // 8, i % 8
        mf = ",multifunction=on" if fn == 0 else ""
        cmd += ["-drive", f"file={d.path},if=none,id=d{i},format=raw,"
                f"cache=unsafe,aio=threads",
                "-device", f"virtio-blk-pci,drive=d{i},serial={d.serial},"
                f"addr={s:#x}.{fn}{mf}"]
    if slot + (len(disks) + 7) // 8 > 31:
        raise ValueError(f"too many disks for one guest: {len(disks)}")
    return cmd


def run(script, disks=(), shares=(), timeout=600, memory=1536, cpus=2,
        out=sys.stdout, quiet=False, accel_name=None):
    """Boots a guest, runs `script` (bash) as root, returns a Result. See the
    module docstring for the contract."""
    check_available()
    vmlinuz, mods_dir, version = kernel()
    if accel_name is None:
        accel_name = accel()
    tmp = owned_tempdir("uraid-vm-")
    proc = None
    try:
        ctl = os.path.join(tmp, "ctl")
        os.mkdir(ctl)
        initrd = os.path.join(tmp, "initrd.cpio")
        build_initramfs(initrd, mods_dir)
        with open(os.path.join(ctl, "run.sh"), "w") as f:
            f.write(script)
        cmd = qemu_command(vmlinuz, initrd, ctl, list(disks), list(shares),
                           memory, cpus, accel_name, quiet)
        with open(os.path.join(ctl, "mounts"), "w") as f:
            for s in shares:
                f.write(f"{s.tag} {s.guest_path}\n")
        with open(os.path.join(ctl, "modules"), "w") as f:
            f.write(version + "\n")
        with open(os.path.join(ctl, "ndisks"), "w") as f:
            f.write(f"{len(list(disks))}\n")
        start = time.time()
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        timed_out = threading.Event()

        def kill_at_timeout():
            if proc.poll() is None:
                timed_out.set()
                os.kill(proc.pid, signal.SIGKILL)
        timer = threading.Timer(timeout, kill_at_timeout)
        timer.start()
        lines = []
        status = None
        try:
            for raw in proc.stdout:
                line = raw.decode(errors="replace").rstrip("\r\n")
                line = line.replace("\r", "")
                lines.append(line)
                m = re.fullmatch(rf"{EXIT_MARK} (\d+)", line.strip())
                if m:
                    status = int(m.group(1))
                if out is not None:
                    print(line, file=out, flush=True)
            proc.wait()
        finally:
            timer.cancel()
        # The status file over 9p is the authority; the console mark is
        # the fallback (they agree whenever both exist).
        rc_file = os.path.join(ctl, "rc")
        if os.path.exists(rc_file):
            with open(rc_file) as f:
                text = f.read().strip()
            if text.isdigit():
                status = int(text)
        if timed_out.is_set():
            status = None
            msg = f"vm: guest killed after the {timeout}s timeout"
            lines.append(msg)
            if out is not None:
                print(msg, file=out, flush=True)
        return Result(status, "\n".join(lines), time.time() - start,
                      timed_out.is_set())
    finally:
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    """python3 vm.py [--disk PATH:SERIAL]... [--share HOST:GUEST]... SCRIPT
    Runs SCRIPT (a file, or '-' for stdin) in a guest; exits with its status
    (77 if no guest can run here, 125 if the guest gave no status)."""
    import argparse
    p = argparse.ArgumentParser()
    p.add_argument("--disk", action="append", default=[])
    p.add_argument("--share", action="append", default=[])
    p.add_argument("--timeout", type=int, default=600)
    p.add_argument("script")
    a = p.parse_args()
    text = sys.stdin.read() if a.script == "-" else open(a.script).read()
    disks = [Disk(*d.rsplit(":", 1)) for d in a.disk]
    shares = [Share(*s.split(":", 1)) for s in a.share]
    try:
        r = run(text, disks, shares, timeout=a.timeout)
    except Unavailable as e:
        print(f"vm: SKIP: {e}", file=sys.stderr)
        sys.exit(77)
    print(f"vm: guest ran {r.seconds:.1f}s, status {r.status}",
          file=sys.stderr)
    sys.exit(125 if r.status is None else r.status)


if __name__ == "__main__":
    main()
