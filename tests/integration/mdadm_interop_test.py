"""Interop: members made by `uraid create` read back in md's own tools.
`mdadm --examine` must find the checksum correct and report the same level,
layout, chunk, raid devices, array size, data offset, events and role as
`uraid examine --json`; `blkid` must see a linux_raid_member with our
uuid. Also after the array has been served, written and a member failed."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import harness
from harness import Server, make_members, run_tool

MIB = 1 << 20


def mdadm_examine(path):
    r = subprocess.run(["mdadm", "--examine", path], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise AssertionError(f"mdadm --examine {path}: {r.stderr}")
    fields = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([A-Za-z' ]+?) : (.*)$", line)
        if m:
            fields[m.group(1).strip()] = m.group(2).strip()
    return fields


def blkid(path):
    r = subprocess.run(["blkid", "-p", "-o", "export", path],
                       capture_output=True, text=True)
    return dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)


@unittest.skipUnless(shutil.which("mdadm") and shutil.which("blkid"),
                     "mdadm and blkid are needed (apt-get install mdadm)")
class MdadmInteropTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-md-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def compare(self, path, expect_state="AAAA"):
        md = mdadm_examine(path)
        ours = json.loads(run_tool("examine", "--json", path).stdout)[0]
        self.assertRegex(md["Checksum"], r"^[0-9a-f]{1,8} - correct$",
                         f"mdadm rejects the checksum of {path}")
        self.assertEqual(int(md["Checksum"].split()[0], 16),
                         int(ours["checksum"], 16))
        self.assertEqual(md["Magic"], "a92b4efc")
        self.assertEqual(md["Version"], "1.2")
        self.assertEqual(md["Array UUID"], ours["array_uuid"])
        self.assertEqual(md["Device UUID"], ours["device_uuid"])
        self.assertEqual(md["Raid Level"], ours["raid_level"])
        self.assertEqual(int(md["Raid Devices"]), ours["raid_devices"])
        self.assertEqual(int(md["Events"]), ours["events"])
        self.assertEqual(md["Data Offset"],
                         f"{ours['data_offset_sectors']} sectors")
        self.assertEqual(md["Array Size"].split()[0],
                         str(ours["array_size_kib"]))
        self.assertEqual(md["Chunk Size"], f"{ours['chunk_size_kib']}K")
        self.assertEqual(md["Device Role"], ours["device_role"])
        self.assertEqual(md["State"], ours["state"])
        if ours["level"] == 5:
            self.assertEqual(md["Layout"], ours["layout"])
        self.assertEqual(md["Array State"].split()[0], expect_state)
        self.assertEqual(ours["array_state"], expect_state)
        b = blkid(path)
        self.assertEqual(b.get("TYPE"), "linux_raid_member")
        self.assertEqual(b.get("UUID", "").replace("-", ""),
                         ours["array_uuid"].replace(":", ""))
        self.assertEqual(b.get("LABEL"), ours["name"])
        return md, ours

    def test_every_layout_and_shape(self):
        shapes = [
            ("left-asymmetric", 3, "4K"), ("right-asymmetric", 4, "64K"),
            ("left-symmetric", 5, "512K"), ("right-symmetric", 8, "128K"),
            ("parity-first", 4, "1M"), ("parity-last", 3, "16K"),
        ]
        for layout, disks, chunk in shapes:
            with self.subTest(layout=layout, disks=disks, chunk=chunk):
                d = tempfile.mkdtemp(dir=self.tmp)
                paths = make_members(d, disks, 48 * MIB)
                run_tool("create", "--force", "--layout", layout, "--chunk",
                         chunk, "--name", "interop", *paths)
                for i, p in enumerate(paths):
                    md, ours = self.compare(p, "A" * disks)
                    self.assertEqual(md["Device Role"],
                                     f"Active device {i}")
                    self.assertEqual(md["Layout"], layout)
                    self.assertEqual(md["Name"], "interop")

    def test_raid4(self):
        paths = make_members(self.tmp, 4, 32 * MIB)
        run_tool("create", "--force", "--level", "4", *paths)
        for p in paths:
            md, _ = self.compare(p)
            self.assertEqual(md["Raid Level"], "raid4")

    def test_created_degraded(self):
        paths = make_members(self.tmp, 4, 32 * MIB)
        run_tool("create", "--force", paths[0], "missing", paths[2],
                 paths[3])
        for p in (paths[0], paths[2], paths[3]):
            self.compare(p, "A.AA")

    def test_after_serving_writes_and_a_failure(self):
        paths = make_members(self.tmp, 4, 32 * MIB)
        run_tool("create", "--force", *paths)
        srv = Server(self.tmp, paths)
        try:
            h = srv.connect()
            h.pwrite(os.urandom(4 * MIB), 0)
            h.flush()
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0)
        for p in paths:
            md, ours = self.compare(p)
            self.assertEqual(md["State"], "clean")
            self.assertGreater(ours["events"], 1)
        # Fail a member by making its file unreadable to the array: serve
        # with it left out, write, and the others record a missing slot.
        srv = Server(self.tmp, paths[1:])
        try:
            h = srv.connect()
            h.pwrite(os.urandom(MIB), 8 * MIB)
            h.flush()
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0)
        for p in paths[1:]:
            self.compare(p, ".AAA")
        # The left-out member is now stale and is refused by name.
        out = harness.start_fails(self.tmp, paths)
        self.assertIn("stale", out)
        self.assertIn("m0.img", out)


if __name__ == "__main__":
    harness.main()
