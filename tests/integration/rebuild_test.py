# SPDX-License-Identifier: MIT
"""Failures, rebuilds, replace and scrubs on a served array, end to end:
nbdkit serving the plugin with a control socket, a libnbd writer that keeps
a reference copy and verifies reads while the admin acts through the
`uraid` tool: fail a member mid-run, add a spare and wait for the rebuild,
fail a different member, verify every byte; replace under load without a
degraded window; check after deliberate parity corruption finds exactly the
corrupted stripes and repair fixes them."""

import json
import os
import random
import subprocess
import tempfile
import threading
import time
import unittest

import harness
from harness import Server, make_members, md_place, run_tool

MIB = 1 << 20
CHUNK = 64 * 1024
MEMBER = 24 * MIB


def wait_path(path, timeout=10):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise AssertionError(f"{path} did not appear")
        time.sleep(0.02)


class Writer(threading.Thread):
    """Random writes (4 KiB to 300 KiB, 4 KiB aligned: the export's
    minimum block size) with a flush now and then, and
    reads checked against the reference, until stopped. Any mismatch or
    error is recorded and ends the thread."""

    def __init__(self, srv, ref, seed):
        super().__init__(daemon=True)
        self.h = srv.connect()
        self.ref = ref
        self.rng = random.Random(seed)
        self.stop_ev = threading.Event()
        self.errors = []
        self.ops = 0
        self.lock = threading.Lock()

    def run(self):
        total = len(self.ref)
        try:
            while not self.stop_ev.is_set():
                n = self.rng.choice([4096, 8192, 65536, 300 * 1024])
                off = self.rng.randrange(0, (total - n) // 4096) * 4096
                if self.rng.random() < 0.6:
                    data = self.rng.randbytes(n)
                    self.h.pwrite(data, off)
                    with self.lock:
                        self.ref[off:off + n] = data
                else:
                    got = self.h.pread(n, off)
                    if got != bytes(self.ref[off:off + n]):
                        self.errors.append(f"read {off}+{n} differs")
                        return
                if self.rng.random() < 0.05:
                    self.h.flush()
                self.ops += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(f"{type(e).__name__}: {e}")

    def finish(self):
        self.stop_ev.set()
        self.join(timeout=60)
        self.h.flush()
        # nbdkit waits for connected clients before it exits on SIGTERM.
        self.h.shutdown()


class RebuildTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-rebuild-")
        self.ctl = os.path.join(self.tmp, "ctl.sock")
        self.paths = make_members(self.tmp, 4, MEMBER)
        run_tool("create", "--force", "--assume-clean", "--chunk", "64K",
                 "--bitmap-chunk", "1M", *self.paths)
        self.srv = Server(self.tmp, self.paths,
                          extra=[f"control={self.ctl}"])
        wait_path(self.ctl)
        h = self.srv.connect()
        rng = random.Random(1)
        self.ref = bytearray(rng.randbytes(h.get_size()))
        for off in range(0, len(self.ref), 4 * MIB):
            h.pwrite(bytes(self.ref[off:off + 4 * MIB]), off)
        h.flush()
        h.shutdown()

    def tearDown(self):
        self.srv.stop()
        subprocess.run(["rm", "-rf", self.tmp])

    def tool(self, *args, check=True):
        return run_tool(*args, "--control", self.ctl, check=check)

    def detail(self):
        return json.loads(self.tool("detail", "--json").stdout)

    def new_member(self, name):
        p = os.path.join(self.tmp, name)
        with open(p, "wb") as f:
            f.truncate(MEMBER)
        return p

    def verify_all(self):
        h = self.srv.connect()
        for off in range(0, len(self.ref), 4 * MIB):
            got = h.pread(min(4 * MIB, len(self.ref) - off), off)
            self.assertEqual(got, bytes(self.ref[off:off + len(got)]),
                             f"array differs from the reference at {off}")
        h.shutdown()

    def test_fail_rebuild_then_fail_another(self):
        w = Writer(self.srv, self.ref, seed=2)
        w.start()
        time.sleep(0.5)
        self.tool("fail", self.paths[1])
        self.assertTrue(self.detail()["degraded"])
        spare = self.new_member("spare.img")
        # Slow enough that the writer overlaps the whole rebuild.
        self.tool("set", "--speed-min", "8M", "--speed-max", "8M")
        self.tool("add", "--wait", spare)
        w.finish()
        self.assertEqual(w.errors, [])
        self.assertGreater(w.ops, 50)
        d = self.detail()
        self.assertFalse(d["degraded"], d)
        self.assertEqual(d["slots"][1]["name"], os.path.realpath(spare))
        self.assertEqual(d["slots"][1]["state"], "active")
        self.assertEqual(d["last_job"]["kind"], "recover")
        self.assertEqual(d["last_job"]["result"], "completed")
        self.verify_all()
        # The rebuilt member now carries data: losing another one is fine.
        w2 = Writer(self.srv, self.ref, seed=3)
        w2.start()
        time.sleep(0.3)
        self.tool("fail", self.paths[2])
        time.sleep(0.3)
        w2.finish()
        self.assertEqual(w2.errors, [])
        self.assertTrue(self.detail()["degraded"])
        self.verify_all()

    def test_returning_member_rebuilds_only_regions_written_while_away(self):
        # The fill's bits go once the regions have been idle (daemon_sleep).
        deadline = time.time() + 30
        while self.detail()["bitmap"]["dirty_chunks"] > 0:
            self.assertLess(time.time(), deadline, "bits never cleared")
            time.sleep(0.2)
        self.tool("fail", self.paths[1])
        self.tool("remove", self.paths[1])
        # Two writes while it is away: array offset 0 (member region 0) and
        # 30 MiB (stripe 160, member offset 10 MiB: region 10 of 1 MiB).
        h = self.srv.connect()
        for off in (0, 30 * MIB):
            data = random.Random(off).randbytes(65536)
            h.pwrite(data, off)
            self.ref[off:off + len(data)] = data
        h.flush()
        h.shutdown()
        before = self.detail()["counters"]["recovered_stripes"]
        self.tool("add", "--wait", self.paths[1])
        d = self.detail()
        self.assertFalse(d["degraded"], d)
        self.assertEqual(d["slots"][1]["name"],
                         os.path.realpath(self.paths[1]))
        self.assertEqual(d["slots"][1]["state"], "active")
        self.assertEqual(d["last_job"]["result"], "completed")
        # Two regions of 1 MiB = 16 stripes of 64 KiB each were rebuilt,
        # not the whole member.
        self.assertEqual(d["counters"]["recovered_stripes"] - before, 32, d)
        self.verify_all()
        # Every stripe's parity agrees with the data.
        self.srv.stop()
        r = run_tool("check", "--json", *self.paths)
        self.assertEqual(json.loads(r.stdout)["mismatches"], 0, r.stdout)

    def test_replace_under_load_has_no_degraded_window(self):
        w = Writer(self.srv, self.ref, seed=4)
        w.start()
        seen_degraded = []
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                if self.detail()["degraded"]:
                    seen_degraded.append(True)
                time.sleep(0.05)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        new = self.new_member("new.img")
        self.tool("set", "--speed-min", "8M", "--speed-max", "8M")
        self.tool("replace", "--wait", self.paths[0], new)
        stop.set()
        watcher.join()
        w.finish()
        self.assertEqual(w.errors, [])
        self.assertEqual(seen_degraded, [])
        d = self.detail()
        self.assertEqual(d["slots"][0]["name"], os.path.realpath(new))
        self.assertEqual(d["last_job"]["kind"], "replace")
        self.verify_all()
        self.srv.stop()
        # The new member assembles in place of the old, parity consistent.
        members = [new] + self.paths[1:]
        r = run_tool("check", "--json", *members, check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.srv = Server(self.tmp, members, extra=[f"control={self.ctl}"])
        wait_path(self.ctl)
        self.verify_all()

    def test_check_finds_exactly_the_corrupted_stripes(self):
        # Corrupt parity of three stripes behind the server's back (same
        # files, so the page cache sees it).
        bad = [3, 50, 101]
        d = self.detail()
        offset = d["data_offset_bytes"]
        for s in bad:
            _, pd, _ = md_place(s * 3, 4, 2)  # left-symmetric, 4 disks
            with open(self.paths[pd], "r+b") as f:
                f.seek(offset + s * CHUNK + 777)
                b = f.read(1)
                f.seek(offset + s * CHUNK + 777)
                f.write(bytes([b[0] ^ 0xFF]))
        r = self.tool("check", "--wait", "--json", check=False)
        self.assertNotEqual(r.returncode, 0)  # mismatches found
        last = self.detail()["last_job"]
        self.assertEqual(last["kind"], "check")
        self.assertEqual(last["mismatches"], len(bad))
        self.assertEqual(last["first_mismatches"], bad)
        self.tool("repair", "--wait")
        self.assertEqual(self.detail()["last_job"]["mismatches"], len(bad))
        r = self.tool("check", "--wait", "--json")
        self.assertEqual(self.detail()["last_job"]["mismatches"], 0)
        self.verify_all()  # data was never touched


if __name__ == "__main__":
    harness.main()
