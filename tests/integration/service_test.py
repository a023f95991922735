# SPDX-License-Identifier: MIT
"""Running uraid as a service, with real processes: uraid.conf and
assembly by uuid (`serve --scan` of three arrays from shuffled candidates
that include a stale member; `examine --scan` output fed back as a
config; the plugin's array= config= keys), the safe default listener (a
unix socket under /run/uraid, never TCP), and the systemd units (verified
with systemd-analyze, and each ExecStart run for real with a NOTIFY_SOCKET
listener standing in for systemd). Refusals write nothing (checksums)."""

import glob
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import harness
from harness import Server, run_tool

MIB = 1 << 20
TAG = f"svc{os.getpid()}"


def digest(paths):
    h = hashlib.sha256()
    for p in sorted(paths):
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def uuid_of(path):
    return json.loads(run_tool("examine", "--json", path).stdout)[0][
        "array_uuid"]


def tcp_listeners():
    out = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True,
                         check=True).stdout
    return sorted(line.split()[3] for line in out.splitlines() if line)


class Notify:
    """A datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self, tmp):
        self.path = os.path.join(tmp, "notify.sock")
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.s.bind(self.path)
        self.s.settimeout(0.2)
        self.messages = []

    def wait_for(self, key, proc, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(key in m.split("\n") for m in self.messages):
                return
            if proc.poll() is not None:
                raise AssertionError(f"exited {proc.returncode} before {key}")
            try:
                self.messages.append(self.s.recv(4096).decode())
            except socket.timeout:
                pass
        raise AssertionError(f"no {key} in {self.messages}")

    def drain(self):
        self.s.setblocking(False)
        try:
            while True:
                self.messages.append(self.s.recv(4096).decode())
        except BlockingIOError:
            pass

    def close(self):
        self.s.close()


def read_some(sock):
    import nbd
    h = nbd.NBD()
    h.connect_unix(sock)
    size = h.get_size()
    data = h.pread(65536, 0)
    h.shutdown()
    return size, data


class ServiceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="uraid-svc-")
        cls.dev = os.path.join(cls.tmp, "dev")
        os.mkdir(cls.dev)
        rng = random.Random(5)
        cls.arrays = {}
        # Shuffled names: candidate order says nothing about arrays or slots.
        names = [f"{rng.getrandbits(40):010x}.img" for _ in range(10)]
        k = 0
        for name, n in (("a", 3), ("b", 4), ("c", 3)):
            paths = []
            for _ in range(n):
                p = os.path.join(cls.dev, names[k])
                k += 1
                with open(p, "wb") as f:
                    f.truncate(16 * MIB)
                paths.append(p)
            run_tool("create", "--force", "--assume-clean", "--chunk", "64K",
                     "--name", f"{TAG}{name}", *paths)
            cls.arrays[name] = {"paths": paths, "uuid": uuid_of(paths[0])}
        # Array b's last member goes stale: the array runs (and is written)
        # without it, which moves the others' events on.
        b = cls.arrays["b"]["paths"]
        srv = Server(cls.tmp, b[:3], ["run=true"])
        h = srv.connect()
        h.pwrite(b"B" * 65536, 0)
        h.flush()
        h.shutdown()
        srv.stop()
        cls.stale = b[3]
        for name in "ac":
            srv = Server(cls.tmp, cls.arrays[name]["paths"])
            h = srv.connect()
            h.pwrite(name.upper().encode() * 65536, 0)
            h.flush()
            h.shutdown()
            srv.stop()
        cls.conf = os.path.join(cls.tmp, "uraid.conf")
        with open(cls.conf, "w") as f:
            f.write(f"# test config\nDEVICE {cls.dev}/*.img\n"
                    f"DEVICE {cls.tmp}/nothing-here-*\n")
            for name, a in cls.arrays.items():
                f.write(f"ARRAY {TAG}{name} uuid={a['uuid']}\n"
                        f"    socket={cls.tmp}/{name}.sock\n"
                        f"    control={cls.tmp}/{name}.ctl\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        for f in glob.glob(f"/run/uraid/{TAG}*"):
            os.unlink(f)

    def serve_fg(self, args, env_extra=None):
        """uraid ARGS in the foreground until READY=1; (proc, notify)."""
        notify = Notify(tempfile.mkdtemp(dir=self.tmp))
        env = dict(os.environ, NOTIFY_SOCKET=notify.path, **(env_extra or {}))
        log = open(os.path.join(self.tmp, "serve.log"), "w+")
        p = subprocess.Popen(args, env=env, stdout=log,
                             stderr=subprocess.STDOUT, text=True)
        try:
            notify.wait_for("READY=1", p)
        except AssertionError:
            p.kill()
            log.seek(0)
            raise AssertionError(log.read())
        p.log = log
        return p, notify

    def stop(self, p, notify):
        p.send_signal(signal.SIGTERM)
        rc = p.wait(timeout=60)
        notify.close()
        p.log.seek(0)
        out = p.log.read()
        self.assertEqual(rc, 0, out)
        return out

    def assert_clean(self, paths):
        for e in json.loads(run_tool("examine", "--json", *paths).stdout):
            self.assertEqual(e["state"], "clean", e["device"])

    def test_scan_serves_three_arrays_leaving_the_stale_member_out(self):
        p, n = self.serve_fg([harness.ARGS.tool, "serve", "--scan",
                              "--foreground", "--config", self.conf])
        for name in "abc":
            size, data = read_some(os.path.join(self.tmp, f"{name}.sock"))
            self.assertEqual(data, name.upper().encode() * 65536, name)
            # Each array has its own control socket.
            d = json.loads(run_tool("detail", "--control",
                                    os.path.join(self.tmp, f"{name}.ctl"),
                                    "--json").stdout)
            self.assertEqual(d["uuid"], self.arrays[name]["uuid"])
        self.assertEqual(d["raid_devices"], 3)
        out = self.stop(p, n)
        self.assertIn(f"uraid: {TAG}b: leaving out {self.stale}: stale", out)
        for name in "abc":
            self.assertIn(f"serving array {TAG}{name} ", out)
        self.assert_clean([x for a in self.arrays.values()
                           for x in a["paths"] if x != self.stale])

    def test_examine_scan_output_is_a_config(self):
        r = run_tool("examine", "--scan", "--config", self.conf)
        lines = r.stdout.splitlines()
        self.assertEqual(sorted(lines), sorted(
            f"ARRAY {TAG}{n} uuid={a['uuid']}"
            for n, a in self.arrays.items()), r.stdout)
        # The same from members given (globs too).
        r2 = run_tool("examine", "--scan", f"{self.dev}/*.img")
        self.assertEqual(sorted(r2.stdout.splitlines()), sorted(lines))
        conf2 = os.path.join(self.tmp, "pasted.conf")
        with open(conf2, "w") as f:
            f.write(f"DEVICE {self.dev}/*\n" + r.stdout)
        # Served by uuid from the pasted config, on a given socket.
        sock = os.path.join(self.tmp, "by-uuid.sock")
        p, n = self.serve_fg([harness.ARGS.tool, "serve",
                              self.arrays["c"]["uuid"], "--config", conf2,
                              "--socket", sock, "--foreground"])
        self.assertEqual(read_some(sock)[1], b"C" * 65536)
        self.stop(p, n)

    def test_plugin_array_and_config_keys(self):
        srv = Server(self.tmp, [], extra=[f"array={TAG}b",
                                          f"config={self.conf}"])
        try:
            h = srv.connect()
            self.assertEqual(h.pread(65536, 0), b"B" * 65536)
            h.shutdown()
        finally:
            srv.stop()
        self.assertIn(f"leaving out {self.stale}: stale", srv.output())
        # By uuid too; a wrong name is refused before anything is written.
        before = digest(glob.glob(f"{self.dev}/*"))
        out = harness.start_fails(self.tmp, [], extra=[
            "array=nosuch", f"config={self.conf}"])
        self.assertIn("array=nosuch: no such ARRAY in", out)
        out = harness.start_fails(self.tmp, [self.stale], extra=[
            f"array={TAG}a", f"config={self.conf}"])
        self.assertIn("give one or the other", out)
        self.assertEqual(before, digest(glob.glob(f"{self.dev}/*")))

    def test_refusals_write_nothing(self):
        before = digest(glob.glob(f"{self.dev}/*"))
        bad = os.path.join(self.tmp, "bad.conf")
        with open(bad, "w") as f:
            f.write(f"DEVICE {self.dev}/*\n\nARRY x uuid=1\n")
        for args, want in (
                (["serve", "x", "--config", bad],
                 f"uraid: {bad}:3: unknown keyword 'ARRY'"),
                (["serve", "nosuch", "--config", self.conf],
                 f"no ARRAY named 'nosuch' in {self.conf}"),
                (["serve", "--scan", "--config",
                  os.path.join(self.tmp, "missing.conf")],
                 "cannot read config file"),
                (["examine", "--scan", "--config", bad], ":3: unknown")):
            r = run_tool(*args, check=False)
            self.assertEqual(r.returncode, 1, r)
            self.assertIn(want, r.stderr)
        # Usage errors exit 2.
        for args in (["serve", "--scan", "--socket", "x", "--config",
                      self.conf],
                     ["serve", "--ipaddr", "0.0.0.0", "x"], ["serve"]):
            self.assertEqual(run_tool(*args, check=False).returncode, 2,
                             args)
        # Two equal copies of one slot: refused, naming both.
        dup = os.path.join(self.tmp, "dupdir")
        os.mkdir(dup)
        for p in self.arrays["a"]["paths"]:
            shutil.copy(p, dup)
        shutil.copy(self.arrays["a"]["paths"][0], os.path.join(dup, "zz.img"))
        dconf = os.path.join(self.tmp, "dup.conf")
        with open(dconf, "w") as f:
            f.write(f"DEVICE {dup}/*\nARRAY a uuid="
                    f"{self.arrays['a']['uuid']}\n")
        r = run_tool("serve", "a", "--config", dconf, check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("both hold slot 0", r.stderr)
        self.assertEqual(before, digest(glob.glob(f"{self.dev}/*")))
        shutil.rmtree(dup)

    def test_default_listener_is_a_unix_socket_never_tcp(self):
        conf = os.path.join(self.tmp, "nosock.conf")
        with open(conf, "w") as f:
            f.write(f"DEVICE {self.dev}/*\n"
                    f"ARRAY {TAG}a uuid={self.arrays['a']['uuid']}\n")
        tcp_before = tcp_listeners()
        p, n = self.serve_fg([harness.ARGS.tool, "serve", f"{TAG}a",
                              "--config", conf, "--foreground"])
        sock = f"/run/uraid/{TAG}a.sock"
        self.assertEqual(read_some(sock)[1], b"A" * 65536)
        self.assertEqual(tcp_listeners(), tcp_before)
        self.assertEqual(os.stat("/run/uraid").st_mode & 0o777, 0o755)
        self.assertTrue(os.path.exists(f"/run/uraid/{TAG}a.ctl"))
        self.stop(p, n)
        # --port binds 127.0.0.1 only; `--` passes nbdkit options through.
        p, n = self.serve_fg([harness.ARGS.tool, "serve", f"{TAG}a",
                              "--config", conf, "--foreground", "--port",
                              "10931",
                              "--", "--filter=noextents"])
        listening = tcp_listeners()
        self.assertIn("127.0.0.1:10931", listening)
        self.assertNotIn("0.0.0.0:10931", listening)
        import nbd
        h = nbd.NBD()
        h.connect_tcp("127.0.0.1", "10931")
        self.assertEqual(h.pread(4096, 0), b"A" * 4096)
        self.assertFalse(h.can_meta_context("base:allocation"))
        h.shutdown()
        self.stop(p, n)


class UnitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="uraid-units-")
        cls.prefix, cls.unitdir = harness.install_units(cls.tmp)
        cls.name = f"{TAG}u"
        dev = os.path.join(cls.tmp, "dev")
        os.mkdir(dev)
        paths = harness.make_members(dev, 3, 16 * MIB)
        run_tool("create", "--force", "--assume-clean", "--chunk", "64K",
                 *paths)
        cls.paths = paths
        cls.conf = os.path.join(cls.tmp, "uraid.conf")
        with open(cls.conf, "w") as f:
            f.write(f"DEVICE {dev}/*.img\n"
                    f"ARRAY {cls.name} uuid={uuid_of(paths[0])}\n")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        for f in glob.glob(f"/run/uraid/{cls.name}*"):
            os.unlink(f)

    def unit(self, name):
        with open(os.path.join(self.unitdir, name)) as f:
            return f.read()

    def exec_start(self, name):
        for line in self.unit(name).splitlines():
            if line.startswith("ExecStart="):
                return line[len("ExecStart="):].replace(
                    "%i", self.name).split()
        self.fail(f"{name}: no ExecStart")

    def test_installed_units_verify(self):
        self.assertEqual(sorted(os.listdir(self.unitdir)), [
            "uraid-check@.service", "uraid-check@.timer",
            "uraid-metrics.service", "uraid-metrics.timer",
            "uraid-monitor.service", "uraid@.service"])
        self.assertEqual(self.exec_start("uraid@.service")[0],
                         os.path.join(self.prefix, "bin/uraid"))
        if shutil.which("systemd-analyze") is None:
            self.skipTest("systemd-analyze is missing")
        vdir = os.path.join(self.tmp, "verify")
        os.makedirs(vdir, exist_ok=True)
        files = []
        for src, dst in (("uraid@.service", f"uraid@{self.name}.service"),
                         ("uraid-check@.service",
                          f"uraid-check@{self.name}.service"),
                         ("uraid-check@.timer",
                          f"uraid-check@{self.name}.timer"),
                         ("uraid-monitor.service", "uraid-monitor.service"),
                         ("uraid-metrics.service", "uraid-metrics.service"),
                         ("uraid-metrics.timer", "uraid-metrics.timer")):
            shutil.copy(os.path.join(self.unitdir, src),
                        os.path.join(vdir, dst))
            files.append(os.path.join(vdir, dst))
        for f in files:
            r = subprocess.run(["systemd-analyze", "verify", f],
                               capture_output=True, text=True, cwd=vdir)
            # Lines about other units (the host's) are not ours.
            ours = [l for l in (r.stdout + r.stderr).splitlines()
                    if "uraid" in l]
            self.assertEqual(ours, [], f)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_exec_starts_run_for_real(self):
        env = {"URAID_CONFIG": self.conf}
        notify = Notify(self.tmp)
        log = open(os.path.join(self.tmp, "unit.log"), "w+")
        p = subprocess.Popen(self.exec_start("uraid@.service"),
                             env=dict(os.environ, NOTIFY_SOCKET=notify.path,
                                      **env),
                             stdout=log, stderr=subprocess.STDOUT)
        try:
            notify.wait_for("READY=1", p)
            size, data = read_some(f"/run/uraid/{self.name}.sock")
            self.assertGreater(size, 16 * MIB)  # 2 data members of ~15 MiB
            self.assertEqual(len(data), 65536)
            # The check unit scrubs the served array through its control
            # socket and waits for the end.
            r = subprocess.run(self.exec_start("uraid-check@.service"),
                               env=dict(os.environ, **env),
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            # The monitor unit, if the monitor's --scan is there.
            mon = self.exec_start("uraid-monitor.service")
            helptext = run_tool("monitor", "--help", check=False).stdout
            if "--scan" in helptext:
                m = subprocess.Popen(mon, env=dict(os.environ, **env),
                                     stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
                time.sleep(2)
                self.assertIsNone(m.poll(), m.stdout.read() if m.poll()
                                  is not None else "")
                m.terminate()
                m.wait(timeout=30)
                # It found the served array through the config and printed
                # its state.
                self.assertIn("NewArray", m.stdout.read())
            else:
                print("uraid monitor has no --scan yet: its unit's "
                      "ExecStart was not run")
        finally:
            p.send_signal(signal.SIGTERM)
            rc = p.wait(timeout=60)
            notify.drain()
            notify.close()
        log.seek(0)
        out = log.read()
        self.assertEqual(rc, 0, out)
        self.assertTrue(any("STOPPING=1" in m for m in notify.messages),
                        notify.messages)
        for e in json.loads(run_tool("examine", "--json",
                                     *self.paths).stdout):
            self.assertEqual(e["state"], "clean")
        self.assertFalse(os.path.exists(f"/run/uraid/{self.name}.pid"))


if __name__ == "__main__":
    harness.main()
