# SPDX-License-Identifier: MIT
"""Interop: members made by `uraid create` read back in md's own tools.
`mdadm --examine` must find the checksum correct and report the same level,
layout, chunk, raid devices, array size, data offset, events and role as
`uraid examine --json`; `blkid` must see a linux_raid_member with our
uuid. Also after the array has been served, written and a member failed.
Consistency policies (create --consistency-policy ppl|resync|bitmap): the
PPL fields and md's empty PPL header as mdadm reads them; bad policy
options refused with nothing written.
The internal write-intent bitmap (on by default) as `mdadm -X` reads it
from a member on a read-only loop device: clean after create, dirty bits
after kill -9 of a server that was writing, clean again after the resync.
An external bitmap file (create --bitmap FILE) as `mdadm -X FILE` reads
it, through the same cycle, served with the plugin's bitmap=FILE.
The bad-block log create reserves, where mdadm --examine expects it, and
its list as mdadm --examine-badblocks and uraid examine --badblocks print
it."""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
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


def mdadm_x(dev):
    """`mdadm -X DEV` (--examine-bitmap) as {field: value}."""
    r = subprocess.run(["mdadm", "-X", dev], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"mdadm -X {dev} ({r.returncode}): "
                             f"{r.stdout}{r.stderr}")
    fields = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([A-Za-z ]+?) : (.*)$", line)
        if m:
            fields[m.group(1).strip()] = m.group(2).strip()
    return fields, r.stdout


def md_sb_csum(block, max_dev):
    """md's sb_csum of a 1.2 superblock block (its own field read as 0)."""
    n = 256 + 2 * max_dev
    b = bytearray(block[:n])
    b[216:220] = bytes(4)
    total = sum(int.from_bytes(b[i:i + 4], "little")
                for i in range(0, n - n % 4, 4))
    if n % 4:
        total += int.from_bytes(b[n - 2:n], "little")
    return ((total & 0xFFFFFFFF) + (total >> 32)) & 0xFFFFFFFF


def crc32c(data):
    """Bitwise CRC-32C (md's ~crc32c_le(~0, ...)), independent of the
    tool's ISA-L one."""
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


