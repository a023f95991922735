# SPDX-License-Identifier: MIT
"""kill -9 crash test for the write-intent bitmap and the resync after an
unclean shutdown.

Each round:
  1. nbdkit serves the array (plugin + control=SOCKET);
  2. WRITERS threads, each on its own NBD connection, mix random writes
     (inside a small "hot" window), sequential writes (a cursor through a
     second window), some of them as NBD write-zeroes, some FUA, and
     flushes, and record what each flush acknowledged;
  3. after a random time nbdkit is killed with SIGKILL while they write
     (in one round of three, SIGTERM comes first and SIGKILL 0-600 ms
     later: a crash during the clean shutdown, if it is not over yet);
  4. the bitmap left on the members is read (its set bits are the regions
     the next assembly may resync) and the superblocks' state recorded
     (the freshest superblock decides whether the array is dirty: a kill
     during a superblock write leaves some members one event behind);
  5. nbdkit serves the members again; the test polls
     `uraid detail --control SOCK --json` until the resync is over (not
     "resyncing" and "clean" again) and records the counters
     resync_bytes / resync_bitmap_chunks / resynced_stripes;
  6. every block written in the round reads back by the rule below (and in
     each array's last round, every block of the array);
  7. the server is stopped (SIGTERM, exit 0), the superblocks must then
     say clean, and the offline
     `uraid check --json MEMBERS` must report 0 mismatched stripes.
Another round of three crashes twice: its first writers write all over the
array, then the array is served again and written at once, and killed
50-300 ms later, mostly while the resync of the first crash runs.

Rounds run on an array with the bitmap (1 MiB bitmap chunk on 4 x 64 MiB
members) and on one created with `--bitmap none`. With the bitmap the
resync must read at most 2 x dirty regions x bitmap chunk per member (2x:
array chunks and bitmap chunks need not line up) and, in one-crash rounds,
at most a quarter of the member; without it a one-crash round of a dirty
array resyncs the whole member (the members are filled at setup, so there
are no holes for the resync to skip). A round killed while every writer
waited in a slow flush for longer than the 200 ms safemode finds the array
clean (no resync; data and parity are still checked); most rounds must be
dirty.

A second test fails a member through the control socket while the writers
run, kills nbdkit, and then requires: serving the survivors is refused with
a message naming "dirty" and "degraded" (md refuses too), by the plugin and
by `uraid serve`, and the members are not written; with force=true it
serves and the durable data verifies (blocks of the failed slot are
rebuilt from parity, and may be wrong only in a stripe a non-durable write
touched: md's dirty-degraded hazard; those are counted).

THE RULE FOR WHAT A BLOCK MAY HOLD AFTER THE CRASH.  Writes are 4 KiB
aligned, and no two writes whose block ranges overlap are ever in flight at
once (a writer picks another range instead), so the writes to one block are
totally ordered: w1 < w2 < ... < wk (each completed before the next was
sent). Sequence numbers come from one counter taken under one lock:
`done` after a write's reply arrived, `issue` just before a flush is sent.
A write is DURABLE when
  * a flush (on any connection: the export advertises multi-conn, which
    makes a flush cover every write completed on any connection before it
    was sent) returned OK and was sent after the write completed
    (write.done < flush.issue), or
  * it was a FUA write and it completed OK.
For a block, let wj be its last durable write (none: the block's durable
value is what it held at the start of the round, itself verified by the
previous round). The block must then hold the value of wj or of any later
write w(j+1..k) to it: a later write may have reached the members or not,
whether it completed, failed or was still in flight at the kill, and a
later one may have landed while an earlier one did not. Older values
(w1..w(j-1), or the start-of-round value when some wj exists) are never
acceptable: they would mean an acknowledged, flushed write was lost or
overwritten by stale data.
In a round that crashes twice, durability is sealed at the first crash: a
write durable then stays durable, and one that was not never becomes so
(a flush after the restart covers what the block then holds, which is
one of the values the rule already accepts).
The rule is stated per byte; it is checked per 4 KiB block first (a block
lies inside one array chunk on one member and page-aligned on it, and a
process killed by a signal leaves each page written whole or not at all),
and a block matching no single candidate is checked byte by byte against
the union of candidates; such "torn" blocks are accepted but counted.
Whatever a block is found to hold becomes its start value for the next
round (the array is then stopped cleanly, so that value is durable).

Rounds: 16 with the bitmap and 14 without by default (the CI short form,
well under 3 minutes); URAID_CRASH_ROUNDS=N or --rounds N for N in all
(half with the bitmap, rounded up). Each round prints one line to stderr.
"""

import hashlib
import json
import os
import random
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import harness
from harness import (Server, control_call, make_members, md_place, run_tool,
                     start_fails)

