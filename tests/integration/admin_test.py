# SPDX-License-Identifier: MIT
"""The admin's view of served arrays, with real processes (issue 34):
`uraid status` (and `detail --scan`) over three arrays served by nbdkit
with the plugin, one healthy, one degraded, one rebuilding, beside an ARRAY
of the config that nobody serves; `uraid stop` of an array (clean
superblocks, nbdkit gone) while `stop --control` keeps stopping only the
job; `serve --port`'s pid file; `uraid metrics` parsed by Prometheus's own
text parser (and promtool where installed); and read-only monitoring
through the service path: the uraid@ unit's ExecStart as root with the
ARRAY line's control-group= and spares=, and `monitor --scan` (the
monitor unit's ExecStart) plus `status` as another uid in that group.

Every tool run gets URAID_RUN_DIR and URAID_CONFIG of its own, so arrays
of other tests (or of the machine) never show up here."""

import errno
import grp
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import harness
from harness import Server, make_members

# The bench (tools/bench) mirrors serve's -t rule for its servers: checked
# against serve's own choice in ServeThreads.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tools"))
from bench import common as bench_common  # noqa: E402

MIB = 1 << 20
TAG = f"adm{os.getpid()}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Env:
    """The tool with this test's run directory and config."""

    def __init__(self, tmp):
        self.run_dir = os.path.join(tmp, "run")
        os.makedirs(self.run_dir, exist_ok=True)
        os.chmod(self.run_dir, 0o755)
        self.conf = os.path.join(tmp, "uraid.conf")
        self.env = dict(os.environ, URAID_RUN_DIR=self.run_dir,
                        URAID_CONFIG=self.conf)

    def tool(self, *args, check=True, timeout=120, **kw):
        r = subprocess.run([harness.ARGS.tool, *args], capture_output=True,
                           text=True, env=self.env, timeout=timeout, **kw)
        if check and r.returncode != 0:
            raise AssertionError(f"uraid {' '.join(args)} failed "
                                 f"({r.returncode}): {r.stdout}{r.stderr}")
        return r

    def ctl(self, name):
        return os.path.join(self.run_dir, f"{name}.ctl")


def uuid_of(env, path):
    return json.loads(env.tool("examine", "--json", path).stdout)[0][
        "array_uuid"]