class ReadOnlyLoop:
    """`losetup -r -f --show FILE`; detached on exit whatever happens.
    Raises SkipTest when no loop device can be attached (no root, no
    /dev/loop-control, a container without loop devices)."""

    def __init__(self, path):
        self.path = path
        self.dev = None

    def __enter__(self):
        r = subprocess.run(["losetup", "-r", "-f", "--show", self.path],
                           capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.strip():
            raise unittest.SkipTest(f"losetup cannot attach a loop device: "
                                    f"{r.stderr.strip()}")
        self.dev = r.stdout.strip()
        return self.dev

    def __exit__(self, *exc):
        subprocess.run(["losetup", "-d", self.dev], capture_output=True)
        return False


def md_chunk_text(n):
    """mdadm's bitmap Chunksize text (human_chunksize)."""
    for unit, name in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "KB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} B"


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

    def serve_until_resynced(self, d, paths, extra=()):
        """Serves `paths` until the log says the resync after a crash is
        done, then stops cleanly; returns the server's output."""
        srv = Server(d, paths, extra=list(extra))
        try:
            deadline = time.time() + 60
            while "resync: done" not in srv.output():
                self.assertLess(time.time(), deadline, srv.output())
                time.sleep(0.05)
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        return srv.output()

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

    def test_ppl_policy_read_by_mdadm(self):
        paths = make_members(self.tmp, 4, 48 * MIB)
        out = run_tool("create", "--force", "--consistency-policy", "ppl",
                       *paths).stdout
        self.assertIn("Consistency Policy : ppl", out)
        self.assertIn("Intent Bitmap : none", out)
        for p in paths:
            md, ours = self.compare(p)
            self.assertEqual(md["Feature Map"], "0x400")
            self.assertEqual(md["PPL"],
                             "2048 sectors at offset 8 sectors from "
                             "superblock")
            self.assertNotIn("Internal Bitmap", md)
            self.assertEqual(ours["consistency_policy"], "ppl")
            self.assertEqual(ours["ppl_offset_sectors"], 8)
            self.assertEqual(ours["ppl_size_sectors"], 2048)
            self.assertGreaterEqual(ours["data_offset_sectors"], 16 + 2048)
            # Byte for byte, Unused Space included (mdadm's PPL end).
            r = subprocess.run(["mdadm", "--examine", p],
                               capture_output=True, text=True)
            self.assertEqual(run_tool("examine", p).stdout, r.stdout)
            # md's empty header at super_offset + ppl.offset: 0xFF
            # reserved, signature = CRC-32C of the array uuid, generation
            # and entries 0, checksum over the header with it zeroed.
            with open(p, "rb") as f:
                f.seek((8 + 8) * 512)
                hdr = f.read(4096)
                rest = f.read(2048 * 512 - 4096)
            uuid = bytes.fromhex(ours["array_uuid"].replace(":", ""))
            self.assertEqual(hdr[:512], b"\xff" * 512)
            self.assertEqual(int.from_bytes(hdr[512:516], "little"),
                             crc32c(uuid))
            self.assertEqual(hdr[516:532], bytes(16))
            zeroed = hdr[:532] + bytes(4) + hdr[536:]
            self.assertEqual(int.from_bytes(hdr[532:536], "little"),
                             crc32c(zeroed))
            self.assertEqual(hdr[536:], bytes(4096 - 536))
            self.assertEqual(rest, bytes(len(rest)))
        self.assertIn("Consistency Policy : ppl",
                      run_tool("detail", *paths).stdout)
        # Served and written (partial writes log into the areas), then
        # stopped: mdadm still reads every member as ours does.
        srv = Server(self.tmp, paths, extra=["cache=0"])
        try:
            h = srv.connect()
            for i in range(64):
                h.pwrite(bytes([i]) * 4096, i * 300 * 1024 + 8192)
            h.flush()
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        for p in paths:
            md, ours = self.compare(p)
            self.assertEqual(md["Feature Map"], "0x400")
            r = subprocess.run(["mdadm", "--examine", p],
                               capture_output=True, text=True)
            self.assertEqual(run_tool("examine", p).stdout, r.stdout)

    def test_bad_block_log_where_mdadm_puts_it(self):
        """create reserves md's bad-block log (8 sectors, 512 entries)
        where mdadm 4.2's write_init_super1 would: after the bitmap's 4 KiB
        pages, after the 1 MiB PPL area, or after choose_bm_space's 4 KiB
        without either. mdadm --examine reports it, and both tools call the
        list empty. A list then written into the area (BAD_BLOCKS set) is
        read the same by mdadm --examine-badblocks and uraid examine
        --badblocks, and printed after uraid examine's mdadm text."""
        cases = [
            ([], 32 * MIB, 16),  # bitmap, 64 MiB chunks: one page
            # 46 MiB of data in 1 KiB chunks: 5888 bytes of bits and the
            # header, two pages.
            (["--bitmap-chunk", "1K"], 48 * MIB, 24),
            (["--consistency-policy", "resync"], 32 * MIB, 16),
            (["--consistency-policy", "ppl"], 48 * MIB, 8 + 2048),
        ]
        for args, size, offset in cases:
            with self.subTest(args=args):
                d = tempfile.mkdtemp(dir=self.tmp)
                paths = make_members(d, 3, size)
                run_tool("create", "--force", *args, *paths)
                p = paths[1]
                md = mdadm_examine(p)
                self.assertEqual(md["Bad Block Log"],
                                 f"512 entries available at offset "
                                 f"{offset} sectors")
                ours = json.loads(run_tool("examine", "--json", p).stdout)[0]
                self.assertEqual(ours["bad_block_log"], {
                    "offset_sectors": offset,
                    "offset_bytes": (8 + offset) * 512,
                    "size_sectors": 8, "entries_available": 512,
                    "shift": 0})
                self.assertFalse(ours["bad_blocks_present"])
                self.assertEqual(ours["bad_blocks"], [])
                want = f"Bad-blocks list is empty in {p}\n"
                self.assertEqual(run_tool("examine", "--badblocks",
                                          p).stdout, want)
                r = subprocess.run(["mdadm", "--examine-badblocks", p],
                                   capture_output=True, text=True)
                self.assertEqual(r.stdout, want)
                r = subprocess.run(["mdadm", "--examine", p],
                                   capture_output=True, text=True)
                self.assertEqual(run_tool("examine", p).stdout, r.stdout)

                # Entries in md's format; the superblock says the list is
                # not empty (its checksum fixed as md computes it).
                data = ours["data_offset_sectors"]
                entries = [(data + 100, 8), (data + 4096, 512),
                           (data + 4608, 276)]
                log = b"".join(((s << 10) | n).to_bytes(8, "little")
                               for s, n in entries)
                log += b"\xff" * (4096 - len(log))
                with open(p, "r+b") as f:
                    f.seek(4096)
                    sb = bytearray(f.read(4096))
                    feature = int.from_bytes(sb[8:12], "little") | 8
                    sb[8:12] = feature.to_bytes(4, "little")
                    max_dev = int.from_bytes(sb[220:224], "little")
                    sb[216:220] = md_sb_csum(sb, max_dev).to_bytes(
                        4, "little")
                    f.seek(4096)
                    f.write(sb)
                    f.seek((8 + offset) * 512)
                    f.write(log)
                md_bb = subprocess.run(["mdadm", "--examine-badblocks", p],
                                       capture_output=True, text=True)
                self.assertEqual(md_bb.returncode, 0, md_bb.stderr)
                self.assertEqual(md_bb.stdout, f"Bad-blocks on {p}:\n" +
                                 "".join(f"{s:20d} for {n} sectors\n"
                                         for s, n in entries))
                self.assertEqual(run_tool("examine", "--examine-badblocks",
                                          p).stdout, md_bb.stdout)
                md_ex = subprocess.run(["mdadm", "--examine", p],
                                       capture_output=True, text=True)
                self.assertIn(" - bad blocks present.", md_ex.stdout)
                self.assertEqual(run_tool("examine", p).stdout,
                                 md_ex.stdout + md_bb.stdout)
                ours = json.loads(run_tool("examine", "--json", p).stdout)[0]
                self.assertTrue(ours["bad_blocks_present"])
                self.assertEqual(ours["bad_blocks"],
                                 [{"sector": s, "sectors": n}
                                  for s, n in entries])
                # A corrupt entry (length 0): an error naming the member,
                # exit 1; the other members are still printed.
                with open(p, "r+b") as f:
                    f.seek((8 + offset) * 512 + 8)
                    f.write(bytes(8))
                r = run_tool("examine", "--badblocks", paths[0], p,
                             check=False)
                self.assertEqual(r.returncode, 1)
                self.assertEqual(r.stdout,
                                 f"Bad-blocks list is empty in {paths[0]}\n")
                self.assertIn(f"{p}: the bad-block log at byte", r.stderr)
                self.assertIn("entry 1", r.stderr)
        # --no-bbl: none, and both tools say so.
        d = tempfile.mkdtemp(dir=self.tmp)
        paths = make_members(d, 3, 32 * MIB)
        run_tool("create", "--force", "--no-bbl", *paths)
        p = paths[0]
        self.assertNotIn("Bad Block Log", mdadm_examine(p))
        want = f"No bad-blocks list configured on {p}\n"
        r = subprocess.run(["mdadm", "--examine-badblocks", p],
                           capture_output=True, text=True)
        self.assertEqual(r.stdout, want)
        self.assertEqual(run_tool("examine", "--badblocks", p).stdout, want)
        ours = json.loads(run_tool("examine", "--json", p).stdout)[0]
        self.assertIsNone(ours["bad_block_log"])
        self.assertEqual(ours["bad_blocks"], [])

    def test_resync_and_bitmap_policies(self):
        for policy, feature, extra in (("resync", "0x0", []),
                                       ("bitmap", "0x1", []),
                                       (None, "0x1", [])):
            with self.subTest(policy=policy):
                d = tempfile.mkdtemp(dir=self.tmp)
                paths = make_members(d, 3, 32 * MIB)
                args = ["--consistency-policy", policy] if policy else []
                out = run_tool("create", "--force", *args, *extra,
                               *paths).stdout
                want = policy or "bitmap"
                self.assertIn(f"Consistency Policy : {want}", out)
                md, ours = self.compare(paths[0], "AAA")
                self.assertEqual(md["Feature Map"], feature)
                self.assertNotIn("PPL", md)
                self.assertEqual(ours["consistency_policy"], want)
                detail = run_tool("detail", *paths).stdout
                self.assertIn(f"Consistency Policy : {want}", detail)

    def test_bad_consistency_policy_options(self):
        paths = make_members(self.tmp, 3, 32 * MIB)
        cases = [
            (["--consistency-policy", "journal"],
             "--consistency-policy journal is not one of bitmap, resync, "
             "ppl"),
            (["--consistency-policy", "ppl", "--bitmap", "internal"],
             "--bitmap internal is not compatible with "
             "--consistency-policy ppl"),
            (["--consistency-policy", "resync", "--bitmap-chunk", "4M"],
             "--bitmap-chunk makes no sense with --consistency-policy "
             "resync"),
            (["--consistency-policy", "bitmap", "--bitmap", "none"],
             "--consistency-policy bitmap needs a bitmap"),
            (["--consistency-policy", "ppl", "--level", "4"],
             "ppl is only supported for RAID level 5"),
        ]
        for args, text in cases:
            with self.subTest(args=args):
                r = run_tool("create", "--force", *args, *paths,
                             check=False)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(text, r.stderr)
                for p in paths:
                    with open(p, "rb") as f:
                        self.assertEqual(f.read(3 * MIB), bytes(3 * MIB),
                                         f"{p} was written")

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
        srv = Server(self.tmp, paths[1:], ["run=true"])
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

    @unittest.skipUnless(shutil.which("losetup"),
                         "losetup is needed to show mdadm -X a member")
    def test_bitmap_read_by_mdadm(self):
        """The internal bitmap `uraid create` writes by default, as mdadm
        reads it from a member attached read-only on a loop device
        (mdadm -X and --examine); then after a served write and kill -9
        (no clean stop) mdadm sees dirty bits."""
        # Every default (parity computed, 64 MiB bitmap chunk), then a
        # small chunk on an --assume-clean array.
        for args, member in (((), 96 * MIB),
                             (("--bitmap-chunk", "1M", "--assume-clean"),
                              64 * MIB)):
            with self.subTest(args=args):
                d = tempfile.mkdtemp(dir=self.tmp)
                paths = make_members(d, 4, member)
                run_tool("create", "--force", *args, *paths)
                chunk_args = args[:2]
                self.check_bitmap(paths, chunk_args, d)

    def check_bitmap(self, paths, chunk_args, d):
        ours = json.loads(run_tool("examine", "--json", *paths).stdout)
        chunk = MIB if chunk_args else 64 * MIB  # mdadm's default rule
        member_bytes = ours[0]["used_dev_size_sectors"] * 512
        bits = -(-member_bytes // chunk)
        for p, o in zip(paths, ours):
            with ReadOnlyLoop(p) as dev:
                x, text = mdadm_x(dev)
                md = mdadm_examine(dev)
            self.assertEqual(x["Magic"], "6d746962", text)
            self.assertEqual(x["Version"], "4", text)
            self.assertEqual(x["UUID"], o["array_uuid"], text)
            self.assertEqual(int(x["Events"]), o["events"], text)
            self.assertLessEqual(int(x["Events Cleared"]), o["events"], text)
            self.assertEqual(x["State"], "OK", text)
            self.assertEqual(x["Chunksize"], md_chunk_text(chunk), text)
            self.assertEqual(x["Daemon"], "5s flush period", text)
            self.assertEqual(x["Write Mode"], "Normal", text)
            self.assertEqual(x["Sync Size"].split()[0],
                             str(member_bytes // 1024), text)
            self.assertRegex(x["Bitmap"],
                             rf"^{bits} bits \(chunks\), 0 dirty \(0\.0%\)$")
            self.assertEqual(md["Internal Bitmap"],
                             "8 sectors from superblock")
            self.assertRegex(md["Checksum"], r" - correct$")
        # What uraid says about its own bitmap agrees.
        text = run_tool("detail", *paths).stdout
        m = re.search(r"Intent Bitmap : Internal \((\S+) chunks, (\d+) of "
                      r"(\d+) dirty, events (\d+)\)", text)
        self.assertIsNotNone(m, text)
        self.assertEqual(m.group(1), "1M" if chunk_args else "64M")
        self.assertEqual((int(m.group(2)), int(m.group(3))), (0, bits))
        self.assertEqual(int(m.group(4)), int(x["Events"]))
        # Serve, write all over, flush, and kill -9 before the bits are
        # lazily cleared (daemon_sleep 5 s): mdadm sees them set. With
        # safe-mode-delay=0 the superblocks stay active until the kill: a
        # kill that came after md's 200 ms idle (a loaded machine) would
        # find them marked clean, and nothing would be resynced.
        srv = Server(d, paths, extra=["safe-mode-delay=0"])
        try:
            h = srv.connect()
            size = h.get_size()
            for off in range(0, size, size // 8):
                h.pwrite(os.urandom(65536), off - off % 65536)
            h.flush()
        finally:
            srv.stop(signal.SIGKILL)
        with ReadOnlyLoop(paths[0]) as dev:
            x, text = mdadm_x(dev)
            md = mdadm_examine(dev)
        m = re.match(r"^(\d+) bits \(chunks\), (\d+) dirty", x["Bitmap"])
        self.assertIsNotNone(m, text)
        self.assertEqual(int(m.group(1)), bits)
        self.assertGreater(int(m.group(2)), 0, text)
        self.assertLessEqual(int(m.group(2)), bits)
        self.assertEqual(md["State"], "active", md)  # dirty, like md's
        # The next assembly resyncs those regions and a clean stop leaves
        # no bit set.
        self.serve_until_resynced(d, paths)
        with ReadOnlyLoop(paths[0]) as dev:
            x, text = mdadm_x(dev)
            md = mdadm_examine(dev)
        self.assertRegex(x["Bitmap"], r", 0 dirty", text)
        self.assertEqual(md["State"], "clean")

    def test_bitmap_file_read_by_mdadm(self):
        """`uraid create --bitmap FILE` writes md's external bitmap file:
        `mdadm -X FILE` reads the header and bits (no loop device: mdadm
        reads a regular file as a bitmap file), the members carry no
        internal bitmap, kill -9 of a writing server leaves dirty bits in
        the file, and serving with bitmap=FILE resyncs and clears them."""
        paths = make_members(self.tmp, 4, 64 * MIB)
        bm = os.path.join(self.tmp, "md0.bitmap")
        out = run_tool("create", "--force", "--assume-clean",
                       "--bitmap-chunk", "1M", "--bitmap", bm, *paths).stdout
        self.assertIn(f"Intent Bitmap : {bm}, 1M chunks", out)
        ours = json.loads(run_tool("examine", "--json", *paths).stdout)
        member_bytes = ours[0]["used_dev_size_sectors"] * 512
        bits = -(-member_bytes // MIB)
        # md's file: the 256-byte header, then ceil(bits / 8) bytes.
        self.assertEqual(os.path.getsize(bm), 256 + -(-bits // 8))
        x, text = mdadm_x(bm)
        self.assertEqual(x["Magic"], "6d746962", text)
        self.assertEqual(x["Version"], "4", text)
        self.assertEqual(x["UUID"], ours[0]["array_uuid"], text)
        self.assertEqual(int(x["Events"]), ours[0]["events"], text)
        self.assertEqual(x["State"], "OK", text)
        self.assertEqual(x["Chunksize"], "1 MB", text)
        self.assertEqual(x["Daemon"], "5s flush period", text)
        self.assertEqual(x["Sync Size"].split()[0],
                         str(member_bytes // 1024), text)
        self.assertRegex(x["Bitmap"],
                         rf"^{bits} bits \(chunks\), 0 dirty \(0\.0%\)$")
        for p in paths:
            md = mdadm_examine(p)
            self.assertNotIn("Internal Bitmap", md)  # md's external way
            self.assertRegex(md["Checksum"], r" - correct$")
        text = run_tool("detail", "--bitmap", bm, *paths).stdout
        self.assertRegex(text, rf"Intent Bitmap : External file \(1M chunks, "
                               rf"0 of {bits} dirty")
        # Without the file the array has no bitmap at all (md's behaviour).
        text = run_tool("detail", *paths).stdout
        self.assertNotIn("Intent Bitmap", text)
        # Serve with the file, write a few regions, kill -9.
        srv = Server(self.tmp, paths,
                     extra=[f"bitmap={bm}", "safe-mode-delay=0"])
        try:
            h = srv.connect()
            size = h.get_size()
            for off in (0, size // 2):
                h.pwrite(os.urandom(65536), off - off % 65536)
            h.flush()
        finally:
            srv.stop(signal.SIGKILL)
        x, text = mdadm_x(bm)
        m = re.match(r"^(\d+) bits \(chunks\), (\d+) dirty", x["Bitmap"])
        self.assertIsNotNone(m, text)
        dirty = int(m.group(2))
        self.assertGreaterEqual(dirty, 2, text)
        self.assertLess(dirty, bits // 4, text)
        self.assertEqual(mdadm_examine(paths[0])["State"], "active")
        # Served again with the file: only those regions are resynced.
        out = self.serve_until_resynced(self.tmp, paths,
                                        extra=[f"bitmap={bm}"])
        m = re.search(r"resync: done: \d+ stripes read \([^)]*, (\d+) "
                      r"bitmap regions\)", out)
        self.assertIsNotNone(m, out)
        self.assertEqual(int(m.group(1)), dirty, out)
        x, text = mdadm_x(bm)
        self.assertRegex(x["Bitmap"], r", 0 dirty", text)
        self.assertEqual(mdadm_examine(paths[0])["State"], "clean")


if __name__ == "__main__":
    harness.main()
