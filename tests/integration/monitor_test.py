# SPDX-License-Identifier: MIT
"""`uraid monitor` and `uraid detail --test` end to end.

The real thing: nbdkit serving the plugin with control=SOCK over two file
members and two NBD members (one behind nbdkit's error filter, one whose
nbdkit is killed with kill -9), a verifying libnbd writer running while the
members fail one by one, the monitor as a subprocess with --program (a
script recording argv and the environment), --mail (a fake sendmail on PATH)
and --syslog (a datagram listener on /dev/log), and the tool's detail --test
and monitor --oneshot exit codes in the healthy, degraded and failed states.

Beside it, a fake control server written here (the protocol as documented
in uraid/control.h) drives what a real array cannot produce on demand:
unknown events and malformed lines, programs that hang or fail, and the
bad-input cases (a file, an NBD socket, a stale socket, a server that is no
uraid server)."""

import email
import email.utils
import json
import os
import queue
import random
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import unittest

import harness
from harness import Server, make_members, run_tool

MIB = 1 << 20
UUID = "0badc0de:11111111:22222222:33333333"

# A --program that records each call: one line per call, tab-separated:
# argc, $1, $2, $3, URAID_EVENT, URAID_ARRAY, URAID_ARRAY_NAME,
# URAID_MEMBER, URAID_CONTROL, URAID_EVENT_JSON. Events named in
# $HANG_ON sleep (in a grandchild, so that killing the process group is
# what ends it); events in $FAIL_ON exit 3.
RECORDER = r"""#!/bin/sh
printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$#" "$1" "$2" "$3" \
  "$URAID_EVENT" "$URAID_ARRAY" "$URAID_ARRAY_NAME" "$URAID_MEMBER" \
  "$URAID_CONTROL" "$URAID_EVENT_JSON" >> "$RECORD"
case " $HANG_ON " in *" $1 "*)
  sleep 1000 & echo $! > "$RECORD.hung"; wait ;;
esac
case " $FAIL_ON " in *" $1 "*) exit 3 ;; esac
exit 0
"""

# A sendmail that keeps what it was given: argv in mail-N.argv, the
# message in mail-N.eml.
FAKE_SENDMAIL = r"""#!/bin/sh
n=$(ls "$MAILDIR" | grep -c '\.eml$')
printf '%s\n' "$@" > "$MAILDIR/mail-$n.argv"
cat > "$MAILDIR/mail-$n.eml.tmp"
mv "$MAILDIR/mail-$n.eml.tmp" "$MAILDIR/mail-$n.eml"
"""


def write_script(path, text):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)


def wait_for(pred, timeout, what):
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for "
                                 f"{what}")
        time.sleep(0.02)


class Record:
    """The calls of RECORDER, parsed."""

    def __init__(self, path):
        self.path = path

    def calls(self):
        if not os.path.exists(self.path):
            return []
        out = []
        with open(self.path) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 10:
                    continue  # a line still being written
                (argc, a1, a2, a3, ev, arr, name, member, ctl,
                 js) = parts
                out.append({"argc": int(argc), "argv": [a1, a2, a3],
                            "URAID_EVENT": ev, "URAID_ARRAY": arr,
                            "URAID_ARRAY_NAME": name,
                            "URAID_MEMBER": member, "URAID_CONTROL": ctl,
                            "event": json.loads(js),
                            "seen": time.time()})
        return out

    def names(self):
        return [c["argv"][0] for c in self.calls()]

    def wait(self, name, timeout=5, after=0, pred=None):
        """The first call for `name` with index >= after (and pred)."""
        def find():
            for i, c in enumerate(self.calls()):
                if i >= after and c["argv"][0] == name and (
                        pred is None or pred(c)):
                    return c
            return None
        return wait_for(find, timeout, f"{name} in {self.names()[after:]}")


class Monitor:
    """uraid monitor as a subprocess, stdout and stderr in files."""

    def __init__(self, tmp, args, env=None, tag="mon", wrap=()):
        self.out = os.path.join(tmp, f"{tag}.out")
        self.err = os.path.join(tmp, f"{tag}.err")
        self.outf = open(self.out, "w")
        self.errf = open(self.err, "w")
        self.proc = subprocess.Popen(
            list(wrap) + [harness.ARGS.tool, "monitor", *args],
            stdout=self.outf, stderr=self.errf, env=env)

    def lines(self):
        with open(self.out) as f:
            return [l for l in f.read().split("\n") if l]

    def stderr(self):
        with open(self.err) as f:
            return f.read()

    def wait_line(self, word, timeout=5, after=0):
        def find():
            for l in self.lines()[after:]:
                if f" {word} " in f" {l} ":
                    return l
            return None
        return wait_for(find, timeout, f"{word} on the monitor's stdout: "
                        f"{self.lines()[after:]} / {self.stderr()}")

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("the monitor did not stop on "
                                     f"{sig}: {self.stderr()}")
        self.outf.close()
        self.errf.close()
        return self.proc.returncode


def monitor_run(*args, env=None, timeout=30):
    return subprocess.run([harness.ARGS.tool, "monitor", *args],
                          capture_output=True, text=True, env=env,
                          timeout=timeout)


