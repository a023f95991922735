# SPDX-License-Identifier: MIT
"""One unreadable sector costs a block, never the array (md's bad-block
log), end to end.

A member with one unreadable 4 KiB sector is nbdkit's file plugin behind
the ddrescue filter (reads of a range its mapfile marks `-` fail with EIO)
under the cow filter (writes land in an in-memory overlay, as a disk
remaps a sector on write; reads of a written block then succeed):

    nbdkit --filter=cow --filter=ddrescue file FILE ddrescue-mapfile=MAP \
        cow-block-size=4096

The array (4 members of 64 MiB, chunk 64K, left-symmetric) is made and
filled on plain files (every 4 KiB block holds a pattern derived from its
index), then served by the plugin with that member given by its
nbd+unix:// URI and the others as files. Every check reads every 4 KiB
block of the export on its own and counts the blocks that fail (EIO) and
those that come back with other bytes than the pattern:

  a. healthy array: every block right, the sector rewritten from parity
     (read_errors_corrected), nothing degraded;
  b. degraded array, the sector on a survivor: the array stays up, only
     the blocks of the sector's row are unreadable, none is wrong, the
     member's bad-block log (examine through the URI) lists the sector,
     and a write of the lost block succeeds and reads back;
  c. a rebuild onto a spare over that survivor finishes, all members end
     active, only that row is unreadable, the job reports the bytes it
     could not rebuild;
  d. kill -9 of the array's server once the sector is logged: the log
     survives and reads still avoid the sector (EIO, not the bytes the
     member now returns there);
  e. fio's verify (crc32c, ioengine=nbd) over a healthy array with a bad
     sector on one member.

The harness itself (EIO on the sector only, a 4 KiB write making it
readable) is checked first, so that a broken harness is not mistaken for
an engine bug.
"""

import errno
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest

import harness
from harness import Server, control_call, md_place
from nbd_members_test import MemberServer, wait_for

MIB = 1 << 20
BLOCK = 4096
SECTOR = 512
CHUNK = 64 * 1024
MEMBER_BYTES = 64 * MIB
DISKS = 4
LAYOUT = 2  # left-symmetric, uraid create's default
BAD_SLOT = 2  # the member with the unreadable sector
BAD_REL = 6 * MIB  # its offset from the data offset
SALT = 0x5552414944424221  # "URAIDBB!"
# The array's server gives up on a member request after this (the
# default 30 s would outlast a test that hangs on one).
MEMBER_TIMEOUT_MS = 20000


