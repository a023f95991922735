# SPDX-License-Identifier: MIT
"""The guest half of the kernel md tests: runs inside the throw-away guest
(vm.py) as root, with the host's / read-only under a tmpfs overlay, the
real md (raid456) and NBD client of Debian's kernel, and each case's member
images as virtio disks.

    python3 guest.py PLAN.json

PLAN names the tool, the plugin, the results directory (a writable 9p share)
and, for this boot, a list of steps: {case, kind, step, params, disks}.
Each step prints "CASE <name> PASS|FAIL ..." and writes
RESULTS/<case>.result.json ({"status": "pass"|"fail"|"crash-armed",
"message", "seconds"}); state a case needs in its next boot goes to
RESULTS/<case>.state.json. A step that ends the boot on purpose (sysrq-b)
writes "crash-armed" first and never returns.

Data is a pattern the reader can recognise: a 4 KiB block written with tag
T at array block B holds (T, B) repeated, so a misplaced block names where
it came from. Unwritten blocks are zeros (the images start sparse).
"""

import errno
import hashlib
import json
import mmap
import os
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback

BLK = 4096
MIB = 1 << 20
PLAN = None


class CaseFailed(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise CaseFailed(msg)


def log(msg):
    print(f"  {msg}", flush=True)


def sh(*cmd, ok=True, timeout=300, input=None):
    """Runs a command; returns CompletedProcess. `ok`: it must exit 0."""
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       timeout=timeout, input=input,
                       stdin=None if input is not None else subprocess.DEVNULL)
    if ok and r.returncode != 0:
        raise CaseFailed(f"{' '.join(map(str, cmd))} exited {r.returncode}: "
                         f"{(r.stdout + r.stderr).strip()[-1500:]}")
    return r


def uraid(*args, ok=True):
    return sh(PLAN["tool"], *args, ok=ok)


def uraid_json(*args):
    return json.loads(uraid(*args, "--json").stdout)


# --- the data pattern and what the array should hold ---------------------