class SyslogListener:
    """An AF_UNIX datagram socket at /dev/log (or, where /dev/log exists,
    at a private path that the monitor sees as /dev/log through a mount
    namespace). Collects (priority, message) of the monitor's lines."""

    def __init__(self, tmp):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.owned = None
        self.wrap = ()
        try:
            if os.path.exists("/dev/log"):
                raise FileExistsError
            self.sock.bind("/dev/log")
            self.owned = "/dev/log"
        except OSError:
            private = os.path.join(tmp, "log.sock")
            self.sock.bind(private)
            self.wrap = ("unshare", "-m", "sh", "-c",
                         f'mount --bind "{private}" /dev/log && exec "$@"',
                         "sh")
        self.msgs = []
        self.sock.settimeout(0.2)
        self.stopped = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stopped:
            try:
                data = self.sock.recv(65536).decode(errors="replace")
            except socket.timeout:
                continue
            except OSError:
                return
            if data.startswith("<") and ">" in data:
                pri, rest = data[1:].split(">", 1)
                if pri.isdigit():
                    self.msgs.append((int(pri), rest))

    def find(self, word):
        return [(p, m) for p, m in self.msgs
                if "uraid-monitor[" in m and f": {word} " in m]

    def close(self):
        self.stopped = True
        self.t.join()
        self.sock.close()
        if self.owned:
            os.unlink(self.owned)


