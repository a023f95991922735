# SPDX-License-Identifier: MIT
"""kill -9 during online reshapes (grow 3->4, grow 4->5, layout change).

Each round, on a fresh array of small file members:
  1. the array is created (`uraid create`), served (nbdkit + control
     socket) and filled with a known pattern through NBD;
  2. the reshape is started over the control socket with the speed limited
     (min = max), so it takes about a second and a half;
  3. a writer on its own NBD connection writes random 4 KiB-aligned blocks
     (one to four) and flushes every few writes, recording what each flush
     made durable, while a reader checks blocks nobody is writing;
  4. nbdkit is killed with SIGKILL at a random moment of the reshape;
  5. in some rounds `mdadm --examine` reads a member and must show the
     reshape (Reshape pos'n, Delta Devices or New Layout) when the kill left
     one in progress;
  6. the members are served again: the reshape resumes by itself; the speed
     limit is lifted and the test waits until it completes;
  7. every block must hold its last durable value or a later one (the
     crash test's rule: a write the kill interrupted may or may not have
     landed, an acknowledged and flushed one must have), and the grown part
     reads as zeros;
  8. the server stops cleanly; the offline `uraid check` finds no stripe
     with bad parity, and the member images are byte for byte what md's
     layout puts where for the new shape (this file's own model from the md
     reference, harness.md_place), at the data offset the superblock names.

Rounds: URAID_RESHAPE_ROUNDS (default 30, split over the three kinds).
"""

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
import shutil

import harness
from harness import Server, control_call, make_members, md_place, run_tool

MIB = 1 << 20
BLK = 4096
MEMBER = 16 * MIB
CHUNK = 64 * 1024
SB = 4096
KINDS = [  # (name, disks, grow request, new disks, new layout number)
    ("grow 3->4", 3, {"raid_devices": 4}, 4, 2),
    ("grow 4->5", 4, {"raid_devices": 5}, 5, 2),
    ("layout ls->ra", 4, {"layout": "right-asymmetric"}, 4, 1),
]


