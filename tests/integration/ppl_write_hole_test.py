# SPDX-License-Identifier: MIT
"""The RAID5 write hole, closed by the partial parity log (issue 18).

Each round, on a PPL array (create --consistency-policy ppl) restored from
a filled copy:
  1. nbdkit serves the array; WRITERS connections send random partial-
     stripe writes (1..4 blocks of 4 KiB, never two overlapping ones in
     flight) into a small hot window;
  2. after a random time nbdkit is killed with SIGKILL while they write;
  3. one member is lost (left out, its file truncated to zero so nothing
     could read it);
  4. the survivors are served again WITHOUT force (run=true, md's --run,
     as the lost slot is not given): the start must succeed (md starts a
     dirty degraded PPL array), and every 4 KiB block of the hot window
     outside the writes in flight at the kill must read back exactly (its
     last completed write, or the fill); blocks some write was in flight
     to are not checked (old, new or torn are all allowed).
Blocks on the lost member are rebuilt from parity: a stripe whose data
reached its members while its parity did not would rebuild them wrong
without the log's replay.

A control round per other policy (bitmap, resync) does the same and
requires the degraded start without force to be refused, naming "dirty"
and "degraded" (today's rule, md's too).

ROUNDS (30 by default, about a minute; URAID_PPL_ROUNDS=N) rounds on the
PPL array. The writers' server runs without the stripe cache
(cache=0), so a completed write is on the members. Members are files: a
kill -9 loses nothing the kernel's page cache holds, so what is tested is the order of the engine's writes and the
replay, not a power cut.
"""

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import harness
from harness import Server, make_members, run_tool, start_fails

MIB = 1 << 20
BLK = 4096
DISKS = 4
MEMBER = 16 * MIB
CHUNK = 64 * 1024
WRITERS = 3
HOT = 2 * MIB  # random writes land in this much of the array
ROUNDS = int(os.environ.get("URAID_PPL_ROUNDS", "30"))


def block_data(wid, blk):
    """The 4 KiB that write `wid` puts in array block `blk` (0: the
    fill)."""
    return hashlib.shake_128(b"%d/%d" % (wid, blk)).digest(BLK)