def pattern(index):
    """The 4 KiB the fill writes at array block `index`: never zeros,
    different for every block."""
    return struct.pack("<QQ", index, index ^ SALT) * (BLOCK // 16)


def row_of(rel):
    """Array block indexes of the row of member offset `rel` (from the data
    offset), by slot: None for the parity slot."""
    stripe, within = divmod(rel, CHUNK)
    dd = DISKS - 1
    row = {}
    for k in range(dd):
        disk, pd, s = md_place(stripe * dd + k, DISKS, LAYOUT)
        assert s == stripe
        row[disk] = ((stripe * dd + k) * CHUNK + within) // BLOCK
        row[pd] = None
    return row


def write_mapfile(path, size, bad):
    """A GNU ddrescue mapfile: every byte of a `size`-byte image rescued
    (`+`) except the 4 KiB at each offset in `bad` (`-`). The ddrescue
    filter serves a read only when one `+` line holds all of it."""
    lines = ["# Mapfile. Created by bad_block_test.py",
             "# current_pos  current_status  current_pass",
             "0x00000000     +               1",
             "#      pos        size  status"]
    pos = 0
    for off in sorted(bad):
        if off > pos:
            lines.append(f"0x{pos:08x}\t0x{off - pos:08x}\t+")
        lines.append(f"0x{off:08x}\t0x{BLOCK:08x}\t-")
        pos = off + BLOCK
    if pos < size:
        lines.append(f"0x{pos:08x}\t0x{size - pos:08x}\t+")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def tool(*args, check=True, timeout=60):
    r = subprocess.run([harness.ARGS.tool, *args], capture_output=True,
                       text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"uraid {' '.join(args)} exited "
                             f"{r.returncode}: {r.stdout}{r.stderr}")
    return r


def connect(sock):
    import nbd
    h = nbd.NBD()
    h.connect_unix(sock)
    return h


def scan(sock, nblocks, expect=pattern):
    """Reads every 4 KiB block on its own; returns (unreadable, wrong):
    the block indexes whose read failed and those whose bytes differ from
    expect(index)."""
    import nbd
    h = connect(sock)
    unreadable, wrong = [], []
    try:
        for i in range(nblocks):
            try:
                got = h.pread(BLOCK, i * BLOCK)
            except nbd.Error:
                unreadable.append(i)
                continue
            if got != expect(i):
                wrong.append(i)
    finally:
        h.shutdown()
    return unreadable, wrong


def short(blocks):
    return (f"{len(blocks)} block(s): {blocks[:12]}"
            + (" ..." if len(blocks) > 12 else ""))


class Template:
    """The array made and filled once, on plain files, for every test to
    copy: create, serve, write the pattern, stop (clean)."""

    dir = None
    data_offset = 0
    export_bytes = 0

    @classmethod
    def get(cls):
        if cls.dir is None:
            cls.dir = tempfile.mkdtemp(prefix="uraid-badblock-template-")
            paths = [os.path.join(cls.dir, f"m{i}.img") for i in range(DISKS)]
            for p in paths:
                with open(p, "wb") as f:
                    f.truncate(MEMBER_BYTES)
            tool("create", "--force", "--assume-clean", "--chunk", "64K",
                 *paths)
            ex = json.loads(tool("examine", "--json", paths[0]).stdout)[0]
            cls.data_offset = ex["data_offset_sectors"] * SECTOR
            srv = Server(cls.dir, paths)
            try:
                h = srv.connect()
                cls.export_bytes = h.get_size()
                per = MIB // BLOCK
                for first in range(0, cls.export_bytes // BLOCK, per):
                    n = min(per, cls.export_bytes // BLOCK - first)
                    h.pwrite(b"".join(pattern(i)
                                      for i in range(first, first + n)),
                             first * BLOCK)
                h.flush()
                h.shutdown()
            finally:
                rc = srv.stop()
            assert rc == 0, srv.output()
        return cls

    @classmethod
    def cleanup(cls):
        if cls.dir:
            shutil.rmtree(cls.dir, ignore_errors=True)
            cls.dir = None


def tearDownModule():
    Template.cleanup()


class BadBlockHarnessTest(unittest.TestCase):
    """The member harness on its own: EIO on the sector only, a whole 4 KiB
    write remaps it; a 512-byte write does not (the cow filter reads the
    rest of its block from below, which fails)."""

    def test_harness(self):
        import nbd
        tmp = tempfile.mkdtemp(prefix="uraid-badblock-harness-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        img = os.path.join(tmp, "m.img")
        with open(img, "wb") as f:
            for i in range(MEMBER_BYTES // MIB):
                f.write(b"".join(pattern(i * 256 + j) for j in range(256)))
        bad = BAD_REL
        mapfile = os.path.join(tmp, "m.map")
        write_mapfile(mapfile, MEMBER_BYTES, [bad])
        srv = MemberServer(tmp, "bad", img,
                           filters=["--filter=cow", "--filter=ddrescue"],
                           params=[f"ddrescue-mapfile={mapfile}",
                                   "cow-block-size=4096"])
        self.addCleanup(srv.stop)
        h = connect(srv.sock)
        self.assertEqual(h.get_size(), MEMBER_BYTES)
        with self.assertRaises(nbd.Error) as e:
            h.pread(BLOCK, bad)
        self.assertIn(e.exception.errno, ("EIO", errno.EIO), e.exception)
        with self.assertRaises(nbd.Error):
            h.pread(SECTOR, bad + 3 * SECTOR)
        with self.assertRaises(nbd.Error):  # any read touching it fails
            h.pread(2 * BLOCK, bad - BLOCK)
        self.assertEqual(h.pread(BLOCK, bad - BLOCK),
                         pattern(bad // BLOCK - 1))
        self.assertEqual(h.pread(BLOCK, bad + BLOCK),
                         pattern(bad // BLOCK + 1))
        self.assertEqual(h.pread(MIB, bad - MIB),
                         b"".join(pattern(bad // BLOCK - 256 + j)
                                  for j in range(256)))
        # A partial write cannot remap it: cow reads the block first.
        with self.assertRaises(nbd.Error):
            h.pwrite(b"\xaa" * SECTOR, bad + SECTOR)
        with self.assertRaises(nbd.Error):
            h.pread(BLOCK, bad)
        # A whole block can, for every connection; the file is untouched.
        h.pwrite(b"\xbb" * BLOCK, bad)
        self.assertEqual(h.pread(BLOCK, bad), b"\xbb" * BLOCK)
        self.assertEqual(len(h.pread(3 * MIB, bad - MIB)), 3 * MIB)
        h.shutdown()
        h = connect(srv.sock)
        self.assertEqual(h.pread(BLOCK, bad), b"\xbb" * BLOCK)
        h.shutdown()
        with open(img, "rb") as f:
            f.seek(bad)
            self.assertEqual(f.read(BLOCK), pattern(bad // BLOCK))


class BadBlockTest(unittest.TestCase):
    """Arrays from the template with a bad sector on slot BAD_SLOT at
    data_offset + BAD_REL."""

    def setUp(self):
        t = Template.get()
        self.data_offset = t.data_offset
        self.blocks = t.export_bytes // BLOCK
        self.tmp = tempfile.mkdtemp(prefix="uraid-badblock-")
        self.ctl = os.path.join(self.tmp, "ctl.sock")
        self.paths = []
        for i in range(DISKS):
            p = os.path.join(self.tmp, f"m{i}.img")
            shutil.copyfile(os.path.join(t.dir, f"m{i}.img"), p)
            self.paths.append(p)
        self.bad_offset = self.data_offset + BAD_REL  # on the member
        self.row = row_of(BAD_REL)
        self.bad_block = self.row[BAD_SLOT]
        assert self.bad_block is not None, "the bad sector must hold data"
        # The member left out of a degraded array: one that holds data in
        # the bad row, so that the row loses two blocks.
        self.missing = next(s for s, b in self.row.items()
                            if b is not None and s != BAD_SLOT)
        self.srv = None
        self.member = None

    def tearDown(self):
        if self.srv:
            try:
                self.srv.stop()
            except subprocess.TimeoutExpired:
                self.srv.proc.kill()
                self.srv.proc.wait()
        if self.member:
            self.member.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # --- setup -----------------------------------------------------------

    def serve_bad_member(self):
        mapfile = os.path.join(self.tmp, "bad.map")
        write_mapfile(mapfile, MEMBER_BYTES, [self.bad_offset])
        self.member = MemberServer(
            self.tmp, "bad", self.paths[BAD_SLOT],
            filters=["--filter=cow", "--filter=ddrescue"],
            params=[f"ddrescue-mapfile={mapfile}", "cow-block-size=4096"])
        return self.member.uri

    def members(self, degraded):
        out = []
        for slot in range(DISKS):
            if degraded and slot == self.missing:
                continue
            out.append(self.member.uri if slot == BAD_SLOT
                       else self.paths[slot])
        return out

    def serve(self, degraded, extra=()):
        if self.member is None:
            self.serve_bad_member()
        keys = [f"control={self.ctl}", f"timeout={MEMBER_TIMEOUT_MS}"]
        if degraded:
            keys.append("run=true")
        self.srv = Server(self.tmp, self.members(degraded),
                          extra=keys + list(extra))
        wait_for(lambda: os.path.exists(self.ctl), 10, "the control socket")

    # --- looking -----------------------------------------------------------

    def detail(self):
        """Every field of the live state (the tool's --json leaves out the
        later counters)."""
        return control_call(self.ctl, {"cmd": "detail"})["detail"]

    def slot(self, d, slot):
        return next(s for s in d["slots"] if s["slot"] == slot)

    def summary(self, d):
        """The array's state, its slots and the server's complaints, for
        failure messages."""
        slots = ", ".join(f"{s['slot']} {s['state']}" for s in d["slots"])
        job = d["last_job"]
        lines = []  # the first of each, without nbdkit's thread prefix
        for line in self.srv.output().splitlines():
            line = re.sub(r"^nbdkit: [\w.]+: ", "", line)
            if (re.search(r"error|critical|warning|FAIL", line)
                    and line not in lines):
                lines.append(line)
        return (f"failed={d['failed']} degraded={d['degraded']}; slots: "
                f"{slots}; last job: {job['kind']} {job['result']!r}\n"
                + "\n".join(lines[:10]))

    def assert_up(self, d, degraded, scanned=None):
        """The array serves, degraded or not as said, the member with the
        bad sector active. `scanned`: (unreadable, wrong) of a scan, shown
        on failure."""
        what = "" if scanned is None else (
            f"unreadable {short(scanned[0])}; wrong {short(scanned[1])}\n")
        self.assertFalse(d["failed"],
                         f"the array failed: {what}{self.summary(d)}")
        self.assertEqual(d["degraded"], degraded,
                         f"degraded: {what}{self.summary(d)}")
        s = self.slot(d, BAD_SLOT)
        self.assertEqual(s["state"], "active",
                         f"the member with the bad sector is {s['state']}: "
                         f"{what}{self.summary(d)}")

    def examine_bad_blocks(self, uri):
        """The bad-block log of the member at `uri` as [(sector, sectors)]
        from `uraid examine --badblocks` (mdadm's --examine-badblocks:
        `SECTOR for N sectors` lines) and from `examine --json`'s
        `bad_blocks`; both must say the same."""
        r = tool("examine", "--badblocks", uri, check=False)
        self.assertEqual(r.returncode, 0,
                         f"uraid examine --badblocks: {r.stdout}{r.stderr}")
        text = [(int(a), int(b)) for a, b in
                re.findall(r"^\s*(\d+) for (\d+) sectors?\s*$", r.stdout,
                           re.M)]
        ex = json.loads(tool("examine", "--json", uri).stdout)[0]
        self.assertIn("bad_blocks", ex, f"examine --json has no bad_blocks: "
                      f"{sorted(ex)}")
        js = []
        for e in ex["bad_blocks"] or []:  # null: no log, or unreadable
            if isinstance(e, dict):
                start = e.get("sector", e.get("first_sector", e.get("start")))
                n = e.get("sectors", e.get("count", e.get("length")))
                js.append((start, n))
            else:
                js.append(tuple(e))
        self.assertEqual(sorted(text), sorted(js),
                         f"--badblocks says {r.stdout!r}, --json says "
                         f"{ex['bad_blocks']} "
                         f"{ex.get('bad_blocks_error', '')}")
        return sorted(text), r.stdout

    def assert_logged(self, uri):
        """The member's log lists the bad 4 KiB (absolute member sectors,
        as md keeps them) and nothing more than that block."""
        first = self.bad_offset // SECTOR
        want = set(range(first, first + BLOCK // SECTOR))
        deadline = time.monotonic() + 10
        while True:
            ranges, out = self.examine_bad_blocks(uri)
            listed = set()
            for start, n in ranges:
                listed.update(range(start, start + n))
            if want <= listed or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertTrue(want <= listed,
                        f"the bad-block log does not list sectors "
                        f"{first}+8: {out!r}")
        self.assertEqual(listed, want,
                         f"the log lists more than the bad block: {out!r}")

    def assert_row_only(self, unreadable, wrong, lost):
        """No wrong block; the unreadable ones are the bad block and, at
        most, the other `lost` blocks of its row."""
        self.assertEqual(wrong, [], f"wrong bytes in {short(wrong)}")
        allowed = {self.bad_block} | set(lost)
        self.assertTrue(set(unreadable) <= allowed,
                        f"unreadable: {short(unreadable)}; only "
                        f"{sorted(allowed)} (the bad row) may be")
        self.assertLessEqual(len(unreadable), 2)
        self.assertIn(self.bad_block, unreadable,
                      "the bad block read back: from where?")

    # --- the tests ---------------------------------------------------------

    def test_a_healthy_array_rewrites_the_sector_from_parity(self):
        self.serve(degraded=False)
        before = self.detail()["counters"]["read_errors_corrected"]
        unreadable, wrong = scan(self.srv.sock, self.blocks)
        d = self.detail()
        self.assert_up(d, False, (unreadable, wrong))
        self.assertEqual(unreadable, [], f"unreadable: {short(unreadable)}")
        self.assertEqual(wrong, [], f"wrong: {short(wrong)}")
        self.assertGreaterEqual(
            d["counters"]["read_errors_corrected"] - before, 1,
            f"no corrected read error counted: {d['counters']}")
        # The engine wrote the block back: the member reads it now, with
        # the data block's bytes.
        h = connect(self.member.sock)
        self.assertEqual(h.pread(BLOCK, self.bad_offset),
                         pattern(self.bad_block))
        h.shutdown()
        unreadable, wrong = scan(self.srv.sock, self.blocks)
        self.assertEqual((unreadable, wrong), ([], []))

    def test_b_degraded_array_loses_only_the_row(self):
        self.serve(degraded=True)
        self.assert_up(self.detail(), degraded=True)
        lost = self.row[self.missing]
        unreadable, wrong = scan(self.srv.sock, self.blocks)
        self.assert_up(self.detail(), True, (unreadable, wrong))
        self.assert_row_only(unreadable, wrong, [lost])
        self.assert_logged(self.member.uri)
        # Writing the lost block remaps the sector; the row's other lost
        # block (on the missing member) must not turn into wrong bytes.
        h = connect(self.srv.sock)
        new = b"\x5a" * BLOCK
        h.pwrite(new, self.bad_block * BLOCK)
        h.flush()
        self.assertEqual(h.pread(BLOCK, self.bad_block * BLOCK), new)
        h.shutdown()

        def expect(i):
            return new if i == self.bad_block else pattern(i)

        unreadable, wrong = scan(self.srv.sock, self.blocks, expect)
        self.assertEqual(wrong, [], f"wrong after the write: {short(wrong)}")
        self.assertTrue(set(unreadable) <= {lost},
                        f"unreadable after the write: {short(unreadable)}")
        self.assert_up(self.detail(), degraded=True)

    def test_c_rebuild_over_the_bad_survivor(self):
        self.serve(degraded=True)
        spare = os.path.join(self.tmp, "spare.img")
        with open(spare, "wb") as f:
            f.truncate(MEMBER_BYTES)
        r = tool("add", "--control", self.ctl, "--wait", spare, check=False)
        d = self.detail()
        self.assertEqual(r.returncode, 0,
                         f"add --wait: {r.stdout}{r.stderr}\n"
                         f"{self.summary(d)}")
        self.assert_up(d, degraded=False)
        states = [s["state"] for s in d["slots"]]
        self.assertEqual(states, ["active"] * DISKS, d["slots"])
        self.assertEqual(self.slot(d, self.missing)["name"],
                         os.path.realpath(spare))
        last = d["last_job"]
        self.assertEqual(last["kind"], "recover", last)
        self.assertEqual(last.get("result"), "completed", last)
        # The rebuild could not make the missing member's block of the bad
        # row, and says so.
        self.assertGreaterEqual(last.get("unrecovered_bytes", 0), BLOCK,
                                f"no bytes reported not rebuilt: {last}")
        unreadable, wrong = scan(self.srv.sock, self.blocks)
        self.assert_up(self.detail(), False, (unreadable, wrong))
        self.assert_row_only(unreadable, wrong, [self.row[self.missing]])

    def test_d_log_survives_kill_9(self):
        self.serve(degraded=True)
        lost = self.row[self.missing]
        unreadable, wrong = scan(self.srv.sock, self.blocks)
        self.assert_up(self.detail(), True, (unreadable, wrong))
        self.assert_row_only(unreadable, wrong, [lost])
        self.assert_logged(self.member.uri)
        self.srv.stop(signal.SIGKILL)
        self.srv = None
        # The drive remaps the sector behind the array's back: it reads
        # back now, as zeros. The log still says its data is gone.
        h = connect(self.member.sock)
        h.pwrite(bytes(BLOCK), self.bad_offset)
        h.flush()
        h.shutdown()
        self.assert_logged(self.member.uri)
        self.serve(degraded=True, extra=["force=true"])
        d = self.detail()
        self.assert_up(d, degraded=True)
        unreadable, wrong = scan(self.srv.sock, self.blocks)
        self.assert_up(self.detail(), True, (unreadable, wrong))
        self.assert_row_only(unreadable, wrong, [lost])


class FioVerifyTest(unittest.TestCase):
    """fio's own verify over an array with a bad sector on one member:
    first the blocks fio wrote before the sector went bad (verify_only:
    every read, the bad sector's too), then random 4 KiB writes read back
    around a second bad sector that nothing read before."""

    def fio(self, cwd, uri, *opts):
        cmd = ["fio", "--output-format=json", "--name=verify",
               "--ioengine=nbd", f"--uri={uri}", "--verify=crc32c",
               "--iodepth=8", "--randrepeat=1", *opts]
        # cwd: fio leaves its verify state file (*-verify.state) there.
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           cwd=cwd)
        self.assertEqual(r.returncode, 0,
                         f"{' '.join(cmd)} exited {r.returncode}:\n"
                         f"{r.stderr[-3000:]}\n{r.stdout[-3000:]}")
        out = json.loads(r.stdout[r.stdout.index("{"):])
        for job in out["jobs"]:
            self.assertEqual(job["error"], 0, job)
        return out

    def test_e_fio_verify(self):
        tmp = tempfile.mkdtemp(prefix="uraid-badblock-fio-")
        self.addCleanup(shutil.rmtree, tmp, ignore_errors=True)
        ctl = os.path.join(tmp, "ctl.sock")
        paths = harness.make_members(tmp, DISKS, MEMBER_BYTES)
        tool("create", "--force", "--assume-clean", "--chunk", "64K", *paths)
        ex = json.loads(tool("examine", "--json", paths[0]).stdout)[0]
        data_offset = ex["data_offset_sectors"] * SECTOR
        # The second bad sector: 4 MiB further on the same member, in a
        # row where it holds data too.
        rel2 = BAD_REL + 4 * MIB
        row1, row2 = row_of(BAD_REL), row_of(rel2)
        assert row1[BAD_SLOT] is not None and row2[BAD_SLOT] is not None
        # fio's first region ends before the second bad row's stripe.
        first_bytes = (rel2 // CHUNK) * CHUNK * (DISKS - 1)
        assert row1[BAD_SLOT] * BLOCK < first_bytes
        second = ["--offset", str(first_bytes), "--size", str(8 * MIB)]
        assert first_bytes <= row2[BAD_SLOT] * BLOCK < first_bytes + 8 * MIB
        write = ["--rw=write", "--bs=64k", f"--size={first_bytes}"]

        srv = Server(tmp, paths)
        self.fio(tmp, srv.uri, *write, "--do_verify=0")
        self.assertEqual(srv.stop(), 0, srv.output())

        mapfile = os.path.join(tmp, "bad.map")
        write_mapfile(mapfile, MEMBER_BYTES,
                      [data_offset + BAD_REL, data_offset + rel2])
        member = MemberServer(
            tmp, "bad", paths[BAD_SLOT],
            filters=["--filter=cow", "--filter=ddrescue"],
            params=[f"ddrescue-mapfile={mapfile}", "cow-block-size=4096"])
        self.addCleanup(member.stop)
        members = list(paths)
        members[BAD_SLOT] = member.uri
        srv = Server(tmp, members, extra=[f"control={ctl}",
                                          f"timeout={MEMBER_TIMEOUT_MS}"])
        try:
            self.fio(tmp, srv.uri, *write, "--verify_only=1")
            self.fio(tmp, srv.uri, "--rw=randwrite", "--bs=4k", *second,
                     "--randseed=7")
            d = control_call(ctl, {"cmd": "detail"})["detail"]
            self.assertFalse(d["failed"], d)
            self.assertFalse(d["degraded"],
                             f"one bad sector cost a member: {d['slots']}\n"
                             f"{srv.output()[-3000:]}")
            self.assertGreaterEqual(d["counters"]["read_errors_corrected"], 1,
                                    d["counters"])
        finally:
            srv.stop()


if __name__ == "__main__":
    harness.main()
