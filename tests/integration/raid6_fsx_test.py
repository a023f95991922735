# SPDX-License-Identifier: MIT
"""fsx over ext4 on a RAID6 array degraded by two (issue 33).

A 6-member RAID6 (left-asymmetric, whose Q slot order differs from the data
index) is created, then served by nbdkit with two members left out
(run=true): every read of a lost data chunk is rebuilt from P and Q or
from the survivors. The filesystem stack is filesystem_test's (nbdfuse, a
4 KiB-sector loop device with direct I/O, ext4). On it runs an fsx-style
exerciser written here (fsx itself, from xfstests, is not packaged in
Debian): random writes (past EOF too), reads, truncates up and down, hole
punches, mmap reads and writes and fsyncs on one file, each checked
against an in-memory model of the file; every 200 operations the whole
file is read back with O_DIRECT (past the page cache, from the array) and
compared. Then umount, e2fsck -fn must be clean, the array is served again
(still without the two) and the file must equal the model.

Needs what filesystem_test needs (root, /dev/fuse, nbdfuse, a loop device,
e2fsprogs); skips with the reason otherwise. Seeded: URAID_FSX_SEED
replays, URAID_FSX_OPS sets the length (default 3000).
"""

import ctypes
import json
import mmap
import os
import random
import sys
import tempfile
import unittest

import harness
import filesystem_test
from filesystem_test import SKIP, Stack, sh
from harness import make_members, run_tool

MIB = 1 << 20
MEMBER_BYTES = 96 * MIB
MAX_FILE = 12 * MIB
FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                            ctypes.c_long]


def punch_hole(fd, off, length):
    if _libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
                       length) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


class Fsx:
    """One file and its model; every operation is applied to both and
    every read checked. `log` keeps the operations for a failure report."""

    def __init__(self, path, seed):
        self.path = path
        self.rng = random.Random(seed)
        self.model = bytearray()
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.log = []

    def close(self):
        os.close(self.fd)

    def fail(self, what):
        tail = "\n".join(self.log[-30:])
        raise AssertionError(f"{what}\nlast operations:\n{tail}")

    def span(self, within):
        off = self.rng.randrange(max(1, within))
        length = self.rng.choice([1, self.rng.randrange(1, 4096),
                                  self.rng.randrange(1, 256 * 1024)])
        return off, length

    def check(self, off, got):
        want = bytes(self.model[off:off + len(got)])
        if got != want:
            bad = next(i for i in range(len(got)) if got[i] != want[i])
            self.fail(f"read at {off}+{len(got)}: byte {off + bad} is "
                      f"{got[bad]:#x}, the model has {want[bad]:#x}")

    def write(self):
        off, length = self.span(min(MAX_FILE, len(self.model) + 64 * 1024))
        length = min(length, MAX_FILE - off)
        data = self.rng.randbytes(length)
        self.log.append(f"write {off}+{length}")
        if os.pwrite(self.fd, data, off) != length:
            self.fail("short write")
        if off > len(self.model):
            self.model.extend(bytes(off - len(self.model)))
        end = off + length
        if end > len(self.model):
            self.model.extend(bytes(end - len(self.model)))
        self.model[off:end] = data

    def read(self):
        if not self.model:
            return
        off, length = self.span(len(self.model))
        length = min(length, len(self.model) - off)
        self.log.append(f"read {off}+{length}")
        self.check(off, os.pread(self.fd, length, off))

    def truncate(self):
        size = self.rng.randrange(MAX_FILE)
        if self.rng.random() < 0.5:
            size = self.rng.randrange(len(self.model) + 1)
        self.log.append(f"truncate {size}")
        os.ftruncate(self.fd, size)
        if size < len(self.model):
            del self.model[size:]
        else:
            self.model.extend(bytes(size - len(self.model)))

    def punch(self):
        if not self.model:
            return
        off, length = self.span(len(self.model))
        length = min(length, len(self.model) - off)
        self.log.append(f"punch {off}+{length}")
        punch_hole(self.fd, off, length)
        self.model[off:off + length] = bytes(length)

    def mapread(self):
        if not self.model:
            return
        off, length = self.span(len(self.model))
        length = min(length, len(self.model) - off)
        self.log.append(f"mapread {off}+{length}")
        with mmap.mmap(self.fd, len(self.model)) as m:
            self.check(off, m[off:off + length])

    def mapwrite(self):
        if not self.model:
            return
        off, length = self.span(len(self.model))
        length = min(length, len(self.model) - off)
        data = self.rng.randbytes(length)
        self.log.append(f"mapwrite {off}+{length}")
        with mmap.mmap(self.fd, len(self.model)) as m:
            m[off:off + length] = data
            m.flush()
        self.model[off:off + length] = data

    def fsync(self):
        self.log.append("fsync")
        os.fsync(self.fd)

    def verify_direct(self):
        """The whole file through O_DIRECT: what the array holds."""
        self.log.append("verify (O_DIRECT)")
        os.fsync(self.fd)
        verify_file(self.path, self.model, self.fail)

    def step(self):
        op = self.rng.random()
        if op < 0.35:
            self.write()
        elif op < 0.60:
            self.read()
        elif op < 0.68:
            self.truncate()
        elif op < 0.76:
            self.punch()
        elif op < 0.86:
            self.mapread()
        elif op < 0.95:
            self.mapwrite()
        else:
            self.fsync()


