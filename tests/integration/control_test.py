# SPDX-License-Identifier: MIT
"""The live control channel end to end: nbdkit serving the plugin with
control=SOCKET, the `uraid` tool speaking it (detail, fail, remove, add,
check, set, grow, errors), a libnbd client reading correct data while a member is
failed and rebuilt, and raw-socket clients sending malformed and hostile
requests that get error replies while the server keeps serving."""

import json
import os
import random
import socket
import stat
import subprocess
import tempfile
import threading
import time
import unittest

import harness
from harness import Server, make_members, run_tool, start_fails

MIB = 1 << 20


class Raw:
    """A raw control-socket client: send bytes, read reply lines."""

    def __init__(self, path, timeout=10):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def line(self):
        while b"\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                return None  # closed
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def call(self, data):
        self.send(data + b"\n")
        return self.line()

    def close(self):
        self.s.close()


def wait_control(path, timeout=10):
    """Until the control socket accepts (nbdkit opens it after forking)."""
    deadline = time.time() + timeout
    while True:
        try:
            Raw(path).close()
            return
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.02)


class ControlTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-ctl-")
        self.ctl = os.path.join(self.tmp, "ctl.sock")
        self.paths = make_members(self.tmp, 4, 24 * MIB)
        run_tool("create", "--force", "--assume-clean", "--chunk", "64K",
                 *self.paths)
        self.srv = Server(self.tmp, self.paths, extra=[f"control={self.ctl}"])
        wait_control(self.ctl)

    def tearDown(self):
        self.srv.stop()
        subprocess.run(["rm", "-rf", self.tmp])

    def detail(self):
        r = run_tool("detail", "--control", self.ctl, "--json")
        return json.loads(r.stdout)

    def fill(self, h, seed=1):
        rng = random.Random(seed)
        total = h.get_size()
        ref = bytearray(rng.randbytes(total))
        for off in range(0, total, 4 * MIB):
            h.pwrite(bytes(ref[off:off + 4 * MIB]), off)
        h.flush()
        return ref

    def test_socket_is_mode_0600(self):
        st = os.lstat(self.ctl)
        self.assertTrue(stat.S_ISSOCK(st.st_mode))
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o600)

    def test_detail_json_and_text(self):
        d = self.detail()
        self.assertTrue(d["live"])
        self.assertEqual(d["raid_devices"], 4)
        self.assertEqual(d["chunk_bytes"], 64 * 1024)
        self.assertEqual(d["state"], "clean")
        self.assertEqual([s["name"] for s in d["slots"]],
                         [os.path.realpath(p) for p in self.paths])
        self.assertEqual(d["job"]["kind"], "idle")
        self.assertIn("min_kib_s", d["speed_limits"])
        # The same fields as an offline detail --json.
        off = json.loads(run_tool("detail", "--json", *self.paths).stdout)
        self.assertEqual(set(off), set(d))
        self.assertEqual(off["uuid"], d["uuid"])
        text = run_tool("detail", "--control", self.ctl).stdout
        self.assertIn("Speed Limits :", text)
        self.assertIn("since the server opened the array", text)
        # Relative socket paths work too.
        r = subprocess.run([harness.ARGS.tool, "detail", "--control",
                            "ctl.sock"], cwd=self.tmp, capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_fail_while_a_client_reads(self):
        h = self.srv.connect()
        ref = self.fill(h)
        total = len(ref)
        stop = threading.Event()
        errors = []
        reads = [0]

        def reader():
            try:
                c = self.srv.connect()
                rng = random.Random(7)
                while not stop.is_set():
                    off = rng.randrange(0, total // 4096 - 64) * 4096
                    n = rng.choice([4096, 65536, 256 * 1024])
                    n = min(n, total - off)
                    if c.pread(n, off) != bytes(ref[off:off + n]):
                        errors.append(f"wrong data at {off}+{n}")
                        return
                    reads[0] += 1
                c.shutdown()
            except Exception as e:  # reported below
                errors.append(repr(e))

        t = threading.Thread(target=reader)
        t.start()
        try:
            time.sleep(0.3)
            r = run_tool("fail", "--control", self.ctl, self.paths[1])
            self.assertIn("faulty", r.stdout)
            d = self.detail()
            self.assertIn("degraded", d["state"])
            self.assertEqual(d["slots"][1]["state"], "faulty")
            time.sleep(0.5)  # reads go on, degraded
            # A second failure would fail the array: refused, like md.
            r = run_tool("fail", "--control", self.ctl, self.paths[2],
                         check=False)
            self.assertEqual(r.returncode, 1)
            self.assertTrue(r.stderr.startswith("uraid: "), r.stderr)
            # Remove it, add a fresh member, wait for the rebuild.
            run_tool("remove", "--control", self.ctl, self.paths[1])
            spare = os.path.join(self.tmp, "spare.img")
            with open(spare, "wb") as f:
                f.truncate(24 * MIB)
            run_tool("add", "--control", self.ctl, spare)
            r = run_tool("detail", "--control", self.ctl, "--wait")
            self.assertEqual(r.returncode, 0)
            time.sleep(0.3)
        finally:
            stop.set()
            t.join()
        self.assertEqual(errors, [])
        self.assertGreater(reads[0], 10)
        d = self.detail()
        self.assertEqual(d["state"], "clean")
        self.assertEqual(d["slots"][1]["name"], os.path.realpath(spare))
        self.assertEqual(d["last_job"]["kind"], "recover")
        self.assertEqual(d["last_job"]["result"], "completed")
        for off in range(0, total, 4 * MIB):
            n = min(4 * MIB, total - off)
            self.assertEqual(h.pread(n, off), bytes(ref[off:off + n]))
        h.shutdown()
        self.assertEqual(self.srv.stop(), 0, self.srv.output())
        new_members = [self.paths[0], spare, self.paths[2], self.paths[3]]
        r = run_tool("check", *new_members, check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_check_set_and_watch(self):
        h = self.srv.connect()
        self.fill(h, seed=2)
        h.shutdown()
        r = run_tool("set", "--control", self.ctl, "--speed-min", "100",
                     "--speed-max", "4M", "--cache", "16M")
        self.assertIn("max 4096 KiB/s", r.stdout)
        d = self.detail()
        self.assertEqual(d["speed_limits"],
                         {"min_kib_s": 100, "max_kib_s": 4096})
        run_tool("check", "--control", self.ctl)
        time.sleep(0.8)
        d = self.detail()
        self.assertEqual(d["job"]["kind"], "check")
        self.assertGreater(d["job"]["percent"], 0)
        self.assertGreater(d["job"]["bytes_per_s"], 0)
        text = run_tool("detail", "--control", self.ctl).stdout
        self.assertIn("   Check Status : ", text)
        self.assertIn("ETA : ", text)
        # --watch prints progress lines (not a tty: one per percent) and
        # ends with the outcome; stopped, the job did not complete: exit 1.
        threading.Timer(1.2, lambda: run_tool(
            "stop", "--control", self.ctl)).start()
        r = run_tool("detail", "--control", self.ctl, "--watch", check=False)
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stdout.splitlines()
        self.assertGreaterEqual(len(lines), 2, r.stdout)
        self.assertRegex(lines[0], r"^\[[=> ]+\] +[0-9.]+% check ")
        self.assertEqual(lines[-1], "check interrupted, 0 mismatched stripes")
        self.assertIn("last job: check interrupted", r.stderr)
        # Full speed: check --wait reports the outcome, exit 0.
        run_tool("set", "--control", self.ctl, "--speed-max", "1000000")
        r = run_tool("check", "--control", self.ctl, "--wait", "--json")
        j = json.loads(r.stdout)
        self.assertEqual((j["result"], j["mismatches"]), ("completed", 0))

    def test_grow_adds_a_member_while_served(self):
        # Its own array: three members, grown to four.
        self.srv.stop()
        gdir = os.path.join(self.tmp, "grow")
        os.mkdir(gdir)
        paths = make_members(gdir, 3, 24 * MIB)
        run_tool("create", "--assume-clean", "--chunk", "64K", *paths)
        ctl = os.path.join(gdir, "ctl.sock")
        self.srv = Server(gdir, paths, extra=[f"control={ctl}"])
        wait_control(ctl)
        h = self.srv.connect()
        old_size = h.get_size()
        ref = self.fill(h, seed=3)
        h.shutdown()
        new = os.path.join(gdir, "m3.img")
        with open(new, "wb") as f:
            f.truncate(24 * MIB)

        # The wrong number of new members is a usage error; nothing changes.
        r = run_tool("grow", "--control", ctl, "--raid-devices", "5",
                     "--add", new, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("needs 2 --add members; 1 given", r.stderr)

        r = run_tool("grow", "--control", ctl, "--raid-devices", "4",
                     "--add", new, "--wait")
        self.assertIn("reshape started: 3 devices", r.stdout)
        self.assertIn("reshaped to 4 devices", r.stdout)
        r = run_tool("detail", "--control", ctl, "--json")
        d = json.loads(r.stdout)
        self.assertEqual(d["raid_devices"], 4)
        self.assertNotIn("reshaping", d["state"])
        self.assertFalse(d["reshape"]["active"])
        self.assertEqual(d["last_job"]["kind"], "reshape")
        self.assertEqual(d["last_job"]["result"], "completed")
        self.assertEqual(d["slots"][3]["name"], os.path.realpath(new))
        text = run_tool("detail", "--control", ctl).stdout
        self.assertIn("   Raid Devices : 4", text)

        # A new connection sees the larger size; the data is intact and the
        # grown part reads as zeros.
        h = self.srv.connect()
        self.assertEqual(h.get_size(), old_size * 3 // 2)
        for off in range(0, old_size, 4 * MIB):
            n = min(4 * MIB, old_size - off)
            self.assertEqual(h.pread(n, off), bytes(ref[off:off + n]),
                             f"data at {off}")
        self.assertEqual(h.pread(MIB, old_size), bytes(MIB))

        # A slow layout change: detail shows it in mdadm's words while it
        # runs, and clients keep reading.
        run_tool("set", "--control", ctl, "--speed-min", "100",
                 "--speed-max", "2M")
        r = run_tool("grow", "--control", ctl, "--layout", "left-asymmetric")
        self.assertIn("follow it with uraid detail", r.stdout)
        d = json.loads(run_tool("detail", "--control", ctl, "--json").stdout)
        self.assertEqual(d["job"]["kind"], "reshape")
        self.assertTrue(d["reshape"]["active"])
        self.assertEqual(d["reshape"]["to"]["layout"], 0)
        self.assertEqual(d["reshape"]["from"]["layout"], 2)
        text = run_tool("detail", "--control", ctl).stdout
        self.assertIn("reshaping", text)
        self.assertIn("  Reshape pos'n : ", text)
        self.assertIn("     New Layout : left-asymmetric", text)
        self.assertNotIn("Delta Devices", text)
        self.assertEqual(h.pread(4 * MIB, 0), bytes(ref[:4 * MIB]))
        run_tool("set", "--control", ctl, "--speed-max", "1000000")
        run_tool("detail", "--control", ctl, "--wait")
        h.shutdown()
        d = json.loads(run_tool("detail", "--control", ctl, "--json").stdout)
        self.assertEqual(d["layout"], "left-asymmetric")
        h = self.srv.connect()
        for off in range(0, old_size, 4 * MIB):
            n = min(4 * MIB, old_size - off)
            self.assertEqual(h.pread(n, off), bytes(ref[off:off + n]),
                             f"data at {off} after the layout change")
        h.shutdown()
        self.assertEqual(self.srv.stop(), 0, self.srv.output())
        r = run_tool("check", *paths, new, check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_malformed_requests_get_errors(self):
        c = Raw(self.ctl)
        bad = [b"", b"hello", b"{", b"[]", b"{}", b'{"cmd":5}',
               b'{"cmd":"zap"}', b'{"cmd":"detail","x":1}',
               b'{"cmd":"fail"}', b'{"cmd":"fail","member":""}',
               b'{"cmd":"add","member":"relative.img"}',
               b'{"cmd":"set","cache":-1}',
               b'{"cmd":"set","speed_max":1e999}',
               b'{"cmd":"set","cache":99999999999999999999999}',
               b"[" * 5000, b'{"cmd":"de\x00tail"}', b"\xff\xfe\xfd",
               b'{"cmd":"detail","cmd":"detail"}',
               b'{"cmd":"fail","member":"/nope/zz.img"}',
               b'{"cmd":"grow","raid_devices":5}',
               b'{"cmd":"grow"}',
               b'{"cmd":"grow","raid_devices":5,"add":"/tmp/x.img"}',
               b'{"cmd":"grow","raid_devices":5,"add":[1]}',
               b'{"cmd":"grow","layout":"zigzag"}',
               b'{"cmd":"grow","chunk":-65536}',
               b'{"cmd":"grow","chunk":99999999999999999999}']
        for line in bad:
            with self.subTest(line=line[:40]):
                reply = c.call(line)
                self.assertIsNotNone(reply, "server closed the connection")
                self.assertFalse(reply["ok"])
                self.assertTrue(reply["error"])
                self.assertIn("code", reply)
        self.assertTrue(c.call(b'{"cmd":"detail"}')["ok"])
        # A silent client and a half-sent line block nobody.
        silent = Raw(self.ctl)
        partial = Raw(self.ctl)
        partial.send(b'{"cmd":"det')
        start = time.time()
        for _ in range(5):
            self.assertTrue(Raw(self.ctl).call(b'{"cmd":"detail"}')["ok"])
        self.assertLess(time.time() - start, 2)
        partial.send(b'ail"}\n')
        self.assertTrue(partial.line()["ok"])
        # An overlong line: an error reply, then the connection is closed.
        big = Raw(self.ctl)
        try:
            big.send(b"x" * (70 * 1024) + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        reply = big.line()
        self.assertFalse(reply["ok"])
        self.assertIn("longer than 65536", reply["error"])
        self.assertIsNone(big.line())
        # Many at once.
        clients = [Raw(self.ctl) for _ in range(8)]
        for cl in clients:
            cl.send(b'{"cmd":"detail"}\n')
        for cl in clients:
            self.assertTrue(cl.line()["ok"])
        for cl in clients + [c, silent, partial, big]:
            cl.close()
        # NBD is still served, and so is the control socket.
        h = self.srv.connect()
        h.pread(4096, 0)
        h.shutdown()
        self.assertEqual(self.detail()["raid_devices"], 4)

    def test_tool_errors(self):
        r = run_tool("detail", "--control",
                     os.path.join(self.tmp, "none.sock"), check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("uraid: cannot connect to control socket", r.stderr)
        self.assertIn("none.sock", r.stderr)
        r = run_tool("fail", "--control", self.ctl, "/nope/zz.img",
                     check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("zz.img", r.stderr)
        r = run_tool("add", "--control", self.ctl,
                     os.path.join(self.tmp, "missing.img"), check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("missing.img", r.stderr)
        r = run_tool("grow", "--control", self.ctl, "--raid-devices", "5",
                     check=False)
        self.assertEqual(r.returncode, 2)  # 4 -> 5 needs an --add
        self.assertIn("needs 1 --add member; 0 given", r.stderr)
        r = run_tool("grow", "--control", self.ctl, check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("nothing to change", r.stderr)
        r = run_tool("grow", "--control", self.ctl, "--layout", "zigzag",
                     check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown layout", r.stderr)
        r = run_tool("grow", "--control", self.ctl, "--raid-devices", "5",
                     "--add", os.path.join(self.tmp, "missing.img"),
                     check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("missing.img", r.stderr)
        self.assertEqual(self.detail()["raid_devices"], 4)
        r = run_tool("set", "--control", self.ctl, check=False)
        self.assertEqual(r.returncode, 2)
        r = run_tool("detail", "--wait", *self.paths, check=False)
        self.assertEqual(r.returncode, 2)  # --wait needs --control

    def test_refusals(self):
        self.srv.stop()
        # A regular file where the socket should go is never replaced.
        path = os.path.join(self.tmp, "precious")
        with open(path, "w") as f:
            f.write("data")
        out = start_fails(self.tmp, self.paths, [f"control={path}"])
        self.assertIn("not a socket", out)
        with open(path) as f:
            self.assertEqual(f.read(), "data")
        # A stale socket (its server killed) is replaced.
        srv = Server(self.tmp, self.paths, extra=[f"control={self.ctl}"])
        try:
            wait_control(self.ctl)
            srv.stop(9)
            self.assertTrue(os.path.exists(self.ctl))  # left behind
            self.srv = Server(self.tmp, self.paths,
                              extra=[f"control={self.ctl}"])
            wait_control(self.ctl)
            self.assertTrue(Raw(self.ctl).call(b'{"cmd":"detail"}')["ok"])
        finally:
            srv.stop()


if __name__ == "__main__":
    harness.main()
