# SPDX-License-Identifier: MIT
"""uraid grow --update=bbl|no-bbl|force-no-bbl (offline): a bad-block log is
added where mdadm would find it, an empty one is removed, one with entries is
kept unless forced; mdadm --examine reads the result, and the array still
assembles and holds its data."""

import shutil
import struct
import subprocess
import tempfile
import unittest

import harness
from harness import make_members, run_tool

MIB = 1 << 20
SB = 4096  # the 1.2 superblock's byte offset


def mdadm_examine(path):
    return subprocess.run(["mdadm", "--examine", path], capture_output=True,
                          text=True).stdout


def set_bad_blocks_bit(path):
    """Sets BAD_BLOCKS (feature 8) in the member's superblock, with md's
    checksum: a member whose log md says lists entries."""
    with open(path, "r+b") as f:
        f.seek(SB)
        sb = bytearray(f.read(4096))
        fm = struct.unpack_from("<I", sb, 8)[0] | 8
        struct.pack_into("<I", sb, 8, fm)
        max_dev = struct.unpack_from("<I", sb, 220)[0]
        n = 256 + 2 * max_dev
        struct.pack_into("<I", sb, 216, 0)
        acc = sum(struct.unpack_from(f"<{n // 4}I", sb, 0))
        if n % 4:
            acc += struct.unpack_from("<H", sb, n - 2)[0]
        csum = ((acc & 0xFFFFFFFF) + (acc >> 32)) & 0xFFFFFFFF
        struct.pack_into("<I", sb, 216, csum)
        f.seek(SB)
        f.write(sb)


class BadBlockUpdateTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-bblu-")
        self.m = make_members(self.tmp, 4, 64 * MIB)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_add_remove_and_refuse(self):
        run_tool("create", "--no-bbl", "--chunk", "64K", "--assume-clean",
                 *self.m)
        self.assertNotIn("Bad Block Log", mdadm_examine(self.m[0]))
        run_tool("grow", "--update=bbl", *self.m)
        for p in self.m:
            self.assertIn("Bad Block Log : 512 entries available at offset "
                          "16 sectors", mdadm_examine(p))
        # The array still assembles (offline check reads every stripe).
        r = run_tool("check", *self.m, check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        # An empty log goes with no-bbl.
        run_tool("grow", "--update=no-bbl", *self.m)
        self.assertNotIn("Bad Block Log", mdadm_examine(self.m[0]))
        # One md says lists entries is kept, unless forced.
        run_tool("grow", "--update=bbl", *self.m)
        set_bad_blocks_bit(self.m[2])
        r = run_tool("grow", "--update=no-bbl", *self.m, check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("Cannot remove active bbl", r.stderr)
        self.assertIn("bad blocks present", mdadm_examine(self.m[2]))
        self.assertIn("Bad Block Log", mdadm_examine(self.m[0]),
                      "a refused update wrote a member")
        run_tool("grow", "--update=force-no-bbl", *self.m)
        for p in self.m:
            self.assertNotIn("Bad Block Log", mdadm_examine(p))

    def test_bad_input(self):
        run_tool("create", "--chunk", "64K", "--assume-clean", *self.m)
        r = run_tool("grow", "--update=bogus", *self.m, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown update", r.stderr)
        r = run_tool("grow", "--update=bbl", "--raid-devices", "5", *self.m,
                     check=False)
        self.assertEqual(r.returncode, 2)


if __name__ == "__main__":
    harness.main()
