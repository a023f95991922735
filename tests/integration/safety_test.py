# SPDX-License-Identifier: MIT
"""mdadm's safety rails in `uraid create` and `uraid zero-superblock`.

Refusals (the bad_input_test catalogue's rules: a positive exit status, a
message naming the cause, every file under the row's directory unchanged
by sha256): create over a member holding a filesystem, a partition table or
another RAID signature (found by libblkid), over our own md superblock,
over members whose sizes differ by more than 1%; `--chunk 64` and
the other sizes mdadm reads in KiB given without a unit;
zero-superblock of a member a running server holds, or of one without a
superblock. Then what the rails must let through (so that they cannot pass
by refusing everything), zero-superblock erasing only the superblock, a
create interrupted by SIGINT during its initial parity computation, the
did-you-mean of unknown commands, --version and exit status 2 for bad
options. And `uraid serve`'s rails: md's --run rule (an active member
forgotten is refused, by name, writing nothing), and members another
server locks or this user may not write, named before "serving" is said.
"""

import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time
import unittest
from collections import namedtuple

import harness
from bad_input_test import Ctx, run_cmd, tool, with_server, read_sb
from harness import Server, make_members, run_tool

MIB = 1 << 20
SIZE = 16 * MIB
SB = 4096
BITMAP = 8192

Row = namedtuple("Row", "name setup command expect")


# --- setups ---------------------------------------------------------------

def blank(c, n=3, size=SIZE):
    c.a = make_members(c.dir, n, size)


def ext4_on_m2(c):
    blank(c)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-L", "precious", c.a[2]],
                   check=True, capture_output=True)
    c.uuid = blkid_value(c.a[2], "UUID")


def dos_table_on_m1(c):
    """An MBR partition table (disk identifier 0x1234abcd, one Linux
    partition at 1 MiB), written by hand: util-linux's sfdisk is not in
    Debian's base set."""
    blank(c)
    mbr = bytearray(512)
    struct.pack_into("<I", mbr, 440, 0x1234ABCD)
    struct.pack_into("<B3sB3sII", mbr, 446, 0, b"\x00\x02\x00", 0x83,
                     b"\xff\xff\xff", 2048, 8192)
    mbr[510:512] = b"\x55\xaa"
    with open(c.a[1], "r+b") as f:
        f.write(mbr)


def swap_on_m0(c):
    blank(c)
    subprocess.run(["mkswap", c.a[0]], check=True, capture_output=True)


def md11_on_m1(c):
    """Another RAID signature: an md v1.1 superblock (at byte 0), which
    uraid does not use but md does. Made from one of our v1.2 superblocks:
    super_offset 0, checksum fixed."""
    from bad_input_test import sb_checksum, OFF_CSUM
    blank(c)
    other = make_members(c.aux, 3, SIZE)
    run_tool("create", "--assume-clean", *other)
    sb = read_sb(other[0])
    struct.pack_into("<Q", sb, 144, 0)  # super_offset
    struct.pack_into("<I", sb, OFF_CSUM, sb_checksum(sb))
    with open(c.a[1], "r+b") as f:
        f.write(sb)
    c.uuid = blkid_value(c.a[1], "UUID")


def our_array(c):
    blank(c)
    run_tool("create", "--assume-clean", *c.a)