def block_bytes(block, gen):
    """The contents of `block` as written by generation `gen` (0 = fill)."""
    return struct.pack("<QQ", block, gen) * (BLK // 16)


def superblock(path):
    """(data_offset bytes, raid_disks, layout, feature_map) from the v1.2
    superblock (md_p.h offsets)."""
    with open(path, "rb") as f:
        f.seek(SB)
        sb = f.read(256)
    feature_map, = struct.unpack_from("<I", sb, 8)
    layout, = struct.unpack_from("<I", sb, 76)
    raid_disks, = struct.unpack_from("<I", sb, 92)
    data_offset, = struct.unpack_from("<Q", sb, 128)
    return data_offset * 512, raid_disks, layout, feature_map


class Oracle:
    """Per block: every write to it this round, in order, and the index of
    the last durable one (-1: the fill). A block may hold the durable value
    or any later one (in flight or not yet flushed)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seq = 0
        self.hist = {}     # block -> [[gen, done_seq or None]]
        self.durable = {}  # block -> index into hist
        self.pending = []  # [block, index, entry] not yet durable

    def start(self, blocks, gen):
        """Before the write is sent: from now on it may land."""
        entries = []
        with self.lock:
            for b in blocks:
                e = [gen, None]
                h = self.hist.setdefault(b, [])
                h.append(e)
                self.pending.append((b, len(h) - 1, e))
                entries.append(e)
        return entries

    def done(self, entries):
        with self.lock:
            self.seq += 1
            for e in entries:
                e[1] = self.seq

    def flush_issue(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def flushed(self, issue):
        with self.lock:
            keep = []
            for b, i, e in self.pending:
                if e[1] is not None and e[1] < issue:
                    self.durable[b] = max(self.durable.get(b, -1), i)
                else:
                    keep.append((b, i, e))
            self.pending = keep

    def allowed(self, block):
        with self.lock:
            h = self.hist.get(block, [])
            d = self.durable.get(block, -1)
            gens = [g for g, _ in h[max(d, 0):]]
            return gens if d >= 0 else [0] + gens

    def touched(self, block):
        with self.lock:
            return block in self.hist


class ReshapeCrashTest(unittest.TestCase):

    def round(self, tmp, kind_index, rnd, rng, examine):
        name, disks, request, new_disks, new_layout = KINDS[kind_index]
        members = make_members(tmp, disks, MEMBER)
        extra = []
        if new_disks > disks:
            extra = [os.path.join(tmp, f"x{i}.img")
                     for i in range(new_disks - disks)]
            for p in extra:
                with open(p, "wb") as f:
                    f.truncate(MEMBER)
        bitmap = ["--bitmap", "internal", "--bitmap-chunk", "1M"] \
            if rnd % 2 == 0 else ["--bitmap", "none"]
        run_tool("create", "--chunk", "64K", "--assume-clean", *bitmap,
                 *members)
        ctl = os.path.join(tmp, "ctl.sock")
        srv = Server(tmp, members, extra=[f"control={ctl}"])
        h = srv.connect()
        size = h.get_size()
        nblocks = size // BLK
        fill = b"".join(block_bytes(b, 0) for b in range(nblocks))
        for off in range(0, size, MIB):
            h.pwrite(fill[off:off + MIB], off)
        h.flush()
        control_call(ctl, {"cmd": "set", "speed_min": 12000,
                           "speed_max": 12000})
        oracle = Oracle()
        req = {"cmd": "grow", **request}
        if extra:
            req["add"] = extra
        control_call(ctl, req)

        stop = threading.Event()
        errors = []

        def writer():
            w = srv.connect()
            gen = 1000 * (rnd + 1)
            n = 0
            try:
                while not stop.is_set():
                    first = rng.randrange(nblocks - 4)
                    count = rng.randint(1, 4)
                    gen += 1
                    data = b"".join(block_bytes(first + i, gen)
                                    for i in range(count))
                    entries = oracle.start(range(first, first + count), gen)
                    w.pwrite(data, first * BLK)
                    oracle.done(entries)
                    n += 1
                    if n % 5 == 0:
                        issue = oracle.flush_issue()
                        w.flush()
                        oracle.flushed(issue)
            except Exception:  # the kill ends the connection
                pass

        def reader():
            r = srv.connect()
            rrng = random.Random(rnd)
            try:
                while not stop.is_set():
                    b = rrng.randrange(nblocks)
                    if oracle.touched(b):
                        continue
                    got = r.pread(BLK, b * BLK)
                    if got != block_bytes(b, 0) and not oracle.touched(b):
                        errors.append(f"block {b} read {got[:16].hex()} "
                                      f"during the reshape")
            except Exception:
                pass

        threads = [threading.Thread(target=writer),
                   threading.Thread(target=reader)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.05, 1.6))
        srv.stop(signal.SIGKILL)
        stop.set()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])
        try:
            h.shutdown()
        except Exception:
            pass

        # What the kill left: in the middle of the reshape, mdadm shows it.
        _, _, _, fm = superblock(members[0])
        if examine and fm & 4 and shutil.which("mdadm"):
            r = subprocess.run(["mdadm", "--examine", members[0]],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("Reshape pos'n", r.stdout)
            self.assertTrue("Delta Devices" in r.stdout or
                            "New Layout" in r.stdout, r.stdout)
            examine_seen = True
        else:
            examine_seen = False
        mid = bool(fm & 4)

        # Serve again (new members that never got a superblock left out).
        present = list(members)
        for p in extra:
            with open(p, "rb") as f:
                f.seek(SB)
                if f.read(4) == b"\xfc\x4e\x2b\xa9":
                    present.append(p)
        srv = Server(tmp, present, extra=[f"control={ctl}"])
        control_call(ctl, {"cmd": "set", "speed_min": 1000,
                           "speed_max": 2000000})
        deadline = time.time() + 120
        while True:
            d = control_call(ctl, {"cmd": "detail"})["detail"]
            if d["job"]["kind"] == "idle" and \
                    d["raid_disks"] == new_disks and \
                    d["layout"] == new_layout:
                break
            if time.time() > deadline:
                self.fail(f"{name}: reshape did not finish: {d}")
            if d["job"]["kind"] == "idle" and \
                    d["last_job"]["kind"] == "reshape" and \
                    d["last_job"]["result"] not in ("completed", ""):
                self.fail(f"{name}: reshape failed: {d['last_job']}")
            time.sleep(0.05)
        h = srv.connect()
        new_size = h.get_size()
        self.assertEqual(new_size, size // (disks - 1) * (new_disks - 1))
        image = bytearray()
        for off in range(0, new_size, MIB):
            image += h.pread(min(MIB, new_size - off), off)
        h.shutdown()
        bad = []
        for b in range(nblocks):
            got = bytes(image[b * BLK:(b + 1) * BLK])
            ok = any(got == block_bytes(b, g) for g in oracle.allowed(b))
            if not ok:
                bad.append(b)
        self.assertEqual(bad[:10], [],
                         f"{name} round {rnd}: {len(bad)} blocks hold "
                         f"neither their durable value nor a later one")
        self.assertEqual(image[size:], bytes(new_size - size),
                         f"{name}: the grown part is not zeros")
        self.assertEqual(srv.stop(), 0)

        # Offline: parity and md's placement for the new shape.
        all_members = present
        r = run_tool("check", "--json", *all_members)
        self.assertEqual(json.loads(r.stdout)["mismatches"], 0, r.stdout)
        offset, nd, layout, fm = superblock(members[0])
        self.assertEqual((nd, layout, fm & 4), (new_disks, new_layout, 0))
        by_role = {}
        for p in all_members:
            r = json.loads(run_tool("examine", "--json", p).stdout)
            r = r[0] if isinstance(r, list) else r
            by_role[r["slot"]] = p
        files = [open(by_role[i], "rb") for i in range(new_disks)]
        try:
            nchunks = new_size // CHUNK
            for c in rng.sample(range(nchunks), 64):
                disk, _, stripe = md_place(c, new_disks, new_layout)
                files[disk].seek(offset + stripe * CHUNK)
                self.assertEqual(files[disk].read(CHUNK),
                                 bytes(image[c * CHUNK:(c + 1) * CHUNK]),
                                 f"{name}: chunk {c} is not where md puts it")
        finally:
            for f in files:
                f.close()
        return mid, examine_seen

    def test_kill9_during_reshapes(self):
        rounds = int(os.environ.get("URAID_RESHAPE_ROUNDS", "30"))
        rng = random.Random(int(os.environ.get("URAID_RESHAPE_SEED", "5")))
        mids = examined = 0
        for rnd in range(rounds):
            kind = rnd % len(KINDS)
            with tempfile.TemporaryDirectory() as tmp:
                t0 = time.time()
                mid, seen = self.round(tmp, kind, rnd, rng,
                                       examine=(rnd % 3 == 0))
                mids += mid
                examined += seen
                print(f"reshape round {rnd} ({KINDS[kind][0]}): killed "
                      f"{'mid-reshape' if mid else 'outside the copy'}, "
                      f"resumed and verified in {time.time() - t0:.1f}s",
                      file=sys.stderr)
        # Most kills land inside the copy.
        self.assertGreaterEqual(mids, rounds // 2)
        if shutil.which("mdadm"):
            self.assertGreater(examined, 0)


if __name__ == "__main__":
    harness.main()
