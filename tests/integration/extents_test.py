# SPDX-License-Identifier: MIT
"""Extents through real nbdkit: `nbdinfo --map` on a mostly empty array
shows holes where no member holds data, and `nbdcopy` of it reads only the
data from the members (the plugin's member-read counters) while the copy
is byte-for-byte the array."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

import harness

MIB = 1 << 20


class ExtentsTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-ext-", dir="/tmp")
        self.members = harness.make_members(self.tmp, 4, 64 * MIB)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_map_shows_holes_and_nbdcopy_reads_only_data(self):
        if not shutil.which("nbdinfo") or not shutil.which("nbdcopy"):
            self.skipTest("nbdinfo/nbdcopy (libnbd-bin) missing")
        harness.run_tool("create", "--chunk", "64K", "--assume-clean",
                         *self.members)
        # Write two MiB and read the whole array back as the reference.
        srv = harness.Server(self.tmp, self.members)
        try:
            h = srv.connect()
            size = h.get_size()
            h.pwrite(os.urandom(MIB), 10 * MIB)
            h.pwrite(os.urandom(MIB), 100 * MIB)
            h.flush()
            want = b"".join(h.pread(min(16 * MIB, size - o), o)
                            for o in range(0, size, 16 * MIB))
            h.shutdown()
            del h
        finally:
            srv.stop()
        # A fresh server, counting member reads, for the map and the copy.
        stats = os.path.join(self.tmp, "stats.json")
        srv = harness.Server(self.tmp, self.members,
                             extra=[f"stats={stats}"])
        try:
            r = subprocess.run(["nbdinfo", "--map", "--json", srv.uri],
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            extents = json.loads(r.stdout)
            holes = sum(e["length"] for e in extents if e["type"] & 2)
            data = [(e["offset"], e["length"]) for e in extents
                    if not e["type"] & 2]
            self.assertEqual(sum(e["length"] for e in extents), size)
            # The two written MiB (chunk-aligned here) and nothing else.
            self.assertEqual(data, [(10 * MIB, MIB), (100 * MIB, MIB)],
                             r.stdout[:2000])
            self.assertEqual(holes, size - 2 * MIB)
            out = os.path.join(self.tmp, "copy.img")
            r = subprocess.run(["nbdcopy", srv.uri, out], capture_output=True,
                               text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
        finally:
            srv.stop()
        with open(out, "rb") as f:
            self.assertEqual(f.read(), want, "the copy is the array")
        with open(stats) as f:
            c = json.load(f)
        # The copy read the data (2 MiB), not the whole array.
        self.assertLess(c["member_read_bytes"], 8 * MIB, c)


if __name__ == "__main__":
    harness.main()