def verify_file(path, model, fail):
    """Reads `path` with O_DIRECT (aligned buffer) and compares it with
    `model`; calls fail(message) on a difference."""
    if os.path.getsize(path) != len(model):
        fail(f"{path}: size {os.path.getsize(path)}, the model has "
             f"{len(model)}")
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        buf = mmap.mmap(-1, MIB)
        off = 0
        while off < len(model):
            n = os.preadv(fd, [buf], off)
            got = bytes(buf[:min(n, len(model) - off)])
            want = bytes(model[off:off + len(got)])
            if got != want:
                bad = next(i for i in range(len(got)) if got[i] != want[i])
                fail(f"O_DIRECT read: byte {off + bad} is {got[bad]:#x}, the "
                     f"model has {want[bad]:#x}")
            if n <= 0:
                fail(f"O_DIRECT read stopped at {off} of {len(model)}")
            off += n
        buf.close()
    finally:
        os.close(fd)


@unittest.skipIf(SKIP is not None, f"RAID6 fsx test skipped: {SKIP}")
class Raid6FsxTest(unittest.TestCase):
    def setUp(self):
        base = os.environ.get("URAID_FS_TMPDIR", "/var/tmp")
        self.tmp = tempfile.mkdtemp(prefix="uraid-r6fsx-", dir=base)

    # filesystem_test's (never delete through a live mount); imported by
    # module, so that its tests do not run here too.
    tearDown = filesystem_test.FilesystemTest.tearDown

    def test_fsx_on_ext4_degraded_by_two(self):
        seed = int(os.environ.get("URAID_FSX_SEED", "33"))
        ops = int(os.environ.get("URAID_FSX_OPS", "3000"))
        paths = make_members(self.tmp, 6, MEMBER_BYTES)
        run_tool("create", "--force", "--assume-clean", "--level", "6",
                 "--layout", "left-asymmetric", "--chunk", "64K", *paths)
        # Two members out from the start: one that holds data in stripe 0
        # and one that holds its P.
        survivors = [p for i, p in enumerate(paths) if i not in (1, 4)]
        run = ["run=true"]
        model = {}

        def exercise(stack):
            sh("mkfs.ext4", "-q", "-F", "-b", "4096", "-E",
               "stride=16,stripe_width=64", stack.loop)
            stack.mount("ext4")
            fsx = Fsx(os.path.join(stack.mnt, "fsx.bin"), seed)
            try:
                for i in range(ops):
                    fsx.step()
                    if i % 200 == 199:
                        fsx.verify_direct()
                fsx.verify_direct()
            finally:
                fsx.close()
            model["bytes"] = bytes(fsx.model)
            stack.umount()
            r = sh("e2fsck", "-fn", stack.loop, check=False)
            self.assertEqual(r.returncode, 0,
                             f"e2fsck -fn not clean:\n{r.stdout}{r.stderr}")

        stack = Stack(self.tmp, survivors, "fsx", run)
        try:
            exercise(stack)
        finally:
            stack.close()
        detail = json.loads(run_tool("detail", "--json", *survivors).stdout)
        self.assertTrue(detail["degraded"], detail)

        # Served again, still without the two: the file is the model.
        def again(stack):
            r = sh("e2fsck", "-fn", stack.loop, check=False)
            self.assertEqual(r.returncode, 0,
                             f"e2fsck -fn not clean:\n{r.stdout}{r.stderr}")
            stack.mount("ext4")

            def fail(msg):
                raise AssertionError(msg)
            verify_file(os.path.join(stack.mnt, "fsx.bin"), model["bytes"],
                        fail)

        stack = Stack(self.tmp, survivors, "again", run)
        try:
            again(stack)
        finally:
            stack.close()


if __name__ == "__main__":
    if SKIP is not None:
        print(f"SKIP: RAID6 fsx test: {SKIP}")
        sys.exit(77)
    harness.main()