MIB = 1 << 20
BLK = 4096
DISKS = 4
MEMBER = 64 * MIB
CHUNK = 64 * 1024          # array chunk
BITMAP_CHUNK = 1 * MIB     # bitmap chunk (bytes of member data per bit)
LAYOUT = 2                 # left-symmetric, the default
WRITERS = 3                # connections writing at once
HOT_WINDOW = 4 * MIB       # random writes land in this much of the array
SEQ_WINDOW = 4 * MIB       # sequential writes cycle through this much
SB = 4096                  # byte offset of the v1.2 superblock
MAX_SECTOR = 2**64 - 1
DEFAULT_ROUNDS = (16, 14)  # (with bitmap, without)
ROUNDS = None              # total, from --rounds or URAID_CRASH_ROUNDS


ZERO_WIDS = set()  # writes sent as NBD write-zeroes
ZERO_BLOCK = bytes(BLK)


def block_data(wid, blk):
    """The 4 KiB that write `wid` puts in array block `blk` (wid 0: the
    fill written at setup)."""
    if wid in ZERO_WIDS:
        return ZERO_BLOCK
    return hashlib.shake_128(b"%d/%d" % (wid, blk)).digest(BLK)


def value_of(v, blk):
    """A recorded block value: a write id, or the bytes themselves."""
    return block_data(v, blk) if isinstance(v, int) else v


def scratch_dir():
    """A temporary directory on disk (not tmpfs): /var/tmp if usable."""
    base = os.environ.get("URAID_CRASH_DIR") or (
        "/var/tmp" if os.access("/var/tmp", os.W_OK) else None)
    return tempfile.mkdtemp(prefix="uraid-crash-", dir=base)


# --- md metadata read straight from a member file ----------------------

def sb_fields(path):
    with open(path, "rb") as f:
        f.seek(SB)
        sb = f.read(256)
    return {"bitmap_offset": struct.unpack_from("<i", sb, 96)[0],
            "events": struct.unpack_from("<Q", sb, 200)[0],
            "resync_offset": struct.unpack_from("<Q", sb, 208)[0],
            "feature_map": struct.unpack_from("<I", sb, 8)[0]}


def array_dirty(sbs):
    """Whether the array is dirty as assembly sees it: the freshest
    superblock (most events) decides. A kill while the superblocks are
    being written leaves some members one event behind; when that write
    was the clean mark, data and parity were already flushed, so the
    array is clean."""
    top = max(s["events"] for s in sbs)
    return any(s["resync_offset"] != MAX_SECTOR
               for s in sbs if s["events"] == top)


