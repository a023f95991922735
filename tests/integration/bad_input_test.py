# SPDX-License-Identifier: MIT
"""The bad-input catalogue: one table, one row per hostile or mistaken input.

Each row builds its own members in a fresh directory (setup), runs ONE
command against them (the uraid tool, nbdkit with the plugin, or an NBD
request to a served array), and requires:
  * a failure: a positive exit status (a signal or a hang is not an error
    report; every command has a 10 s limit) or, for NBD requests, an error
    reply;
  * a message naming the cause: every `expect` substring appears in what
    the command printed (tool stderr, nbdkit's log, the client's error);
  * nothing written: every regular file under the row's directory (member
    images, copies, other arrays) is byte-identical by sha256 before and
    after.

Rows that cannot be built as root (permission bits do not stop root) or
without root (bind mounts) skip with the reason.
"""

import hashlib
import os
import random
import shutil
import stat
import struct
import subprocess
import tempfile
import unittest
from collections import namedtuple

import harness
from harness import Server, make_members, run_tool

MIB = 1 << 20
SIZE = 16 * MIB
TIMEOUT = 10
SB = 4096  # byte offset of the v1.2 superblock

Row = namedtuple("Row", "name setup command expect")


# --- superblock surgery (md v1.2 field offsets; see superblock.cc) -------

OFF_LAYOUT, OFF_SIZE, OFF_CHUNK = 76, 80, 88
OFF_NAME, OFF_CSUM, OFF_MAX_DEV = 32, 216, 220


def sb_checksum(sb):
    """md's calc_sb_1_csum: 32-bit LE words over 256 + 2*max_dev bytes with
    sb_csum taken as zero, folded to 32 bits."""
    max_dev = struct.unpack_from("<I", sb, OFF_MAX_DEV)[0]
    n = 256 + 2 * max_dev
    b = bytearray(sb[:n])
    b[OFF_CSUM:OFF_CSUM + 4] = bytes(4)
    total = sum(struct.unpack_from(f"<{n // 4}I", b))
    if n % 4:
        total += struct.unpack_from("<H", b, n - 2)[0]
    return ((total & 0xFFFFFFFF) + (total >> 32)) & 0xFFFFFFFF


def read_sb(path):
    with open(path, "rb") as f:
        f.seek(SB)
        return bytearray(f.read(4096))


def write_sb(path, sb):
    with open(path, "r+b") as f:
        f.seek(SB)
        f.write(sb)


def patch_field(path, off, fmt, value):
    """Rewrites one field and fixes the checksum: a well-formed superblock
    that describes something wrong."""
    sb = read_sb(path)
    assert sb_checksum(sb) == struct.unpack_from("<I", sb, OFF_CSUM)[0], path
    struct.pack_into(fmt, sb, off, value)
    struct.pack_into("<I", sb, OFF_CSUM, sb_checksum(sb))
    write_sb(path, sb)


def poke(path, off, data):
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(data)


# --- the row context ------------------------------------------------------

class Ctx:
    """One row's world: `dir` holds every file whose bytes must not change;
    `aux` holds sockets, pid files and logs (outside `dir`)."""

    def __init__(self, dir_, aux):
        self.dir = dir_
        self.aux = aux
        self.cleanups = []
        self.a = []  # the row's main array

    def array(self, sub="", n=3, size=SIZE, *create_args):
        d = os.path.join(self.dir, sub)
        os.makedirs(d, exist_ok=True)
        paths = make_members(d, n, size)
        run_tool("create", "--force", "--assume-clean", *create_args, *paths)
        return paths

    def path(self, name):
        return os.path.join(self.dir, name)

    def snapshot(self):
        sums = {}
        for d, _, files in os.walk(self.dir):
            for name in files:
                p = os.path.join(d, name)
                mode = os.lstat(p).st_mode
                if not stat.S_ISREG(mode):
                    continue
                # A mode-000 row: let the owner read it for the hash.
                locked = not os.access(p, os.R_OK)
                if locked:
                    os.chmod(p, stat.S_IMODE(mode) | stat.S_IRUSR)
                try:
                    h = hashlib.sha256()
                    with open(p, "rb") as f:
                        for block in iter(lambda: f.read(MIB), b""):
                            h.update(block)
                finally:
                    if locked:
                        os.chmod(p, stat.S_IMODE(mode))
                sums[os.path.relpath(p, self.dir)] = h.hexdigest()
        return sums


