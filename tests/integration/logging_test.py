# SPDX-License-Identifier: MIT
"""The plugin's log lines by severity, through real nbdkit: in the
foreground on stderr ("uraid: NAME: LEVEL: ..."), daemonised to syslog
(a real AF_UNIX datagram listener on /dev/log: ident uraid, LOG_DAEMON,
the array's name in each line) and to the systemd journal (a listener on
the journal's socket, speaking its native protocol: fields URAID_EVENT,
URAID_MEMBER, URAID_ARRAY); routine lines never at error or worse; and
control-group=GROUP: a group member may read, not change, others cannot
connect (setpriv as another uid).

/dev/log and the journal socket are the system's: where they do not exist
(no syslog daemon, no journald: this machine) the test binds its listener
there and removes it afterwards; where they do, nbdkit runs in a private
mount namespace with the listener bind-mounted over the path, so the real
daemon is not disturbed. ctest gives this test the "devlog" resource lock.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import harness

LOG_DAEMON = 3 << 3
PRI = {"crit": 2, "err": 3, "warning": 4, "notice": 5, "info": 6, "debug": 7}


class Listener:
    """An AF_UNIX datagram socket at `path` (created, or bind-mounted over
    an existing one in nbdkit's namespace) collecting what arrives."""

    def __init__(self, tmp, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.settimeout(0.2)
        self.created = []   # what we made at the system path, to remove
        self.namespace = os.path.exists(path)
        if self.namespace:
            # Ours beside it, bind-mounted over it in nbdkit's namespace.
            self.own = os.path.join(tmp, os.path.basename(path) + ".listener")
        else:
            self.own = path
            d = os.path.dirname(path)
            parts = []
            while not os.path.exists(d):
                parts.append(d)
                d = os.path.dirname(d)
            for p in reversed(parts):
                os.mkdir(p)
                self.created.append(p)
            self.created.append(path)
        self.sock.bind(self.own)
        os.chmod(self.own, 0o666)
        self.got = []

    def wrap(self, cmd):
        """`cmd` as run so that it reaches this listener at self.path."""
        if not self.namespace:
            return cmd
        return ["unshare", "-m", "--propagation", "private", "sh", "-c",
                'mount --bind "$0" "$1" && shift 2 && exec "$@"',
                self.own, self.path] + cmd

    def drain(self, want=None, timeout=10):
        """Collects datagrams; with `want` (a predicate over the list),
        until it holds or `timeout` passes."""
        deadline = time.time() + timeout
        while True:
            try:
                self.got.append(self.sock.recv(1 << 20))
                continue
            except socket.timeout:
                pass
            if want is None or want(self.got) or time.time() > deadline:
                return self.got

    def close(self):
        self.sock.close()
        if self.namespace:
            os.unlink(self.own)
        for p in reversed(self.created):
            if os.path.isdir(p):
                os.rmdir(p)
            else:
                os.unlink(p)


def parse_syslog(datagrams):
    """(priority, facility, tag, message) of each RFC 3164 line glibc's
    syslog(3) sends: "<PRI>Mmm dd hh:mm:ss TAG[PID]: MESSAGE"."""
    out = []
    for d in datagrams:
        m = re.match(rb"<(\d+)>\w{3} [ \d]\d \d\d:\d\d:\d\d ([^:\[]+)\[(\d+)\]: "
                     rb"(.*)", d, re.S)
        if m:
            pri = int(m.group(1))
            out.append((pri & 7, pri & ~7, m.group(2).decode(),
                        m.group(4).decode(errors="replace")))
    return out


def parse_journal(datagrams):
    """The fields of each native-protocol datagram (sd_journal_send):
    KEY=VALUE lines, or KEY\\n + 64-bit length + value for binary ones."""
    out = []
    for d in datagrams:
        fields, i = {}, 0
        while i < len(d):
            nl = d.index(b"\n", i)
            line = d[i:nl]
            if b"=" in line:
                k, v = line.split(b"=", 1)
                fields[k.decode()] = v.decode(errors="replace")
                i = nl + 1
            else:
                n = int.from_bytes(d[nl + 1:nl + 9], "little")
                fields[line.decode()] = d[nl + 9:nl + 9 + n].decode(
                    errors="replace")
                i = nl + 9 + n + 1
        out.append(fields)
    return out


class LoggingTest(unittest.TestCase):

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-log-", dir="/tmp")
        os.chmod(self.tmp, 0o755)
        self.members = harness.make_members(self.tmp, 4, 16 << 20)
        harness.run_tool("create", "--chunk", "64K", "--name", "logtest",
                         "--assume-clean", *self.members)
        self.ctl = os.path.join(self.tmp, "ctl.sock")
        self.sock = os.path.join(self.tmp, "nbd.sock")
        self.pidfile = os.path.join(self.tmp, "nbdkit.pid")
        self.listeners = []
        self.pid = None

    def tearDown(self):
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
                for _ in range(200):
                    os.kill(self.pid, 0)
                    time.sleep(0.05)
            except ProcessLookupError:
                pass
        for l in self.listeners:
            l.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def daemon(self, listener, *extra):
        """nbdkit daemonised (no -f: stderr becomes /dev/null), reaching
        `listener`; returns once the control socket answers."""
        cmd = ["nbdkit", "-U", self.sock, "-P", self.pidfile, harness.ARGS.plugin,
               *[f"member={m}" for m in self.members], f"control={self.ctl}",
               *extra]
        r = subprocess.run(listener.wrap(cmd), capture_output=True, text=True,
                           timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        deadline = time.time() + 30
        while not os.path.exists(self.pidfile) and time.time() < deadline:
            time.sleep(0.02)
        with open(self.pidfile) as f:
            self.pid = int(f.read().strip() or 0)
        harness.control_call(self.ctl, {"cmd": "detail"})

    def fail_member_and_stop(self):
        r = harness.control_call(self.ctl, {"cmd": "fail",
                                            "member": self.members[1]})
        self.assertTrue(r["ok"], r)

    def test_daemonised_to_syslog_at_the_right_priorities(self):
        if os.path.exists("/run/systemd/journal/socket"):
            self.skipTest("a journal runs here: the plugin logs there "
                          "(test_daemonised_to_the_journal)")
        lst = Listener(self.tmp, "/dev/log")
        self.listeners.append(lst)
        self.daemon(lst)
        self.fail_member_and_stop()
        mine = lambda got: [l for l in parse_syslog(got)
                            if l[2] == "uraid" and "logtest: " in l[3]]
        lines = lst.drain(lambda got: any("continues degraded" in l[3]
                                          for l in mine(got)))
        lines = mine(lines)
        text = "\n".join(f"{p} {m}" for p, _, _, m in lines)
        self.assertTrue(lines, "no uraid lines reached /dev/log")
        for pri, fac, tag, msg in lines:
            self.assertEqual(fac, LOG_DAEMON, msg)
            self.assertTrue(msg.startswith("logtest: "), msg)
        by = {m: p for p, _, _, m in lines}

        def level_of(fragment):
            hits = [p for m, p in by.items() if fragment in m]
            self.assertTrue(hits, f"no line with {fragment!r}:\n{text}")
            return hits[0]
        self.assertEqual(level_of(f"{self.members[1]} (slot 1) failed"),
                         PRI["err"])
        self.assertEqual(level_of("continues degraded"), PRI["warning"])
        self.assertEqual(level_of("control: fail"), PRI["notice"])
        # Nothing else (routine lines) at error or worse.
        bad = [m for p, _, _, m in lines
               if p <= PRI["err"] and "failed" not in m]
        self.assertEqual(bad, [], text)

    def test_daemonised_to_the_journal_with_fields(self):
        if "sd_journal_send" not in subprocess.run(
                ["nm", "-D", harness.ARGS.plugin], capture_output=True,
                text=True).stdout:
            self.skipTest("plugin built without libsystemd")
        lst = Listener(self.tmp, "/run/systemd/journal/socket")
        self.listeners.append(lst)
        self.daemon(lst)
        self.fail_member_and_stop()
        mine = lambda got: [f for f in parse_journal(got)
                            if f.get("SYSLOG_IDENTIFIER") == "uraid"]
        fields = mine(lst.drain(lambda got: any(
            f.get("URAID_EVENT") == "DegradedArray" for f in mine(got))))
        fail = [f for f in fields if f.get("URAID_EVENT") == "Fail"]
        self.assertTrue(fail, json.dumps(fields, indent=1))
        f = fail[0]
        self.assertEqual(f["PRIORITY"], str(PRI["err"]))
        self.assertEqual(f["URAID_MEMBER"], self.members[1])
        self.assertEqual(f["URAID_SLOT"], "1")
        self.assertEqual(f["URAID_ARRAY_NAME"], "logtest")
        self.assertRegex(f["URAID_ARRAY"], r"^[0-9a-f]{8}(:[0-9a-f]{8}){3}$")
        self.assertIn("failed", f["MESSAGE"])
        deg = [f for f in fields if f.get("URAID_EVENT") == "DegradedArray"]
        self.assertEqual(deg[0]["PRIORITY"], str(PRI["warning"]))
        routine = [f for f in fields if "control: fail" in f["MESSAGE"]]
        self.assertTrue(routine)
        self.assertEqual(routine[0]["PRIORITY"], str(PRI["notice"]))

    def test_foreground_on_stderr_with_levels(self):
        srv = harness.Server(self.tmp, self.members,
                             extra=[f"control={self.ctl}"])
        try:
            harness.control_call(self.ctl, {"cmd": "check"})
            harness.run_tool("detail", "--control", self.ctl, "--wait")
            self.fail_member_and_stop()
            deadline = time.time() + 10
            while "continues degraded" not in srv.output() and \
                    time.time() < deadline:
                time.sleep(0.05)
        finally:
            srv.stop()
        out = srv.output()
        self.assertRegex(out, r"uraid: logtest: notice: check: completed")
        self.assertRegex(out, r"uraid: logtest: error: member .*m1\.img "
                              r"\(slot 1\) failed")
        self.assertRegex(out, r"uraid: logtest: warning: array continues "
                              r"degraded")
        errors = [l for l in out.splitlines()
                  if re.search(r"uraid: logtest: (error|critical):", l)
                  and "failed" not in l]
        self.assertEqual(errors, [], out)

    def test_control_group_may_read_not_change(self):
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root and setpriv to act as another user")
        gid = 4327
        srv = harness.Server(self.tmp, self.members,
                             extra=[f"control={self.ctl}",
                                    f"control-group={gid}"])
        try:
            harness.control_call(self.ctl, {"cmd": "detail"})
            st = os.stat(self.ctl)
            self.assertEqual(st.st_mode & 0o777, 0o660)
            self.assertEqual(st.st_gid, gid)

            def as_user(groups, *args):
                cmd = ["setpriv", "--reuid", "4327", "--regid",
                       "4327" if groups else "65534"]
                cmd += ["--groups", str(gid)] if groups else ["--clear-groups"]
                return subprocess.run(cmd + [harness.ARGS.tool, *args],
                                      capture_output=True, text=True,
                                      timeout=60)
            r = as_user(True, "detail", "--control", self.ctl)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("logtest", r.stdout)
            r = as_user(True, "fail", "--control", self.ctl, self.members[2])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn(f"permission denied: fail is read-only for group "
                          f"{gid} (uid 4327)", r.stderr)
            r = as_user(False, "detail", "--control", self.ctl)
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("ermission denied", r.stderr)
            info = harness.control_call(self.ctl, {"cmd": "detail"})
            self.assertFalse(info["detail"]["degraded"],
                             "the refused fail changed nothing")
        finally:
            srv.stop()

    def test_bad_keys_are_refused(self):
        out = harness.start_fails(self.tmp, self.members,
                                  ["log=loud", f"control={self.ctl}"])
        self.assertIn("log=loud: expected auto, stderr, syslog or journal", out)
        out = harness.start_fails(self.tmp, self.members,
                                  ["control-group=no-such-group-xyz",
                                   f"control={self.ctl}"])
        self.assertIn("control-group=no-such-group-xyz: no such group", out)
        out = harness.start_fails(self.tmp, self.members,
                                  ["control-group=0"])
        self.assertIn("control-group= needs control=SOCKET", out)
        out = harness.start_fails(self.tmp, self.members, ["spares=-1"])
        self.assertIn("spares", out)
        out = harness.start_fails(self.tmp, self.members,
                                  ["safe-mode-delay=3600001"])
        self.assertIn("safe-mode-delay=3600001: give milliseconds up to", out)
        out = harness.start_fails(self.tmp, self.members,
                                  ["safe-mode-delay=soon"])
        self.assertIn("safe-mode-delay", out)


if __name__ == "__main__":
    harness.main()