def bitmap_dirty(path):
    """(set bits, bits, chunk bytes) of the member's bitmap, or None when the
    superblock has none (feature bit 0)."""
    sb = sb_fields(path)
    if not sb["feature_map"] & 1:
        return None
    with open(path, "rb") as f:
        f.seek(SB + sb["bitmap_offset"] * 512)
        head = f.read(256)
        magic, = struct.unpack_from("<I", head, 0)
        assert magic == 0x6d746962, f"{path}: bitmap magic {magic:#x}"
        sync_size, = struct.unpack_from("<Q", head, 40)
        chunk, = struct.unpack_from("<I", head, 52)
        nbits = -(-sync_size * 512 // chunk)
        bits = f.read(-(-nbits // 8))
    dirty = sum(bin(b).count("1") for b in bits[:nbits // 8])
    if nbits % 8:
        dirty += bin(bits[nbits // 8] & ((1 << (nbits % 8)) - 1)).count("1")
    return dirty, nbits, chunk


def control_detail(ctl, timeout=20):
    """`uraid detail --control CTL --json`, retried while the socket is not
    up yet (nbdkit opens it after forking)."""
    deadline = time.time() + timeout
    while True:
        r = run_tool("detail", "--control", ctl, "--json", check=False)
        if r.returncode == 0:
            return json.loads(r.stdout)
        if time.time() > deadline:
            raise AssertionError(f"detail --control failed: {r.stderr}")
        time.sleep(0.05)


def raw_detail(ctl):
    """The control protocol's own detail (every ArrayInfo field, all
    counters and the bitmap)."""
    return control_call(ctl, {"cmd": "detail"})["detail"]


def wait_resync(ctl, timeout=120):
    """Polls until no resync runs and the array is clean again (the resync
    marks it clean when it ends); returns the last detail."""
    deadline = time.time() + timeout
    while True:
        d = control_detail(ctl)
        if not d["resyncing"] and d["clean"] and d["job"]["kind"] == "idle":
            return d
        if time.time() > deadline:
            raise AssertionError(f"resync did not finish: {d}")
        time.sleep(0.05)


def offline_check(test, paths, what):
    r = run_tool("check", "--json", *paths, check=False)
    test.assertEqual(r.returncode, 0, f"{what}: uraid check: "
                     f"{r.stdout}{r.stderr}")
    j = json.loads(r.stdout)
    test.assertEqual(j["mismatches"], 0, f"{what}: {j}")
    test.assertFalse(j["degraded"])
    return j


def fill(h, size):
    """Writes block_data(0, b) to every block and flushes."""
    step = MIB
    for off in range(0, size, step):
        n = min(step, size - off) // BLK
        b0 = off // BLK
        h.pwrite(b"".join(block_data(0, b) for b in range(b0, b0 + n)), off)
    h.flush()


# --- one round's writers and their record ------------------------------

class Write:
    __slots__ = ("wid", "blk", "nblk", "fua", "issue", "done", "error",
                 "sealed")

    def __init__(self, wid, blk, nblk, fua):
        self.wid, self.blk, self.nblk, self.fua = wid, blk, nblk, fua
        self.issue = self.done = None
        self.error = None
        self.sealed = None  # durability fixed by a crash (Recorder.seal)

    def __repr__(self):
        return (f"write#{self.wid}(blocks {self.blk}+{self.nblk}, fua="
                f"{self.fua}, issue={self.issue}, done={self.done}, "
                f"error={self.error})")


class Recorder:
    """The writers of one round and everything they did."""

    next_wid = 1  # write ids are unique over the whole test

    def __init__(self, size, rng, wide=False):
        self.lock = threading.Lock()
        self.seq = 0
        self.inflight = set()  # Write objects
        self.writes = []
        self.by_block = {}     # blk -> [Write] in order
        self.durable_mark = 0  # largest issue seq of a flush that returned OK
        self.flushes_ok = self.flushes_failed = 0
        self.flush_s = 0.0  # the slowest flush
        self.term_exit = None
        self.size = size
        self.new_windows(rng, wide)
        self.stop = threading.Event()
        self.errors = []  # unexpected exceptions (not nbd.Error)

    def new_windows(self, rng, wide=False):
        """Random writes go to a HOT_WINDOW of the array (the whole array
        when `wide`), sequential ones cycle through a SEQ_WINDOW."""
        hot_len = self.size if wide else HOT_WINDOW
        self.hot = rng.randrange(0, (self.size - hot_len) // BLK + 1)
        self.hot_len = hot_len // BLK
        self.seq_start = rng.randrange(0, (self.size - SEQ_WINDOW) // BLK)
        self.seq_len = SEQ_WINDOW // BLK
        self.cursor = self.seq_start

    def seal(self):
        """After a crash: what was durable stays so, what was not never
        becomes so (a later flush does not vouch for writes the crash may
        have lost), and writes left in flight are dead."""
        for w in self.writes:
            if w.sealed is None:
                w.sealed = self.durable(w)
        self.inflight.clear()
        self.stop = threading.Event()

    def tick(self):
        self.seq += 1
        return self.seq

    def durable(self, w):
        if w.sealed is not None:
            return w.sealed
        return w.done is not None and (w.fua or w.done < self.durable_mark)

    def _overlaps(self, blk, n):
        return any(w.blk < blk + n and blk < w.blk + w.nblk
                   for w in self.inflight)

    def _pick(self, rng):
        """A write that overlaps none in flight, registered; or None."""
        with self.lock:
            if rng.random() < 0.5:
                for _ in range(6):
                    n = rng.choice([1, 1, 2, 4, 16, 32])
                    blk = self.hot + rng.randrange(self.hot_len - n)
                    if not self._overlaps(blk, n):
                        break
                else:
                    return None
            else:
                n = rng.choice([16, 48, 96, 256])  # 64K .. 1M, 192K = stripe
                if self.cursor + n > self.seq_start + self.seq_len:
                    self.cursor = self.seq_start
                blk = self.cursor
                if self._overlaps(blk, n):
                    return None
                self.cursor += n
            w = Write(Recorder.next_wid, blk, n, rng.random() < 0.1)
            Recorder.next_wid += 1
            if rng.random() < 0.06:
                ZERO_WIDS.add(w.wid)
            w.issue = self.tick()
            self.inflight.add(w)
            self.writes.append(w)
            for b in range(blk, blk + n):
                self.by_block.setdefault(b, []).append(w)
            return w

    def worker(self, h, seed):
        import nbd
        rng = random.Random(seed)
        try:
            while not self.stop.is_set():
                if rng.random() < 0.12:
                    with self.lock:
                        issue = self.tick()
                    t = time.monotonic()
                    try:
                        h.flush()
                        self.flush_s = max(self.flush_s,
                                           time.monotonic() - t)
                    except nbd.Error:
                        with self.lock:
                            self.flushes_failed += 1
                        return
                    with self.lock:
                        self.flushes_ok += 1
                        self.durable_mark = max(self.durable_mark, issue)
                    continue
                w = self._pick(rng)
                if w is None:
                    continue
                flags = nbd.CMD_FLAG_FUA if w.fua else 0
                try:
                    if w.wid in ZERO_WIDS:
                        h.zero(w.nblk * BLK, w.blk * BLK, flags)
                    else:
                        h.pwrite(b"".join(
                            block_data(w.wid, b)
                            for b in range(w.blk, w.blk + w.nblk)),
                            w.blk * BLK, flags)
                except nbd.Error as e:
                    with self.lock:
                        w.error = e.string
                        self.inflight.discard(w)
                    return  # the server is gone
                with self.lock:
                    w.done = self.tick()
                    self.inflight.discard(w)
        except Exception as e:  # reported by the test
            self.errors.append(repr(e))

    def run(self, srv, phase_s, rng, during=None, term_first=None):
        """Writers on WRITERS connections for phase_s seconds, then kill -9
        of the server while they write. `during()` runs in between (e.g. to
        fail a member). With term_first (seconds) the server gets SIGTERM
        first, and SIGKILL that long after: a crash during the clean
        shutdown (flush, bitmap clear, clean mark), or none if it was
        quicker; self.term_exit then holds its exit status, or None."""
        handles = [srv.connect() for _ in range(WRITERS)]
        assert handles[0].can_multi_conn(), "the flush rule needs multi-conn"
        threads = [threading.Thread(target=self.worker,
                                    args=(h, rng.randrange(1 << 30)))
                   for h in handles]
        for t in threads:
            t.start()
        try:
            if during is not None:
                during()
            time.sleep(phase_s)
            if term_first is not None:
                srv.proc.send_signal(signal.SIGTERM)
                time.sleep(term_first)
                self.term_exit = srv.proc.poll()
        finally:
            srv.stop(signal.SIGKILL)
            self.stop.set()
            for t in threads:
                t.join(timeout=60)
            for h in handles:
                try:
                    h.shutdown()
                except Exception:
                    pass  # the server is gone
            handles.clear()  # closes the handles
        assert not any(t.is_alive() for t in threads), "a writer hangs"

    def summary(self):
        done = sum(1 for w in self.writes if w.done is not None)
        return {"writes": len(self.writes), "completed": done,
                "durable": sum(1 for w in self.writes if self.durable(w)),
                "fua": sum(1 for w in self.writes if w.fua and w.done),
                "zero": sum(1 for w in self.writes if w.wid in ZERO_WIDS),
                "flushes": self.flushes_ok,
                "max_flush_ms": round(self.flush_s * 1000, 1),
                "written_mib": round(sum(w.nblk for w in self.writes)
                                     * BLK / MIB, 1)}


def read_blocks(h, blocks):
    """{blk: bytes} for the sorted block numbers, reading runs together."""
    out = {}
    i = 0
    while i < len(blocks):
        j = i
        while (j + 1 < len(blocks) and blocks[j + 1] == blocks[j] + 1
               and j + 1 - i < 256):
            j += 1
        data = h.pread((j - i + 1) * BLK, blocks[i] * BLK)
        for k in range(i, j + 1):
            out[blocks[k]] = data[(k - i) * BLK:(k - i + 1) * BLK]
        i = j + 1
    return out


def candidates(rec, blk, baseline):
    """The values block `blk` may hold (the rule in the module doc), as
    (label, value-or-wid) pairs, oldest first."""
    ws = rec.by_block[blk]
    last = None
    for i, w in enumerate(ws):
        if rec.durable(w):
            last = i
    if last is None:
        return [("start of round", baseline.get(blk, 0))] + \
            [(repr(w), w.wid) for w in ws]
    return [(repr(w), w.wid) for w in ws[last:]]


def check_block(got, blk, cands):
    """('ok', the candidate matched), ('torn', got) when each byte is some
    candidate's, or (None, None)."""
    values = [value_of(v, blk) for _, v in cands]
    for (_, raw), v in zip(cands, values):
        if got == v:
            return "ok", raw
    for i in range(BLK):
        if not any(got[i] == v[i] for v in values):
            return None, None
    return "torn", got


def member_of(blk):
    """(slot, stripe) holding array block `blk` (md's placement)."""
    disk, _, stripe = md_place(blk * BLK // CHUNK, DISKS, LAYOUT)
    return disk, stripe


class CrashTest(unittest.TestCase):
    stats = {}

    def setUp(self):
        self.tmp = scratch_dir()

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def make_array(self, sub, member_bytes, bitmap):
        d = os.path.join(self.tmp, sub)
        os.makedirs(d)
        paths = make_members(d, DISKS, member_bytes)
        args = ["--chunk", f"{CHUNK // 1024}K"]
        args += (["--bitmap-chunk", f"{BITMAP_CHUNK // 1024}K"] if bitmap
                 else ["--bitmap", "none"])
        run_tool("create", "--force", "--assume-clean", *args, *paths)
        srv = Server(d, paths)
        try:
            h = srv.connect()
            size = h.get_size()
            fill(h, size)
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        return d, paths, size

    def verify(self, h, rec, baseline, what, failed_slot=None):
        """Checks every block the round wrote (see the rule); updates
        `baseline`. With failed_slot, blocks on that slot are rebuilt from
        parity and may be wrong only in a stripe a non-durable write
        touched. Returns (blocks checked, torn, rebuilt-and-wrong)."""
        blocks = sorted(rec.by_block)
        got = read_blocks(h, blocks)
        torn_stripes = set()
        if failed_slot is not None:
            for w in rec.writes:
                if not rec.durable(w):
                    for b in range(w.blk, w.blk + w.nblk):
                        torn_stripes.add(member_of(b)[1])
        torn = wrong_rebuilt = 0
        for blk in blocks:
            cands = candidates(rec, blk, baseline)
            verdict, value = check_block(got[blk], blk, cands)
            if verdict is None and failed_slot is not None:
                slot, stripe = member_of(blk)
                if slot == failed_slot and stripe in torn_stripes:
                    wrong_rebuilt += 1  # md's dirty-degraded hazard
                    baseline[blk] = got[blk]
                    continue
            if verdict is None:
                slot, stripe = member_of(blk)
                first = next((i for i in range(BLK)
                              if all(got[blk][i] != value_of(v, blk)[i]
                                     for _, v in cands)), None)
                self.fail(f"{what}: block {blk} (array byte {blk * BLK}, "
                          f"slot {slot}, stripe {stripe}) holds none of the "
                          f"acceptable values (first bad byte {first}); "
                          f"acceptable, oldest first: "
                          + "; ".join(label for label, _ in cands)
                          + f"; durable mark {rec.durable_mark}")
            torn += verdict == "torn"
            baseline[blk] = value
        return len(blocks), torn, wrong_rebuilt

    def full_read(self, h, size, baseline, what):
        """Every block of the array holds its recorded value."""
        step = 4 * MIB
        for off in range(0, size, step):
            n = min(step, size - off)
            data = h.pread(n, off)
            for k in range(n // BLK):
                blk = off // BLK + k
                if data[k * BLK:(k + 1) * BLK] != value_of(
                        baseline.get(blk, 0), blk):
                    self.fail(f"{what}: block {blk} (array byte {blk * BLK}"
                              f", slot/stripe {member_of(blk)}) changed "
                              f"though no write touched it this round")

    def crash_rounds(self, bitmap, rounds, seed):
        mode = "bitmap" if bitmap else "no bitmap"
        d, paths, size = self.make_array(
            "bm" if bitmap else "nobm", MEMBER, bitmap)
        ctl = os.path.join(d, "ctl.sock")
        rng = random.Random(seed)
        baseline = {}
        results = []
        for rnd in range(rounds):
            what = f"{mode} round {rnd}"
            # Every third round crashes twice: the second time during the
            # resync the first crash started, with writers running.
            double = rnd % 3 == 1
            # Some rounds are killed during a clean shutdown.
            term = rng.uniform(0, 0.6) if rnd % 3 == 2 else None
            t0 = time.time()
            rec = Recorder(size, rng, wide=double)
            phase = rng.uniform(0.2, 1.5)
            srv = Server(d, paths, extra=[f"control={ctl}"])
            rec.run(srv, phase, rng, term_first=term)
            self.assertEqual(rec.errors, [], what)
            resync_at_kill = None
            if double:
                # Random writes were all over the array: many regions to
                # resync. Serve again and write at once, and kill while
                # the resync runs.
                rec.seal()
                rec.new_windows(rng)
                srv = Server(d, paths, extra=[f"control={ctl}"])
                phase2 = rng.uniform(0.05, 0.3)
                sample = {}

                def until_kill():
                    time.sleep(phase2)
                    sample.update(raw_detail(ctl))

                rec.run(srv, 0, rng, during=until_kill)
                self.assertEqual(rec.errors, [], what)
                resync_at_kill = sample["resyncing"]
            sbs = [sb_fields(p) for p in paths]
            dirty_sb = array_dirty(sbs)
            sb_split = len({s["events"] for s in sbs}) > 1
            bm = [bitmap_dirty(p) for p in paths]
            if bitmap:
                self.assertTrue(all(b is not None for b in bm), what)
                dirty_bits = max(b[0] for b in bm)
                self.assertEqual(bm[0][2], BITMAP_CHUNK)
            else:
                self.assertEqual(bm, [None] * DISKS, what)
                dirty_bits = None
            # Serve again: resync in the background, wait for it.
            srv = Server(d, paths, extra=[f"control={ctl}"])
            try:
                det = wait_resync(ctl)
                c = det["counters"]
                h = srv.connect()
                checked, torn, _ = self.verify(h, rec, baseline, what)
                if rnd == rounds - 1:
                    self.full_read(h, size, baseline, what)
                h.shutdown()
            finally:
                rc = srv.stop()
            out = srv.output()
            self.assertEqual(rc, 0, f"{what}: nbdkit exited {rc}: {out}")
            after = [sb_fields(p) for p in paths]
            self.assertFalse(array_dirty(after), what)
            # Members left one event apart by a kill during a superblock
            # write stay so while nothing writes a superblock again (see
            # test_two_crashes_in_superblock_writes); counted, not failed.
            split_after = len({s["events"] for s in after}) > 1
            offline_check(self, paths, what)
            r = dict(round=rnd, double=double, phase_s=round(phase, 2),
                     term_ms=None if term is None else round(term * 1000),
                     term_exit=rec.term_exit,
                     dirty_sb=dirty_sb, sb_split=sb_split,
                     sb_split_after_stop=split_after,
                     dirty_bits=dirty_bits,
                     resync_bytes=c["resync_bytes"],
                     resync_bitmap_chunks=c["resync_bitmap_chunks"],
                     resynced_stripes=c["resynced_stripes"],
                     resync_repairs=c["resync_repairs"],
                     blocks_checked=checked, torn=torn,
                     second_crash_mid_resync=resync_at_kill,
                     secs=round(time.time() - t0, 2), **rec.summary())
            results.append(r)
            print(f"crash: {mode}: " + json.dumps(r), file=sys.stderr,
                  flush=True)
            # A round killed after its clean shutdown marked the array
            # clean, or while every writer waited in a slow flush for more
            # than md's 200 ms safemode, finds the array clean: no resync
            # then, but the data and parity checks still hold. Most rounds
            # must be dirty (checked below).
            if dirty_sb:
                self.assertIn("resync: done:", out, what)
            member_data = det["member_bytes"]
            if bitmap:
                self.assertLessEqual(c["resync_bitmap_chunks"], dirty_bits,
                                     what)
                self.assertLessEqual(
                    c["resync_bytes"], 2 * dirty_bits * BITMAP_CHUNK,
                    f"{what}: resync read more than 2 x dirty regions x "
                    f"bitmap chunk")
                if not double:  # (double rounds dirty the whole array)
                    self.assertLessEqual(c["resync_bytes"],
                                         member_data // 4, what)
            elif dirty_sb and not double:
                self.assertEqual(c["resync_bytes"], member_data,
                                 f"{what}: a dirty array without a bitmap "
                                 f"resyncs every (filled) stripe")
            else:
                self.assertLessEqual(c["resync_bytes"], member_data, what)
        dirty = sum(r["dirty_sb"] for r in results)
        self.assertGreaterEqual(dirty * 2, len(results),
                                f"{mode}: most rounds found the array clean "
                                f"after kill -9 during writes")
        self.assertGreater(sum(r["durable"] for r in results), 0, mode)
        return results

    def test_kill9_rounds(self):
        if ROUNDS is None:
            with_bm, without = DEFAULT_ROUNDS
        else:
            with_bm, without = (ROUNDS + 1) // 2, ROUNDS // 2
        t0 = time.time()
        res = {}
        for bitmap, n, seed in ((True, with_bm, 11), (False, without, 12)):
            if n == 0:
                continue
            with self.subTest(bitmap=bitmap):
                res[bitmap] = self.crash_rounds(bitmap, n, seed)
        total = sum(len(v) for v in res.values())
        lines = [f"crash: {total} rounds in {time.time() - t0:.1f} s"]
        mean = {}
        for bitmap, rs in res.items():
            name = "bitmap" if bitmap else "no bitmap"
            for double in (False, True):
                sub = [r for r in rs if r["double"] == double]
                if not sub:
                    continue
                rb = [r["resync_bytes"] for r in sub]
                dirty = [r["resync_bytes"] for r in sub if r["dirty_sb"]]
                if not double and dirty:
                    mean[bitmap] = sum(dirty) / len(dirty)
                bits = [r["dirty_bits"] for r in sub if r["dirty_bits"]]
                lines.append(
                    f"crash: {name}, {'crashed twice' if double else 'one crash'}"
                    f": {len(sub)} rounds, resync bytes per member: mean "
                    f"{sum(rb) / len(rb) / MIB:.2f} MiB, min {min(rb) / MIB:.2f}"
                    f", max {max(rb) / MIB:.2f} (member {MEMBER // MIB} MiB)"
                    + (f", dirty bits mean {sum(bits) / len(bits):.1f}"
                       if bits else "")
                    + f", dirty after kill {sum(r['dirty_sb'] for r in sub)}"
                    + f", killed mid-superblock-write "
                      f"{sum(r['sb_split'] for r in sub)}"
                    + (f", killed mid-resync "
                       f"{sum(bool(r['second_crash_mid_resync']) for r in sub)}"
                       if double else "")
                    + f", torn blocks {sum(r['torn'] for r in sub)}")
        print("\n".join(lines), file=sys.stderr, flush=True)
        if True in mean and False in mean:
            # One-crash rounds that found the array dirty.
            self.assertLess(mean[True] * 4, mean[False],
                            "the bitmap does not shrink the resync")

    def test_detail_json_has_resync_counters(self):
        """`uraid detail --control SOCK --json` carries the counters and
        the bitmap the control protocol reports (resync_bytes,
        resync_bitmap_chunks, the bitmap's dirty count)."""
        d = os.path.join(self.tmp, "j")
        os.makedirs(d)
        paths = make_members(d, 3, 16 * MIB)
        run_tool("create", "--force", "--assume-clean", "--bitmap-chunk",
                 "1M", *paths)
        ctl = os.path.join(d, "ctl.sock")
        srv = Server(d, paths, extra=[f"control={ctl}"])
        try:
            tool = control_detail(ctl)
            raw = raw_detail(ctl)
        finally:
            srv.stop()
        self.assertEqual(set(raw["counters"]) - set(tool["counters"]), set(),
                         "counters missing from uraid detail --json")
        self.assertIn("bitmap", tool, "uraid detail --json has no bitmap "
                      "object (the control reply has one)")
        self.assertEqual(tool["bitmap"]["chunk_bytes"], MIB)
        self.assertEqual(tool["bitmap"], raw["bitmap"])

    def test_two_crashes_in_superblock_writes(self):
        """Two crashes, each during a superblock write, must leave members
        that assemble. Superblocks go to the members one after another
        (highest slot first, so that a reshape's new members get theirs
        before the old ones), so a crash in the middle leaves some members one
        event behind, which assembly accepts -- but it does not bring them
        up to date. A second crash in the middle of the next superblock
        write then leaves them two events behind: "stale", refused, and
        with two of them the array cannot start at all although every
        member holds current data.

        The members are NBD exports (nbdkit's file plugin), one of them
        behind the delay filter, so that its superblock write is in flight
        for seconds and the crash (kill -9 of every server, members too)
        lands inside that write:
          crash 1: the clean mark (200 ms after the last write) has
                   reached slots 3 and 2, slot 1 is delayed;
          crash 2: the next start's first write: its active mark has
                   reached slot 3, slot 2 is delayed.
        Then all four members must assemble, resync, verify and check."""
        d = os.path.join(self.tmp, "sb")
        os.makedirs(d)
        paths = make_members(d, DISKS, 16 * MIB)
        run_tool("create", "--force", "--assume-clean", "--bitmap", "none",
                 *paths)
        socks = [os.path.join(d, f"m{i}.sock") for i in range(DISKS)]
        uris = [f"nbd+unix:///?socket={s}" for s in socks]
        delay_s = 4

        def start_members(delayed):
            procs = []
            for i, (p, sock) in enumerate(zip(paths, socks)):
                pid = sock + ".pid"
                for f in (sock, pid):
                    if os.path.exists(f):
                        os.unlink(f)
                cmd = ["nbdkit", "-U", sock, "-P", pid, "-f",
                       "--exit-with-parent"]
                if i == delayed:
                    cmd += ["--filter=delay"]
                cmd += ["file", f"file={p}"]
                if i == delayed:
                    cmd += [f"delay-write={delay_s}"]
                procs.append(subprocess.Popen(cmd))
                deadline = time.time() + 20
                while not os.path.exists(pid):
                    self.assertLess(time.time(), deadline, "member server")
                    time.sleep(0.01)
            return procs

        def crash(srv, procs):
            srv.stop(signal.SIGKILL)  # the array first, then its "disks"
            for pr in procs:
                pr.kill()
                pr.wait()

        def state():
            return [(s["events"], s["resync_offset"] != MAX_SECTOR)
                    for s in map(sb_fields, paths)]

        block = block_data(1, 0)
        # Crash 1, inside the clean mark's superblock writes.
        procs = start_members(delayed=1)
        srv = Server(d, uris)
        try:
            h = srv.connect()
            h.pwrite(block, 0)  # waits for slot 1's active mark
            h.flush()
            time.sleep(1.5)  # the clean mark starts after 200 ms
        finally:
            crash(srv, procs)
        s1 = state()
        top = max(e for e, _ in s1)
        self.assertEqual(s1, [(top - 1, True)] * 2 + [(top, False)] * 2,
                         "crash 1 did not land where planned")
        # Crash 2, inside the next start's active mark.
        procs = start_members(delayed=2)
        srv = Server(d, uris)
        try:
            h = srv.connect()
            h.aio_pwrite(block_data(2, 1), BLK)  # marks the array active
            time.sleep(1.5)
        finally:
            crash(srv, procs)
        s2 = state()
        print(f"crash: superblocks (events, dirty) after crash 1: {s1}, "
              f"after crash 2: {s2}", file=sys.stderr, flush=True)
        # Every member holds current data: the array has to start.
        procs = start_members(delayed=None)
        try:
            ctl = os.path.join(d, "ctl.sock")
            srv = refused = None
            try:
                srv = Server(d, uris, extra=[f"control={ctl}"])
            except RuntimeError as e:
                refused = str(e)
            self.assertIsNone(refused, "the array does not start after two "
                              "crashes in superblock writes (superblocks "
                              f"(events, dirty) per slot: {s2})")
            try:
                wait_resync(ctl)
                h = srv.connect()
                self.assertEqual(h.pread(BLK, 0), block)
                # The second write was never acknowledged: old or new.
                self.assertIn(h.pread(BLK, BLK),
                              (bytes(BLK), block_data(2, 1)))
                h.shutdown()
            finally:
                self.assertEqual(srv.stop(), 0, srv.output())
        finally:
            for pr in procs:
                pr.kill()
                pr.wait()
        offline_check(self, paths, "after two crashes")

    def test_resync_obeys_speed_limits(self):
        """md throttles the resync after an unclean shutdown by
        sync_speed_min/max like every other sync action; uraid shows it as
        job "resync" and `uraid set --speed-max` is documented to bound
        jobs. Set 1000 KiB/s at once after the start: one second later
        the resync must not have read much more than 1 MB per member."""
        d, paths, size = self.make_array("speed", 32 * MIB, bitmap=False)
        ctl = os.path.join(d, "ctl.sock")
        # safe-mode-delay=0: still active at the kill, however late it comes.
        srv = Server(d, paths, extra=["safe-mode-delay=0"])
        h = srv.connect()
        h.pwrite(bytes(BLK), 0)  # the array goes active
        srv.stop(signal.SIGKILL)
        self.assertEqual(sb_fields(paths[0])["resync_offset"], 0)
        srv = Server(d, paths, extra=[f"control={ctl}"])
        try:
            control_call(ctl, {"cmd": "set", "speed_min": 100,
                               "speed_max": 1000})
            t0 = time.time()
            before = raw_detail(ctl)["resync_bytes"]
            time.sleep(1)
            after = raw_detail(ctl)
            elapsed = time.time() - t0
            control_call(ctl, {"cmd": "set", "speed_max": 200000})
            wait_resync(ctl)
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        done = after["resync_bytes"] - before
        self.assertLessEqual(
            done, 2 * 1000 * 1024 * elapsed + MIB,
            f"the resync read {done / MIB:.1f} MiB per member in "
            f"{elapsed:.1f} s at speed_max 1000 KiB/s "
            f"(resyncing: {after['resyncing']})")

    def test_dirty_degraded(self):
        """Fail a member via the control socket while writing, kill -9:
        the survivors are dirty and degraded. Serving them is refused
        (naming both) and writes nothing; force=true serves them and the
        durable data verifies."""
        for bitmap in (True, False):
            with self.subTest(bitmap=bitmap):
                self.dirty_degraded(bitmap)

    def dirty_degraded(self, bitmap):
        what = f"dirty degraded ({'bitmap' if bitmap else 'no bitmap'})"
        rng = random.Random(21 if bitmap else 22)
        failed = 1
        # A kill that lands while every writer waits in a slow flush past
        # the 200 ms safemode finds the array clean (and it would start):
        # then try again on a fresh array.
        for attempt in range(3):
            d, paths, size = self.make_array(
                f"dd-{int(bitmap)}-{attempt}", 16 * MIB, bitmap)
            ctl = os.path.join(d, "ctl.sock")
            baseline = {}
            rec = Recorder(size, rng)
            srv = Server(d, paths, extra=[f"control={ctl}"])

            def fail_member():
                time.sleep(0.3)
                r = run_tool("fail", "--control", ctl, paths[failed])
                self.assertIn("faulty", r.stdout)
                time.sleep(rng.uniform(0.2, 0.6))  # degraded writes

            rec.run(srv, 0, rng, during=fail_member)
            self.assertEqual(rec.errors, [], what)
            survivors = [p for i, p in enumerate(paths) if i != failed]
            sbs = [sb_fields(p) for p in survivors]
            if array_dirty(sbs):
                break
            print(f"crash: {what}: clean after the kill, again: {sbs}",
                  file=sys.stderr, flush=True)
        else:
            self.fail(f"{what}: survivors never dirty after kill -9")

        def digest():
            sums = []
            for p in paths:
                with open(p, "rb") as f:
                    sums.append(hashlib.sha256(f.read()).hexdigest())
            return sums

        roles = json.loads(run_tool("examine", "--json",
                                    *survivors).stdout)
        for r in roles:
            self.assertEqual(r["array_state"][failed], ".",
                             f"{what}: slot {failed} not failed: {r}")
        before = digest()
        out = start_fails(d, survivors, [f"control={ctl}"])
        print(f"crash: {what}: refused: "
              + next(l for l in out.splitlines() if "dirty" in l),
              file=sys.stderr, flush=True)
        self.assertIn("dirty", out, f"{what}: {out}")
        self.assertIn("degraded", out, f"{what}: {out}")
        self.assertEqual(before, digest(), f"{what}: the refused start "
                         "wrote to the members")
        # uraid serve refuses as well.
        r = run_tool("serve", "--socket", os.path.join(d, "s.sock"),
                     *survivors, check=False)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("dirty", r.stderr)
        self.assertEqual(before, digest())

        srv = Server(d, survivors, extra=[f"control={ctl}", "force=true"])
        try:
            det = control_detail(ctl)
            self.assertTrue(det["degraded"], det)
            h = srv.connect()
            checked, torn, wrong = self.verify(h, rec, baseline, what,
                                               failed_slot=failed)
            # Still writable, degraded: a flushed write reads back.
            h.pwrite(b"\x5a" * BLK * 4, 0)
            h.flush()
            self.assertEqual(h.pread(BLK * 4, 0), b"\x5a" * BLK * 4)
            h.shutdown()
        finally:
            rc = srv.stop()
        out = srv.output()
        self.assertEqual(rc, 0, f"{what}: {out}")
        self.assertIn("dirty degraded", out)
        print(f"crash: {what}: " + json.dumps(dict(
            blocks_checked=checked, torn=torn,
            rebuilt_wrong_in_torn_stripes=wrong, **rec.summary())),
            file=sys.stderr, flush=True)


if __name__ == "__main__":
    if "--rounds" in sys.argv:
        i = sys.argv.index("--rounds")
        ROUNDS = int(sys.argv[i + 1])
        del sys.argv[i:i + 2]
    elif os.environ.get("URAID_CRASH_ROUNDS"):
        ROUNDS = int(os.environ["URAID_CRASH_ROUNDS"])
    harness.main()