def block_bytes(tag, blk):
    if tag == 0:
        return bytes(BLK)
    return struct.pack("<QQ", tag, blk) * (BLK // 16)


def describe(got):
    if got == bytes(BLK):
        return "zeros"
    tag, blk = struct.unpack_from("<QQ", got)
    if got == block_bytes(tag, blk):
        return f"tag {tag} block {blk}"
    return f"garbage {got[:16].hex()}"


class Image:
    """What each 4 KiB block of an array should hold: a tag, or a set of
    allowed tags (a write a crash interrupted may or may not have landed)."""

    def __init__(self, size):
        self.size = size
        self.blocks = {}   # blk -> tag or frozenset of allowed tags

    def set(self, blk, tag):
        self.blocks[blk] = tag

    def allowed(self, blk):
        v = self.blocks.get(blk, 0)
        return v if isinstance(v, frozenset) else frozenset([v])

    def to_json(self):
        return {"size": self.size,
                "blocks": {str(b): (sorted(v) if isinstance(v, frozenset)
                                    else v) for b, v in self.blocks.items()}}

    @staticmethod
    def from_json(j):
        im = Image(j["size"])
        for b, v in j["blocks"].items():
            im.blocks[int(b)] = frozenset(v) if isinstance(v, list) else v
        return im

    def verify(self, read_at, what, size=None):
        """Reads the whole array (`read_at(offset, length)`), 1 MiB at a time,
        and fails naming the first block that differs. `size`: the device's
        size, which must be this image's unless given larger (a grow), the
        rest then reading as zeros."""
        size = self.size if size is None else size
        step = MIB
        bad = []
        for off in range(0, size, step):
            n = min(step, size - off)
            got = read_at(off, n)
            check(len(got) == n, f"{what}: short read at {off}: {len(got)}")
            first = off // BLK
            want = b"".join(block_bytes(min(self.allowed(b)) if
                                        len(self.allowed(b)) == 1 else 0, b)
                            for b in range(first, first + n // BLK))
            if got == want:
                continue
            for i in range(n // BLK):
                b = first + i
                g = got[i * BLK:(i + 1) * BLK]
                if not any(g == block_bytes(t, b) for t in self.allowed(b)):
                    bad.append(f"block {b} (byte {b * BLK}): want "
                               f"{sorted(self.allowed(b))}, got {describe(g)}")
                    if len(bad) >= 5:
                        break
            if len(bad) >= 5:
                break
        check(not bad, f"{what}: data differs: " + "; ".join(bad))


def write_pattern(write_at, image, tag, blocks):
    """Writes `tag` to each array block in `blocks` (runs of adjacent blocks
    go in one request) and records it in `image`."""
    blocks = sorted(set(blocks))
    i = 0
    while i < len(blocks):
        j = i
        while j + 1 < len(blocks) and blocks[j + 1] == blocks[j] + 1 and \
                j - i < 255:
            j += 1
        data = b"".join(block_bytes(tag, b) for b in blocks[i:j + 1])
        write_at(data, blocks[i] * BLK)
        for b in blocks[i:j + 1]:
            image.set(b, tag)
        i = j + 1


def spread_blocks(nblocks, seed, head=256, count=64):
    """A head run (partial and full stripes), blocks spread over the whole
    array, and the last block: the shapes that catch layout errors."""
    import random
    rng = random.Random(seed)
    out = set(range(min(head, nblocks)))
    for _ in range(count):
        b = rng.randrange(nblocks)
        out.update(range(b, min(b + rng.randint(1, 40), nblocks)))
    out.add(nblocks - 1)
    return out


# --- block devices -------------------------------------------------------

class Direct:
    """O_DIRECT reads and writes of a block device (no page cache between
    md and the test, so a read sees what md serves now)."""

    def __init__(self, path, write=False):
        self.fd = os.open(path, (os.O_RDWR if write else os.O_RDONLY) |
                          os.O_DIRECT)
        self.buf = mmap.mmap(-1, MIB)

    def size(self):
        return os.lseek(self.fd, 0, os.SEEK_END)

    def read(self, off, n):
        out = bytearray()
        while n:
            k = min(n, MIB)
            view = memoryview(self.buf)[:k]
            got = os.preadv(self.fd, [view], off)
            check(got == k, f"short O_DIRECT read at {off}: {got}")
            out += view
            view.release()
            off += k
            n -= k
        return bytes(out)

    def write(self, data, off):
        pos = 0
        while pos < len(data):
            k = min(len(data) - pos, MIB)
            self.buf[:k] = data[pos:pos + k]
            view = memoryview(self.buf)[:k]
            os.pwritev(self.fd, [view], off + pos)
            view.release()
            pos += k

    def close(self):
        os.fsync(self.fd)
        os.close(self.fd)
        self.buf.close()


# --- md ------------------------------------------------------------------

def md_attr(md, name):
    with open(f"/sys/block/{md}/md/{name}") as f:
        return f.read().strip()


def md_set(md, name, value):
    with open(f"/sys/block/{md}/md/{name}", "w") as f:
        f.write(str(value))


def md_size(md):
    with open(f"/sys/block/{md}/size") as f:
        return int(f.read()) * 512


def dmesg_md(md):
    r = sh("dmesg", ok=False)
    return [l for l in r.stdout.splitlines() if md in l]


def md_wait_idle(md, timeout=600, what="sync"):
    """Waits until md has no sync, recovery or reshape running or pending."""
    deadline = time.time() + timeout
    while True:
        action = md_attr(md, "sync_action")
        if action == "idle" and md_attr(md, "sync_completed") == "none":
            return
        check(time.time() < deadline,
              f"{md}: {what} did not end in {timeout}s (sync_action "
              f"{action}, {md_attr(md, 'sync_completed')})")
        time.sleep(0.2)


def md_wait_sync(md, what, timeout=600):
    """Waits for md's first sync (resync, recovery) to have run and ended.
    md starts it a moment after the array goes read-write, so idle alone
    may be seen before it began (a loaded guest did: last_sync_action was
    still 'none'). Returns the last_sync_action md reports."""
    wait_for(lambda: md_attr(md, "last_sync_action") != "none" or
             md_attr(md, "sync_action") != "idle", 60,
             f"{what} to start")
    md_wait_idle(md, timeout=timeout, what=what)
    return md_attr(md, "last_sync_action")


def md_sync_progress(md):
    """(done, total) from md's sync_completed (sectors per member) while a
    sync, recovery or reshape runs part-way (0 < done < total); None
    when none runs ("none", "delayed"), none began or it has ended."""
    s = md_attr(md, "sync_completed")
    m = re.fullmatch(r"(\d+) / (\d+)", s)
    if m is None:
        return None
    done, total = int(m.group(1)), int(m.group(2))
    return (done, total) if 0 < done < total else None


def md_hold(md):
    """Holds md's running reshape or recovery about where it is, so that
    it cannot end before the case crashes or stops md mid-way (a fast run
    could finish between the look and the crash, and the case then tested
    nothing). The array's own speed limits go to 1 KiB/s: md's throttle
    then lets a step through only when its window of the last ~30 s saw no
    progress, a chunk or so per half minute. Not sync_max: md refuses to
    lower it while the sync runs (EBUSY), and mdadm's reshape monitor
    writes it as the reshape goes; neither touches sync_speed_*."""
    md_set(md, "sync_speed_min", 1)
    md_set(md, "sync_speed_max", 1)


def md_release(md):
    """Undoes md_hold after md was stopped: the limits go back to the
    system's, should the stopped array's sysfs node still be there (its
    next assembly must not inherit 1 KiB/s)."""
    for name in ("sync_speed_min", "sync_speed_max"):
        if os.path.exists(f"/sys/block/{md}/md/{name}"):
            md_set(md, name, "system")


def md_readwrite(md):
    """md starts arrays auto-read-only (no sync runs until the first
    write): make it writable, as a user would by writing."""
    if md_attr(md, "array_state") in ("read-auto", "readonly"):
        sh("mdadm", "--readwrite", f"/dev/{md}")


def md_sync_action(md, action, tries=50, pause=0.2):
    """Asks md for a sync action ("check", "repair") and waits for it to end.

    md refuses a sync_action write with EBUSY while MD_RECOVERY_RUNNING or
    MD_RECOVERY_NEEDED is set, and NEEDED alone reads back as "idle" (md's
    action_show names an action only for the SYNC, RECOVER or RESHAPE bits,
    and ignores NEEDED on a read-only array): md sets it on a switch to
    read-write, on a finished sync being reaped, on a superblock change, and
    its own thread clears it a moment later. So an idle sync_action does not
    promise the write takes; two of 100 full-grid cases met EBUSY right after
    md_readwrite and an idle wait. The write is retried on EBUSY (waiting out
    any sync that did start meanwhile) up to `tries` times, `pause` seconds
    apart; a refusal that never ends fails the case naming the last error."""
    last = None
    for attempt in range(1, tries + 1):
        try:
            md_set(md, "sync_action", action)
            break
        except OSError as e:
            if e.errno != errno.EBUSY:
                raise
            last = e
        md_wait_idle(md, what=f"sync before {action}")
        time.sleep(pause)
    else:
        check(False, f"{md}: writing '{action}' to sync_action was refused "
              f"{tries} times over at least {tries * pause:.0f}s; last error: "
              f"{last} (sync_action {md_attr(md, 'sync_action')}, "
              f"sync_completed {md_attr(md, 'sync_completed')}, array_state "
              f"{md_attr(md, 'array_state')})")
    if attempt > 1:
        log(f"{md}: '{action}' taken at attempt {attempt} (EBUSY before)")
    time.sleep(0.2)
    md_wait_idle(md, what=action)


def md_check(md):
    """md's own parity check; returns mismatch_cnt."""
    md_readwrite(md)
    md_wait_idle(md, what="sync before check")
    md_sync_action(md, "check")
    check(md_attr(md, "last_sync_action") == "check",
          f"{md}: last_sync_action {md_attr(md, 'last_sync_action')} after "
          f"a check")
    return int(md_attr(md, "mismatch_cnt"))


def md_examine_all(devs):
    """`mdadm --examine DEV...` (one run: every process start is slow under
    TCG) as {dev: {field: value}}."""
    r = sh("mdadm", "--examine", *devs)
    out, fields = {}, None
    for line in r.stdout.splitlines():
        if line.rstrip().endswith(":") and line.startswith("/dev/"):
            fields = out.setdefault(line.rstrip()[:-1], {})
            continue
        m = re.match(r"\s*([A-Za-z' ]+?) : (.*)$", line)
        if m and fields is not None:
            fields[m.group(1).strip()] = m.group(2).strip()
    check(sorted(out) == sorted(devs), f"mdadm --examine printed "
          f"{sorted(out)} for {devs}")
    return out


def md_examine(dev):
    return md_examine_all([dev])[dev]


def md_bitmap_all(devs):
    """`mdadm -X DEV...` in one run, as {dev: md_bitmap's dict}."""
    r = sh("mdadm", "-X", *devs)
    parts = re.split(r"^\s*Filename : (\S+)\n", r.stdout, flags=re.M)
    out = {}
    for dev, text in zip(parts[1::2], parts[2::2]):
        out[dev] = parse_bitmap(dev, text)
    check(sorted(out) == sorted(devs), f"mdadm -X printed {sorted(out)} "
          f"for {devs}: {r.stdout}")
    return out


def md_bitmap(dev):
    """`mdadm -X DEV`: (bits, dirty, events, events cleared)."""
    r = sh("mdadm", "-X", dev)
    return parse_bitmap(dev, r.stdout)


def parse_bitmap(dev, text):
    m = re.search(r"Bitmap : (\d+) bits \(chunks\), (\d+) dirty", text)
    check(m, f"mdadm -X {dev}: no bitmap line: {text}")
    ev = re.search(r"\n\s*Events : (\d+)", text)
    evc = re.search(r"Events Cleared : (\d+)", text)
    return {"bits": int(m.group(1)), "dirty": int(m.group(2)),
            "events": int(ev.group(1)), "events_cleared": int(evc.group(1)),
            "text": text}


def md_assemble(md, devs, *extra):
    r = sh("mdadm", "--assemble", f"/dev/{md}", *extra, *devs, ok=False)
    check(r.returncode == 0 and os.path.exists(f"/sys/block/{md}/md"),
          f"mdadm --assemble /dev/{md} {' '.join(extra)} {' '.join(devs)} "
          f"exited {r.returncode}: {(r.stdout + r.stderr).strip()}; "
          f"kernel: {' | '.join(dmesg_md(md)[-8:])}")
    return (r.stdout + r.stderr).strip()


def md_stop(md):
    if os.path.exists(f"/sys/block/{md}/md"):
        sh("mdadm", "--stop", f"/dev/{md}")


def md_shape(md, level, layout, chunk, disks, size):
    """md's view of the array must be the one uraid made."""
    check(md_attr(md, "level") == f"raid{level}",
          f"{md}: level {md_attr(md, 'level')}, want raid{level}")
    check(int(md_attr(md, "raid_disks")) == disks,
          f"{md}: raid_disks {md_attr(md, 'raid_disks')}, want {disks}")
    if level == 5:
        check(int(md_attr(md, "layout")) == layout,
              f"{md}: layout {md_attr(md, 'layout')}, want {layout}")
    check(int(md_attr(md, "chunk_size")) == chunk,
          f"{md}: chunk {md_attr(md, 'chunk_size')}, want {chunk}")
    check(md_size(md) == size, f"{md}: size {md_size(md)}, uraid says {size}")


def md_members(md):
    """{dev name: state} of md's members (dev-vdX/state)."""
    out = {}
    base = f"/sys/block/{md}/md"
    for e in os.listdir(base):
        if e.startswith("dev-"):
            with open(f"{base}/{e}/state") as f:
                out[e[4:]] = f.read().strip()
    return out


# --- uraid ---------------------------------------------------------------

LAYOUTS = {"left-asymmetric": 0, "right-asymmetric": 1, "left-symmetric": 2,
           "right-symmetric": 3, "parity-first": 4, "parity-last": 5}


class Server:
    """nbdkit with our plugin on a unix socket (harness.Server's rules)."""

    def __init__(self, tmp, members, extra=()):
        os.makedirs(tmp, exist_ok=True)
        self.sock = os.path.join(tmp, "uraid.sock")
        self.pidfile = os.path.join(tmp, "uraid.pid")
        self.log = os.path.join(tmp, "nbdkit.log")
        for f in (self.sock, self.pidfile):
            if os.path.exists(f):
                os.unlink(f)
        cmd = ["nbdkit", "-U", self.sock, "-P", self.pidfile, "-f",
               "--exit-with-parent", PLAN["plugin"]]
        cmd += [f"member={m}" for m in members] + list(extra)
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.logf,
                                     stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not os.path.exists(self.pidfile):
            if self.proc.poll() is not None:
                raise CaseFailed("nbdkit exited: " + self.output())
            if time.time() > deadline:
                self.proc.kill()
                raise CaseFailed("nbdkit did not start: " + self.output())
            time.sleep(0.05)

    def output(self):
        if not self.logf.closed:
            self.logf.flush()
        with open(self.log) as f:
            return f.read()

    def connect(self):
        import nbd
        h = nbd.NBD()
        h.connect_unix(self.sock)
        return h

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=120)
        self.logf.close()
        rc = self.proc.returncode
        if sig == signal.SIGTERM:
            check(rc == 0, f"nbdkit exited {rc}: {self.output()[-1500:]}")
        return rc


def uraid_read_all(tmp, devs, image, what, size=None, extra=()):
    srv = Server(tmp, devs, extra)
    h = None
    try:
        h = srv.connect()
        got_size = h.get_size()
        check(got_size == (size or image.size),
              f"{what}: uraid serves {got_size} bytes, want {size or image.size}")
        image.verify(lambda o, n: h.pread(n, o), what, size)
    finally:
        # Disconnect on failure too: nbdkit waits for its clients after
        # SIGTERM, and stop() would time out instead of the case failing.
        if h is not None:
            try:
                h.shutdown()
            except Exception:
                pass
        srv.stop()
    return srv


def uraid_detail(devs):
    return uraid_json("detail", *devs)


def uraid_check(devs, what):
    j = uraid_json("check", *devs)
    check(j["mismatches"] == 0, f"{what}: uraid check found "
          f"{j['mismatches']} mismatched stripes {j['first_mismatched_stripes']}")


def compare_superblocks(devs, what):
    """uraid examine and mdadm --examine agree on every member."""
    ours = uraid_json("examine", *devs)
    mds = md_examine_all(devs)
    for dev, u in zip(devs, ours):
        m = mds[dev]
        check(m.get("Checksum", "").endswith("correct"),
              f"{what}: mdadm --examine {dev}: checksum {m.get('Checksum')}")
        for mk, uk in (("Events", "events"), ("Array UUID", "array_uuid"),
                       ("Device Role", "device_role"), ("State", "state")):
            check(str(m.get(mk)) == str(u.get(uk)),
                  f"{what}: {dev}: mdadm --examine {mk} {m.get(mk)!r}, "
                  f"uraid examine {uk} {u.get(uk)!r}")
    return ours


def compare_bitmaps(devs, what):
    """uraid detail's bitmap and mdadm -X of each member agree."""
    d = uraid_detail(devs)
    b = d["bitmap"]
    if not b["present"]:
        return d, None
    xs = md_bitmap_all(devs)
    for dev in devs:
        x = xs[dev]
        for k, uk in (("bits", "chunks"), ("dirty", "dirty_chunks"),
                      ("events", "events"),
                      ("events_cleared", "events_cleared")):
            check(x[k] == b[uk], f"{what}: {dev}: mdadm -X {k} {x[k]}, "
                  f"uraid detail bitmap.{uk} {b[uk]}\n{x['text']}")
    return d, b


# --- the cases -----------------------------------------------------------

def settle_speed():
    # md throttles a sync to speed_limit_min when it sees other I/O; under
    # TCG everything is slow, so let it run at full speed.
    with open("/proc/sys/dev/raid/speed_limit_max", "w") as f:
        f.write("2000000")
    with open("/proc/sys/dev/raid/speed_limit_min", "w") as f:
        f.write("1000000")


def create_args(p):
    a = ["create", "--force", "--name", "k", "--chunk", p["chunk"],
         "--bitmap", p.get("bitmap", "none")]
    if p.get("bitmap_chunk"):
        a += ["--bitmap-chunk", p["bitmap_chunk"]]
    if p.get("level", 5) == 4:
        a += ["--level", "4"]
    else:
        if p.get("level", 5) == 6:
            a += ["--level", "6"]
        a += ["--layout", p.get("layout", "left-symmetric")]
    if p.get("assume_clean", True):
        a.append("--assume-clean")
    return a


def chunk_bytes(text):
    return int(text[:-1]) * 1024 if text.endswith("K") else int(text)


def case_uraid_to_md(c):
    """uraid creates and writes; md assembles with every member, reads it
    back, checks parity, writes; uraid reads md's writes."""
    p, devs, md = c.params, c.devs, c.md
    slots = list(devs)
    missing = p.get("missing")          # a slot created as `missing`
    if missing is not None:
        slots[missing] = "missing"
    uraid(*create_args(p), *slots)
    present = [d for d in slots if d != "missing"]
    d = uraid_detail(present)
    size = d["array_bytes"]
    image = Image(size)
    srv = Server(c.tmp, present)
    h = srv.connect()
    write_pattern(lambda data, off: h.pwrite(data, off), image, 1,
                  spread_blocks(size // BLK, c.seed))
    h.flush()
    h.shutdown()
    srv.stop()
    leave_out = p.get("leave_out")      # served without it: it goes stale
    if leave_out is not None:
        stale = present[leave_out]
        rest = [x for x in present if x != stale]
        # Leaving an active member out is md's --run (run=true).
        srv = Server(c.tmp, rest, ["run=true"])
        h = srv.connect()
        write_pattern(lambda data, off: h.pwrite(data, off), image, 2,
                      spread_blocks(size // BLK, c.seed + 1, count=16))
        h.flush()
        h.shutdown()
        srv.stop()
    before = compare_superblocks(present, "after uraid")
    if p.get("bitmap", "none") != "none":
        compare_bitmaps([x for x in present
                         if leave_out is None or x != stale], "after uraid")

    # md: the stale member is given too, and md must leave it out.
    out = md_assemble(md, present)
    log(f"mdadm --assemble: {out or 'ok'}")
    level = p.get("level", 5)
    layout = LAYOUTS.get(p.get("layout", "left-symmetric"), 2)
    md_shape(md, level, layout, chunk_bytes(p["chunk"]), p["disks"], size)
    degraded = int(md_attr(md, "degraded"))
    want_degraded = int(missing is not None) + int(leave_out is not None)
    check(degraded == want_degraded,
          f"{md}: degraded {degraded}, want {want_degraded}; members "
          f"{md_members(md)}; mdadm said: {out}")
    if leave_out is not None:
        name = os.path.basename(stale)
        check(name not in md_members(md),
              f"{md}: md took the stale member {stale}: {md_members(md)}")
    check(md_attr(md, "resync_start") == "none",
          f"{md}: md wants a resync of uraid's clean array (resync_start "
          f"{md_attr(md, 'resync_start')})")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, f"md reading uraid's array /dev/{md}")
    dev.close()
    if want_degraded == 0:
        mm = md_check(md)
        check(mm == 0, f"{md}: md check: mismatch_cnt {mm}")
    else:
        md_readwrite(md)
    # md writes (partial stripes, full stripes, the end), then stops.
    dev = Direct(f"/dev/{md}", write=True)
    write_pattern(dev.write, image, 3, spread_blocks(size // BLK, c.seed + 2,
                                                     head=64, count=24))
    dev.close()
    md_stop(md)

    # uraid reads md's writes; superblocks and bitmaps agree.
    members = [x for x in present if leave_out is None or x != stale]
    after = compare_superblocks(members, "after md")
    check(after[0]["events"] > max(b["events"] for b in before),
          f"md's writes did not advance events ({after[0]['events']})")
    d, b = compare_bitmaps(members, "after md")
    check(d["state"].startswith("clean"), f"uraid detail after md: state "
          f"{d['state']}")
    if want_degraded == 0:
        uraid_check(members, "after md")
    uraid_read_all(c.tmp, members, image, "uraid reading md's writes")


def case_md_to_uraid(c):
    """md creates and writes; uraid serves it, reads it back, checks
    parity, writes; md assembles again: no resync, check 0."""
    p, devs, md = c.params, c.devs, c.md
    slots = list(devs)
    missing = p.get("missing")
    if missing is not None:
        slots[missing] = "missing"
    args = ["mdadm", "--create", f"/dev/{md}", "--run", "--metadata=1.2",
            f"--level={p.get('level', 5)}", f"--raid-devices={p['disks']}",
            f"--chunk={p['chunk']}", f"--bitmap={p.get('bitmap', 'none')}",
            "--name=k"]
    if p.get("level", 5) == 5:
        args.append(f"--layout={p.get('layout', 'left-symmetric')}")
    if p.get("assume_clean", True):
        args.append("--assume-clean")
    sh(*args, *slots)
    present = [d for d in slots if d != "missing"]
    if not p.get("assume_clean", True):
        # md's initial build of parity: a "recovery" onto the last slot.
        md_readwrite(md)
        last = md_wait_sync(md, "initial recovery")
        check(last == "recovery", f"{md}: initial sync was {last!r}, "
              f"expected md's recovery")
    size = md_size(md)
    image = Image(size)
    dev = Direct(f"/dev/{md}", write=True)
    write_pattern(dev.write, image, 1, spread_blocks(size // BLK, c.seed))
    dev.close()
    if p.get("fail") is not None:
        # A member md fails and removes, then more writes: it goes stale.
        stale = present[p["fail"]]
        sh("mdadm", f"/dev/{md}", "--fail", stale)
        sh("mdadm", f"/dev/{md}", "--remove", stale)
        dev = Direct(f"/dev/{md}", write=True)
        write_pattern(dev.write, image, 2,
                      spread_blocks(size // BLK, c.seed + 1, count=16))
        dev.close()
    md_stop(md)

    members = present
    if p.get("fail") is not None:
        # uraid refuses the stale member by name (README: leave it out).
        r = sh("nbdkit", "-U", os.path.join(c.tmp, "bad.sock"), "-f",
               PLAN["plugin"], *[f"member={m}" for m in present], ok=False,
               timeout=60)
        check(r.returncode != 0, "uraid served md's array with a stale member")
        check(stale in r.stdout + r.stderr,
              f"uraid's refusal does not name the stale member {stale}: "
              f"{(r.stdout + r.stderr).strip()}")
        members = [x for x in present if x != stale]
    compare_superblocks(members, "after md")
    d, b = compare_bitmaps(members, "after md")
    check(d["array_bytes"] == size,
          f"uraid array_bytes {d['array_bytes']}, md size {size}")
    degraded = missing is not None or p.get("fail") is not None
    if not degraded:
        uraid_check(members, "md's array")
    srv = Server(c.tmp, members)
    h = srv.connect()
    check(h.get_size() == size, f"uraid serves {h.get_size()}, md {size}")
    image.verify(lambda o, n: h.pread(n, o), "uraid reading md's array")
    write_pattern(lambda data, off: h.pwrite(data, off), image, 3,
                  spread_blocks(size // BLK, c.seed + 2, head=64, count=24))
    h.flush()
    h.shutdown()
    srv.stop()
    if not degraded:
        uraid_check(members, "after uraid's writes")
    compare_superblocks(members, "after uraid")
    _, bits = compare_bitmaps(members, "after uraid")

    out = md_assemble(md, members)
    check(md_attr(md, "resync_start") == "none",
          f"{md}: md wants a resync after uraid's clean stop (resync_start "
          f"{md_attr(md, 'resync_start')})")
    check(int(md_attr(md, "degraded")) == int(degraded),
          f"{md}: degraded {md_attr(md, 'degraded')}: {out}")
    if bits is not None:
        # Clean stop: every bit cleared, except while degraded, where md
        # and uraid both keep the bits of regions written (for a re-add).
        x = md_bitmap(members[0])
        want = bits["dirty_chunks"] if degraded else 0
        check(x["dirty"] == want and (want > 0 or not degraded),
              f"md's bitmap after uraid's clean stop has {x['dirty']} dirty "
              f"bits; uraid said {bits['dirty_chunks']}, degraded {degraded}")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md reading uraid's writes")
    dev.close()
    if not degraded:
        mm = md_check(md)
        check(mm == 0, f"{md}: md check after uraid's writes: mismatch_cnt {mm}")
        check(md_attr(md, "resync_start") == "none", "md resynced")
    md_stop(md)


def parity_location(p, array_off):
    """(parity slot, member byte offset from the data start) of the stripe
    holding array byte `array_off`, from `uraid map`."""
    m = uraid_json("map", "--disks", str(p["disks"]), "--layout",
                   p.get("layout", "left-symmetric"), "--chunk", p["chunk"],
                   str(array_off))
    m = m[0] if isinstance(m, list) else m
    return m


def case_kill9_bitmap(c):
    """kill -9 of nbdkit during writes with the bitmap: mdadm -X and uraid
    detail agree on the dirty bits; md resyncs the dirty regions only
    (parity spoiled in a clean region stays spoiled, in a dirty one md
    rewrites it) and the data reads back."""
    p, devs, md = c.params, c.devs, c.md
    uraid(*create_args(p), *devs)
    d = uraid_detail(devs)
    size, bchunk = d["array_bytes"], d["bitmap"]["chunk_bytes"]
    data_disks = p["disks"] - 1
    region = bchunk * data_disks          # array bytes per bitmap bit
    nregions = size // region
    check(nregions >= 6, f"only {nregions} bitmap regions")
    image = Image(size)
    # On the fresh (zeroed, clean) array, write regions 1 and 3 only, flushing each write, and kill -9 with a
    # write in flight.
    srv = Server(c.tmp, devs)
    h = srv.connect()
    targets = [b for r in (1, 3) for b in range(r * region // BLK,
                                                (r + 1) * region // BLK)]
    import random
    rng = random.Random(c.seed)
    gen = 10
    stop = threading.Event()
    inflight = {}

    def writer():
        nonlocal gen
        try:
            while not stop.is_set():
                b = rng.choice(targets)
                gen += 1
                prev = image.allowed(b)
                image.blocks[b] = frozenset(prev | {gen})
                inflight[b] = gen
                h.pwrite(block_bytes(gen, b), b * BLK)
                h.flush()
                image.blocks[b] = gen
                del inflight[b]
        except Exception:
            pass
    t = threading.Thread(target=writer)
    t.start()
    time.sleep(1.5)
    srv.stop(signal.SIGKILL)
    stop.set()
    t.join()
    d, b = compare_bitmaps(devs, "after kill -9")
    check(not d["state"].startswith("clean"), f"state {d['state']} after kill")
    check(1 <= b["dirty_chunks"] <= 2,
          f"{b['dirty_chunks']} dirty bits after writing 2 regions")
    # Spoil parity in region 5 (clean) and region 1 (dirty).
    for r in (5, 1):
        m = parity_location(p, r * region + BLK)
        pslot = m["parity_disk"]
        off = d["data_offset_bytes"] + m["member_offset"]
        fd = os.open(devs[pslot], os.O_RDWR)
        os.pwrite(fd, b"\xa5" * BLK, off)
        os.fsync(fd)
        os.close(fd)

    out = md_assemble(md, devs)
    log(f"mdadm --assemble: {out or 'ok'}")
    md_readwrite(md)
    # md starts the resync from its own thread: wait for md to call the
    # array in sync (resync_start none), not only for an idle sync_action.
    wait_for(lambda: md_attr(md, "resync_start") == "none", 600,
             f"{md}'s resync after kill -9 (resync_start "
             f"{md_attr(md, 'resync_start')})")
    md_wait_idle(md, what="resync after kill -9")
    check(md_attr(md, "last_sync_action") == "resync",
          f"{md}: last_sync_action {md_attr(md, 'last_sync_action')}")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md after its resync")
    dev.close()
    mm = md_check(md)
    # One spoiled 4 KiB page (8 sectors) in the clean region; the one in
    # the dirty region was rewritten by the resync.
    check(mm == 8, f"md check after the resync: mismatch_cnt {mm}, want 8 "
          f"(the parity spoiled in a clean region only): md resynced "
          f"{'more' if mm == 0 else 'less'} than the dirty regions")
    md_sync_action(md, "repair")
    md_stop(md)
    compare_bitmaps(devs, "after md")
    uraid_check(devs, "after md's repair")
    uraid_read_all(c.tmp, devs, image, "uraid after md's resync")


def case_kill9_ppl(c):
    """kill -9 of nbdkit during partial-stripe writes on a PPL array
    (create --consistency-policy ppl): md assembles the members, replays
    uraid's partial parity log, and starts with no resync; the data reads
    back, md's check finds mismatch_cnt 0, and uraid reads md's result.
    With `switch`: the array is created with the resync policy and switched
    to ppl online while the writer writes (uraid grow --consistency-policy
    ppl --control), as md's `mdadm --grow --consistency-policy=ppl` does;
    md must find the same log and superblocks as on an array created so."""
    p, devs, md = c.params, c.devs, c.md
    switch = p.get("switch", False)
    # Switched: created without a bad-block log (--no-bbl, mdadm.conf's
    # CREATE bbl=no), as md needs for the switch: mdadm's log, 16 sectors
    # past the superblock on these members, leaves the PPL no room, and
    # both mdadm --grow and uraid grow refuse the switch then.
    uraid(*create_args(p), "--consistency-policy",
          "resync" if switch else "ppl", *(["--no-bbl"] if switch else []),
          *devs)
    d = uraid_detail(devs)
    size = d["array_bytes"]
    image = Image(size)
    ctl = os.path.join(c.tmp, "ctl.sock")
    srv = Server(c.tmp, devs, ["cache=0"] +
                 ([f"control={ctl}"] if switch else []))
    h = srv.connect()
    import random
    rng = random.Random(c.seed)
    nblk = min(size, 8 * MIB) // BLK
    gen = 10
    stop = threading.Event()

    def writer():
        nonlocal gen
        try:
            while not stop.is_set():
                b = rng.randrange(nblk)
                gen += 1
                image.blocks[b] = frozenset(image.allowed(b) | {gen})
                h.pwrite(block_bytes(gen, b), b * BLK)
                h.flush()
                image.blocks[b] = gen
        except Exception:
            pass
    t = threading.Thread(target=writer)
    t.start()
    if switch:
        time.sleep(0.5)  # the writer is going
        r = uraid("grow", "--consistency-policy", "ppl", "--control", ctl)
        check("consistency policy is now ppl" in r.stdout,
              f"grow --consistency-policy ppl: {r.stdout} {r.stderr}")
        check(uraid_json("detail", "--control", ctl)["ppl"],
              "detail does not say ppl after the switch")
    time.sleep(1.5)
    srv.stop(signal.SIGKILL)
    stop.set()
    t.join()
    ex = md_examine(devs[0])
    log(f"after kill -9: state {ex.get('State')}, feature map "
        f"{ex.get('Feature Map')}, {ex.get('PPL')}")
    check(ex.get("State") == "active", f"state {ex.get('State')} after kill")
    out = md_assemble(md, devs)
    log(f"mdadm --assemble: {out or 'ok'}")
    check(md_attr(md, "consistency_policy") == "ppl",
          f"{md}: consistency_policy {md_attr(md, 'consistency_policy')}")
    md_readwrite(md)
    time.sleep(1)
    check(md_attr(md, "resync_start") == "none",
          f"{md}: resync_start {md_attr(md, 'resync_start')} after the PPL "
          f"recovery (want none: no resync); dmesg: {dmesg_md(md)}")
    check(md_attr(md, "sync_action") == "idle",
          f"{md}: sync_action {md_attr(md, 'sync_action')}")
    log(f"md: {dmesg_md(md)}")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md after replaying uraid's PPL")
    dev.close()
    mm = md_check(md)
    check(mm == 0, f"md check after the PPL recovery: mismatch_cnt {mm}")
    md_stop(md)
    uraid_check(devs, "after md")
    uraid_read_all(c.tmp, devs, image, "uraid after md")


def case_ppl_md_crashed(c):
    """Boot 1: md (--consistency-policy=ppl) takes random 4 KiB writes on
    four threads and the guest is crashed with sysrq-b while they run.
    Boot 2: uraid serves the members: it replays md's log with no mismatch
    (so no resync), every block reads back as written or, for a write in
    flight at the crash, as before or after it; uraid's check finds 0
    mismatches, and md assembles the result with no resync. With
    leave_out=SLOT, boot 2 serves the other members: dirty and degraded,
    started without force, every block reads back by the same rule."""
    p, devs, md = c.params, c.devs, c.md
    if c.step == 0:
        sh("mdadm", "--create", f"/dev/{md}", "--run", "--metadata=1.2",
           "--level=5", f"--raid-devices={len(devs)}",
           f"--chunk={p['chunk']}", "--consistency-policy=ppl",
           "--assume-clean", "--name=k", *devs)
        md_readwrite(md)
        size = md_size(md)
        image = Image(size)
        lock = threading.Lock()
        frozen = threading.Event()
        import random
        nblk = min(size, 8 * MIB) // BLK
        gens = iter(range(10, 1 << 40))

        def writer(seed):
            rng = random.Random(seed)
            dev = Direct(f"/dev/{md}", write=True)
            while True:
                with lock:
                    if frozen.is_set():
                        break
                    b = rng.randrange(nblk)
                    if isinstance(image.blocks.get(b), frozenset):
                        continue  # another thread's write is in flight
                    g = next(gens)
                    image.blocks[b] = frozenset(image.allowed(b) | {g})
                dev.write(block_bytes(g, b), b * BLK)
                with lock:
                    image.blocks[b] = g
            # Frozen: rewrite blocks with what they already hold, so md
            # keeps logging partial writes (and the array stays active,
            # not marked clean after 200 ms idle) until the crash, while
            # the saved image stays true.
            while True:
                b = rng.randrange(nblk)
                v = image.blocks.get(b, 0)
                if isinstance(v, int):
                    dev.write(block_bytes(v, b), b * BLK)
        threads = [threading.Thread(target=writer, args=(c.seed * 10 + i,),
                                    daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(2)
        with lock:
            frozen.set()
            c.save_state({"image": image.to_json(), "size": size})
        ex = md_examine(devs[0])
        log(f"md's member before the crash: feature map "
            f"{ex.get('Feature Map')}, {ex.get('PPL')}, state "
            f"{ex.get('State')}")
        c.crash_armed()
        with open("/proc/sysrq-trigger", "w") as f:
            f.write("b")
        time.sleep(60)
        raise CaseFailed("sysrq-b did not end the guest")
    # Boot 2.
    st = c.load_state()
    image, size = Image.from_json(st["image"]), st["size"]
    ex = md_examine(devs[0])
    log(f"after the crash: state {ex.get('State')}, feature map "
        f"{ex.get('Feature Map')}, {ex.get('PPL')}")
    check(ex.get("State") == "active", f"state {ex.get('State')} after the "
          f"crash: md had marked the array clean, nothing to recover")
    lost = p.get("leave_out")
    if lost is not None:
        # Dirty and degraded: md's rule (and uraid's) starts it with a PPL,
        # without force (run=true: the slot is not given).
        survivors = [d for i, d in enumerate(devs) if i != lost]
        srv = uraid_read_all(c.tmp, survivors, image,
                             f"uraid degraded (slot {lost} left out) after "
                             f"md's crash", extra=["run=true"])
        out = srv.output()
        m = re.search(r"ppl: replayed (\d+) log entries .*?(\d+) "
                      r"mismatches", out)
        check(m is not None, f"uraid did not replay md's log: {out[-600:]}")
        log(f"uraid degraded: {m.group(0)}")
        return
    srv = uraid_read_all(c.tmp, devs, image, "uraid after md's crash")
    out = srv.output()
    m = re.search(r"ppl: replayed (\d+) log entries .*?(\d+) mismatches", out)
    check(m is not None, f"uraid did not replay md's log: {out[-600:]}")
    log(f"uraid: {m.group(0)}")
    check(m.group(2) == "0", f"uraid refused md's log: {out[-600:]}")
    check(int(m.group(1)) > 0, f"md's log held no entries: {out[-600:]}")
    check("will be resynced" not in out and "recomputing parity" not in out,
          f"uraid resynced after replaying md's log: {out[-600:]}")
    uraid_check(devs, "after uraid replayed md's log")
    out = md_assemble(md, devs)
    md_readwrite(md)
    time.sleep(1)
    check(md_attr(md, "resync_start") == "none",
          f"md wants a resync after uraid ({md_attr(md, 'resync_start')})")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md after uraid replayed its log")
    dev.close()
    mm = md_check(md)
    check(mm == 0, f"md check: mismatch_cnt {mm}")
    md_stop(md)


def wait_for(cond, timeout, what):
    deadline = time.time() + timeout
    while True:
        v = cond()
        if v:
            return v
        check(time.time() < deadline, f"timed out waiting for {what}")
        time.sleep(0.1)


def serve_written(c, devs):
    """uraid creates an array on `devs` (the case's create_args), serves it
    with a control socket and writes every block of it. Returns (server,
    open handle, control socket, Image)."""
    uraid(*create_args(c.params), *devs)
    image = Image(uraid_detail(devs)["array_bytes"])
    ctl = os.path.join(c.tmp, "ctl.sock")
    srv = Server(c.tmp, devs, [f"control={ctl}"])
    h = srv.connect()
    write_pattern(lambda data, off: h.pwrite(data, off), image, 1,
                  range(image.size // BLK))
    h.flush()
    return srv, h, ctl, image


def kill_mid_job(srv, ctl, what):
    """Waits until the served array's job is 20-70% done, then kills its
    nbdkit with SIGKILL. The caller limits the job beforehand so that the
    window lasts well over one poll: a poll is a `uraid detail` run in a
    TCG guest, a second or more on a loaded host (CI's stop 44 missed a
    4 s window at 2000 KiB/s). A timeout says what the polls last saw."""
    seen = []

    def progress():
        j = uraid_json("detail", "--control", ctl)
        job = j.get("job") or {}
        pct = job.get("percent") or 0
        seen.append(f"{job.get('kind')} {pct:.0f}%")
        return pct if 20 <= pct <= 70 else 0
    try:
        pct = wait_for(progress, 120, f"{what} to reach 20%")
    except CaseFailed as e:
        raise CaseFailed(f"{e} (polls saw: {', '.join(seen[-6:])}; "
                         f"{len(seen)} polls)") from None
    srv.stop(signal.SIGKILL)
    log(f"killed nbdkit at {pct}% of {what} (poll {len(seen)})")


def md_finish_reshape(c, image, level, disks, new_size, what):
    """The md side of a reshape uraid was killed in (`what` names it):
    the superblocks say a reshape is in progress; md assembles c.devs,
    finishes it to `disks` members of RAID `level` (its log says reshape),
    reads `image` back over the new size `new_size`, and its check finds
    the parity right. md is then stopped, and the superblocks agree with
    each other and with uraid's check."""
    devs, md = c.devs, c.md
    ex = md_examine(devs[0])
    check("Reshape pos'n" in ex, f"no reshape in progress after the kill: {ex}")
    out = md_assemble(md, devs)
    log(f"mdadm --assemble: {out or 'ok'}; kernel: "
        f"{' | '.join(dmesg_md(md)[-4:])}")
    md_readwrite(md)
    md_wait_idle(md, timeout=600, what=f"md finishing {what}")
    check(md_attr(md, "level") == f"raid{level}",
          f"level {md_attr(md, 'level')} after md finished {what}")
    check(int(md_attr(md, "raid_disks")) == disks,
          f"raid_disks {md_attr(md, 'raid_disks')} after md finished {what}")
    check(md_attr(md, "reshape_position") == "none",
          f"reshape_position {md_attr(md, 'reshape_position')}")
    msgs = dmesg_md(md)
    check(any("reshape" in m for m in msgs),
          f"md's log does not mention the reshape: {msgs[-10:]}")
    check(md_size(md) == new_size, f"{md}: size {md_size(md)} after md "
          f"finished {what}, want {new_size}")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, f"md after finishing {what}", new_size)
    dev.close()
    mm = md_check(md)
    check(mm == 0, f"md check after {what}: mismatch_cnt {mm}")
    md_stop(md)
    compare_superblocks(devs, f"after md finished {what}")
    uraid_check(devs, f"after md finished {what}")


def case_reshape_uraid_killed(c):
    """uraid grows 3->4 and is killed mid-reshape; md assembles the four
    members, finishes the reshape, and the data is intact."""
    devs = c.devs
    srv, h, ctl, image = serve_written(c, devs[:3])
    size = image.size
    # 15 MiB a member at 500 KiB/s: about 30 s, the 20-70% window 15 s.
    uraid("set", "--control", ctl, "--speed-min", "500", "--speed-max", "500")
    uraid("grow", "--control", ctl, "--raid-devices", "4", "--add", devs[3])
    kill_mid_job(srv, ctl, "the reshape")
    new_size = size * 3 // 2
    md_finish_reshape(c, image, 5, 4, new_size, "uraid's reshape 3->4")
    uraid_read_all(c.tmp, devs, image, "uraid after md's reshape", new_size)


def case_reshape_md_crashed(c):
    """Boot 1: md grows 3->4 (RAID6: 4->5) and the guest is crashed
    (sysrq-b) mid-reshape. Boot 2: `uraid grow --continue` finishes it;
    data intact in uraid and then in md."""
    p, devs, md = c.params, c.devs, c.md
    level = p.get("level", 5)
    n0 = 3 if level == 5 else 4         # two data members before, three after
    if c.step == 0:
        sh("mdadm", "--create", f"/dev/{md}", "--run", "--metadata=1.2",
           f"--level={level}", f"--raid-devices={n0}",
           f"--chunk={p['chunk']}", f"--bitmap={p.get('bitmap', 'none')}",
           "--assume-clean", "--name=k", *devs[:n0])
        size = md_size(md)
        image = Image(size)
        dev = Direct(f"/dev/{md}", write=True)
        write_pattern(dev.write, image, 1, range(size // BLK))
        dev.close()
        ex = md_examine(devs[0])
        log(f"md's member: data offset {ex.get('Data Offset')}, unused "
            f"{ex.get('Unused Space')}")
        sh("mdadm", f"/dev/{md}", "--add", devs[n0])
        with open("/proc/sys/dev/raid/speed_limit_max", "w") as f:
            f.write("2000")
        with open("/proc/sys/dev/raid/speed_limit_min", "w") as f:
            f.write("2000")
        r = sh("mdadm", "--grow", f"/dev/{md}", f"--raid-devices={n0 + 1}")
        log(f"mdadm --grow: {(r.stdout + r.stderr).strip()}")
        md_readwrite(md)

        def mid():
            pos = md_attr(md, "reshape_position")
            return pos != "none" and int(pos) * 512 >= size // 5
        wait_for(mid, 300, "md's reshape to pass 20%")
        md_hold(md)
        # md writes reshape_position to the superblocks as it goes; crash
        # when a checkpoint past the start is on disk.
        wait_for(lambda: "Reshape pos'n" in sh("mdadm", "--examine",
                                               devs[0]).stdout and
                 not md_examine(devs[0])["Reshape pos'n"].startswith("0 "),
                 300, "a reshape checkpoint in the superblock")

        # One look at both: md is mid-reshape, and held there, so it still
        # is when the crash lands; else the case fails here.
        def held():
            pos, done = md_attr(md, "reshape_position"), md_sync_progress(md)
            return (pos, done) if pos != "none" and done else None
        pos, done = wait_for(held, 10, "md held mid-reshape (reshape_position "
                             "set and sync_completed part-way)")
        c.save_state({"image": image.to_json(), "size": size,
                      "md_reshape_position": pos})
        log(f"crashing the guest with sysrq-b at reshape_position {pos} "
            f"(sync_completed {done[0]} / {done[1]})")
        c.crash_armed()
        with open("/proc/sysrq-trigger", "w") as f:
            f.write("b")
        time.sleep(60)
        raise CaseFailed("sysrq-b did not end the guest")
    # Boot 2.
    st = c.load_state()
    image, size = Image.from_json(st["image"]), st["size"]
    ex = md_examine(devs[0])
    check("Reshape pos'n" in ex, f"md's crash left no reshape: {ex}")
    pos = ex["Reshape pos'n"]
    log(f"md's superblock after the crash: Reshape pos'n {pos}, "
        f"Delta Devices {ex.get('Delta Devices')}")
    # mdadm prints the position in KiB of the array: past the start and
    # short of the grown end, so uraid takes over a reshape half done.
    kib = int(pos.split()[0])
    check(0 < kib * 1024 < size * 3 // 2,
          f"md's crash left Reshape pos'n {pos}, not mid-way through "
          f"{n0}->{n0 + 1} of {size} bytes")
    r = uraid("grow", "--continue", *devs)
    log(f"uraid grow --continue: {(r.stdout + r.stderr).strip()[-300:]}")
    d = uraid_detail(devs)
    check(d["raid_devices"] == n0 + 1 and not d["reshape"]["active"],
          f"after uraid grow --continue: {d['raid_devices']} devices, "
          f"reshape {d['reshape']}")
    new_size = d["array_bytes"]
    check(new_size == size * 3 // 2,
          f"size {new_size} after {n0}->{n0 + 1} of {size}")
    uraid_check(devs, "after uraid finished md's reshape")
    uraid_read_all(c.tmp, devs, image, "uraid after finishing md's reshape",
                   new_size)
    out = md_assemble(md, devs)
    check(int(md_attr(md, "raid_disks")) == n0 + 1 and
          md_attr(md, "reshape_position") == "none",
          f"md sees raid_disks {md_attr(md, 'raid_disks')}, reshape "
          f"{md_attr(md, 'reshape_position')}: {out}")
    check(md_attr(md, "resync_start") == "none",
          f"md wants a resync after uraid's reshape "
          f"({md_attr(md, 'resync_start')})")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md after uraid finished its reshape", new_size)
    dev.close()
    mm = md_check(md)
    check(mm == 0, f"md check: mismatch_cnt {mm}")
    md_stop(md)


def case_nbd0(c):
    """The README's /dev/nbd0 recipe: the plugin serves the disks, the
    kernel's NBD client attaches them, a filesystem made with uraid
    detail's hints is written and fsck'd; md then assembles the same disks
    and the files are identical."""
    p, devs, md = c.params, c.devs, c.md
    fs = p.get("fs", "ext4")
    uraid(*create_args(p), *devs)
    d = uraid_detail(devs)
    sh("modprobe", "nbd", "nbds_max=4")
    srv = Server(c.tmp, devs)
    nbd = "/dev/nbd0"
    mnt = os.path.join(c.tmp, "mnt")
    os.makedirs(mnt, exist_ok=True)
    files = {}
    try:
        sh("nbd-client", "-b", "4096", "-unix", srv.sock, nbd)
        with open("/sys/block/nbd0/queue/logical_block_size") as f:
            check(f.read().strip() == "4096", "nbd0 is not 4 KiB sectors")
        if fs == "ext4":
            # detail's hint: "mkfs.ext4 -b 4096 -E stride=S,stripe-width=W"
            hint = d["mkfs"]["ext4"]
            check(f"stride={d['mkfs']['ext4_stride']}" in hint, hint)
            sh(*hint.split()[:1], "-q", "-F", *hint.split()[1:], nbd)
        else:
            hint = d["mkfs"]["xfs"]
            sh(*hint.split(), "-q", "-f", nbd)
        log(f"mkfs: {hint}")
        sh("mount", nbd, mnt)
        import random
        rng = random.Random(c.seed)
        os.makedirs(os.path.join(mnt, "dir", "sub"))
        for i in range(12):
            n = rng.choice([1, 100, 4095, 4096, 70000, 1 << 20, 3 << 20])
            name = os.path.join("dir" if i % 2 else "dir/sub", f"f{i}")
            data = rng.randbytes(n)
            with open(os.path.join(mnt, name), "wb") as f:
                f.write(data)
            files[name] = hashlib.sha256(data).hexdigest()
        sh("umount", mnt)
        fsck = ["fsck.ext4", "-f", "-n"] if fs == "ext4" else \
            ["xfs_repair", "-n"]
        sh(*fsck, nbd)
    finally:
        sh("umount", mnt, ok=False)
        sh("nbd-client", "-d", nbd, ok=False)
        srv.stop()
    out = md_assemble(md, devs)
    check(md_attr(md, "resync_start") == "none", "md wants a resync")
    sh(*fsck, f"/dev/{md}")
    sh("mount", "-o", "ro", f"/dev/{md}", mnt)
    try:
        for name, digest in files.items():
            with open(os.path.join(mnt, name), "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
            check(got == digest, f"{name} differs when md serves the disks")
    finally:
        sh("umount", mnt, ok=False)
    mm = md_check(md)
    check(mm == 0, f"md check: mismatch_cnt {mm}")
    md_stop(md)


# --- md's bad-block log, both ways ---------------------------------------

def md_examine_badblocks(devs):
    """`mdadm --examine-badblocks DEV...` in one run: (its stdout, {dev:
    [(sector, sectors)...], [] for an empty list, None for no log})."""
    r = sh("mdadm", "--examine-badblocks", *devs)
    return r.stdout, parse_badblocks(r.stdout, "mdadm --examine-badblocks")


def parse_badblocks(text, what):
    """mdadm --examine-badblocks' wording (super1.c,
    examine_badblocks_super1), which uraid examine --badblocks copies."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"Bad-blocks on (\S+):$", line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = re.match(r"Bad-blocks list is empty in (\S+)$", line)
        if m:
            out[m.group(1)], cur = [], None
            continue
        m = re.match(r"No bad-blocks list configured on (\S+)$", line)
        if m:
            out[m.group(1)], cur = None, None
            continue
        m = re.match(r"\s*(\d+) for (\d+) sectors$", line)
        check(m is not None and cur is not None,
              f"{what}: unexpected line {line!r} in:\n{text}")
        cur.append((int(m.group(1)), int(m.group(2))))
    return out


def uraid_examine_badblocks(devs):
    """`uraid examine --badblocks DEV...` (text) and `uraid examine --json`'s
    bad_blocks of each member, as parse_badblocks' lists."""
    text = uraid("examine", "--badblocks", *devs).stdout
    js = uraid_json("examine", *devs)
    lists = {}
    for dev, j in zip(devs, js):
        check(j.get("bad_blocks") is not None,
              f"uraid examine --json {dev}: bad_blocks null "
              f"({j.get('bad_blocks_error')})")
        lists[dev] = [(e["sector"], e["sectors"]) for e in j["bad_blocks"]]
    return text, lists


def compare_badblocks(devs, what):
    """mdadm --examine-badblocks and uraid examine --badblocks print the same
    text for every member, and uraid examine --json lists the same ranges.
    Returns mdadm's lists."""
    md_text, md_lists = md_examine_badblocks(devs)
    ours_text, ours_json = uraid_examine_badblocks(devs)
    check(ours_text == md_text,
          f"{what}: uraid examine --badblocks printed\n{ours_text}\nmdadm "
          f"--examine-badblocks printed\n{md_text}")
    for dev in devs:
        check(ours_json[dev] == (md_lists.get(dev) or []),
              f"{what}: {dev}: uraid examine --json bad_blocks "
              f"{ours_json[dev]}, mdadm {md_lists.get(dev)}")
    return md_lists


def md_rdev_badblocks(md, dev):
    """md's in-memory list of a member (dev-X/bad_blocks: "sector length"
    lines) as [(sector, sectors)]."""
    name = os.path.basename(dev)
    with open(f"/sys/block/{md}/md/dev-{name}/bad_blocks") as f:
        return [tuple(int(x) for x in line.split())
                for line in f.read().splitlines() if line.strip()]


def block_map(p, blocks):
    """`uraid map` of array blocks (one run): {blk: {disk, parity_disk,
    member_offset, stripe}}."""
    m = uraid_json("map", "--disks", str(p["disks"]), "--layout",
                   p.get("layout", "left-symmetric"), "--chunk", p["chunk"],
                   *[str(b * BLK) for b in blocks])
    m = m if isinstance(m, list) else [m]
    return {b: e for b, e in zip(blocks, m)}


def stripe_blocks(p, stripe):
    """The array blocks of one stripe."""
    per = chunk_bytes(p["chunk"]) * (p["disks"] - 1) // BLK
    return list(range(stripe * per, (stripe + 1) * per))


def scribble(dev, offset, length):
    """Garbage over member bytes (the page cache bypassed), so that serving
    them, rather than rebuilding them, is caught."""
    fd = os.open(dev, os.O_RDWR)
    try:
        os.pwrite(fd, bytes([0xe7, 0x5a]) * (length // 2), offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def verify_with_holes(read_at, image, holes, what):
    """Reads the whole array 1 MiB at a time; a read that fails with EIO is
    read again block by block. Each block in `holes` must fail with EIO,
    every other block must hold what `image` says. Returns how many blocks
    failed."""
    import errno
    size, bad, failed = image.size, [], 0
    for off in range(0, size, MIB):
        n = min(MIB, size - off)
        first = off // BLK
        try:
            got = read_at(off, n)
        except OSError as e:
            check(e.errno == errno.EIO, f"{what}: read at {off}: {e}")
            got = None
        for i in range(n // BLK):
            b = first + i
            if got is None:
                try:
                    g = read_at(b * BLK, BLK)
                except OSError as e:
                    check(e.errno == errno.EIO,
                          f"{what}: read of block {b}: {e}")
                    failed += 1
                    if b not in holes:
                        bad.append(f"block {b}: EIO, want "
                                   f"{sorted(image.allowed(b))}")
                    continue
            else:
                g = got[i * BLK:(i + 1) * BLK]
            if b in holes:
                bad.append(f"block {b}: served ({describe(g)}), want EIO")
            elif not any(g == block_bytes(t, b) for t in image.allowed(b)):
                bad.append(f"block {b}: want {sorted(image.allowed(b))}, got "
                           f"{describe(g)}")
            if len(bad) >= 5:
                break
        if len(bad) >= 5:
            break
    check(not bad, f"{what}: " + "; ".join(bad))
    return failed


def case_bad_blocks_md_to_uraid(c):
    """md writes the log, uraid honours it. md (mdadm --create) holds a
    pattern; two ranges are added to md's lists through sysfs
    (dev-X/bad_blocks, absolute member sectors, acknowledged): a whole
    4 KiB block of a data chunk on one member, and 2 sectors in the middle
    of a 4 KiB block on another. md writes its lists into the members' logs
    with the next superblock update; then the listed sectors are overwritten
    with garbage on the members. mdadm --examine-badblocks and uraid examine
    --badblocks print the same lists; uraid serves the array and every
    block reads back as written (the listed ranges rebuilt from parity,
    never the garbage). uraid then writes over the whole block: its entry
    leaves the log (the other stays) and md, assembling again, lists what
    the log holds and reads the new data."""
    p, devs, md = c.params, c.devs, c.md
    sh("mdadm", "--create", f"/dev/{md}", "--run", "--metadata=1.2",
       "--level=5", f"--raid-devices={len(devs)}", f"--chunk={p['chunk']}",
       f"--layout={p['layout']}", "--bitmap=none", "--assume-clean",
       "--name=k", *devs)
    ex = md_examine(devs[0])
    log(f"md's member: Bad Block Log {ex.get('Bad Block Log')}, data offset "
        f"{ex.get('Data Offset')}")
    size = md_size(md)
    image = Image(size)
    dev = Direct(f"/dev/{md}", write=True)
    write_pattern(dev.write, image, 1, spread_blocks(size // BLK, c.seed))
    dev.close()
    # Two blocks of the written head, in different stripes and members.
    where = block_map(p, [37, 150])
    b_whole, b_part = 37, 150
    mw, mp = where[b_whole], where[b_part]
    check(mw["disk"] != mp["disk"], f"blocks {b_whole} and {b_part} on the "
          f"same member: {where}")
    dw, dp = devs[mw["disk"]], devs[mp["disk"]]
    with open(f"/sys/block/{md}/md/dev-{os.path.basename(dw)}/offset") as f:
        data_offset = int(f.read())   # sectors
    s_whole = data_offset + mw["member_offset"] // 512
    s_part = data_offset + mp["member_offset"] // 512 + 3
    entries = {dw: [(s_whole, 8)], dp: [(s_part, 2)]}
    for d, ((s, n),) in entries.items():
        with open(f"/sys/block/{md}/md/dev-{os.path.basename(d)}/"
                  f"bad_blocks", "w") as f:
            f.write(f"{s} {n}\n")
        got = md_rdev_badblocks(md, d)
        check(got == [(s, n)], f"md's dev-{os.path.basename(d)}/bad_blocks "
              f"is {got} after writing '{s} {n}'")
    log(f"md lists {entries} (data offset {data_offset} sectors; blocks "
        f"{b_whole} and {b_part} at member bytes {mw['member_offset']} and "
        f"{mp['member_offset']} of slots {mw['disk']} and {mp['disk']})")
    # md writes the lists with its next superblock update: a write
    # elsewhere turns the array active (and md_stop marks it clean again).
    last = size // BLK - 1
    check(where[b_whole]["stripe"] != block_map(p, [last])[last]["stripe"],
          "the last block shares a stripe with the listed ones")
    dev = Direct(f"/dev/{md}", write=True)
    write_pattern(dev.write, image, 2, [last])
    dev.close()
    md_stop(md)
    lists = compare_badblocks(devs, "after md")
    for d in devs:
        want = entries.get(d, [])
        check((lists.get(d) or []) == want,
              f"md's log on {d}: {lists.get(d)}, want {want} (what sysfs "
              f"was given, in absolute member sectors)")
    ex = md_examine_all([dw, dp])
    for d in (dw, dp):
        check(ex[d].get("Bad Block Log", "").endswith("bad blocks present."),
              f"mdadm --examine {d}: Bad Block Log {ex[d].get('Bad Block Log')}")
    scribble(dw, s_whole * 512, 8 * 512)
    scribble(dp, s_part * 512, 2 * 512)
    # uraid must rebuild both ranges from parity.
    uraid_read_all(c.tmp, devs, image, "uraid reading md's array with md's "
                   "bad-block lists over garbage")
    # uraid writes the whole block: the range is good again, its entry goes.
    srv = Server(c.tmp, devs)
    h = srv.connect()
    write_pattern(lambda data, off: h.pwrite(data, off), image, 3, [b_whole])
    h.flush()
    h.shutdown()
    srv.stop()
    lists = compare_badblocks(devs, "after uraid rewrote the listed block")
    check(not lists.get(dw) and lists.get(dp) == entries[dp],
          f"after uraid's write over block {b_whole}: {dw} lists "
          f"{lists.get(dw)} (want nothing), {dp} lists {lists.get(dp)} "
          f"(want {entries[dp]})")
    md_assemble(md, devs)
    for d in devs:
        got = md_rdev_badblocks(md, d)
        want = entries[dp] if d == dp else []
        check(got == want, f"md's dev-{os.path.basename(d)}/bad_blocks "
              f"{got} after uraid, want {want}")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md after uraid's write over the listed block")
    dev.close()
    # Not asserted: whether md, having rebuilt a listed range for a read,
    # rewrote it and dropped the entry (uraid clears entries on writes).
    log(f"md's list of {dp} after md read the array: "
        f"{md_rdev_badblocks(md, dp)}")
    md_stop(md)


def case_bad_blocks_uraid_to_md(c):
    """uraid writes the log, md honours it. uraid creates and writes a
    pattern, then serves the array degraded (slot `missing` left out, run)
    with one survivor behind a device-mapper table whose 8 sectors under an
    array block answer EIO (dm's error target). The read of that block fails
    with EIO (nothing to rebuild it from), and uraid records the block in
    that member's bad-block log. The table is then removed: the member
    reads fine again, only the log remembers. mdadm --examine-badblocks
    lists uraid's entry (uraid examine --badblocks prints the same), mdadm
    --assemble --run takes the survivors, md loads the entry
    (dev-X/bad_blocks), and md refuses exactly what uraid could not serve:
    EIO for the block and for the block of the missing slot in its row
    (its rebuild needs the listed range), every other block the pattern."""
    p, devs, md = c.params, c.devs, c.md
    uraid(*create_args(p), *devs)
    d = uraid_detail(devs)
    size, data_offset = d["array_bytes"], d["data_offset_bytes"]
    image = Image(size)
    srv = Server(c.tmp, devs)
    h = srv.connect()
    write_pattern(lambda data, off: h.pwrite(data, off), image, 1,
                  spread_blocks(size // BLK, c.seed))
    h.flush()
    h.shutdown()
    srv.stop()
    blk = 37
    loc = block_map(p, [blk])[blk]
    slot = loc["disk"]
    # The missing slot: another data member of the stripe, so that its
    # block in the row needs the listed range too.
    missing = next(i for i in range(len(devs))
                   if i not in (slot, loc["parity_disk"]))
    survivors = [x for i, x in enumerate(devs) if i != missing]
    bad_dev = devs[slot]
    sector = (data_offset + loc["member_offset"]) // 512
    sh("modprobe", "dm_mod")
    total = int(sh("blockdev", "--getsz", bad_dev).stdout)
    name = f"uraidbb{c.md[2:]}"
    table = (f"0 {sector} linear {bad_dev} 0\n"
             f"{sector} 8 error\n"
             f"{sector + 8} {total - sector - 8} linear {bad_dev} "
             f"{sector + 8}\n")
    env = dict(os.environ, DM_DISABLE_UDEV="1")
    r = subprocess.run(["dmsetup", "create", name, "--noudevsync"],
                       input=table, capture_output=True, text=True, env=env,
                       timeout=60)
    check(r.returncode == 0, f"dmsetup create: {r.stdout} {r.stderr}")
    mapped = f"/dev/mapper/{name}"
    try:
        if not os.path.exists(mapped):
            subprocess.run(["dmsetup", "mknodes", name], env=env,
                           capture_output=True, timeout=60)
        check(os.path.exists(mapped), f"{mapped} did not appear")
        members = [mapped if x == bad_dev else x for x in survivors]
        srv = Server(c.tmp, members, ["run=true"])
        h = srv.connect()
        import nbd
        try:
            h.pread(BLK, blk * BLK)
            raise CaseFailed(f"uraid served block {blk} over dm's error "
                             f"target with slot {missing} missing")
        except nbd.Error as e:
            check(e.errno in ("EIO", 5), f"read of block {blk}: {e}")
        h.shutdown()
        srv.stop()
        out = srv.output()
        check("bad-block log" in out,
              f"uraid's log does not mention the bad-block log: {out[-1500:]}")
        log("uraid: " + next(l for l in out.splitlines()
                             if "bad-block log" in l)[-300:])
    finally:
        subprocess.run(["dmsetup", "remove", name], env=env,
                       capture_output=True, timeout=60)
    lists = compare_badblocks(survivors, "after uraid recorded the block")
    want = [(sector, 8)]
    check(lists.get(bad_dev) == want,
          f"{bad_dev}'s log: {lists.get(bad_dev)}, want {want} (the 4 KiB "
          f"block at member byte {data_offset + loc['member_offset']})")
    for x in survivors:
        if x != bad_dev:
            check(not lists.get(x), f"{x} lists {lists.get(x)}")
    ex = md_examine(bad_dev)
    log(f"mdadm --examine {bad_dev}: Feature Map {ex.get('Feature Map')}, "
        f"Bad Block Log {ex.get('Bad Block Log')}")
    check(ex.get("Bad Block Log", "").endswith("bad blocks present."),
          f"mdadm --examine {bad_dev}: Bad Block Log "
          f"{ex.get('Bad Block Log')}")
    out = md_assemble(md, survivors, "--run")
    log(f"mdadm --assemble --run: {out or 'ok'}")
    check(int(md_attr(md, "degraded")) == 1,
          f"{md}: degraded {md_attr(md, 'degraded')}: {md_members(md)}")
    got = md_rdev_badblocks(md, bad_dev)
    check(got == want, f"md's list of {bad_dev}: {got}, want {want}")
    # What md must refuse: the listed block, and the missing slot's
    # blocks of the same rows.
    m = block_map(p, stripe_blocks(p, loc["stripe"]))
    lo, hi = sector * 512 - data_offset, (sector + 8) * 512 - data_offset
    holes = {b for b, e in m.items()
             if e["disk"] in (slot, missing) and
             e["member_offset"] < hi and e["member_offset"] + BLK > lo}
    check(blk in holes and len(holes) == 2, f"holes {sorted(holes)}")
    dev = Direct(f"/dev/{md}")
    n = verify_with_holes(dev.read, image, holes,
                          f"md reading uraid's degraded array")
    dev.close()
    log(f"md: EIO for blocks {sorted(holes)} ({n} failed), the rest as "
        f"written")
    check(md_rdev_badblocks(md, bad_dev) == want,
          f"md's list changed while reading: {md_rdev_badblocks(md, bad_dev)}")
    md_stop(md)


def case_bad_blocks_create_log(c):
    """uraid create reserves the bad-block log where mdadm --create (the
    real one, here) puts it, for each of: the default internal bitmap,
    --bitmap none, and the PPL. mdadm --examine's "Bad Block Log" line is
    the same for both creators' members, both call the list empty, and md
    assembles uraid's members."""
    devs, md = c.devs, c.md
    seen = []
    for label, md_args, ours in (
            ("bitmap", ["--bitmap=internal"], ["--bitmap", "internal"]),
            ("no bitmap", ["--bitmap=none"], ["--bitmap", "none"]),
            ("ppl", ["--consistency-policy=ppl"],
             ["--bitmap", "none", "--consistency-policy", "ppl"])):
        sh("mdadm", "--create", f"/dev/{md}", "--run", "--metadata=1.2",
           "--level=5", f"--raid-devices={len(devs)}", "--chunk=64K",
           "--assume-clean", "--name=k", *md_args, *devs)
        md_stop(md)
        theirs = md_examine_all(devs)
        uraid("create", "--force", "--name", "k", "--chunk", "64K",
              "--assume-clean", *ours, *devs)
        mine = md_examine_all(devs)
        for x in devs:
            a, b = theirs[x].get("Bad Block Log"), mine[x].get("Bad Block Log")
            check(a is not None and a == b,
                  f"{label}: {x}: mdadm --create's Bad Block Log {a!r}, "
                  f"uraid create's {b!r} (data offsets "
                  f"{theirs[x].get('Data Offset')} / "
                  f"{mine[x].get('Data Offset')})")
        seen.append(f"{label}: {mine[devs[0]].get('Bad Block Log')}")
        text, lists = md_examine_badblocks(devs)
        check(all(lists.get(x) == [] for x in devs),
              f"{label}: mdadm --examine-badblocks of uraid's members:\n{text}")
        md_assemble(md, devs)
        md_stop(md)
    log("; ".join(seen))


# --- RAID6: md makes, uraid's geometry and codec judge ----------------------

def zero_members(devs):
    """Zeros whole members (O_DIRECT), so no block of an earlier array can
    pass for one of the next."""
    for d in devs:
        sh("dd", "if=/dev/zero", f"of={d}", "bs=1M", "oflag=direct",
           "status=none", ok=False)


def case_raid6_md_layout(c):
    """For each RAID6 layout and disk count: mdadm --create --level=6
    without --assume-clean (md's resync computes P and Q), the data pattern
    written through md, md stopped; then raid6_layout_check, which knows
    only uraid's Geometry and P+Q codec, finds md's P and Q in every stripe
    and every written block where Map puts it. The control run orders Q by
    data index: it must fail exactly where md's slot order differs."""
    p, md = c.params, c.md
    tool = PLAN.get("raid6_check")
    check(tool, "the plan has no raid6_check tool (kernel_md_test.py "
          "--raid6-check)")
    seen = []
    for layout in p["layouts"]:
        for n in p["disk_counts"]:
            devs = c.devs[:n]
            what = f"{layout}/{n}disks"
            zero_members(devs)
            sh("mdadm", "--create", f"/dev/{md}", "--run", "--metadata=1.2",
               "--level=6", f"--raid-devices={n}", f"--chunk={p['chunk']}",
               f"--layout={layout}", "--bitmap=none", "--name=k", *devs)
            md_readwrite(md)
            last = md_wait_sync(md, f"{what}: initial resync")
            check(last == "resync", f"{what}: initial sync was {last!r}, "
                  f"expected md's resync of P and Q")
            size = md_size(md)
            image = Image(size)
            dev = Direct(f"/dev/{md}", write=True)
            write_pattern(dev.write, image, 1,
                          spread_blocks(size // BLK, c.seed, head=64,
                                        count=24))
            dev.close()
            md_stop(md)
            r = sh(tool, f"--expect-blocks={len(image.blocks)}", *devs,
                   ok=False)
            out = (r.stdout + r.stderr).strip()
            check(r.returncode == 0, f"{what}: {out}")
            differs = re.search(r"differs from the data index in (\d+)\)",
                                out)
            check(differs, f"{what}: no summary: {out}")
            ctl = sh(tool, "--slots=data-index", *devs, ok=False)
            cout = (ctl.stdout + ctl.stderr).strip()
            if int(differs.group(1)) > 0:
                check(ctl.returncode == 1 and "Q on disk" in cout,
                      f"{what}: Q ordered by data index passed, though the "
                      f"orders differ: {cout}")
            else:
                check(ctl.returncode == 0, f"{what}: {cout}")
            seen.append(f"{what}: {len(image.blocks)} blocks, slot order "
                        f"differs in {differs.group(1)} stripes")
            sh("mdadm", "--zero-superblock", *devs, ok=False)
    log("; ".join(seen))


RAID6_LAYOUT_NUMBERS = {
    "left-asymmetric": 0, "right-asymmetric": 1, "left-symmetric": 2,
    "right-symmetric": 3, "parity-first": 4, "parity-last": 5,
    "ddf-zero-restart": 8, "ddf-N-restart": 9, "ddf-N-continue": 10,
    "left-asymmetric-6": 16, "right-asymmetric-6": 17,
    "left-symmetric-6": 18, "right-symmetric-6": 19, "parity-first-6": 20}


def case_raid6_interop(c):
    """RAID6 served by uraid, judged by md, both ways. uraid creates (its
    own initial resync computes P and Q) and writes; its check finds P and
    Q right; md assembles, reads the same bytes, its check gives
    mismatch_cnt 0, and writes; uraid reads md's writes with two members
    left out. Then md creates and writes; uraid serves it with two members
    left out, reads the same bytes and writes; md assembles those
    survivors and reads uraid's degraded writes."""
    p, devs, md = c.params, c.devs, c.md
    layout, n = p["layout"], p["disks"]
    number = RAID6_LAYOUT_NUMBERS[layout]
    gone = [devs[1], devs[n - 2]]       # two members left out, not adjacent
    survivors = [d for d in devs if d not in gone]
    uraid("create", "--force", "--name", "k", "--level", "6", "--layout",
          layout, "--chunk", p["chunk"], "--bitmap", "none", *devs)
    d = uraid_detail(devs)
    size = d["array_bytes"]
    image = Image(size)
    srv = Server(c.tmp, devs)
    h = srv.connect()
    write_pattern(lambda data, off: h.pwrite(data, off), image, 1,
                  spread_blocks(size // BLK, c.seed))
    h.flush()
    h.shutdown()
    srv.stop()
    uraid_check(devs, "uraid's RAID6 after its writes")
    compare_superblocks(devs, "uraid's RAID6")

    out = md_assemble(md, devs)
    log(f"mdadm --assemble: {out or 'ok'}")
    check(md_attr(md, "level") == "raid6", f"{md}: level "
          f"{md_attr(md, 'level')}")
    check(int(md_attr(md, "layout")) == number, f"{md}: layout "
          f"{md_attr(md, 'layout')}, want {number} ({layout})")
    check(md_size(md) == size, f"{md}: size {md_size(md)}, uraid {size}")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, f"md reading uraid's RAID6 /dev/{md}")
    dev.close()
    mm = md_check(md)
    check(mm == 0, f"{md}: md check of uraid's RAID6: mismatch_cnt {mm}")
    dev = Direct(f"/dev/{md}", write=True)
    write_pattern(dev.write, image, 2, spread_blocks(size // BLK, c.seed + 1,
                                                     head=64, count=24))
    dev.close()
    md_stop(md)
    uraid_check(devs, "md's writes to uraid's RAID6")
    uraid_read_all(c.tmp, survivors, image,
                   "uraid reading md's writes with two members left out",
                   extra=["run=true"])

    zero_members(devs)
    sh("mdadm", "--create", f"/dev/{md}", "--run", "--metadata=1.2",
       "--level=6", f"--raid-devices={n}", f"--chunk={p['chunk']}",
       f"--layout={layout}", "--bitmap=none", "--name=k", *devs)
    md_readwrite(md)
    md_wait_idle(md, what="md's initial resync")
    size = md_size(md)
    image = Image(size)
    dev = Direct(f"/dev/{md}", write=True)
    write_pattern(dev.write, image, 3, spread_blocks(size // BLK, c.seed + 2))
    dev.close()
    md_stop(md)
    uraid_check(devs, "md's RAID6")
    srv = Server(c.tmp, survivors, ["run=true"])
    h = srv.connect()
    check(h.get_size() == size, f"uraid serves {h.get_size()}, md {size}")
    image.verify(lambda o, k: h.pread(k, o),
                 "uraid reading md's RAID6 with two members left out")
    write_pattern(lambda data, off: h.pwrite(data, off), image, 4,
                  spread_blocks(size // BLK, c.seed + 3, head=64, count=24))
    h.flush()
    h.shutdown()
    srv.stop()
    out = md_assemble(md, survivors, "--run")
    check(int(md_attr(md, "degraded")) == 2,
          f"{md}: degraded {md_attr(md, 'degraded')}: {out}")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md reading uraid's writes to its RAID6 with two "
                 "members gone")
    dev.close()
    md_stop(md)


def case_raid6_takeover_reshape(c):
    """RAID5 -> RAID6 -> a bigger RAID6 -> RAID5, judged by md at each
    step. uraid converts a served RAID5 of four to RAID6 (md's takeover:
    left-symmetric-6, the fifth member rebuilt as Q), grows the RAID6 to six
    members and is killed mid-reshape; md assembles the six, finishes
    uraid's RAID6 reshape, and its check finds P and Q right (Q as uraid
    rebuilt and restriped it). uraid then converts the array back to RAID5
    offline (Q is last in left-symmetric-6, so the sixth member becomes a
    spare), and md assembles that RAID5 and reads the same bytes."""
    devs, md = c.devs, c.md
    srv, h, ctl, image = serve_written(c, devs[:4])
    size = image.size
    uraid("grow", "--control", ctl, "--level", "6", "--raid-devices", "5",
          "--add", devs[4], "--wait")
    d = uraid_json("detail", "--control", ctl)
    check(d["level"] == 6 and d["layout"] == "left-symmetric-6"
          and not d["degraded"],
          f"after the takeover: level {d['level']} layout {d['layout']} "
          f"degraded {d['degraded']}")
    image.verify(lambda o, k: h.pread(k, o), "uraid after its takeover")
    uraid("set", "--control", ctl, "--speed-min", "500", "--speed-max",
          "500")
    uraid("grow", "--control", ctl, "--raid-devices", "6", "--add", devs[5])
    kill_mid_job(srv, ctl, "the RAID6 reshape")
    # Three data members before, four after.
    new_size = size * 4 // 3
    md_finish_reshape(c, image, 6, 6, new_size, "uraid's RAID6 reshape 5->6")
    uraid("grow", "--level", "5", *devs)
    ex = md_examine_all(devs)
    check("spare" in ex[devs[5]].get("Device Role", "").lower(),
          f"{devs[5]} after the conversion to RAID5: "
          f"{ex[devs[5]].get('Device Role')}")
    out = md_assemble(md, devs)
    check(md_attr(md, "level") == "raid5", f"level {md_attr(md, 'level')}: "
          f"{out}")
    check(int(md_attr(md, "raid_disks")) == 5,
          f"raid_disks {md_attr(md, 'raid_disks')} after uraid's takeover")
    check(md_size(md) == new_size, f"{md}: size {md_size(md)}, want "
          f"{new_size}")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md reading the RAID5 uraid converted back",
                 new_size)
    dev.close()
    mm = md_check(md)
    check(mm == 0, f"md check of the RAID5: mismatch_cnt {mm}")
    md_stop(md)


def case_raid6_takeover_handover(c):
    """RAID5 -> RAID6 handed over while Q is rebuilt, both ways. uraid
    converts a served RAID5 of four (left-symmetric-6, Q on the fifth
    member) and is killed while it rebuilds Q; md assembles the five,
    finishes the recovery from uraid's recovery_offset, reads every byte
    and its check gives mismatch_cnt 0. Then md converts a RAID5 of four
    (mdadm --grow --level=6 --layout=preserve) and is stopped while it
    rebuilds Q; uraid serves the five, finishes the recovery from md's
    recovery_offset, reads every byte, and its check and md's both find P
    and Q right."""
    p, devs, md = c.params, c.devs, c.md
    r5 = devs[:4]
    srv, h, ctl, image = serve_written(c, r5)
    uraid("set", "--control", ctl, "--speed-min", "500", "--speed-max",
          "500")
    uraid("grow", "--control", ctl, "--level", "6", "--raid-devices", "5",
          "--add", devs[4])
    kill_mid_job(srv, ctl, "uraid's rebuild of Q")
    ex = md_examine(devs[4])
    check("Recovery Offset" in ex, f"{devs[4]}: no recovery offset after "
          f"the kill: {ex}")
    out = md_assemble(md, devs[:5])
    log(f"mdadm --assemble: {out or 'ok'}")
    check(md_attr(md, "level") == "raid6", f"level {md_attr(md, 'level')}")
    md_readwrite(md)
    # md may not have started the recovery yet (sync_action still idle):
    # wait for the member to be in sync, not for idle alone.
    wait_for(lambda: int(md_attr(md, "degraded")) == 0, 600,
             "md finishing uraid's rebuild of Q")
    md_wait_idle(md, timeout=600, what="md finishing uraid's rebuild of Q")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md after finishing uraid's rebuild of Q")
    dev.close()
    mm = md_check(md)
    check(mm == 0, f"md check after finishing uraid's Q: mismatch_cnt {mm}")
    md_stop(md)

    zero_members(devs[:5])
    sh("mdadm", "--create", f"/dev/{md}", "--run", "--metadata=1.2",
       "--level=5", "--raid-devices=4", f"--chunk={p['chunk']}",
       "--layout=left-symmetric", "--bitmap=none", "--assume-clean",
       "--name=k", *r5)
    size = md_size(md)
    image = Image(size)
    dev = Direct(f"/dev/{md}", write=True)
    write_pattern(dev.write, image, 2, range(size // BLK))
    dev.close()
    sh("mdadm", f"/dev/{md}", "--add", devs[4])
    with open("/proc/sys/dev/raid/speed_limit_max", "w") as f:
        f.write("1000")
    with open("/proc/sys/dev/raid/speed_limit_min", "w") as f:
        f.write("1000")
    r = sh("mdadm", "--grow", f"/dev/{md}", "--level=6", "--raid-devices=5",
           "--layout=preserve", ok=False)
    log(f"mdadm --grow --level=6: {(r.stdout + r.stderr).strip()}")
    check(md_attr(md, "level") == "raid6",
          f"md's takeover: level {md_attr(md, 'level')}")
    md_readwrite(md)

    def mid():
        done = md_sync_progress(md)
        return done is not None and 0.2 * done[1] <= done[0] <= 0.7 * done[1]
    wait_for(mid, 300, "md's rebuild of Q to reach 20%")
    md_hold(md)
    # One look: Q still rebuilding part-way, and held there until the stop.
    done = wait_for(lambda: int(md_attr(md, "degraded")) > 0 and
                    md_sync_progress(md), 10,
                    "md held mid-way through its rebuild of Q")
    log(f"stopping md mid-recovery at sync_completed {done[0]} / {done[1]}")
    md_stop(md)
    md_release(md)
    with open("/proc/sys/dev/raid/speed_limit_max", "w") as f:
        f.write("200000")
    with open("/proc/sys/dev/raid/speed_limit_min", "w") as f:
        f.write("1000")
    ex = md_examine(devs[4])
    log(f"md stopped mid-recovery: {devs[4]} Recovery Offset "
        f"{ex.get('Recovery Offset')}, Layout {ex.get('Layout')}")
    check("Recovery Offset" in ex, f"{devs[4]}: md left no recovery offset")
    check(int(ex["Recovery Offset"].split()[0]) > 0,
          f"{devs[4]}: md stopped at Recovery Offset "
          f"{ex['Recovery Offset']}, not mid-way")
    srv = Server(c.tmp, devs[:5], [f"control={ctl}"])
    h = srv.connect()
    check(h.get_size() == size, f"uraid serves {h.get_size()}, md {size}")
    uraid("set", "--control", ctl, "--speed-min", "100000", "--speed-max",
          "200000")
    wait_for(lambda: not uraid_json("detail", "--control", ctl)["degraded"],
             300, "uraid finishing md's rebuild of Q")
    log("uraid finished md's rebuild of Q")
    image.verify(lambda o, k: h.pread(k, o), "uraid after finishing md's Q")
    h.shutdown()
    srv.stop()
    uraid_check(devs[:5], "after uraid finished md's rebuild of Q")
    md_assemble(md, devs[:5])
    check(int(md_attr(md, "degraded")) == 0,
          f"{md}: degraded {md_attr(md, 'degraded')} after uraid's recovery")
    mm = md_check(md)
    check(mm == 0, f"md check after uraid's Q: mismatch_cnt {mm}")
    md_stop(md)


def case_raid6_two_failures(c):
    """Two members of uraid's RAID6 fail under writes and two spares are
    rebuilt in one pass; md judges the result. uraid creates and serves a
    RAID6 of n members, writes every block, and takes two spares; while a
    writer keeps writing, one member is failed (the recovery onto the first
    spare starts, held slow) and then a second: the running recovery takes
    the second slot on (detail's job names both slots, one job). Once
    whole, uraid reads the writer's bytes, and md assembles the n members
    (the two rebuilt spares in the failed members' slots) with nothing to
    recover, reads the same bytes, and its check gives mismatch_cnt 0."""
    import random
    p, devs, md = c.params, c.devs, c.md
    n = p["disks"]
    members, spares = devs[:n], devs[n:n + 2]
    gone = [members[1], members[n - 2]]
    srv, h, ctl, image = serve_written(c, members)
    uraid("add", "--control", ctl, *spares)
    # 200 KiB/s: the first slot's rebuild alone lasts half a minute, so the
    # second failure lands mid-pass however slow the guest is.
    uraid("set", "--control", ctl, "--speed-min", "200", "--speed-max",
          "200")
    nblocks = image.size // BLK
    rng = random.Random(c.seed)
    stop = threading.Event()
    errors = []
    writes = [0]

    def writer():
        gen = 100
        try:
            while not stop.is_set():
                b = rng.randrange(nblocks - 8)
                k = rng.randint(1, 8)
                gen += 1
                h.pwrite(b"".join(block_bytes(gen, x)
                                  for x in range(b, b + k)), b * BLK)
                for x in range(b, b + k):
                    image.set(x, gen)
                writes[0] += 1
        except Exception as e:  # a client error fails the case below
            errors.append(repr(e))
    t = threading.Thread(target=writer)
    t.start()
    try:
        time.sleep(0.5)
        uraid("fail", "--control", ctl, gone[0])

        def job():
            return uraid_json("detail", "--control", ctl)["job"]
        first = wait_for(lambda: (lambda j: j if j["kind"] == "recover"
                                  and j["done_bytes"] > 0 else None)(job()),
                         120, "the recovery of the first failed slot")
        uraid("fail", "--control", ctl, gone[1])
        both = wait_for(lambda: (lambda j: j if j["kind"] == "recover"
                                 and j["second_slot"] >= 0 else None)(job()),
                        120, "the running recovery to take the second slot")
        log(f"first slot {first['slot']} at {first['done_bytes']} bytes; "
            f"then slots {both['slot']} and {both['second_slot']} in one "
            f"pass")
        uraid("set", "--control", ctl, "--speed-min", "100000",
              "--speed-max", "200000")
        wait_for(lambda: uraid_json("detail", "--control", ctl)["job"]
                 ["kind"] == "idle", 600, "uraid's rebuild of both slots")
    finally:
        stop.set()
        t.join()
    check(not errors, f"the writer got an error: {errors}")
    check(writes[0] > 0, "the writer wrote nothing")
    d = uraid_json("detail", "--control", ctl)
    lj = d["last_job"]
    check(not d["degraded"] and lj["kind"] == "recover"
          and lj["result"] == "completed"
          and sorted([lj["slot"], lj["second_slot"]]) == [1, n - 2],
          f"after the rebuild: degraded {d['degraded']}, last job "
          f"{lj['kind']} {lj['result']} slots {lj['slot']} "
          f"{lj['second_slot']}")
    image.verify(lambda o, k: h.pread(k, o),
                 "uraid after rebuilding two slots")
    h.shutdown()
    srv.stop()
    final = [m for m in members if m not in gone] + spares
    uraid_check(final, "uraid's RAID6 after two rebuilt slots")
    compare_superblocks(final, "after two rebuilt slots")
    out = md_assemble(md, final)
    log(f"mdadm --assemble: {out or 'ok'}; {writes[0]} writes during the "
        f"failures and the rebuild")
    check(md_attr(md, "level") == "raid6", f"level {md_attr(md, 'level')}")
    check(int(md_attr(md, "degraded")) == 0,
          f"{md}: degraded {md_attr(md, 'degraded')} after uraid's rebuild")
    dev = Direct(f"/dev/{md}")
    image.verify(dev.read, "md reading uraid's two rebuilt slots")
    dev.close()
    mm = md_check(md)
    check(mm == 0, f"md check after uraid rebuilt two slots: mismatch_cnt "
          f"{mm}")
    md_stop(md)


KINDS = {"uraid_to_md": case_uraid_to_md, "md_to_uraid": case_md_to_uraid,
         "kill9_bitmap": case_kill9_bitmap, "kill9_ppl": case_kill9_ppl,
         "ppl_md_crashed": case_ppl_md_crashed,
         "reshape_uraid_killed": case_reshape_uraid_killed,
         "reshape_md_crashed": case_reshape_md_crashed, "nbd0": case_nbd0,
         "bad_blocks_md_to_uraid": case_bad_blocks_md_to_uraid,
         "bad_blocks_uraid_to_md": case_bad_blocks_uraid_to_md,
         "bad_blocks_create_log": case_bad_blocks_create_log,
         "raid6_md_layout": case_raid6_md_layout,
         "raid6_interop": case_raid6_interop,
         "raid6_takeover_reshape": case_raid6_takeover_reshape,
         "raid6_takeover_handover": case_raid6_takeover_handover,
         "raid6_two_failures": case_raid6_two_failures}


class Case:
    def __init__(self, entry, index, disks_by_serial):
        self.name, self.kind = entry["case"], entry["kind"]
        self.step, self.params = entry["step"], entry["params"]
        self.seed = entry.get("seed", index + 1)
        self.devs = [disks_by_serial[s] for s in entry["disks"]]
        self.md = f"md{index}"
        self.tmp = f"/tmp/case-{index}"
        self.results = PLAN["results"]

    def path(self, what):
        return os.path.join(self.results, f"{self.name}.{what}.json")

    def save_state(self, st):
        with open(self.path("state"), "w") as f:
            json.dump(st, f)
            f.flush()
            os.fsync(f.fileno())

    def load_state(self):
        with open(self.path("state")) as f:
            return json.load(f)

    def crash_armed(self):
        self.result("crash-armed", "the guest is crashed on purpose", 0)
        os.sync()

    def result(self, status, message, seconds):
        with open(self.path("result"), "w") as f:
            json.dump({"status": status, "message": message,
                       "seconds": seconds}, f)
            f.flush()
            os.fsync(f.fileno())


def main():
    global PLAN
    with open(sys.argv[1]) as f:
        PLAN = json.load(f)
    disks = {}
    with open("/run/uraid-disks") as f:
        for line in f:
            serial, dev = line.split()
            disks[serial] = dev
    sh("modprobe", "raid456")
    settle_speed()
    failed = 0
    for i, entry in enumerate(PLAN["steps"]):
        missing = [s for s in entry["disks"] if s not in disks]
        if missing:
            # A disk the plan gave this case is not in the guest: the case
            # fails by name, and the boot goes on with the others.
            c = Case(dict(entry, disks=[]), i, disks)
            msg = (f"disks {missing} are not in the guest (it has "
                   f"{len(disks)}: {sorted(disks)[:4]}...)")
            c.result("fail", msg, 0)
            print(f"CASE {c.name}: FAIL: {msg}", flush=True)
            failed += 1
            continue
        c = Case(entry, i, disks)
        os.makedirs(c.tmp, exist_ok=True)
        label = c.name + (f" (step {c.step + 1})" if entry.get("steps", 1) > 1
                          else "")
        print(f"CASE {label}: start", flush=True)
        t0 = time.time()
        try:
            KINDS[c.kind](c)
            status, msg = "pass", ""
        except CaseFailed as e:
            status, msg = "fail", str(e)
        except Exception:
            status, msg = "fail", traceback.format_exc()
        finally:
            for k in range(8):  # whatever a failed case left assembled
                if os.path.exists(f"/sys/block/md{i}/md"):
                    sh("mdadm", "--stop", f"/dev/md{i}", ok=False)
            settle_speed()
        secs = time.time() - t0
        c.result(status, msg, secs)
        print(f"CASE {label}: {status.upper()} ({secs:.1f}s guest)"
              + (f": {msg}" if msg else ""), flush=True)
        failed += status != "pass"
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