class FakeServer:
    """A uraid control server as uraid/control.h documents it, written
    here: answers {"cmd":"events"} with the current state and then streams
    what the test pushes. mode "garbage" answers a line that is not ours."""

    def __init__(self, path, initial=None, mode="uraid"):
        self.path = path
        if os.path.lexists(path):
            os.unlink(path)
        self.initial = initial if initial is not None else [
            self.event("NewArray", state="clean", level=5, raid_devices=4,
                       degraded=False, failed=False, spares=0)]
        self.mode = mode
        self.requests = []
        self.clients = []
        self.lock = threading.Lock()
        self.ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ls.bind(path)
        self.ls.listen(8)
        self.t = threading.Thread(target=self.accept, daemon=True)
        self.t.start()

    @staticmethod
    def event(name, **fields):
        e = {"event": name, "time": time.time(), "array": UUID,
             "name": "fake"}
        e.update(fields)
        return e

    def accept(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            threading.Thread(target=self.serve, args=(c,),
                             daemon=True).start()

    def serve(self, c):
        buf = b""
        try:
            while b"\n" not in buf:
                chunk = c.recv(4096)
                if not chunk:
                    c.close()
                    return
                buf += chunk
            self.requests.append(buf.split(b"\n")[0].decode())
            if self.mode == "garbage":
                c.sendall(b"HELLO this is not uraid\n")
                c.close()
                return
            head = json.dumps({"ok": True, "initial": len(self.initial)})
            c.sendall((head + "\n" + "".join(
                json.dumps(e) + "\n" for e in self.initial)).encode())
            with self.lock:
                self.clients.append(c)
        except OSError:
            c.close()

    def push_raw(self, data):
        with self.lock:
            for c in list(self.clients):
                try:
                    c.sendall(data)
                except OSError:
                    self.clients.remove(c)

    def push(self, event):
        self.push_raw((json.dumps(event) + "\n").encode())

    def connected(self):
        with self.lock:
            return len(self.clients)

    def stop(self):
        self.ls.close()
        with self.lock:
            for c in self.clients:
                c.close()
            self.clients = []
        if os.path.lexists(self.path):
            os.unlink(self.path)


class NbdMember:
    """nbdkit's file plugin over one image on a unix socket (optionally
    behind the error filter, switched on by creating `error_file`)."""

    def __init__(self, tmp, name, size, error_file=None):
        self.img = os.path.join(tmp, f"{name}.img")
        with open(self.img, "wb") as f:
            f.truncate(size)
        self.sock = os.path.join(tmp, f"{name}.sock")
        pid = os.path.join(tmp, f"{name}.pid")
        cmd = ["nbdkit", "-U", self.sock, "-P", pid, "-f",
               "--exit-with-parent"]
        if error_file:
            cmd += ["--filter=error"]
        cmd += ["file", self.img]
        if error_file:
            cmd += ["error-rate=100%", f"error-file={error_file}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_for(lambda: os.path.exists(pid), 20, f"nbdkit for {name}")
        self.uri = f"nbd+unix:///?socket={self.sock}"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Writer:
    """Random writes, each read back and compared, over the whole array,
    against a reference copy; runs until stopped. Any error or wrong byte
    is kept in `errors`."""

    def __init__(self, srv, size, seed=5):
        self.srv = srv
        self.size = size
        self.ref = bytearray(size)
        self.rng = random.Random(seed)
        self.errors = []
        self.ops = 0
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def run(self):
        try:
            h = self.srv.connect()
            while not self.stop_ev.is_set():
                n = self.rng.choice([4096, 65536, 192 * 1024])
                off = self.rng.randrange(0, (self.size - n) // 4096) * 4096
                data = self.rng.randbytes(n)
                h.pwrite(data, off)
                self.ref[off:off + n] = data
                if h.pread(n, off) != data:
                    self.errors.append(f"wrong data at {off}+{n}")
                    return
                # And an older region, through whatever path it takes now.
                o2 = self.rng.randrange(0, (self.size - 65536) // 4096) * 4096
                if h.pread(65536, o2) != bytes(self.ref[o2:o2 + 65536]):
                    self.errors.append(f"wrong old data at {o2}")
                    return
                self.ops += 1
            h.shutdown()
        except Exception as e:  # reported by stop()
            self.errors.append(repr(e))

    def stop(self):
        self.stop_ev.set()
        self.t.join()
        return self.errors


class MonitorEndToEnd(unittest.TestCase):
    """The real plugin, real failures, one monitor following it all."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-mon-",
                                    dir="/dev/shm" if os.path.isdir(
                                        "/dev/shm") else None)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            try:
                p()
            except Exception:
                pass
        if os.environ.get("URAID_KEEP"):
            print(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def detail_test(self, *args):
        r = run_tool("detail", "--test", *args, check=False)
        return r.returncode, r

    def test_failures_rebuild_and_alerts(self):
        t0 = time.time()
        tmp = self.tmp
        size = 16 * MIB
        err_on = os.path.join(tmp, "errors.on")
        a = NbdMember(tmp, "a", size, error_file=err_on)
        self.procs.append(a.kill)
        c = NbdMember(tmp, "c", size)
        self.procs.append(c.kill)
        err2_on = os.path.join(tmp, "errors2.on")
        d = NbdMember(tmp, "d", size, error_file=err2_on)
        self.procs.append(d.kill)
        (b,) = make_members(tmp, 1, size)
        members = [a.uri, b, c.uri, d.uri]
        run_tool("create", "--force", "--assume-clean", "--chunk", "64K",
                 "--name", "montest", *members)
        uuid = json.loads(run_tool("detail", "--json", *members).stdout)[
            "uuid"]
        # Offline, healthy.
        self.assertEqual(self.detail_test(*members)[0], 0)

        ctl = os.path.join(tmp, "ctl.sock")
        srv = Server(tmp, members, extra=[f"control={ctl}"])
        self.procs.append(srv.stop)
        wait_for(lambda: os.path.exists(ctl), 10, "the control socket")

        # The alert plumbing: recorder, fake sendmail, syslog listener.
        rec = Record(os.path.join(tmp, "record"))
        prog = os.path.join(tmp, "recorder.sh")
        write_script(prog, RECORDER)
        bindir = os.path.join(tmp, "bin")
        maildir = os.path.join(tmp, "mail")
        os.mkdir(bindir)
        os.mkdir(maildir)
        write_script(os.path.join(bindir, "sendmail"), FAKE_SENDMAIL)
        env = dict(os.environ, RECORD=rec.path, MAILDIR=maildir,
                   PATH=bindir + ":" + os.environ["PATH"])
        log = SyslogListener(tmp)
        self.procs.append(log.close)
        mon = Monitor(tmp, ["--control", ctl, "--program", prog,
                            "--mail", "ops@example.org", "--syslog",
                            "--delay", "0.2"], env=env, wrap=log.wrap)
        self.procs.append(mon.stop)

        first = rec.wait("NewArray")
        self.assertEqual(first["argc"], 2)
        self.assertEqual(first["argv"][1], uuid)
        self.assertEqual(first["URAID_ARRAY"], uuid)
        self.assertEqual(first["URAID_ARRAY_NAME"], "montest")
        self.assertEqual(first["URAID_CONTROL"], ctl)
        self.assertEqual(first["event"]["state"], "clean")
        self.assertEqual(first["event"]["raid_devices"], 4)
        line = mon.wait_line("NewArray")
        self.assertIn(f"array={uuid}", line)
        self.assertIn("name=montest", line)

        # Live and --oneshot, healthy.
        self.assertEqual(self.detail_test("--control", ctl)[0], 0)
        r = monitor_run("--oneshot", "--control", ctl)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "")

        # A server restart: DeviceDisappeared, then the array again.
        self.assertEqual(srv.stop(), 0)
        gone = rec.wait("DeviceDisappeared", timeout=5)
        self.assertEqual(gone["argv"][1], uuid)
        self.assertEqual(gone["event"]["control"], ctl)
        srv = Server(tmp, members, extra=[f"control={ctl}"])
        self.procs.append(srv.stop)
        n = len(rec.calls())
        again = rec.wait("NewArray", timeout=5, after=n - 1)
        self.assertEqual(again["argv"][1], uuid)
        self.assertEqual(rec.names().count("NewArray"), 2)

        writer = Writer(srv, srv.connect().get_size())
        time.sleep(0.3)

        # (a) An NBD member whose server starts failing every request.
        start = len(rec.calls())
        t_fail = time.time()
        open(err_on, "w").close()
        fail = rec.wait("Fail", timeout=5, after=start)
        deg = rec.wait("DegradedArray", timeout=5, after=start)
        self.assertLess(max(fail["seen"], deg["seen"]) - t_fail, 2.0,
                        "Fail and DegradedArray took over 2 s")
        self.assertEqual(fail["argc"], 3)
        self.assertEqual(fail["argv"][2], a.uri)
        self.assertEqual(fail["URAID_MEMBER"], a.uri)
        self.assertEqual(fail["event"]["slot"], 0)
        self.assertTrue(fail["event"].get("error"))
        self.assertEqual(self.detail_test("--control", ctl)[0], 1)
        # The spare, rebuilt slowly enough to show progress.
        # (The writer holds a rebuild at its minimum: md's rule.)
        run_tool("set", "--control", ctl, "--speed-min", "6M",
                 "--speed-max", "6M")
        run_tool("remove", "--control", ctl, a.uri)
        rec.wait("MemberRemoved", after=start)
        a.kill()
        spare1 = os.path.join(tmp, "spare1.img")
        with open(spare1, "wb") as f:
            f.truncate(size)
        start = len(rec.calls())
        run_tool("add", "--control", ctl, spare1)
        started = rec.wait("RebuildStarted", after=start)
        self.assertEqual(started["event"].get("kind"), "recover")
        fin = rec.wait("RebuildFinished", timeout=20, after=start)
        self.assertEqual(fin["event"]["result"], "completed")
        rec.wait("SpareActive", timeout=5, after=start)
        progress = [n for n in rec.names()[start:]
                    if n in ("Rebuild20", "Rebuild40", "Rebuild60",
                             "Rebuild80")]
        self.assertTrue(progress, rec.names()[start:])
        self.assertEqual(progress, sorted(progress))
        self.assertEqual(self.detail_test("--control", ctl)[0], 0)
        run_tool("set", "--control", ctl, "--speed-min", "1G",
                 "--speed-max", "1G")

        # An administrator's fail (the truncation case (b) has its own
        # test below), and a second spare.
        start = len(rec.calls())
        run_tool("fail", "--control", ctl, b)
        fail = rec.wait("Fail", timeout=5, after=start)
        self.assertEqual(fail["argv"][2], os.path.realpath(b))
        rec.wait("DegradedArray", timeout=5, after=start)
        run_tool("remove", "--control", ctl, b)
        spare2 = os.path.join(tmp, "spare2.img")
        with open(spare2, "wb") as f:
            f.truncate(size)
        start = len(rec.calls())
        run_tool("add", "--control", ctl, spare2)
        rec.wait("RebuildFinished", timeout=20, after=start)
        rec.wait("SpareActive", timeout=5, after=start)

        # (c) An NBD member's server killed with kill -9.
        self.assertEqual(writer.errors, [])
        ops = writer.ops
        wait_for(lambda: writer.ops > ops, 5, "the writer going on")
        start = len(rec.calls())
        t_fail = time.time()
        c.kill()
        fail = rec.wait("Fail", timeout=5, after=start)
        deg = rec.wait("DegradedArray", timeout=5, after=start)
        # The NBD member gives up after its reconnect backoff (0.7 s) and
        # then fails the array's retry at once: within the 2 s.
        self.assertLess(max(fail["seen"], deg["seen"]) - t_fail, 2.0,
                        f"server: Fail {fail['event']['time'] - t_fail:.2f} "
                        f"s after the kill, DegradedArray "
                        f"{deg['event']['time'] - t_fail:.2f} s")
        self.assertEqual(fail["argv"][2], c.uri)
        self.assertEqual(writer.stop(), [])
        self.assertGreater(writer.ops, 20)

        # Degraded: detail --test says 1 live and offline (the members
        # that are left; --force: the served array is dirty), --oneshot
        # reports it, and a monitor started now hears DegradedArray at once.
        self.assertEqual(self.detail_test("--control", ctl)[0], 1)
        left = [spare1, spare2, d.uri]
        code, r = self.detail_test("--force", *left)
        self.assertEqual(code, 1, r.stderr)
        code, r = self.detail_test("--force", "--json", *left)
        self.assertEqual(code, 1, r.stderr)
        self.assertIn("degraded", json.loads(r.stdout)["state"])
        r = monitor_run("--oneshot", "--control", ctl)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual([l.split()[1] for l in r.stdout.splitlines()],
                         ["DegradedArray"])
        rec2 = Record(os.path.join(tmp, "record2"))
        t_start = time.time()
        mon2 = Monitor(tmp, ["--control", ctl, "--program", prog],
                       env=dict(env, RECORD=rec2.path), tag="mon2")
        self.procs.append(mon2.stop)
        deg2 = rec2.wait("DegradedArray", timeout=3)
        self.assertLess(deg2["seen"] - t_start, 2.0)
        self.assertEqual(rec2.names()[:2], ["NewArray", "DegradedArray"])
        self.assertEqual(mon2.stop(), 0)

        # A second failure: the array fails.
        start = len(rec.calls())
        open(err2_on, "w").close()
        h = srv.connect()
        for off in range(0, 4 * MIB, 64 * 1024):
            try:
                h.pwrite(b"x" * 65536, off)
            except Exception:
                pass
        rec.wait("ArrayFailed", timeout=5, after=start)
        self.assertEqual(self.detail_test("--control", ctl)[0], 2)
        r = monitor_run("--oneshot", "--control", ctl)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("ArrayFailed", r.stdout)

        # Mail: one well-formed message per mail-worthy event.
        def mails():
            out = []
            for fn in sorted(os.listdir(maildir)):
                if fn.endswith(".eml"):
                    with open(os.path.join(maildir, fn), "rb") as f:
                        out.append(email.message_from_bytes(f.read()))
            return out
        wait_for(lambda: any("ArrayFailed" in m["Subject"]
                             for m in mails()), 5, "the ArrayFailed mail")
        subjects = [m["Subject"] for m in mails()]
        for ev in ("Fail", "DegradedArray", "ArrayFailed"):
            self.assertTrue(any(s.startswith(f"{ev} event on montest "
                                             f"({uuid}):") for s in
                                subjects), subjects)
        for unworthy in ("NewArray", "RebuildStarted", "SpareActive",
                         "DeviceDisappeared", "MemberRemoved"):
            self.assertFalse(any(s.startswith(unworthy) for s in subjects))
        with open(os.path.join(maildir, "mail-0.argv")) as f:
            self.assertEqual(f.read().split(), ["-t"])
        host = socket.gethostname()
        for m in mails():
            self.assertEqual(m["To"], "ops@example.org")
            self.assertTrue(m["From"])
            self.assertTrue(m["Subject"].endswith(f":{host}"), m["Subject"])
            self.assertIsNotNone(email.utils.parsedate_to_datetime(
                m["Date"]))
            self.assertEqual(m["MIME-Version"], "1.0")
            self.assertEqual(m.get_content_type(), "text/plain")
            self.assertFalse(m.is_multipart())
        failmail = next(m for m in mails()
                        if m["Subject"].startswith("Fail "))
        body = failmail.get_payload(decode=True).decode()
        self.assertIn("A Fail event had been detected on array montest", body)
        self.assertIn(f"component device {a.uri}", body)
        self.assertIn("State :", body)

        # Syslog: every event, at its priority (facility daemon = 3).
        def pri(word):
            found = wait_for(lambda: log.find(word), 3, f"{word} in syslog "
                             f"({log.msgs[-5:]})")
            facility, severity = divmod(found[0][0], 8)
            self.assertEqual(facility, 3)
            return severity
        self.assertEqual(pri("Fail"), 2)            # LOG_CRIT
        self.assertEqual(pri("ArrayFailed"), 2)
        self.assertEqual(pri("DegradedArray"), 4)   # LOG_WARNING
        self.assertEqual(pri("DeviceDisappeared"), 4)
        self.assertEqual(pri("MemberRemoved"), 5)   # LOG_NOTICE
        self.assertEqual(pri("NewArray"), 6)        # LOG_INFO
        self.assertEqual(pri("RebuildFinished"), 6)
        self.assertIn(f"array={uuid}", log.find("Fail")[0][1])

        # The stdout lines carry the member and slot.
        failline = mon.wait_line("Fail")
        # (A URI holds '=', so it is quoted.)
        self.assertIn(f"member={json.dumps(a.uri)}", failline)
        self.assertIn("slot=0", failline)

        self.assertEqual(mon.stop(), 0, mon.stderr())
        self.assertNotIn("program", mon.stderr())  # no alert failed
        h.shutdown()
        srv.stop()
        # Offline after the array failed: SecondFailureOnDisk below.
        # Nothing readable at all: 4.
        junk = os.path.join(tmp, "junk.img")
        with open(junk, "wb") as f:
            f.truncate(MIB)
        self.assertEqual(self.detail_test(junk)[0], 4)
        self.assertEqual(self.detail_test("--control", ctl)[0], 4)
        print(f"end-to-end: {time.time() - t0:.1f} s, "
              f"{writer.ops} verified writes")


class TruncatedMember(unittest.TestCase):
    """(b): a file member truncated under the served array, under load."""

    # A read past the new end is not a bad sector to rewrite: the file
    # member reports that it shrank (OutOfRange) and the array fails it.
    def test_truncated_file_member_fails(self):
        tmp = tempfile.mkdtemp(prefix="uraid-mont-")
        self.addCleanup(shutil.rmtree, tmp, True)
        m = make_members(tmp, 4, 16 * MIB)
        run_tool("create", "--force", "--assume-clean", "--chunk", "64K", *m)
        ctl = os.path.join(tmp, "ctl.sock")
        srv = Server(tmp, m, extra=[f"control={ctl}"])
        self.addCleanup(srv.stop)
        rec = Record(os.path.join(tmp, "record"))
        prog = os.path.join(tmp, "recorder.sh")
        write_script(prog, RECORDER)
        wait_for(lambda: os.path.exists(ctl), 10, "the control socket")
        mon = Monitor(tmp, ["--control", ctl, "--program", prog],
                      env=dict(os.environ, RECORD=rec.path))
        self.addCleanup(mon.stop)
        rec.wait("NewArray")
        writer = Writer(srv, srv.connect().get_size())
        self.addCleanup(writer.stop)
        wait_for(lambda: writer.ops > 5, 5, "the writer")
        t_fail = time.time()
        os.truncate(m[1], 0)
        fail = rec.wait("Fail", timeout=5)
        deg = rec.wait("DegradedArray", timeout=5)
        self.assertLess(max(fail["seen"], deg["seen"]) - t_fail, 2.0)
        self.assertEqual(fail["argv"][2], os.path.realpath(m[1]))
        self.assertEqual(writer.stop(), [])


class SecondFailureOnDisk(unittest.TestCase):
    """Offline detail --test of an array that failed while served: the
    server writes the second failure into the surviving members'
    superblocks, as md does, so offline the array reads as failed (2)."""

    def test_offline_after_array_failed(self):
        tmp = tempfile.mkdtemp(prefix="uraid-mon2-")
        self.addCleanup(shutil.rmtree, tmp, True)
        size = 16 * MIB
        errs = [os.path.join(tmp, f"err{i}") for i in range(2)]
        nbds = [NbdMember(tmp, f"n{i}", size, error_file=errs[i])
                for i in range(2)]
        for n in nbds:
            self.addCleanup(n.kill)
        files = make_members(tmp, 2, size)
        members = [nbds[0].uri, files[0], nbds[1].uri, files[1]]
        run_tool("create", "--force", "--assume-clean", "--chunk", "64K",
                 *members)
        ctl = os.path.join(tmp, "ctl.sock")
        srv = Server(tmp, members, extra=[f"control={ctl}"])
        self.addCleanup(srv.stop)
        h = srv.connect()
        live = lambda: run_tool("detail", "--test", "--control", ctl,
                                check=False).returncode
        for i, want in ((0, 1), (1, 2)):
            open(errs[i], "w").close()
            def poke():
                for off in range(0, 4 * MIB, 64 * 1024):
                    try:
                        h.pwrite(b"y" * 65536, off)
                    except Exception:
                        pass
                return live() == want
            wait_for(poke, 10, f"detail --test {want}")
        h.shutdown()
        srv.stop()
        imgs = [nbds[0].img, files[0], nbds[1].img, files[1]]
        r = run_tool("detail", "--test", *imgs, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("recorded in its superblocks", r.stderr)
        # The cable is back: a plain start refuses and names force; a forced
        # one takes back the member that failed last (slot 2) and leaves
        # out the one the array ran without (slot 0), md's --force.
        out = harness.start_fails(tmp, imgs)
        self.assertIn("force=true", out)
        forced = Server(tmp, imgs, extra=["force=true", f"control={ctl}"])
        self.addCleanup(forced.stop)
        log = forced.output()
        self.assertIn(f"forced assembly: {nbds[1].img} (slot 2", log)
        self.assertIn("failed last", log)
        self.assertIn(f"leaves out {nbds[0].img}", log)
        self.assertEqual(live(), 1)  # degraded: slot 0 to rebuild
        forced.stop()


class MonitorWithFakeServer(unittest.TestCase):
    """The monitor's own behaviour, against a server the test controls."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-monf-")
        self.sock = os.path.join(self.tmp, "ctl.sock")
        self.rec = Record(os.path.join(self.tmp, "record"))
        self.prog = os.path.join(self.tmp, "recorder.sh")
        write_script(self.prog, RECORDER)
        self.env = dict(os.environ, RECORD=self.rec.path)
        self.cleanup = []

    def tearDown(self):
        for f in reversed(self.cleanup):
            try:
                f()
            except Exception:
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)

    def fake(self, **kw):
        s = FakeServer(self.sock, **kw)
        self.cleanup.append(s.stop)
        return s

    def monitor(self, *args, env=None, tag="mon"):
        m = Monitor(self.tmp, ["--control", self.sock, *args],
                    env=env or self.env, tag=tag)
        self.cleanup.append(m.stop)
        return m

    def test_stream_program_and_json(self):
        srv = self.fake(initial=[
            FakeServer.event("NewArray", state="clean, degraded", level=5),
            FakeServer.event("DegradedArray")])
        mon = self.monitor("--program", self.prog, "--json", "--test")
        self.assertEqual(self.rec.wait("TestMessage")["argc"], 2)
        # The request is exactly the subscription, and TestMessage comes
        # right after the current state.
        self.assertEqual([json.loads(r) for r in srv.requests],
                         [{"cmd": "events"}])
        self.assertEqual(self.rec.names(),
                         ["NewArray", "DegradedArray", "TestMessage"])
        wait_for(srv.connected, 5, "the subscription")
        fail = FakeServer.event("Fail", member="/x/m 1.img", slot=1,
                                error="I/O error")
        t_push = time.time()
        srv.push(fail)
        self.assertLess(self.rec.wait("Fail")["seen"] - t_push, 0.5)
        srv.push_raw(b"this is not json\n")
        srv.push_raw(b'{"no_event":1}\n')
        future = FakeServer.event("SomethingNew", answer=42,
                                  first_mismatches=[1, 2])
        srv.push(future)
        got = self.rec.wait("SomethingNew")
        self.assertEqual(got["event"], future)
        call = self.rec.wait("Fail")
        self.assertEqual(call["argc"], 3)
        self.assertEqual(call["argv"], ["Fail", UUID, "/x/m 1.img"])
        self.assertEqual(call["event"], fail)
        self.assertEqual(call["URAID_EVENT"], "Fail")
        self.assertEqual(call["URAID_MEMBER"], "/x/m 1.img")
        self.assertEqual(call["URAID_ARRAY_NAME"], "fake")
        self.assertEqual(call["URAID_CONTROL"], self.sock)
        # --json: the objects verbatim, one per line.
        wait_for(lambda: len(mon.lines()) >= 5, 5, "five lines")
        objs = [json.loads(l) for l in mon.lines()]
        self.assertEqual(objs[3], fail)
        self.assertEqual(objs[4], future)
        self.assertEqual(objs[2]["event"], "TestMessage")
        self.assertEqual(objs[2]["array"], UUID)
        self.assertIn("not JSON", mon.stderr())
        self.assertIn("without an \"event\"", mon.stderr())
        self.assertEqual(mon.stop(signal.SIGINT), 0)

    def test_human_lines(self):
        srv = self.fake()
        mon = self.monitor()
        mon.wait_line("NewArray")
        wait_for(srv.connected, 5, "the subscription")
        srv.push(FakeServer.event("CheckFinished", mismatches=3,
                                  first_mismatches=[7, 9],
                                  result="completed"))
        line = mon.wait_line("CheckFinished")
        words = line.split(" ")
        self.assertRegex(words[0], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}")
        self.assertEqual(words[1:], [
            "CheckFinished", f"array={UUID}", "name=fake", "mismatches=3",
            "first_mismatches=[7,9]", "result=completed"])
        line = mon.wait_line("NewArray")
        self.assertIn('state=clean', line)
        self.assertEqual(mon.stop(), 0)

    def test_hanging_and_failing_programs(self):
        srv = self.fake()
        env = dict(self.env, HANG_ON="Hang", FAIL_ON="Oops")
        mon = self.monitor("--program", self.prog, "--program-timeout", "1",
                           env=env)
        self.rec.wait("NewArray")
        wait_for(srv.connected, 5, "the subscription")
        srv.push(FakeServer.event("Hang"))
        self.rec.wait("Hang")
        t = time.time()
        srv.push(FakeServer.event("After"))
        # Printing is not held up by the hung program...
        mon.wait_line("After", timeout=0.8)
        self.assertLess(time.time() - t, 0.8)
        self.assertNotIn("After", self.rec.names())
        # ...which is killed with its process group after 1 s, and then
        # the next alert runs.
        self.rec.wait("After", timeout=5)
        wait_for(lambda: "did not finish within 1 s (killed)" in
                 mon.stderr(), 3, "the timeout report")
        with open(self.rec.path + ".hung") as f:
            hung = int(f.read())
        wait_for(lambda: not os.path.exists(f"/proc/{hung}") or
                 open(f"/proc/{hung}/stat").read().split()[2] == "Z",
                 3, "the hung program's child killed")
        srv.push(FakeServer.event("Oops"))
        srv.push(FakeServer.event("Fine"))
        self.rec.wait("Fine")
        wait_for(lambda: "exited with status 3" in mon.stderr(), 3,
                 "the failure report")
        self.assertIn("program " + self.prog + " for Oops on " + UUID,
                      mon.stderr())
        self.assertEqual(mon.proc.poll(), None)
        self.assertEqual(mon.stop(), 0)

    def test_missing_program_is_reported(self):
        self.fake()
        mon = self.monitor("--program", os.path.join(self.tmp, "nope"))
        mon.wait_line("NewArray")
        wait_for(lambda: "cannot run" in mon.stderr(), 5, mon.stderr())
        self.assertEqual(mon.stop(), 0)

    def test_disappear_and_reconnect(self):
        srv = self.fake()
        mon = self.monitor("--program", self.prog, "--delay", "0.1")
        self.rec.wait("NewArray")
        wait_for(srv.connected, 5, "the subscription")
        srv.stop()
        gone = self.rec.wait("DeviceDisappeared")
        self.assertEqual(gone["argv"][1], UUID)  # the last known array
        self.assertEqual(gone["event"]["control"], self.sock)
        time.sleep(0.3)
        self.assertEqual(self.rec.names().count("DeviceDisappeared"), 1)
        srv = self.fake()
        n = len(self.rec.calls())
        self.rec.wait("NewArray", after=n)
        self.assertEqual(mon.stop(), 0)

    def test_oneshot(self):
        self.fake()
        r = monitor_run("--oneshot", "--control", self.sock)
        self.assertEqual((r.returncode, r.stdout), (0, ""), r.stderr)
        r = monitor_run("--oneshot", "--test", "--control", self.sock,
                        "--program", self.prog, env=self.env)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout.split()[1], "TestMessage")
        self.assertEqual(self.rec.names(), ["TestMessage"])
        FakeServer(self.sock, initial=[
            FakeServer.event("NewArray", state="clean, degraded"),
            FakeServer.event("DegradedArray"),
            FakeServer.event("SparesMissing", spares=0, expected=1)])
        r = monitor_run("--oneshot", "--control", self.sock)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual([l.split()[1] for l in r.stdout.splitlines()],
                         ["DegradedArray", "SparesMissing"])
        # One socket that cannot be read: 2, after reporting the others.
        missing = os.path.join(self.tmp, "missing.sock")
        r = monitor_run("--oneshot", "--control", self.sock, "--control",
                        missing)
        self.assertEqual(r.returncode, 2)
        self.assertIn("DegradedArray", r.stdout)
        self.assertIn(f"uraid: {missing}: does not exist", r.stderr)

    def test_bad_input(self):
        # A regular file and a directory: configuration errors.
        f = os.path.join(self.tmp, "file")
        open(f, "w").close()
        for path in (f, self.tmp):
            r = monitor_run("--control", path, timeout=10)
            self.assertEqual(r.returncode, 2)
            self.assertIn(f"uraid: {path}: not a socket", r.stderr)
        r = monitor_run("--oneshot", "--control", f)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a socket", r.stderr)
        # An NBD server's socket.
        nsock = os.path.join(self.tmp, "nbd.sock")
        pid = os.path.join(self.tmp, "nbd.pid")
        nbd = subprocess.Popen(["nbdkit", "-U", nsock, "-P", pid, "-f",
                                "--exit-with-parent", "memory", "1M"])
        self.cleanup.append(nbd.kill)
        wait_for(lambda: os.path.exists(pid), 20, "nbdkit")
        for extra in ([], ["--oneshot"]):
            r = monitor_run(*extra, "--control", nsock, timeout=20)
            self.assertEqual(r.returncode, 2)
            self.assertIn("an NBD server, not a uraid control socket",
                          r.stderr)
        # A server that is no uraid server.
        g = self.fake(mode="garbage")
        r = monitor_run("--control", self.sock, timeout=20)
        self.assertEqual(r.returncode, 2)
        self.assertIn("not a uraid control socket (it answered \"HELLO",
                      r.stderr)
        g.stop()
        # A stale socket (bound, nobody listening) and a missing one: 2 in
        # --oneshot; a long-running monitor warns and waits for the server.
        stale = os.path.join(self.tmp, "stale.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(stale)
        s.close()
        r = monitor_run("--oneshot", "--control", stale)
        self.assertEqual(r.returncode, 2)
        self.assertIn("no server is listening (stale socket)", r.stderr)
        r = monitor_run("--oneshot", "--control", self.sock)
        self.assertEqual(r.returncode, 2)
        self.assertIn("does not exist", r.stderr)
        mon = Monitor(self.tmp, ["--control", stale, "--program", self.prog,
                                 "--delay", "0.1"], env=self.env)
        self.cleanup.append(mon.stop)
        wait_for(lambda: "stale socket" in mon.stderr(), 5, "the warning")
        time.sleep(0.5)
        self.assertEqual(mon.stderr().count("stale socket"), 1)  # not per try
        self.assertEqual(self.rec.names(), [])
        FakeServer(stale)
        self.rec.wait("NewArray")
        self.assertEqual(mon.stop(), 0)
        # Usage errors.
        r = monitor_run("--program", self.prog)
        self.assertEqual(r.returncode, 2)
        r = monitor_run("--control", self.sock, "--delay", "0")
        self.assertEqual(r.returncode, 2)

    def test_several_arrays(self):
        other = os.path.join(self.tmp, "other.sock")
        a = self.fake()
        b = FakeServer(other, initial=[
            {"event": "NewArray", "time": time.time(),
             "array": "aaaaaaaa:bbbbbbbb:cccccccc:dddddddd", "name": "two"}])
        self.cleanup.append(b.stop)
        mon = self.monitor("--control", other, "--program", self.prog)
        wait_for(lambda: self.rec.names().count("NewArray") == 2, 5,
                 "both arrays")
        self.assertEqual(sorted(c["URAID_CONTROL"] for c in
                                self.rec.calls()), sorted([self.sock, other]))
        wait_for(lambda: b.connected() and a.connected(), 5, "both streams")
        b.stop()
        gone = self.rec.wait("DeviceDisappeared")
        self.assertEqual(gone["argv"][1], "aaaaaaaa:bbbbbbbb:cccccccc:dddddddd")
        a.push(FakeServer.event("StillHere"))
        self.rec.wait("StillHere")
        self.assertEqual(mon.stop(), 0)


class DetailTestOffline(unittest.TestCase):
    def test_exit_codes(self):
        tmp = tempfile.mkdtemp(prefix="uraid-dt-")
        try:
            m = make_members(tmp, 4, 16 * MIB)
            run_tool("create", "--force", "--assume-clean", *m)
            def code(*args):
                return run_tool("detail", "--test", *args,
                                check=False).returncode
            self.assertEqual(code(*m), 0)
            self.assertEqual(code(*m[:3]), 1)
            self.assertEqual(code(*m[1:]), 1)
            # Two members not given: the superblocks record no failure, so
            # nothing says the array failed; it cannot be judged (4). (An
            # array that failed while served says 2:
            # test_offline_after_array_failed.)
            self.assertEqual(code(*m[:2]), 4)
            self.assertEqual(code(m[0]), 4)
            # Without --test, detail of a degraded array still exits 0.
            self.assertEqual(run_tool("detail", *m[:3],
                                      check=False).returncode, 0)
            # A member without its superblock: the library will not
            # assemble what it was given, and one lost member is not a
            # failed array, so md's "cannot be read".
            os.truncate(m[3], 0)
            self.assertEqual(code(*m), 4)
            open(os.path.join(tmp, "empty"), "w").close()
            self.assertEqual(code(os.path.join(tmp, "empty")), 4)
            self.assertEqual(code(os.path.join(tmp, "nope")), 4)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    harness.main()