def sizes_differ(c):
    c.a = make_members(c.dir, 3, SIZE)
    with open(c.path("m3.img"), "wb") as f:
        f.truncate(SIZE // 2)
    c.a.append(c.path("m3.img"))


def blkid_value(path, tag):
    r = subprocess.run(["blkid", "-p", "-o", "value", "-s", tag, path],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip(), (
        f"blkid sees no {tag} on {path}: {r.stdout} {r.stderr}")
    return r.stdout.strip()


def A(c):
    return c.a


ROWS = [
    Row("create over an ext4 filesystem", ext4_on_m2, tool("create", A),
        ("m2.img holds an ext4 filesystem", "label precious",
         "use --force to overwrite it")),
    Row("create over a dos partition table", dos_table_on_m1,
        tool("create", A), ("m1.img holds a dos partition table",
                            "PTUUID 1234abcd", "--force")),
    Row("create over an md v1.1 superblock (another RAID signature)",
        md11_on_m1, tool("create", A),
        ("m1.img holds a linux_raid_member RAID signature", "version 1.1",
         "--force")),
    Row("create over swap", swap_on_m0, tool("create", A),
        ("m0.img holds a swap signature", "--force")),
    Row("create over our own md superblock (the library's message)",
        our_array, tool("create", A),
        ("m0.img already holds an md superblock", "--force")),
    Row("create over members whose sizes differ by more than 1%",
        sizes_differ, tool("create", A),
        ("differ by more than 1%", "the smallest, ", "m3.img", "(8 MiB)",
         "m0.img 8 MiB of 16 MiB", "m2.img 8 MiB of 16 MiB", "--size",
         "--force")),
    Row("create --chunk 64 (a number without a unit)", blank,
        tool("create", "--chunk", "64", A), ("did you mean 64K?",)),
    Row("zero-superblock of a served member", our_array,
        with_server(tool("zero-superblock", lambda c: c.a[1])),
        ("m1.img is in use by a running array",)),
    Row("zero-superblock of a member without a superblock", blank,
        tool("zero-superblock", lambda c: c.a[0]),
        ("m0.img holds no md superblock",)),
]


def wait_gone(pidfile, timeout=30):
    """Waits for the nbdkit that wrote `pidfile` to exit."""
    with open(pidfile) as f:
        pid = int(f.read())
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"nbdkit {pid} still running")


def sha(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class SafetyTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-safety-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def ctx(self, name):
        c = Ctx(os.path.join(self.tmp, name), os.path.join(self.tmp,
                                                           name + "-aux"))
        os.makedirs(c.dir)
        os.makedirs(c.aux)
        return c

    def test_refusals_write_nothing(self):
        for i, row in enumerate(ROWS):
            with self.subTest(row.name):
                c = self.ctx(f"row{i}")
                row.setup(c)
                before = c.snapshot()
                rc, out = row.command(c)
                after = c.snapshot()
                self.assertIsNotNone(rc, f"hung:\n{out}")
                self.assertGreater(rc, 0, f"did not fail:\n{out}")
                for want in row.expect:
                    self.assertIn(want, out)
                if hasattr(c, "uuid"):
                    self.assertIn(f"UUID {c.uuid}", out)
                self.assertEqual(before, after,
                                 "files changed by a refused command")

    def test_chunk_hint_is_a_usage_error(self):
        c = self.ctx("chunk")
        blank(c)
        rc, out = run_cmd([harness.ARGS.tool, "create", "--chunk", "64",
                           *c.a])
        self.assertEqual(rc, 2, out)
        self.assertIn("--chunk 64 has no unit", out)
        # mdadm reads a bare number as KiB, uraid read bytes: a number
        # without a unit is refused wherever mdadm reads KiB, with both
        # readings offered; nothing is written.
        for opt, value, meant in (
                ("--chunk", "65536", "did you mean 64K (65536 bytes) or "
                                     "65536K?"),
                ("--size", "1048576", "did you mean 1M (1048576 bytes) or "
                                      "1048576K?"),
                ("--bitmap-chunk", "64", "did you mean 64K?"),
                ("--data-offset", "2048", "did you mean 2K (2048 bytes) or "
                                          "2048K?")):
            with self.subTest(opt=opt):
                rc, out = run_cmd([harness.ARGS.tool, "create",
                                   "--assume-clean", opt, value, *c.a])
                self.assertEqual(rc, 2, out)
                self.assertIn(f"{opt} {value} has no unit", out)
                self.assertIn(meant, out)
        for argv in (["grow", "--chunk", "128", "x"],
                     ["map", "--disks", "4", "--chunk", "64", "0"]):
            with self.subTest(argv=argv):
                rc, out = run_cmd([harness.ARGS.tool, *argv])
                self.assertEqual(rc, 2, out)
                self.assertIn("has no unit", out)
        self.assertEqual(read_sb(c.a[0]), bytes(len(read_sb(c.a[0]))),
                         "a refused create wrote a superblock")
        # With a unit it works.
        rc, out = run_cmd([harness.ARGS.tool, "create", "--assume-clean",
                           "--chunk", "64K", *c.a])
        self.assertEqual(rc, 0, out)
        self.assertIn("Chunk Size : 64K", out)

    def test_force_and_close_sizes_pass(self):
        # --force overwrites what the probe found; blkid then sees md.
        c = self.ctx("force")
        ext4_on_m2(c)
        rc, out = run_cmd([harness.ARGS.tool, "create", "--force",
                           "--assume-clean", *c.a])
        self.assertEqual(rc, 0, out)
        self.assertEqual(blkid_value(c.a[2], "TYPE"), "linux_raid_member")
        # Sizes within 1% (16 MiB and 16 MiB + 128 KiB: 0.8%) are fine.
        c = self.ctx("close")
        blank(c)
        with open(c.a[2], "r+b") as f:
            f.truncate(SIZE + 128 * 1024)
        rc, out = run_cmd([harness.ARGS.tool, "create", "--assume-clean",
                           *c.a])
        self.assertEqual(rc, 0, out)
        # Sizes that differ more pass with an explicit --size.
        c = self.ctx("size")
        sizes_differ(c)
        rc, out = run_cmd([harness.ARGS.tool, "create", "--assume-clean",
                           "--size", "4M", *c.a])
        self.assertEqual(rc, 0, out)

    def test_zero_superblock_erases_only_the_superblock(self):
        c = self.ctx("zero")
        blank(c)
        run_tool("create", *c.a)  # internal bitmap at byte 8192
        with open(c.a[0], "rb") as f:
            before = f.read()
        r = run_tool("zero-superblock", c.a[0], c.a[1])
        self.assertIn(f"{c.a[0]}: md superblock erased", r.stdout)
        with open(c.a[0], "rb") as f:
            after = f.read()
        self.assertEqual(after[SB:SB + 4096], bytes(4096))
        self.assertNotEqual(before[SB:SB + 4], bytes(4))
        # Everything else is as it was: the bitmap (mdadm leaves it too)
        # and the data.
        self.assertEqual(after[:SB], before[:SB])
        self.assertEqual(after[SB + 4096:], before[SB + 4096:])
        self.assertEqual(after[BITMAP:BITMAP + 4], b"bitm")
        # md agrees that the superblock is gone; create accepts the member
        # again without --force.
        r = subprocess.run(["mdadm", "--examine", c.a[0]],
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        r = run_tool("zero-superblock", "--force", c.a[0])
        self.assertIn("no md superblock", r.stdout)
        run_tool("create", "--force", "--assume-clean", *c.a)
        # add's refusal of another array's member points here, not to mdadm.
        with open(harness.ARGS.tool, "rb") as f:
            self.assertNotIn(b"mdadm --zero-superblock", f.read(),
                             "the tool still tells users to run mdadm")

    def test_sigint_during_initial_parity(self):
        c = self.ctx("sigint")
        size = 96 * MIB  # at 200 MB/s per member (md's default): ~0.5 s
        block = bytes(range(256)) * 4096
        c.a = []
        for i in range(3):
            p = c.path(f"m{i}.img")
            with open(p, "wb") as f:
                for _ in range(size // len(block)):
                    f.write(block)
            c.a.append(p)
        proc = subprocess.Popen([harness.ARGS.tool, "create", *c.a],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        seen = ""
        deadline = time.time() + 20
        while time.time() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            seen += line
            if re.search(r"\d+\.\d%", line):  # the progress line
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=30)
        err = seen + err
        self.assertEqual(proc.returncode, 1, err)
        self.assertIn("interrupted during the initial parity computation",
                      err)
        self.assertIn("needs a resync", err)
        self.assertNotIn("Created array", out)
        # The array exists and says it needs its resync; served, it gets it.
        r = run_tool("detail", "--json", *c.a)
        import json
        info = json.loads(r.stdout)
        self.assertFalse(info["clean"], r.stdout)
        ctl = os.path.join(c.aux, "ctl.sock")
        srv = Server(c.aux, c.a, extra=["control=" + ctl])
        try:
            harness.control_call(ctl, {"cmd": "detail"})  # up
            run_tool("detail", "--control", ctl, "--wait")
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        r = run_tool("detail", "--json", *c.a)
        self.assertTrue(json.loads(r.stdout)["clean"], r.stdout)

    def serve(self, c, *args):
        sock = os.path.join(c.aux, "serve.sock")
        pid = os.path.join(c.aux, "serve.pid")
        return sock, pid, [harness.ARGS.tool, "serve", "--socket", sock,
                           "--pidfile", pid, *args]

    def test_serve_needs_run_for_a_forgotten_member(self):
        c = self.ctx("run")
        blank(c)
        rc, out = run_cmd([harness.ARGS.tool, "create", "--assume-clean",
                           *c.a])
        self.assertEqual(rc, 0, out)
        before = c.snapshot()
        sock, pid, argv = self.serve(c, *c.a[:2])
        rc, out = run_cmd(argv)
        self.assertGreater(rc, 0, out)
        self.assertIn("slot 2 (device 2) not given", out)
        self.assertIn("--run", out)
        self.assertNotIn("serving array", out)
        self.assertFalse(os.path.exists(sock), "a refused serve listened")
        self.assertEqual(before, c.snapshot(), "a refused serve wrote")
        # The plugin holds the same rule, and names its key.
        out = harness.start_fails(c.aux, c.a[:2])
        self.assertIn("run=true", out)
        self.assertEqual(before, c.snapshot(), "a refused plugin wrote")
        # --run starts it degraded.
        sock, pid, argv = self.serve(c, "--run", *c.a[:2])
        r = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, URAID_PLUGIN=harness.ARGS.plugin))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("serving array", r.stdout)
        deadline = time.time() + 30
        while not (os.path.exists(pid) and os.path.getsize(pid) > 0):
            self.assertLess(time.time(), deadline, "the daemon never started")
            time.sleep(0.05)
        try:
            import nbd
            h = nbd.NBD()
            h.connect_unix(sock)
            self.assertEqual(h.pread(4096, 0), bytes(4096))
            h.shutdown()
        finally:
            with open(pid) as f:
                os.kill(int(f.read()), signal.SIGTERM)
            wait_gone(pid)

    def test_serve_checks_locks_and_permissions_first(self):
        c = self.ctx("locks")
        blank(c)
        rc, out = run_cmd([harness.ARGS.tool, "create", "--assume-clean",
                           *c.a])
        self.assertEqual(rc, 0, out)
        # Members another server holds: named, nothing said of serving.
        srv = Server(c.aux, c.a)
        try:
            srv.connect().shutdown()
            sock, _, argv = self.serve(c, *c.a)
            rc, out = run_cmd(argv)
            self.assertGreater(rc, 0, out)
            self.assertIn("in use by another uraid process (locked)", out)
            self.assertNotIn("serving array", out)
            self.assertFalse(os.path.exists(sock))
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        # A member this user may not write (the tests run as root, whom
        # modes do not stop: run the tool as nobody, who may read them).
        if os.geteuid() != 0 or shutil.which("setpriv") is None:
            self.skipTest("needs root and setpriv to act as another user")
        for d in (self.tmp, c.dir, c.aux):
            os.chmod(d, 0o777)
        for m in c.a:
            os.chmod(m, 0o644)
        nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup",
                  "--clear-groups"]
        probe = run_cmd(nobody + [harness.ARGS.tool, "--version"])
        if probe[0] != 0:
            self.skipTest(f"nobody cannot run the tool here: {probe[1]}")
        before = c.snapshot()
        sock, _, argv = self.serve(c, *c.a)
        rc, out = run_cmd(nobody + argv)
        self.assertGreater(rc, 0, out)
        self.assertIn("Permission denied", out)
        self.assertIn("m0.img", out)
        self.assertNotIn("serving array", out)
        self.assertEqual(before, c.snapshot())
        # Read-only serving needs only read permission, so it gets past
        # the members (it may still be refused later for the socket).
        _, pid, argv = self.serve(c, *c.a)
        try:
            rc, out = run_cmd(nobody + argv[:2] + ["--readonly"] + argv[2:])
        finally:
            # Where it got going, the server it left in the background.
            if os.path.exists(pid):
                with open(pid) as f:
                    try:
                        os.kill(int(f.read().strip()), signal.SIGTERM)
                    except (ValueError, ProcessLookupError):
                        pass
        self.assertNotIn("Permission denied", out.split("serving array")[0])

    def test_command_names_and_usage_errors(self):
        r = run_tool("detial", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("uraid: unknown command 'detial' (did you mean "
                      "detail?)", r.stderr)
        r = run_tool("frobnicate", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown command 'frobnicate'", r.stderr)
        self.assertNotIn("did you mean", r.stderr)
        r = run_tool("--version")
        self.assertRegex(r.stdout.strip(), r"^uraid \d+\.\d+\.\d+$")
        for argv in (["create", "--bogus", "x"], ["detail", "--nope"],
                     ["serve", "--port", "many", "x"], ["zero-superblock"],
                     ["map", "--disks", "1", "0"], [],
                     ["grow", "--chunk", "64", "x"]):
            with self.subTest(argv=argv):
                r = run_tool(*argv, check=False)
                self.assertEqual(r.returncode, 2, (argv, r.stderr))
                self.assertTrue(r.stderr.startswith("uraid: "), r.stderr)


if __name__ == "__main__":
    harness.main()