class Writers:
    """Random non-overlapping partial writes on several connections; what
    completed and what was in flight when the server died."""

    def __init__(self, hot_blk, rng):
        self.lock = threading.Lock()
        self.hot_blk = hot_blk
        self.rng = rng
        self.next_wid = 1
        self.inflight = {}  # wid -> (blk, n)
        self.last_done = {}  # blk -> wid of its last completed write
        self.dead = []       # (blk, n) in flight at the kill or failed
        self.stop = threading.Event()

    def pick(self, rng):
        with self.lock:
            for _ in range(8):
                n = rng.choice([1, 1, 2, 4])
                blk = self.hot_blk + rng.randrange(HOT // BLK - n)
                if all(b + m <= blk or blk + n <= b
                       for b, m in self.inflight.values()):
                    wid = self.next_wid
                    self.next_wid += 1
                    self.inflight[wid] = (blk, n)
                    return wid, blk, n
        return None

    def worker(self, h, seed):
        import nbd
        rng = random.Random(seed)
        while not self.stop.is_set():
            p = self.pick(rng)
            if p is None:
                continue
            wid, blk, n = p
            data = b"".join(block_data(wid, b) for b in range(blk, blk + n))
            try:
                h.pwrite(data, blk * BLK)
            except nbd.Error:
                with self.lock:
                    self.dead.append(self.inflight.pop(wid))
                return
            with self.lock:
                del self.inflight[wid]
                for b in range(blk, blk + n):
                    self.last_done[b] = wid

    def run(self, srv, seconds):
        handles = [srv.connect() for _ in range(WRITERS)]
        threads = [threading.Thread(target=self.worker,
                                    args=(h, self.rng.randrange(1 << 30)))
                   for h in handles]
        for t in threads:
            t.start()
        try:
            time.sleep(seconds)
        finally:
            srv.stop(signal.SIGKILL)
            self.stop.set()
            for t in threads:
                t.join(timeout=60)
            for h in handles:
                try:
                    h.shutdown()
                except Exception:
                    pass
        assert not any(t.is_alive() for t in threads), "a writer hangs"
        with self.lock:
            self.dead.extend(self.inflight.values())
            self.inflight.clear()


def dirty(path):
    """The member's superblock says active (resync_offset != MaxSector)."""
    with open(path, "rb") as f:
        f.seek(4096 + 208)
        return int.from_bytes(f.read(8), "little") != 2**64 - 1


class PplWriteHoleTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-ppl-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def make_filled(self, policy):
        """A filled array with `policy`; returns (pristine copies, size)."""
        d = os.path.join(self.tmp, policy)
        os.makedirs(d)
        paths = make_members(d, DISKS, MEMBER)
        run_tool("create", "--force", "--assume-clean", "--chunk",
                 f"{CHUNK // 1024}K", "--consistency-policy", policy, *paths)
        srv = Server(d, paths)
        try:
            h = srv.connect()
            size = h.get_size()
            for off in range(0, size, MIB):
                h.pwrite(b"".join(block_data(0, b) for b in
                                  range(off // BLK, (off + MIB) // BLK)),
                         off)
            h.flush()
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        pristine = []
        for p in paths:
            shutil.copyfile(p, p + ".pristine")
            pristine.append(p + ".pristine")
        return d, paths, pristine, size

    def crash_round(self, d, paths, pristine, size, rng):
        """Restore, write, kill -9, lose a member. Returns (survivors,
        writers, lost slot, dirty)."""
        for p, q in zip(paths, pristine):
            shutil.copyfile(q, p)
        hot_blk = rng.randrange(0, (size - HOT) // BLK)
        w = Writers(hot_blk, rng)
        # cache=0: no stripe cache, which acknowledges a write before it
        # reaches the members (durable only at a flush); without it a
        # completed write is on the members and must read back exactly.
        srv = Server(d, paths, extra=["cache=0"])
        w.run(srv, rng.uniform(0.2, 0.8))
        was_dirty = dirty(paths[0])
        lost = rng.randrange(DISKS)
        os.truncate(paths[lost], 0)  # gone: nothing can read it
        survivors = [p for i, p in enumerate(paths) if i != lost]
        return survivors, w, lost, was_dirty

    def test_ppl_rounds(self):
        d, paths, pristine, size = self.make_filled("ppl")
        rng = random.Random(18)
        dirty_rounds = checked = torn = 0
        for r in range(ROUNDS):
            survivors, w, lost, was_dirty = self.crash_round(
                d, paths, pristine, size, rng)
            dirty_rounds += was_dirty
            in_flight = {}
            for blk, n in w.dead:
                for b in range(blk, blk + n):
                    in_flight[b] = True
            # run=true: start without the lost slot (md's --run); no force.
            srv = Server(d, survivors, extra=["run=true"])
            try:
                h = srv.connect()
                data = h.pread(HOT, w.hot_blk * BLK)
                h.shutdown()
            finally:
                out = srv.output()
                self.assertEqual(srv.stop(), 0, out)
            for k in range(HOT // BLK):
                blk = w.hot_blk + k
                got = data[k * BLK:(k + 1) * BLK]
                want = block_data(w.last_done.get(blk, 0), blk)
                if blk in in_flight:
                    continue  # the write in flight may or may not be there
                checked += 1
                self.assertEqual(
                    got, want,
                    f"round {r}: block {blk} (array byte {blk * BLK}), "
                    f"written by no write in flight, reads back wrong "
                    f"with slot {lost} lost; server log:\n{out}")
            print(f"ppl round {r}: slot {lost} lost, dirty={was_dirty}, "
                  f"{len(w.last_done)} blocks written, {len(w.dead)} writes "
                  f"in flight", file=sys.stderr, flush=True)
        print(f"ppl: {ROUNDS} rounds, {dirty_rounds} dirty, {checked} "
              f"blocks checked", file=sys.stderr, flush=True)
        # Most kills land while the array is dirty (writes every few ms).
        self.assertGreater(dirty_rounds, ROUNDS // 2)

    def test_other_policies_refuse_the_degraded_start(self):
        for policy in ("bitmap", "resync"):
            with self.subTest(policy=policy):
                d, paths, pristine, size = self.make_filled(policy)
                rng = random.Random(policy)
                for _ in range(10):
                    survivors, w, lost, was_dirty = self.crash_round(
                        d, paths, pristine, size, rng)
                    if was_dirty:
                        break
                self.assertTrue(was_dirty, "no kill found the array dirty")
                out = start_fails(d, survivors, ["run=true"])
                self.assertIn("dirty", out)
                self.assertIn("degraded", out)


if __name__ == "__main__":
    harness.main()
