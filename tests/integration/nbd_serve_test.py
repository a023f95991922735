# SPDX-License-Identifier: MIT
"""End to end: `uraid create`, nbdkit serving the plugin on a unix socket,
libnbd as the client; then the member files read directly and checked
against an independent md layout model; then served with a member left
out and read back whole; several connections at once; refusals."""

import os
import random
import signal
import struct
import subprocess
import tempfile
import threading
import unittest

import harness
from harness import Server, make_members, md_place, run_tool, start_fails

MIB = 1 << 20


def data_offset_bytes(path):
    with open(path, "rb") as f:
        f.seek(4096 + 128)
        return struct.unpack("<Q", f.read(8))[0] * 512


def resync_offset(path):
    with open(path, "rb") as f:
        f.seek(4096 + 208)
        return struct.unpack("<Q", f.read(8))[0]


class ServeTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-it-")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def check_layout(self, paths, ref, layout, chunk):
        n = len(paths)
        off = data_offset_bytes(paths[0])
        files = [open(p, "rb") for p in paths]
        try:
            chunks = len(ref) // chunk
            stripes = {}
            for c in range(chunks):
                disk, pd, stripe = md_place(c, n, layout)
                files[disk].seek(off + stripe * chunk)
                got = files[disk].read(chunk)
                self.assertEqual(got, bytes(ref[c * chunk:(c + 1) * chunk]),
                                 f"chunk {c} not on disk {disk} where md "
                                 f"puts it (layout {layout})")
                stripes.setdefault(stripe, pd)
            for stripe, pd in stripes.items():
                row = []
                for d in range(n):
                    files[d].seek(off + stripe * chunk)
                    row.append(files[d].read(chunk))
                self.assertEqual(harness.xor_bytes(row), bytes(chunk),
                                 f"parity of stripe {stripe} is wrong")
        finally:
            for f in files:
                f.close()

    def run_layout(self, layout, disks, chunk, size=24 * MIB):
        paths = make_members(self.tmp, disks, size)
        run_tool("create", "--force", "--layout", str(layout), "--chunk",
                 f"{chunk // 1024}K", *paths)
        srv = Server(self.tmp, paths)
        rng = random.Random(layout * 100 + disks)
        try:
            h = srv.connect()
            total = h.get_size()
            self.assertEqual(h.get_block_size(0), 4096)  # minimum
            self.assertTrue(h.can_multi_conn())
            self.assertTrue(h.can_fua())
            ref = bytearray(total)
            for i in range(120):
                blocks = rng.choice([1, 2, 16, 256])
                length = min(blocks * 4096, total)
                off = rng.randrange(0, (total - length) // 4096 + 1) * 4096
                data = rng.randbytes(length)
                flags = 1 if i % 7 == 0 else 0  # LIBNBD_CMD_FLAG_FUA
                h.pwrite(data, off, flags)
                ref[off:off + length] = data
                if i % 10 == 0:
                    check = rng.randrange(0, total - 65536) // 4096 * 4096
                    self.assertEqual(h.pread(65536, check),
                                     bytes(ref[check:check + 65536]))
            h.flush()
            for off in range(0, total, 8 * MIB):
                n = min(8 * MIB, total - off)
                self.assertEqual(h.pread(n, off), bytes(ref[off:off + n]))
            # zero and trim keep parity consistent and read back right
            h.zero(3 * chunk, chunk)
            ref[chunk:4 * chunk] = bytes(3 * chunk)
            h.flush()
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        self.assertEqual(resync_offset(paths[0]), 2**64 - 1,
                         "array not marked clean at shutdown")
        self.check_layout(paths, ref, layout, chunk)

        # Serve with one member left out: everything reads back.
        left_out = rng.randrange(disks)
        srv = Server(self.tmp, [p for i, p in enumerate(paths)
                                if i != left_out], ["run=true"])
        try:
            h = srv.connect()
            for off in range(0, len(ref), 8 * MIB):
                n = min(8 * MIB, len(ref) - off)
                self.assertEqual(h.pread(n, off), bytes(ref[off:off + n]),
                                 f"degraded read at {off} (member "
                                 f"{left_out} out)")
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())

    def test_left_symmetric_4_disks(self):
        self.run_layout(2, 4, 64 * 1024)

    def test_left_asymmetric_3_disks_4k(self):
        self.run_layout(0, 3, 4096)

    def test_right_asymmetric_5_disks(self):
        self.run_layout(1, 5, 64 * 1024)

    def test_right_symmetric_4_disks_128k(self):
        self.run_layout(3, 4, 128 * 1024)

    def test_parity_first(self):
        self.run_layout(4, 3, 64 * 1024)

    def test_parity_last_512k(self):
        self.run_layout(5, 4, 512 * 1024, size=40 * MIB)

    def test_several_connections_at_once(self):
        paths = make_members(self.tmp, 4, 32 * MIB)
        run_tool("create", "--force", "--chunk", "64K", *paths)
        srv = Server(self.tmp, paths)
        try:
            total = srv.connect().get_size()
            conns = 4
            span = (total - 4096) // conns // 4096 * 4096  # last block shared
            refs = [None] * conns
            errors = []

            def writer(i):
                try:
                    h = srv.connect()
                    rng = random.Random(i)
                    ref = bytearray(span)
                    for j in range(60):
                        length = rng.choice([4096, 65536, MIB])
                        off = rng.randrange(0, (span - length) // 4096) * 4096
                        data = rng.randbytes(length)
                        h.pwrite(data, i * span + off, 1 if j % 5 == 0 else 0)
                        ref[off:off + length] = data
                    # overlapping region: everyone writes the same block
                    h.pwrite(bytes([i + 1]) * 4096, total - 4096)
                    h.flush()
                    refs[i] = ref
                    h.shutdown()
                except Exception as e:  # reported below
                    errors.append(e)

            threads = [threading.Thread(target=writer, args=(i,))
                       for i in range(conns)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(errors, [])
            h = srv.connect()
            for i in range(conns):
                self.assertEqual(h.pread(span, i * span), bytes(refs[i]))
            last = h.pread(4096, total - 4096)
            self.assertIn(last, [bytes([i + 1]) * 4096 for i in range(conns)])
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        r = run_tool("check", *paths, check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_flushed_writes_survive_kill_9(self):
        """Flushed data (and FUA writes) survive kill -9 of nbdkit with the
        stripe cache holding unflushed writes; the next start resyncs the
        dirty array and parity checks clean."""
        paths = make_members(self.tmp, 4, 32 * MIB)
        run_tool("create", "--force", "--chunk", "64K", *paths)
        rng = random.Random(9)
        blocks = {}  # 4K block -> (bytes, durable)
        for round_ in range(3):
            srv = Server(self.tmp, paths, extra=["cache-age=60000"])
            h = srv.connect()
            total = h.get_size()
            for i in range(60):
                length = rng.choice([4096, 65536, 192 * 1024])
                off = rng.randrange(0, (total - length) // 4096) * 4096
                data = rng.randbytes(length)
                fua = i % 9 == 0
                h.pwrite(data, off, 1 if fua else 0)
                for b in range(length // 4096):
                    blocks[off // 4096 + b] = (data[b * 4096:(b + 1) * 4096],
                                               fua)
                if i % 10 == 9:
                    h.flush()
                    blocks = {b: (d, True) for b, (d, _) in blocks.items()}
            srv.stop(signal.SIGKILL)  # unflushed writes die with it
            srv = Server(self.tmp, paths)
            try:
                h = srv.connect()
                checked = 0
                for b, (data, durable) in blocks.items():
                    if durable:
                        self.assertEqual(h.pread(4096, b * 4096), data,
                                         f"round {round_}: flushed block {b} "
                                         f"lost after kill -9")
                        checked += 1
                self.assertGreater(checked, 100)
                # Blocks whose last write was not flushed may hold either
                # version; from now on they hold what is read now.
                for b, (data, durable) in list(blocks.items()):
                    if not durable:
                        blocks[b] = (h.pread(4096, b * 4096), True)
                h.shutdown()
            finally:
                self.assertEqual(srv.stop(), 0, srv.output())
            r = run_tool("check", *paths, check=False)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_read_only_export_refuses_writes(self):
        import nbd
        paths = make_members(self.tmp, 3, 16 * MIB)
        run_tool("create", "--force", *paths)
        before = [open(p, "rb").read() for p in paths]
        srv = Server(self.tmp, paths, readonly=True)
        try:
            h = srv.connect()
            self.assertTrue(h.is_read_only())
            with self.assertRaises(nbd.Error):
                h.pwrite(bytes(4096), 0)
            h.pread(4096, 0)
            h.shutdown()
        finally:
            srv.stop()
        self.assertEqual(before, [open(p, "rb").read() for p in paths])

    def test_refusals(self):
        a = make_members(os.path.join(self.tmp), 3, 16 * MIB)
        run_tool("create", "--force", *a)
        other_dir = os.path.join(self.tmp, "other")
        os.mkdir(other_dir)
        b = make_members(other_dir, 3, 16 * MIB)
        run_tool("create", "--force", *b)
        cases = [
            ([a[0], a[1], a[1]], (), "same device"),
            ([a[0], a[1], b[2]], (), "different array"),
            ([a[0]], (), "missing"),
            (a, ("bogus=1",), "unknown parameter"),
            ([a[0], a[1], os.path.join(self.tmp, "nope.img")], (), "nope.img"),
            ([a[0], a[1], other_dir], (), "directory"),
        ]
        for members, extra, want in cases:
            with self.subTest(want=want):
                out = start_fails(self.tmp, members, extra)
                self.assertIn(want, out)

    def test_second_server_on_same_members_is_refused(self):
        paths = make_members(self.tmp, 3, 16 * MIB)
        run_tool("create", "--force", *paths)
        srv = Server(self.tmp, paths)
        try:
            out = start_fails(self.tmp, paths)
            self.assertIn("in use", out)
        finally:
            srv.stop()


if __name__ == "__main__":
    harness.main()