def alive(pid):
    """Running: a zombie (a daemon whose reaper is slow, in a container
    whose pid 1 may never reap) has exited."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def fill(srv, size, seed):
    """Data over the whole array, so that a rebuild has work everywhere."""
    rng = random.Random(seed)
    h = srv.connect()
    block = bytes(rng.getrandbits(8) for _ in range(MIB))
    for off in range(0, h.get_size() - MIB + 1, MIB):
        h.pwrite(block, off)
    h.flush()
    h.shutdown()


class StatusStopMetrics(unittest.TestCase):
    """Three served arrays: healthy (a), degraded (b), rebuilding (c)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="uraid-adm-")
        cls.env = Env(cls.tmp)
        cls.servers = {}
        cls.members = {}
        for name, n in (("a", 3), ("b", 3), ("c", 3)):
            d = os.path.join(cls.tmp, name)
            os.mkdir(d)
            paths = make_members(d, n, 16 * MIB)
            if name == "c":  # a spare, in a directory of its own
                os.mkdir(os.path.join(d, "spare"))
                paths += make_members(os.path.join(d, "spare"), 1, 16 * MIB)
            cls.env.tool("create", "--force", "--assume-clean", "--chunk",
                         "64K", "--name", f"{TAG}{name}", *paths[:3])
            cls.members[name] = paths
            srv = Server(d, paths[:3],
                         [f"control={cls.env.ctl(TAG + name)}"])
            cls.servers[name] = srv
            harness.control_call(cls.env.ctl(TAG + name), {"cmd": "detail"})
        # Data everywhere: a rebuild or check of holes would end at once.
        fill(cls.servers["a"], 32 * MIB, 1)
        fill(cls.servers["c"], 32 * MIB, 3)
        # b: a member fails; c: a member fails and a spare is added, the
        # rebuild held at 50-100 KiB/s (15 MiB: minutes) so that it is still
        # running while the tests look at it.
        cls.env.tool("fail", "--control", cls.env.ctl(TAG + "b"),
                     cls.members["b"][1])
        cc = cls.env.ctl(TAG + "c")
        cls.env.tool("set", "--control", cc, "--speed-min", "50",
                     "--speed-max", "100")
        cls.env.tool("fail", "--control", cc, cls.members["c"][2])
        cls.env.tool("remove", "--control", cc, cls.members["c"][2])
        cls.env.tool("add", "--control", cc, cls.members["c"][3])
        deadline = time.time() + 30
        while True:
            d = json.loads(cls.env.tool("detail", "--control", cc,
                                        "--json").stdout)
            if d["job"]["kind"] == "recover" and d["job"]["done_bytes"] > 0:
                break
            assert time.time() < deadline, d["job"]
            time.sleep(0.1)
        # The config: a by name, plus an array nobody serves.
        with open(cls.env.conf, "w") as f:
            f.write(f"DEVICE {cls.tmp}/*/*.img\n"
                    f"ARRAY {TAG}a uuid={uuid_of(cls.env, cls.members['a'][0])}"
                    f" metadata=1.2 name=host:{TAG}a\n"
                    f"ARRAY {TAG}ghost uuid=0123abcd:4567ef01:89abcdef:01234567\n")

    @classmethod
    def tearDownClass(cls):
        for srv in cls.servers.values():
            srv.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def detail_test_code(self, name):
        return self.env.tool("detail", "--test", "--control",
                             self.env.ctl(TAG + name), check=False).returncode

    def test_status_text_json_and_exit_code(self):
        codes = {n: self.detail_test_code(n) for n in "abc"}
        self.assertEqual(codes["a"], 0)
        self.assertEqual(codes["b"], 1)
        r = self.env.tool("status", check=False)
        self.assertEqual(r.returncode, max(codes.values()), r.stdout + r.stderr)
        blocks = {b.split(" : ")[0]: b for b in r.stdout.strip().split("\n\n")}
        self.assertEqual(sorted(blocks), sorted(
            [f"{TAG}a", f"{TAG}b", f"{TAG}c", f"{TAG}ghost"]), r.stdout)
        a, b, c = (blocks[TAG + n] for n in "abc")
        self.assertRegex(a.splitlines()[0],
                         rf"^{TAG}a : active raid5 m0\.img\[0\] m1\.img\[1\] "
                         r"m2\.img\[2\]$")
        self.assertRegex(a.splitlines()[1],
                         r"^      \d+ blocks super 1\.2 level 5, 64k chunk, "
                         r"algorithm 2 \[3/3\] \[UUU\]$")
        self.assertIn("m1.img[1](F)", b.splitlines()[0])
        self.assertIn("[3/2] [U_U]", b)
        self.assertIn("state: clean, degraded", b)
        self.assertNotIn("recovery", b)
        # c: the spare is rebuilding slot 2, md's progress line.
        self.assertIn("[3/2] [UU_]", c)
        self.assertRegex(c, r"\n      \[=*>\.*\]  recovery = *\d+\.\d% "
                            r"\(\d+/15360\)( finish=\d+\.\dmin)? "
                            r"speed=\d+K/sec\n")
        self.assertIn(f"{TAG}ghost : not served", blocks[TAG + "ghost"])
        # --json: the same arrays, health per array, the worst overall.
        j = json.loads(self.env.tool("status", "--json", check=False).stdout)
        by = {x["name"]: x for x in j["arrays"]}
        for n in "abc":
            self.assertEqual(by[TAG + n]["presence"], "served")
            self.assertEqual(by[TAG + n]["health"], codes[n], n)
        self.assertEqual(by[TAG + "a"]["configured"], True)
        self.assertEqual(by[TAG + "ghost"]["presence"], "not served")
        self.assertIsNone(by[TAG + "ghost"]["health"])
        self.assertEqual(by[TAG + "c"]["detail"]["job"]["kind"], "recover")
        self.assertGreater(by[TAG + "c"]["detail"]["job"]["percent"], 0)
        self.assertEqual(by[TAG + "b"]["slot_map"], "[3/2] [U_U]")
        self.assertEqual(j["health"], max(codes.values()))
        # detail --scan is the same command.
        d = json.loads(self.env.tool("detail", "--scan", "--json",
                                     check=False).stdout)
        self.assertEqual([x["name"] for x in d["arrays"]],
                         [x["name"] for x in j["arrays"]])

    def test_status_unreadable_socket_is_4(self):
        import threading
        bogus = os.path.join(self.env.run_dir, "zz-bogus.ctl")
        done = threading.Event()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.bind(bogus)
            s.listen(4)
            s.settimeout(0.1)

            def close_all():  # accepts and closes at once: no detail
                while not done.is_set():
                    try:
                        s.accept()[0].close()
                    except socket.timeout:
                        pass
            t = threading.Thread(target=close_all)
            t.start()
            r = self.env.tool("status", check=False)
            done.set()
            t.join()
        os.unlink(bogus)
        self.assertEqual(r.returncode, 4, r.stdout + r.stderr)
        self.assertRegex(r.stdout, r"zz-bogus : unreadable \(control socket "
                                  r".*zz-bogus.ctl: ")

    def test_watch_redraws_until_interrupted(self):
        p = subprocess.Popen([harness.ARGS.tool, "status", "--watch",
                              "--delay", "0.3"], env=self.env.env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        time.sleep(1.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        self.assertGreaterEqual(out.count("Every 0.3s: uraid status"), 2, out)
        self.assertGreaterEqual(out.count(f"{TAG}b : active raid5"), 2)
        self.assertEqual(p.returncode,
                         max(self.detail_test_code(n) for n in "abc"), err)

    def test_metrics_parse_with_prometheus_parser(self):
        from prometheus_client.parser import text_string_to_metric_families
        r = self.env.tool("metrics")
        fams = {f.name: f for f in text_string_to_metric_families(r.stdout)}

        def value(name, **labels):
            # A counter's family is named without "_total".
            fam = fams.get(name) or fams[name.removesuffix("_total")]
            found = [s.value for s in fam.samples if s.name == name and
                     all(s.labels.get(k) == v for k, v in labels.items())]
            self.assertEqual(len(found), 1, (name, labels))
            return found[0]

        for fam, typ in (("node_md_state", "gauge"), ("node_md_disks", "gauge"),
                         ("node_md_disks_required", "gauge"),
                         ("node_md_blocks", "gauge"),
                         ("node_md_blocks_synced", "gauge")):
            self.assertEqual(fams[fam].type, typ)
        self.assertEqual(fams["node_md_state"].documentation,
                         "Indicates the state of md-device.")
        self.assertEqual(fams["node_md_disks"].documentation,
                         "Number of active/failed/spare disks of device.")
        a, b, c, g = (TAG + n for n in ("a", "b", "c", "ghost"))
        self.assertEqual(value("node_md_state", device=a, state="active"), 1)
        self.assertEqual(value("node_md_state", device=a, state="recovering"),
                         0)
        self.assertEqual(value("node_md_state", device=c, state="recovering"),
                         1)
        self.assertEqual(value("node_md_state", device=c, state="active"), 0)
        self.assertEqual(value("node_md_state", device=g, state="inactive"),
                         1)
        self.assertEqual(value("node_md_disks", device=a, state="active"), 3)
        self.assertEqual(value("node_md_disks", device=b, state="active"), 2)
        self.assertEqual(value("node_md_disks", device=b, state="failed"), 1)
        self.assertEqual(value("node_md_disks", device=c, state="spare"), 0)
        self.assertEqual(value("node_md_disks_required", device=b), 3)
        blocks = value("node_md_blocks", device=a)
        detail = json.loads(self.env.tool(
            "detail", "--json", "--control", self.env.ctl(a)).stdout)
        self.assertEqual(blocks * 1024, detail["array_bytes"])
        self.assertEqual(value("node_md_blocks_synced", device=a), blocks)
        synced = value("node_md_blocks_synced", device=c)
        self.assertGreater(synced, 0)
        self.assertLess(synced, value("node_md_blocks", device=c))
        # uraid's own.
        self.assertEqual(value("uraid_array_up", device=a), 1)
        self.assertEqual(value("uraid_array_up", device=g), 0)
        self.assertEqual(value("uraid_array_health", device=b), 1)
        self.assertEqual(value("uraid_job_running", device=c, job="recover"), 1)
        self.assertGreater(
            value("uraid_job_speed_bytes_per_second", device=c, job="recover"),
            0)
        self.assertEqual(value("uraid_member_faulty", device=b,
                               member=self.members["b"][1]), 1)
        self.assertEqual(value("uraid_member_bad_blocks", device=a,
                               member=self.members["a"][0]), 0)
        # Per member: the fill's I/O, timed; no errors on a healthy one.
        m0 = self.members["a"][0]
        for name in ("uraid_member_ios_total",
                     "uraid_member_io_seconds_total",
                     "uraid_member_latency_seconds"):
            self.assertGreater(value(name, device=a, member=m0), 0, name)
        for name in ("uraid_member_read_errors_total",
                     "uraid_member_write_errors_total",
                     "uraid_member_corrected_read_errors_total",
                     "uraid_member_bad_block_records_total"):
            self.assertEqual(value(name, device=a, member=m0), 0, name)
        self.assertEqual(fams["uraid_member_write_errors"].type, "counter")
        # Counters lose "_total" in the parser's family name.
        self.assertEqual(fams["uraid_member_writes"].type, "counter")
        self.assertGreater(value("uraid_member_writes_total", device=c), 0)
        # --output: the same text, written whole for the textfile collector.
        out = os.path.join(self.tmp, "uraid.prom")
        self.env.tool("metrics", "--output", out)
        with open(out) as f:
            text = f.read()
        self.assertEqual(os.stat(out).st_mode & 0o777, 0o644)
        names = {f.name for f in text_string_to_metric_families(text)}
        self.assertEqual(names, set(fams))
        if shutil.which("promtool"):
            p = subprocess.run(["promtool", "check", "metrics"], input=text,
                               capture_output=True, text=True)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        else:
            print("promtool is not installed: checked with "
                  "prometheus_client's parser only")

    def test_add_of_an_active_member_names_it(self):
        m = self.members["a"][0]
        r = self.env.tool("add", "--control", self.env.ctl(TAG + "a"), m,
                          check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn(f"{m} is already a member of this array (slot 0, "
                      "active)", r.stderr)
        self.assertNotIn("in use", r.stderr)

    def test_stop_array_and_job(self):
        env = self.env
        # stop --control alone still stops only the job (a slow check of
        # a), and so does idle; the array keeps serving.
        ca = env.ctl(TAG + "a")
        env.tool("set", "--control", ca, "--speed-min", "100",
                 "--speed-max", "200")
        for how in ("stop", "idle"):
            env.tool("check", "--control", ca)
            r = env.tool(how, "--control", ca)
            self.assertEqual(r.stdout, "stopped the running job, if any\n")
            d = json.loads(env.tool("detail", "--control", ca,
                                    "--json").stdout)
            self.assertEqual(d["job"]["kind"], "idle", how)
            self.assertEqual((d["last_job"]["kind"], d["last_job"]["result"]),
                             ("check", "interrupted"), how)
        cc = env.ctl(TAG + "c")
        # Refused mixes.
        r = env.tool("stop", "--control", cc, TAG + "c", check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        r = env.tool("stop", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("stop needs ARRAY", r.stderr)
        # An array served the way users serve it: uraid serve (daemon), a
        # TCP port, so that the pid file is the run directory's.
        d = os.path.join(self.tmp, "d")
        os.mkdir(d)
        paths = make_members(d, 3, 16 * MIB)
        env.tool("create", "--force", "--assume-clean", "--chunk", "64K",
                 "--name", f"{TAG}d", *paths)
        port = free_port()
        r = env.tool("serve", "--port", str(port), "--control",
                     env.ctl(TAG + "d"), *paths)
        pidfile = os.path.join(env.run_dir, f"{TAG}d.pid")
        self.assertIn(f"pid file {pidfile}", r.stdout)
        with open(pidfile) as f:
            pid = int(f.read())
        self.assertTrue(r.stdout.endswith(f"; nbdkit pid {pid}\n"), r.stdout)
        self.assertTrue(alive(pid))
        import nbd
        h = nbd.NBD()
        h.connect_tcp("127.0.0.1", str(port))
        h.pwrite(b"x" * 65536, 0)  # the array goes active (dirty)
        h.flush()
        h.shutdown()
        r = env.tool("stop", f"{TAG}d")
        self.assertRegex(r.stdout, rf"^stopped {TAG}d \(nbdkit pid {pid}, "
                                   r"control .*\): superblocks clean\n$")
        self.assertFalse(alive(pid))
        for e in json.loads(env.tool("examine", "--json", *paths).stdout):
            self.assertEqual(e["state"], "clean")
        # Gone from status (its socket was removed with it).
        out = env.tool("status", "--json", check=False).stdout
        self.assertNotIn(f'"{TAG}d"', out)
        # Stopping what is not served says so, exit 1.
        r = env.tool("stop", f"{TAG}d", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("uraid: ", r.stderr)


class ReadOnlySwitch(unittest.TestCase):
    """`uraid readonly NAME` / `readwrite NAME` on an array nbdkit serves
    (md's --readonly / --readwrite): a client's writes fail (nbdkit sends
    the plugin's EROFS as NBD's EPERM) while reads go on, the superblocks
    are clean for uraid examine and mdadm --examine, status, detail and
    metrics say read-only; back to read-write the same client writes
    again and every byte is as written. Wrong requests name the cause."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="uraid-ro-")
        cls.env = Env(cls.tmp)
        cls.name = f"{TAG}ro"
        cls.paths = make_members(cls.tmp, 4, 16 * MIB)
        cls.env.tool("create", "--force", "--assume-clean", "--chunk", "64K",
                     "--name", cls.name, *cls.paths)
        cls.srv = Server(cls.tmp, cls.paths,
                         [f"control={cls.env.ctl(cls.name)}"])
        harness.control_call(cls.env.ctl(cls.name), {"cmd": "detail"})

    @classmethod
    def tearDownClass(cls):
        cls.srv.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def examine_states(self):
        return [m["state"] for m in json.loads(
            self.env.tool("examine", "--json", *self.paths).stdout)]

    def test_readonly_then_readwrite(self):
        import nbd
        rng = random.Random(5)
        h = self.srv.connect()
        size = h.get_size()
        data = bytearray(rng.getrandbits(8) for _ in range(4 * MIB))
        h.pwrite(bytes(data), 0)  # no flush: the switch writes it out
        r = self.env.tool("readonly", self.name)
        self.assertIn("read-only: writes refused, jobs frozen, superblocks "
                      "clean", r.stdout)
        self.assertEqual(self.examine_states(), ["clean"] * 4)
        if shutil.which("mdadm"):
            for p in self.paths:
                out = subprocess.run(["mdadm", "--examine", p],
                                     capture_output=True, text=True).stdout
                self.assertRegex(out, r"State : clean", p)
        block = bytes(4096)
        for op in (lambda: h.pwrite(block, 0),
                   lambda: h.zero(4096, 4096),
                   lambda: h.trim(1 * MIB, 0)):
            with self.assertRaises(nbd.Error) as e:
                op()
            self.assertIn(e.exception.errno, ("EPERM", errno.EPERM),
                          str(e.exception))
        self.assertIn("read-only", self.srv.output())
        self.assertEqual(h.pread(len(data), 0), bytes(data))  # reads go on
        # A client connecting now can read too.
        h2 = self.srv.connect()
        self.assertEqual(h2.pread(4096, 0), bytes(data[:4096]))
        h2.shutdown()

        detail = json.loads(self.env.tool(
            "detail", "--control", self.env.ctl(self.name), "--json").stdout)
        self.assertTrue(detail["read_only"])
        self.assertTrue(detail["switched_read_only"])
        self.assertIn("read-only", self.env.tool("detail", "--control",
                                                 self.env.ctl(self.name)
                                                 ).stdout)
        st = self.env.tool("status").stdout
        self.assertRegex(st, self.name + r" : active \(read-only\) raid5")
        metrics = self.env.tool("metrics").stdout
        self.assertRegex(metrics, r'uraid_array_read_only\{[^}]*\} 1')
        # Again: says so, exit 0; wrong requests: a clear error each.
        self.assertIn("already read-only",
                      self.env.tool("readonly", self.name).stdout)
        r = self.env.tool("readwrite", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("readwrite needs ARRAY... or --control SOCKET",
                      r.stderr)
        r = self.env.tool("readonly", "nosuch", check=False)
        self.assertEqual(r.returncode, 1)
        self.assertIn("nosuch", r.stderr)
        reply = harness.control_call(self.env.ctl(self.name),
                                     {"cmd": "readwrite", "force": True},
                                     must=False)
        self.assertFalse(reply["ok"])
        self.assertIn('unknown field "force" in a readwrite request',
                      reply["error"])

        r = self.env.tool("readwrite", "--control", self.env.ctl(self.name))
        self.assertIn("read-write: writes accepted", r.stdout)
        new = bytes(rng.getrandbits(8) for _ in range(64 * 1024))
        h.pwrite(new, size - len(new))  # the same connection writes again
        h.flush()
        self.assertEqual(h.pread(len(data), 0), bytes(data))
        self.assertEqual(h.pread(len(new), size - len(new)), new)
        self.assertFalse(json.loads(self.env.tool(
            "detail", "--control", self.env.ctl(self.name),
            "--json").stdout)["read_only"])
        h.shutdown()


class HonestMessages(unittest.TestCase):
    """serve says "serving" only once the export answers and reports
    nbdkit's own failure instead; the readiness probe leaves nbdkit nothing
    to complain about; --control names what a wrong path is."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="uraid-adm-msg-")
        cls.env = Env(cls.tmp)
        cls.env.env["URAID_PLUGIN"] = harness.ARGS.plugin
        cls.paths = make_members(cls.tmp, 3, 16 * MIB)
        cls.env.tool("create", "--force", "--assume-clean", "--chunk", "64K",
                     "--name", f"{TAG}h", *cls.paths)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_serve_reports_nbdkit_failures_not_serving(self):
        sock = os.path.join(self.tmp, "h.sock")
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            port = busy.getsockname()[1]
            r = self.env.tool("serve", "--port", str(port), *self.paths,
                              check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertNotIn("serving array", r.stdout)
        self.assertIn("Address already in use", r.stderr)
        self.assertIn("nbdkit did not start (exit status 1; its messages "
                      "are above)", r.stderr)
        r = self.env.tool("serve", "--socket", sock, *self.paths, "--",
                          "--no-such-nbdkit-option", check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertNotIn("serving array", r.stdout)
        self.assertIn("nbdkit did not start", r.stderr)

    def test_words_after_dashdash(self):
        """A filter's KEY=VALUE after -- reaches the filter (nbdkit wants
        it after the plugin); the plugin's own keys are serve's flags."""
        sock = os.path.join(self.tmp, "o.sock")
        r = self.env.tool("serve", "--socket", sock, *self.paths, "--",
                          "control-group=root", check=False)
        self.assertEqual(r.returncode, 2)
        self.assertIn("'control-group=root' after -- is a key of the uraid "
                      "plugin: give it as --control-group GROUP", r.stderr)
        r = self.env.tool("serve", "--socket", sock, *self.paths, "--",
                          "--filter=offset", "offset=1M", "range=1M")
        pid = int(r.stdout.rsplit("nbdkit pid ", 1)[1])
        try:
            import nbd
            h = nbd.NBD()
            h.connect_unix(sock)
            self.assertEqual(h.get_size(), MIB)
            h.shutdown()
        finally:
            os.kill(pid, signal.SIGTERM)
            deadline = time.time() + 30
            while alive(pid) and time.time() < deadline:
                time.sleep(0.05)

    def test_foreground_probe_logs_no_error_and_control_diagnosis(self):
        sock = os.path.join(self.tmp, "f.sock")
        p = subprocess.Popen([harness.ARGS.tool, "serve", "--foreground",
                              "--socket", sock, *self.paths],
                             env=self.env.env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.time() + 30
            while not os.path.exists(os.path.join(self.tmp, "f.pid")):
                self.assertLess(time.time(), deadline)
                time.sleep(0.05)
            # --control pointed at the export's socket, and at a file.
            r = self.env.tool("detail", "--control", sock, check=False)
            self.assertEqual(r.returncode, 1)
            self.assertIn("an NBD server, not a uraid control socket",
                          r.stderr)
            r = self.env.tool("detail", "--control", self.paths[0],
                              check=False)
            self.assertIn(f"{self.paths[0]}: not a socket", r.stderr)
            self.assertNotIn("stale", r.stderr)
        finally:
            p.send_signal(signal.SIGTERM)
            out = p.communicate(timeout=60)[0]
        self.assertEqual(p.returncode, 0, out)
        self.assertRegex(out, r"^serving array ")
        self.assertNotIn("error", out)


def fs_type(path):
    return subprocess.run(["stat", "-f", "-c", "%T", path], check=True,
                          capture_output=True, text=True).stdout.strip()


class ServeThreads(unittest.TestCase):
    """serve gives nbdkit -t (the CPUs, at least 2) when every member is
    memory, where more threads only take turns on the CPUs
    (tools/serve_threads.h); members elsewhere keep nbdkit's default, and
    a -t after -- wins."""

    def serve_cmdline(self, tmp, paths, *extra):
        env = Env(tmp)
        env.env["URAID_PLUGIN"] = harness.ARGS.plugin
        sock = os.path.join(tmp, "t.sock")
        r = env.tool("serve", "--socket", sock, *paths, *extra)
        pid = int(r.stdout.rsplit("nbdkit pid ", 1)[1])
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                argv = f.read().split("\0")
            # serve says what it chose, and only then.
            chose = self.threads(argv) and not extra
            self.assertEqual("; members in memory: nbdkit -t " in r.stdout,
                             bool(chose), r.stdout)
            return argv
        finally:
            os.kill(pid, signal.SIGTERM)
            deadline = time.time() + 30
            while alive(pid) and time.time() < deadline:
                time.sleep(0.05)

    def threads(self, argv):
        return [argv[i + 1] for i, w in enumerate(argv) if w == "-t"]

    def bench_threads(self, paths):
        """The -t the bench's default ("auto") gives a uraid server over
        `paths` and a file-plugin peer beside them: serve's choice."""
        bench_common.NBDKIT_THREADS = "auto"
        uraid = bench_common.threads_args(
            [harness.ARGS.plugin] + [f"member={p}" for p in paths])
        peer = bench_common.threads_args(["file", paths[0]])
        self.assertEqual(uraid, peer)
        return uraid[1:]

    def array_in(self, parent):
        tmp = tempfile.mkdtemp(prefix="uraid-adm-thr-", dir=parent)
        self.addCleanup(shutil.rmtree, tmp, True)
        paths = make_members(tmp, 3, 16 * MIB)
        Env(tmp).tool("create", "--force", "--assume-clean", "--chunk",
                      "64K", *paths)
        return tmp, paths

    def test_memory_members_get_the_cpus(self):
        if fs_type("/dev/shm") != "tmpfs":
            self.skipTest("/dev/shm is not tmpfs here")
        tmp, paths = self.array_in("/dev/shm")
        want = str(max(2, len(os.sched_getaffinity(0))))
        self.assertEqual(self.threads(self.serve_cmdline(tmp, paths)),
                         [want])
        self.assertEqual(self.bench_threads(paths), [want])
        # The user's -t wins, in any of nbdkit's spellings.
        for extra in (["-t", "5"], ["-t5"], ["--threads=5"],
                      ["--threads", "5"]):
            argv = self.serve_cmdline(tmp, paths, "--", *extra)
            setting = [w for w in argv
                       if w in ("-t", "--threads") or
                       w.startswith("--threads=") or
                       (w.startswith("-t") and len(w) > 2)]
            self.assertEqual(setting, extra[:1], argv)

    def test_disk_members_keep_nbdkit_default(self):
        parent = "/var/tmp"
        if fs_type(parent) in ("tmpfs", "ramfs"):
            self.skipTest(f"{parent} is memory here")
        tmp, paths = self.array_in(parent)
        self.assertEqual(self.threads(self.serve_cmdline(tmp, paths)), [])
        self.assertEqual(self.bench_threads(paths), [])


class NonRootMonitor(unittest.TestCase):
    """The uraid@ unit's ExecStart as root, monitor and status as another
    uid in the ARRAY's control-group."""

    USER = f"uraidmon{os.getpid() % 100000}"

    @classmethod
    def setUpClass(cls):
        if os.getuid() != 0:
            raise unittest.SkipTest("needs root to make a user")
        cls.tmp = tempfile.mkdtemp(prefix="uraid-adm-mon-")
        os.chmod(cls.tmp, 0o755)
        cls.env = Env(cls.tmp)
        subprocess.run(["groupadd", "--system", cls.USER], check=True)
        subprocess.run(["useradd", "--system", "--gid", cls.USER,
                        "--no-create-home", "--shell", "/usr/sbin/nologin",
                        cls.USER], check=True)
        cls.uid = pwd.getpwnam(cls.USER).pw_uid
        cls.gid = grp.getgrnam(cls.USER).gr_gid
        cls.prefix, cls.unitdir = harness.install_units(cls.tmp)
        dev = os.path.join(cls.tmp, "dev")
        os.mkdir(dev)
        cls.paths = make_members(dev, 3, 16 * MIB)
        cls.env.tool("create", "--force", "--assume-clean", "--chunk", "64K",
                     *cls.paths)
        cls.name = f"{TAG}m"
        with open(cls.env.conf, "w") as f:
            f.write(f"DEVICE partitions {dev}/*.img\n"
                    f"ARRAY /dev/md/{cls.name} "
                    f"uuid={uuid_of(cls.env, cls.paths[0])}\n"
                    f"    control-group={cls.USER} spares=1 timeout=5000\n")
        os.chmod(cls.env.conf, 0o644)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        subprocess.run(["userdel", cls.USER], capture_output=True)
        subprocess.run(["groupdel", cls.USER], capture_output=True)

    def exec_start(self, unit):
        with open(os.path.join(self.unitdir, unit)) as f:
            for line in f:
                if line.startswith("ExecStart="):
                    return line[len("ExecStart="):].replace(
                        "%i", self.name).split()
        self.fail(f"{unit}: no ExecStart")

    def as_user(self, args, **kw):
        return subprocess.Popen(args, env=self.env.env, user=self.uid,
                                group=self.gid, extra_groups=[self.gid],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, **kw)

    def test_monitor_and_status_as_group_member(self):
        srv = subprocess.Popen(self.exec_start("uraid@.service"),
                               env=self.env.env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        try:
            ctl = self.env.ctl(self.name)
            harness.control_call(ctl, {"cmd": "detail"})
            st = os.stat(ctl)
            self.assertEqual(st.st_mode & 0o777, 0o660)
            self.assertEqual(st.st_gid, self.gid)
            # The monitor unit's own command line, as that user.
            mon = self.as_user(self.exec_start("uraid-monitor.service"))
            time.sleep(2)
            self.assertIsNone(mon.poll(), mon.stdout.read()
                              if mon.poll() is not None else "")
            mon.terminate()
            out = mon.communicate(timeout=30)[0]
            self.assertIn("NewArray", out)
            # spares=1 from the ARRAY line reached the plugin.
            self.assertIn("SparesMissing", out)
            # status as that user: read access is enough.
            p = self.as_user([harness.ARGS.tool, "status"])
            out = p.communicate(timeout=60)[0]
            self.assertEqual(p.returncode, 0, out)
            self.assertIn(f"{self.name} : active raid5", out)
            # ... and changing anything is refused.
            p = self.as_user([harness.ARGS.tool, "fail", "--control", ctl,
                              self.paths[0]])
            out = p.communicate(timeout=60)[0]
            self.assertEqual(p.returncode, 1, out)
            self.assertIn("permission denied", out)
            # stop as that user cannot signal root's nbdkit.
            p = self.as_user([harness.ARGS.tool, "stop", self.name])
            out = p.communicate(timeout=60)[0]
            self.assertEqual(p.returncode, 1, out)
            self.assertIn("run as its user or root", out)
            # Root stops it through the unit's process: nbdkit exits, the
            # supervisor after it.
            r = self.env.tool("stop", self.name)
            self.assertIn("superblocks clean", r.stdout)
            self.assertEqual(srv.wait(timeout=60), 0)
        finally:
            if srv.poll() is None:
                srv.send_signal(signal.SIGTERM)
                srv.wait(timeout=60)

    def test_plugin_array_key_takes_the_tags(self):
        """nbdkit uraid array=NAME: the ARRAY line's control-group= and
        spares= reach the plugin as its keys (control= given here)."""
        ctl = os.path.join(self.env.run_dir, "plugin.ctl")
        sock = os.path.join(self.tmp, "plugin.sock")
        srv = subprocess.Popen(
            ["nbdkit", "-U", sock, "-f", "--exit-with-parent",
             harness.ARGS.plugin, f"array={self.name}",
             f"config={self.env.conf}", f"control={ctl}"],
            env=self.env.env, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True)
        try:
            harness.control_call(ctl, {"cmd": "detail"})
            st = os.stat(ctl)
            self.assertEqual((st.st_mode & 0o777, st.st_gid),
                             (0o660, self.gid))
            p = self.as_user([harness.ARGS.tool, "monitor", "--oneshot",
                              "--control", ctl])
            out = p.communicate(timeout=60)[0]
            self.assertEqual(p.returncode, 1, out)
            self.assertIn("SparesMissing", out)
        finally:
            srv.send_signal(signal.SIGTERM)
            out = srv.communicate(timeout=60)[0]
        self.assertEqual(srv.returncode, 0, out)


if __name__ == "__main__":
    harness.main()