def run_cmd(argv):
    """(exit status or None on timeout, stdout + stderr)."""
    try:
        r = subprocess.run(argv, capture_output=True, text=True,
                           timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        if isinstance(out, bytes):
            out = out.decode(errors="replace")
        return None, f"{out}\n[timed out after {TIMEOUT} s: hung]"
    return r.returncode, r.stdout + r.stderr


# --- command builders: each returns a function of the row context ---------

def tool(*args):
    """uraid ARGS; callables in ARGS are called with ctx (and may expand to
    a list of paths)."""
    def build(c):
        argv = [harness.ARGS.tool]
        for a in args:
            v = a(c) if callable(a) else a
            argv += v if isinstance(v, list) else [v]
        return run_cmd(argv)
    return build


def plugin(members, *extra):
    """nbdkit with the plugin on a private socket; --run exits at once if it
    ever starts (status 0), so a wrongly accepted input cannot hang.
    Callables in `extra` are called with ctx."""
    def build(c):
        argv = ["nbdkit", "-U", "-", "--exit-with-parent", harness.ARGS.plugin]
        argv += [f"member={m}" for m in members(c)]
        argv += [a(c) if callable(a) else a for a in extra]
        argv += ["--run", "true"]
        return run_cmd(argv)
    return build


def serve(members, *extra):
    """`uraid serve` in the background mode users run; if it wrongly starts
    a daemon, the daemon is stopped again. Callables in `extra` are called
    with ctx."""
    def build(c):
        sock = os.path.join(c.aux, "serve.sock")
        pidfile = os.path.join(c.aux, "serve.pid")
        more = [a(c) if callable(a) else a for a in extra]
        rc, out = run_cmd([harness.ARGS.tool, "serve", "--socket", sock,
                           "--pidfile", pidfile, *more, *members(c)])
        if os.path.exists(pidfile):
            with open(pidfile) as f:
                pid = int(f.read().strip() or 0)
            if pid:
                os.kill(pid, 15)
            out += "\n[a server started]"
        return rc, out
    return build


def with_server(second):
    """Serves the row's array, runs `second` against the same members while
    it runs, then stops the server."""
    def build(c):
        srv = Server(c.aux, c.a)
        try:
            return second(c)
        finally:
            rc = srv.stop()
            if rc != 0:
                raise AssertionError(f"first server exited {rc}: "
                                     f"{srv.output()}")
    return build


def nbd_request(op):
    """Serves the row's array and sends one request with libnbd's
    client-side checks off, so the server sees it. Status 1 when the
    request failed; the output is the client's error and the server log."""
    def build(c):
        import nbd
        srv = Server(c.aux, c.a)
        try:
            h = srv.connect()
            h.set_strict_mode(0)
            size = h.get_size()
            try:
                op(h, size)
                rc, err = 0, "request succeeded"
            except nbd.Error as e:
                rc, err = 1, f"{e.string} (errno {e.errno})"
            h.shutdown()
        finally:
            stop = srv.stop()
        if stop != 0:
            raise AssertionError(f"server exited {stop}: {srv.output()}")
        return rc, err + "\n" + srv.output()
    return build


# --- setups ---------------------------------------------------------------

def array(c):
    c.a = c.array()


def corrupt_superblock(c):
    array(c)
    poke(c.a[1], SB, random.Random(8).randbytes(4096))


def wrong_magic(c):
    array(c)
    poke(c.a[2], SB, b"ABCD")


def bad_checksum(c):
    array(c)
    sb = read_sb(c.a[0])
    sb[OFF_NAME] ^= 0x20  # "uraid" -> "Uraid"; checksum left as it was
    write_sb(c.a[0], sb)


def blank_member(c):
    array(c)
    with open(c.a[2], "wb") as f:
        f.truncate(SIZE)


def foreign(c):
    array(c)
    c.b = c.array("other")


def copied_member(c):
    array(c)
    shutil.copy(c.a[1], c.path("m1-copy.img"))


def stale(c):
    """m0 is saved before the array is written and put back after."""
    array(c)
    saved = c.a[0] + ".saved"
    shutil.copy(c.a[0], saved)
    srv = Server(c.aux, c.a)
    try:
        h = srv.connect()
        h.pwrite(b"new data" * 512, 0)
        h.flush()
        h.shutdown()
    finally:
        if srv.stop() != 0:
            raise AssertionError(srv.output())
    os.replace(saved, c.a[0])


def truncated(c):
    array(c)
    with open(c.a[2], "r+b") as f:
        f.truncate(SIZE // 2)


def size_disagrees(c):
    array(c)
    patch_field(c.a[1], OFF_SIZE, "<Q", 8192)


def patch_all(off, fmt, value):
    def setup(c):
        array(c)
        for p in c.a:
            patch_field(p, off, fmt, value)
    return setup


# --- bitmap surgery (md's bitmap_super_t; see uraid/bitmap.h) ------------

BITMAP = 8192  # the bitmap area: 8 sectors after the v1.2 superblock
BM_MAGIC, BM_UUID, BM_EVENTS, BM_SYNC_SIZE, BM_CHUNK = 0, 8, 24, 40, 52
OFF_EVENTS = 200  # md superblock events


def bitmap_header(path):
    with open(path, "rb") as f:
        f.seek(BITMAP)
        head = f.read(256)
    assert struct.unpack_from("<I", head, BM_MAGIC)[0] == 0x6d746962, (
        f"{path}: no bitmap at byte {BITMAP} (the default is internal)")
    return head


def patch_bitmap_all(off, value_of):
    """Writes value_of(member path) (bytes) at `off` of the bitmap header of
    every member: a bitmap that decodes but does not fit this array."""
    def setup(c):
        array(c)
        for p in c.a:
            bitmap_header(p)
            poke(p, BITMAP + off, value_of(p))
    return setup


def member_events(path):
    return struct.unpack_from("<Q", read_sb(path), OFF_EVENTS)[0]


def bitmap_sync_size(path):
    return struct.unpack_from("<Q", bitmap_header(path), BM_SYNC_SIZE)[0]


# --- external bitmap files (md's --bitmap FILE: bitmap_super_t at byte 0) --

def file_array(c):
    """The row's array with its bitmap in c.path("md.bitmap")."""
    c.bitmap = c.path("md.bitmap")
    c.a = c.array("", 3, SIZE, "--bitmap", c.bitmap)


def file_array_and_other(c):
    """Plus a second array with its own bitmap file (other/other.bitmap)."""
    file_array(c)
    c.other_bitmap = c.path("other.bitmap")
    c.array("other", 3, SIZE, "--bitmap", c.other_bitmap)


def patch_bitmap_file(off, data):
    def setup(c):
        file_array(c)
        poke(c.bitmap, off, data)
    return setup


def truncated_bitmap_file(c):
    file_array(c)
    with open(c.bitmap, "r+b") as f:
        f.truncate(os.path.getsize(c.bitmap) - 1)


def internal_array_and_file(c):
    """An internal-bitmap array and, beside it, another array's file."""
    array(c)
    c.other_bitmap = c.path("other.bitmap")
    c.array("other", 3, SIZE, "--bitmap", c.other_bitmap)


def blank_members_and_used_file(c):
    """Members never created, and a non-empty file where the bitmap would
    go."""
    c.a = make_members(c.dir, 3, SIZE)
    with open(c.path("used.bitmap"), "wb") as f:
        f.write(b"precious")


def bitmap_key(name):
    return lambda c: f"bitmap={getattr(c, name)}"


def small_file(c):
    array(c)
    with open(c.path("small.img"), "wb") as f:
        f.truncate(MIB)


def tiny_file(c):
    array(c)
    with open(c.path("tiny.img"), "wb") as f:
        f.truncate(4096)


def fifo(c):
    array(c)
    os.mkfifo(os.path.join(c.aux, "fifo"))


def directory(c):
    array(c)
    os.mkdir(c.path("adir"))


def unreadable(c):
    if os.geteuid() == 0:
        raise unittest.SkipTest("root reads files whatever their mode; the "
                                "'path that does not exist' rows cover a "
                                "member that cannot be opened")
    array(c)
    os.chmod(c.a[1], 0)
    c.cleanups.append(lambda: os.chmod(c.a[1], 0o644))


def read_only(c):
    """The members seen through a read-only bind mount (EROFS even for
    root; chmod would not stop root)."""
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root for a read-only bind mount")
    array(c)
    ro = os.path.join(c.aux, "ro")
    os.mkdir(ro)
    subprocess.run(["mount", "--bind", c.dir, ro], check=True)
    c.cleanups.append(lambda: subprocess.run(["umount", ro], check=True))
    subprocess.run(["mount", "-o", "remount,bind,ro", ro], check=True)
    c.ro = [os.path.join(ro, os.path.basename(p)) for p in c.a]


# --- the table ------------------------------------------------------------

def A(c):
    return c.a


ROWS = [
    # Corrupt or foreign metadata.
    Row("corrupt superblock (random bytes): detail", corrupt_superblock,
        tool("detail", A), ("m1.img", "not an md superblock")),
    Row("corrupt superblock (random bytes): examine", corrupt_superblock,
        tool("examine", lambda c: c.a[1]), ("m1.img", "not an md superblock")),
    Row("corrupt superblock (random bytes): check", corrupt_superblock,
        tool("check", A), ("m1.img", "not an md superblock")),
    Row("corrupt superblock (random bytes): serve", corrupt_superblock,
        serve(A), ("m1.img", "not an md superblock")),
    Row("corrupt superblock (random bytes): plugin", corrupt_superblock,
        plugin(A), ("m1.img", "not an md superblock")),
    Row("wrong magic: plugin", wrong_magic, plugin(A),
        ("m2.img", "not an md superblock", "magic 0x44434241")),
    Row("wrong magic: detail", wrong_magic, tool("detail", A),
        ("m2.img", "not an md superblock", "magic 0x44434241")),
    Row("bad checksum (a byte of the name flipped): detail", bad_checksum,
        tool("detail", A), ("m0.img", "bad superblock checksum")),
    Row("bad checksum (a byte of the name flipped): plugin", bad_checksum,
        plugin(A), ("m0.img", "bad superblock checksum")),
    Row("blank member (no superblock): plugin", blank_member, plugin(A),
        ("m2.img", "not an md superblock")),
    Row("foreign member (from another array): plugin", foreign,
        plugin(lambda c: c.a[:2] + c.b[2:]),
        ("other/m2.img", "different array")),
    Row("foreign member (from another array): detail", foreign,
        tool("detail", lambda c: c.a[:2] + c.b[2:]),
        ("other/m2.img", "different array")),
    # The same member twice.
    Row("duplicate member (same path twice): plugin", array,
        plugin(lambda c: [c.a[0], c.a[1], c.a[1]]),
        ("m1.img", "twice", "same device")),
    Row("duplicate member (same path twice): detail", array,
        tool("detail", lambda c: [c.a[0], c.a[1], c.a[1]]),
        ("m1.img", "same device")),
    Row("duplicate member (same path twice): create", array,
        tool("create", "--force", lambda c: [c.a[0], c.a[1], c.a[1]]),
        ("m1.img", "same device")),
    Row("duplicate member (a copy of one): plugin", copied_member,
        plugin(lambda c: [c.a[0], c.a[1], c.path("m1-copy.img")]),
        ("m1-copy.img", "same device")),
    # Events, counts and sizes.
    Row("stale member (saved before writes, restored after): plugin", stale,
        plugin(A), ("m0.img", "stale")),
    Row("stale member (saved before writes, restored after): detail", stale,
        tool("detail", A), ("m0.img", "stale")),
    Row("too many missing (1 of 3 given): plugin", array,
        plugin(lambda c: c.a[:1]), ("2 of 3 members are missing",)),
    Row("too many missing: create with 2 'missing'", array,
        tool("create", "--force", lambda c: c.a[0], "missing", "missing"),
        ("2 members given as missing",)),
    Row("too few members: create with 2", array,
        tool("create", "--force", lambda c: c.a[:2]),
        ("at least 3 members", "got 2")),
    Row("size mismatch (member truncated): plugin", truncated, plugin(A),
        ("m2.img", "too small", "truncated")),
    Row("size mismatch (member truncated): check", truncated,
        tool("check", A), ("m2.img", "too small", "truncated")),
    Row("size mismatch (component sizes disagree): plugin", size_disagrees,
        plugin(A), ("m1.img", "disagree on component size")),
    Row("size mismatch: create --size larger than the members", array,
        tool("create", "--force", "--size", "64M", A),
        ("requested size", "exceeds")),
    # Geometry.
    Row("chunk not a power of two: create --chunk 48K", array,
        tool("create", "--force", "--chunk", "48K", A),
        ("chunk size 49152 is not a power of two",)),
    Row("chunk not a power of two: in every superblock",
        patch_all(OFF_CHUNK, "<I", 96), plugin(A),
        ("chunk size 49152 is not a power of two",)),
    Row("chunk too large: create --chunk 32M", array,
        tool("create", "--force", "--chunk", "32M", A),
        ("chunk size 32 MiB is out of range",)),
    Row("chunk too small: create --chunk 2K", array,
        tool("create", "--force", "--chunk", "2K", A),
        ("chunk size 2 KiB is out of range",)),
    Row("layout out of range: create --layout 9", array,
        tool("create", "--force", "--layout", "9", A),
        ("unknown layout '9'",)),
    Row("layout out of range: layout 9 in every superblock",
        patch_all(OFF_LAYOUT, "<I", 9), plugin(A),
        ("invalid array", "layout 9")),
    Row("member too small: create on a 1 MiB file", small_file,
        tool("create", "--force", lambda c: [c.path("small.img")] + c.a[1:]),
        ("small.img", "too small")),
    Row("member too small to hold a superblock: plugin", tiny_file,
        plugin(lambda c: c.a[:2] + [c.path("tiny.img")]),
        ("tiny.img", "too small")),
    Row("existing superblock: create without --force", array,
        tool("create", A), ("m0.img", "already holds an md superblock")),
    # The write-intent bitmap (md's bitmap_super_t at byte 8192), patched
    # the same in every member.
    Row("bitmap: wrong magic: plugin",
        patch_bitmap_all(BM_MAGIC, lambda p: struct.pack("<I", 0x12345678)),
        plugin(A), ("bitmap", "corrupt", "magic 0x12345678")),
    Row("bitmap: wrong magic: serve",
        patch_bitmap_all(BM_MAGIC, lambda p: struct.pack("<I", 0x12345678)),
        serve(A), ("bitmap", "magic 0x12345678")),
    Row("bitmap: foreign uuid: plugin",
        patch_bitmap_all(BM_UUID, lambda p: bytes(range(1, 17))),
        plugin(A), ("bitmap", "another array",
                    "01020304:05060708:090a0b0c:0d0e0f10")),
    Row("bitmap: wrong sync size: plugin",
        patch_bitmap_all(BM_SYNC_SIZE, lambda p: struct.pack(
            "<Q", bitmap_sync_size(p) + 128)),
        plugin(A), ("bitmap sync_size", "differs from the component size")),
    Row("bitmap: events far ahead of the superblocks: plugin",
        patch_bitmap_all(BM_EVENTS, lambda p: struct.pack(
            "<Q", member_events(p) + 1000)),
        plugin(A), ("bitmap events", "1000 ahead")),
    Row("bitmap: chunksize not a power of two: plugin",
        patch_bitmap_all(BM_CHUNK, lambda p: struct.pack("<I", 3 * MIB)),
        plugin(A), ("bitmap chunksize", "not a power of two")),
    # External bitmap files (create --bitmap FILE; bitmap=FILE at assembly).
    Row("bitmap file: another array's file: plugin", file_array_and_other,
        plugin(A, bitmap_key("other_bitmap")),
        ("bitmap file", "other.bitmap", "another array")),
    Row("bitmap file: another array's file: serve", file_array_and_other,
        serve(A, "--bitmap", lambda c: c.other_bitmap),
        ("bitmap file", "other.bitmap", "another array")),
    Row("bitmap file: corrupt magic: plugin",
        patch_bitmap_file(BM_MAGIC, struct.pack("<I", 0x12345678)),
        plugin(A, bitmap_key("bitmap")),
        ("md.bitmap", "corrupt", "magic 0x12345678")),
    Row("bitmap file: corrupt magic: detail --bitmap",
        patch_bitmap_file(BM_MAGIC, struct.pack("<I", 0x12345678)),
        tool("detail", "--bitmap", lambda c: c.bitmap, A),
        ("md.bitmap", "corrupt", "magic 0x12345678")),
    Row("bitmap file: chunksize not a power of two: plugin",
        patch_bitmap_file(BM_CHUNK, struct.pack("<I", 3 * MIB)),
        plugin(A, bitmap_key("bitmap")),
        ("md.bitmap", "bitmap chunksize", "not a power of two")),
    Row("bitmap file: events far ahead: plugin",
        patch_bitmap_file(BM_EVENTS, struct.pack("<Q", 1000)),
        plugin(A, bitmap_key("bitmap")), ("md.bitmap", "bitmap events")),
    Row("bitmap file: truncated: plugin", truncated_bitmap_file,
        plugin(A, bitmap_key("bitmap")), ("md.bitmap", "truncated")),
    Row("bitmap file: does not exist: plugin", file_array,
        plugin(A, lambda c: f"bitmap={c.path('gone.bitmap')}"),
        ("gone.bitmap", "No such file or directory")),
    Row("bitmap file: is a member: plugin", file_array,
        plugin(A, lambda c: f"bitmap={c.a[1]}"),
        ("bitmap file", "m1.img", "member")),
    Row("bitmap file: for an array with an internal bitmap: plugin",
        internal_array_and_file, plugin(A, bitmap_key("other_bitmap")),
        ("other.bitmap", "internal bitmap")),
    Row("bitmap file: create over an existing file without --force",
        blank_members_and_used_file,
        tool("create", "--bitmap", lambda c: c.path("used.bitmap"), A),
        ("used.bitmap", "already exists", "--force")),
    Row("bitmap file: create in a directory that does not exist", array,
        tool("create", "--force", "--bitmap",
             lambda c: c.path("nodir/md.bitmap"), A),
        ("nodir/md.bitmap", "directory does not exist")),
    Row("bitmap file: create with a member as the file",
        blank_members_and_used_file,
        tool("create", "--bitmap", lambda c: c.a[2], A),
        ("bitmap file", "m2.img", "member")),
    Row("bitmap: create --bitmap none --bitmap-chunk 1M", array,
        tool("create", "--force", "--bitmap", "none", "--bitmap-chunk", "1M",
             A), ("--bitmap-chunk", "--bitmap none")),
    # Members that cannot be opened, or are not files.
    Row("member path does not exist: plugin", array,
        plugin(lambda c: c.a[:2] + [c.path("nope.img")]),
        ("nope.img", "No such file or directory")),
    Row("member path does not exist: detail", array,
        tool("detail", lambda c: c.a[:2] + [c.path("nope.img")]),
        ("nope.img", "No such file or directory")),
    Row("member path does not exist: examine", array,
        tool("examine", lambda c: c.path("nope.img")),
        ("nope.img", "No such file or directory")),
    Row("unreadable member (mode 000, not root): plugin", unreadable,
        plugin(A), ("m1.img", "Permission denied")),
    Row("read-only member (read-only bind mount): plugin", read_only,
        plugin(lambda c: c.ro), ("m0.img", "Read-only file system")),
    Row("read-only member (read-only bind mount): create", read_only,
        tool("create", "--force", lambda c: c.ro),
        ("m0.img", "Read-only file system")),
    Row("member is a FIFO: plugin", fifo,
        plugin(lambda c: c.a[:2] + [os.path.join(c.aux, "fifo")]),
        ("fifo", "not a regular file or block device")),
    Row("member is a FIFO: detail", fifo,
        tool("detail", lambda c: c.a[:2] + [os.path.join(c.aux, "fifo")]),
        ("fifo", "not a regular file or block device")),
    Row("member is a FIFO: examine", fifo,
        tool("examine", lambda c: os.path.join(c.aux, "fifo")),
        ("fifo", "not a regular file or block device")),
    Row("member is a character device (/dev/null): detail", array,
        tool("detail", lambda c: c.a[:2] + ["/dev/null"]),
        ("/dev/null", "not a regular file or block device")),
    Row("member path is a directory: plugin", directory,
        plugin(lambda c: c.a[:2] + [c.path("adir")]),
        ("adir", "is a directory")),
    Row("member path is a directory: detail", directory,
        tool("detail", lambda c: c.a[:2] + [c.path("adir")]),
        ("adir", "is a directory")),
    Row("member path is a directory: examine", directory,
        tool("examine", lambda c: c.path("adir")),
        ("adir", "is a directory")),
    Row("member path is a directory: create", directory,
        tool("create", "--force", lambda c: c.a[:2] + [c.path("adir")]),
        ("adir", "is a directory")),
    # Requests past the end of a served array (libnbd strict mode off, so
    # the server has to refuse them).
    Row("request past the end: read at the end", array,
        nbd_request(lambda h, size: h.pread(4096, size)),
        ("Invalid argument", "NBD_CMD_READ", "out of range")),
    Row("request past the end: write straddling the end", array,
        nbd_request(lambda h, size: h.pwrite(b"x" * 8192, size - 4096)),
        ("NBD_CMD_WRITE", "out of range")),
    Row("request past the end: write far beyond", array,
        nbd_request(lambda h, size: h.pwrite(b"x" * 4096, 1 << 62)),
        ("NBD_CMD_WRITE", "out of range")),
    Row("request past the end: write-zeroes", array,
        nbd_request(lambda h, size: h.zero(65536, size - 4096)),
        ("NBD_CMD_WRITE_ZEROES", "out of range")),
    Row("request past the end: trim", array,
        nbd_request(lambda h, size: h.trim(65536, size - 4096)),
        ("NBD_CMD_TRIM", "out of range")),
    # Plugin keys.
    Row("unknown plugin key", array, plugin(A, "bogus=1"),
        ("unknown parameter 'bogus'",)),
    Row("malformed boolean: direct=maybe", array, plugin(A, "direct=maybe"),
        ("boolean", "maybe")),
    Row("malformed boolean: force=2x", array, plugin(A, "force=2x"),
        ("boolean", "2x")),
    Row("empty member path: member=", array, plugin(A, "member="),
        ("empty path",)),
    Row("no members at all", array, plugin(lambda c: []), ("no members",)),
    Row("control socket in a directory that does not exist", array,
        plugin(A, "control=/nonexistent-dir/c.sock"),
        ("/nonexistent-dir/c.sock",)),
    Row("malformed size: cache=banana", array, plugin(A, "cache=banana"),
        ("size", "banana")),
    Row("malformed number: cache-age=soon", array,
        plugin(A, "cache-age=soon"), ("cache-age", "expected a number")),
    # Members already served: locked.
    Row("second server on the same members: plugin", array,
        with_server(plugin(A)), ("m0.img", "in use")),
    Row("second server on the same members: uraid serve", array,
        with_server(serve(A)), ("m0.img", "in use")),
    Row("create over a served array", array,
        with_server(tool("create", "--force", A)), ("m0.img", "in use")),
]


class BadInputTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-bad-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_row(self, i, row):
        c = Ctx(os.path.join(self.tmp, f"row{i}"),
                os.path.join(self.tmp, f"aux{i}"))
        os.makedirs(c.dir)
        os.makedirs(c.aux)
        try:
            row.setup(c)
            before = c.snapshot()
            self.assertTrue(before, "the row has no files to watch")
            rc, out = row.command(c)
            after = c.snapshot()
        finally:
            for fn in reversed(c.cleanups):
                fn()
        self.assertIsNotNone(rc, f"hung instead of refusing:\n{out}")
        self.assertGreater(rc, 0, f"did not fail (status {rc}):\n{out}")
        for want in row.expect:
            self.assertIn(want, out, "the message does not name the cause")
        changed = sorted(k for k in set(before) | set(after)
                         if before.get(k) != after.get(k))
        self.assertEqual(changed, [], "files changed by a refused command")

    def test_catalogue(self):
        names = [r.name for r in ROWS]
        self.assertEqual(len(names), len(set(names)), "row names repeat")
        for i, row in enumerate(ROWS):
            with self.subTest(row.name):
                self.run_row(i, row)


if __name__ == "__main__":
    harness.main()
