# SPDX-License-Identifier: MIT
"""md's habits in the tool (issue 34, point 7), with real processes:
`create --data-offset` giving a small array room for the reshapes the
default refuses (whose refusal names the remedy); the short options
meaning what they mean in mdadm's matching mode, read from every
command's --help, and `serve -f` starting a dirty degraded array as
`mdadm --assemble -f` does; the bash completion offering the ARRAY names
of the config named on the line and option values. And point 5's PPL
words: after a kill -9, a PPL array is described offline as "PPL: log
replayed at assembly" (not "resyncing (PENDING)"), and serve says so
instead of announcing a whole-array resync and recommending --bitmap FILE
(which a resync-policy array, the control, still gets).

(Sizes without a unit are refused in safety_test; the Python package
under --prefix /usr is checked by install_test.sh.)"""

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import harness
from harness import Server, make_members, run_tool

MIB = 1 << 20
SRC = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))


def data_offset(path):
    return json.loads(run_tool("examine", "--json", path).stdout)[0][
        "data_offset_sectors"] * 512


def grow(paths, new):
    return run_tool("grow", "--raid-devices", str(len(paths) + 1), "--add",
                    new, *paths, check=False)


class DataOffset(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-habits-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_data_offset_gives_a_small_array_room_to_reshape(self):
        # 64 MiB members at the default chunk (512K): mdadm's rule leaves
        # 2 MiB before the data, room for one grow.
        d = os.path.join(self.tmp, "default")
        os.makedirs(d)
        m = make_members(d, 5, 64 * MIB)
        run_tool("create", "--assume-clean", *m[:3])
        self.assertEqual(data_offset(m[0]), 2 * MIB)
        r = grow(m[:3], m[3])
        self.assertEqual(r.returncode, 0, r.stderr)
        r = grow(m[:4], m[4])
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("no room to reshape without a backup file", r.stderr)
        self.assertIn("uraid create --data-offset SIZE", r.stderr)

        # The same members with room: both grows run.
        d = os.path.join(self.tmp, "roomy")
        os.makedirs(d)
        m = make_members(d, 5, 64 * MIB)
        out = run_tool("create", "--assume-clean", "--data-offset", "8M",
                       *m[:3]).stdout
        self.assertIn("Data Offset : 16384 sectors (8M)", out)
        self.assertEqual(data_offset(m[0]), 8 * MIB)
        for n in (3, 4):
            r = grow(m[:n], m[n])
            self.assertEqual(r.returncode, 0, r.stderr)
        info = json.loads(run_tool("detail", "--json", *m).stdout)
        self.assertEqual(info["raid_devices"], 5)
        self.assertLess(data_offset(m[0]), 8 * MIB)  # moved into the room

        # What the library refuses is refused by name, nothing written.
        d = os.path.join(self.tmp, "bad")
        os.makedirs(d)
        m = make_members(d, 3, 64 * MIB)
        for value, want in (("6K", "must be a multiple of 4096"),
                            ("100M", "is too small")):
            r = run_tool("create", "--assume-clean", "--data-offset", value,
                         *m, check=False)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(want, r.stderr)
            r = run_tool("examine", m[0], check=False)
            self.assertNotEqual(r.returncode, 0, "a refused create wrote")


def help_options(cmd):
    """{letter: long name} of `uraid CMD --help`."""
    out = run_tool(cmd, "--help").stdout
    return dict(re.findall(r"^\s+(-[A-Za-z0-9]),(--[a-z][-a-z]*)", out,
                           re.M))


class ShortOptions(unittest.TestCase):
    # Letters that mdadm itself gives a meaning per mode, and ours per
    # command; every other letter means one thing in every command.
    PER_COMMAND = {
        "-c": lambda cmd: "--chunk" if cmd in ("create", "grow", "map")
        else "--config",
        "-p": lambda cmd: {"create": "--layout", "grow": "--layout",
                           "map": "--layout", "monitor": "--program",
                           "serve": "--port"}[cmd],
        "-n": lambda cmd: "--disks" if cmd == "map" else "--raid-devices",
    }

    def test_one_meaning_per_letter_as_mdadm(self):
        out = run_tool("--help").stdout
        cmds = re.findall(r"^  ([a-z][-a-z]*) ", out.split("Subcommands:")[1],
                          re.M)
        self.assertIn("serve", cmds)
        seen = {}
        for cmd in cmds:
            for letter, long in help_options(cmd).items():
                if letter == "-h":
                    continue
                if letter in self.PER_COMMAND:
                    self.assertEqual(long, self.PER_COMMAND[letter](cmd),
                                     f"uraid {cmd} {letter}")
                    continue
                first = seen.setdefault(letter, (long, cmd))
                self.assertEqual(long, first[0],
                                 f"{letter} is {first[0]} in {first[1]} but "
                                 f"{long} in {cmd}")
        # mdadm's meanings, where mdadm has them.
        for letter, long in (("-f", "--force"), ("-s", "--scan"),
                             ("-t", "--test"), ("-R", "--run"),
                             ("-b", "--bitmap"), ("-l", "--level"),
                             ("-k", "--consistency-policy"),
                             ("-z", "--size"), ("-N", "--name"),
                             ("-d", "--delay"), ("-1", "--oneshot"),
                             ("-m", "--mail"), ("-y", "--syslog"),
                             ("-a", "--add")):
            self.assertEqual(seen.get(letter, (None,))[0], long, letter)
        # Where --force exists it is -f; --foreground has no letter.
        for cmd in cmds:
            opts = help_options(cmd)
            out = run_tool(cmd, "--help").stdout
            if re.search(r"^\s+(-f,)?--force\b", out, re.M):
                self.assertEqual(opts.get("-f"), "--force", cmd)
        self.assertNotIn("--foreground", help_options("serve").values())
        for cmd, long in (("detail", "--scan"), ("stop", "--scan"),
                          ("monitor", "--scan"), ("detail", "--test"),
                          ("grow", "--chunk"), ("status", "--control")):
            self.assertIn(long, help_options(cmd).values(), (cmd, long))

    def test_serve_f_forces_a_dirty_degraded_start(self):
        tmp = tempfile.mkdtemp(prefix="uraid-habits-")
        self.addCleanup(shutil.rmtree, tmp, True)
        m = make_members(tmp, 3, 32 * MIB)
        run_tool("create", "--assume-clean", "--bitmap", "none", *m)
        # Never marked clean while served: dirty at the kill, however
        # slowly this machine gets there.
        srv = Server(tmp, m, extra=["safe-mode-delay=0"])
        h = srv.connect()
        h.pwrite(b"\x5a" * MIB, 0)
        srv.stop(signal.SIGKILL)
        state = json.loads(run_tool("detail", "--json", *m).stdout)["state"]
        self.assertTrue(state.startswith("active"), state)

        sock = os.path.join(tmp, "f.sock")
        pidfile = os.path.join(tmp, "f.pid")
        argv = ["serve", "--socket", sock, "--pidfile", pidfile, "-R",
                m[0], m[1]]
        r = run_tool(*argv, check=False)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("dirty", r.stderr)
        self.assertFalse(os.path.exists(pidfile))
        r = run_tool(*argv[:-2], "-f", m[0], m[1], check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("serving array", r.stdout + r.stderr)
        with open(pidfile) as f:
            pid = int(f.read())
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + 30
        while os.path.exists(f"/proc/{pid}") and time.time() < deadline:
            time.sleep(0.05)


class Completion(unittest.TestCase):
    def complete(self, *words, env=None):
        """COMPREPLY for the words (the last one is being completed)."""
        script = ('compopt() { :; }; source "$1"; shift; '
                  'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _uraid; '
                  'printf "%s\\n" "${COMPREPLY[@]}"')
        tool_dir = os.path.dirname(os.path.realpath(harness.ARGS.tool))
        e = dict(os.environ, PATH=f"{tool_dir}:{os.environ['PATH']}",
                 **(env or {}))
        r = subprocess.run(
            ["bash", "-c", script, "_",
             os.path.join(SRC, "tools", "uraid-completion.bash"), "uraid",
             *words], capture_output=True, text=True, env=e, cwd=self.tmp,
            check=True)
        return r.stdout.split()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-habits-")
        self.conf = os.path.join(self.tmp, "my.conf")
        with open(self.conf, "w") as f:
            f.write("DEVICE /nonexistent/*\n"
                    "ARRAY /dev/md/alpha uuid=1:2:3:4\n"
                    "ARRAY beta uuid=5:6:7:8 control-group=disk\n")
        self.env = {"URAID_CONFIG": os.path.join(self.tmp, "none.conf"),
                    "URAID_RUN_DIR": os.path.join(self.tmp, "run")}

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def test_array_names_from_the_config_on_the_line(self):
        self.assertEqual(self.complete("stop", "--config", self.conf, "",
                                       env=self.env)[:2], ["alpha", "beta"])
        self.assertIn("beta", self.complete("serve", "-c", self.conf, "b",
                                            env=self.env))
        # $URAID_CONFIG without --config.
        env = dict(self.env, URAID_CONFIG=self.conf)
        self.assertIn("alpha", self.complete("stop", "al", env=env))
        # The default config (here one that does not exist) names none.
        self.assertNotIn("alpha", self.complete("serve", "al", env=self.env))

    def test_option_values(self):
        self.assertEqual(self.complete("create", "-c", "6"), ["64K"])
        self.assertEqual(self.complete("create", "--chunk", "51"), ["512K"])
        self.assertEqual(self.complete("grow", "-p", "right-s"),
                         ["right-symmetric"])
        self.assertEqual(self.complete("grow", "-k", ""), ["ppl", "resync"])
        self.assertEqual(self.complete("grow", "--update", "no"), ["no-bbl"])
        self.assertIn("internal", self.complete("create", "--bitmap", "in"))
        self.assertEqual(self.complete("serve", "--tls", "re"), ["require"])
        self.assertEqual(self.complete("serve", "--log", "j"), ["journal"])
        self.assertEqual(self.complete("serve", "-p", ""), [])  # a port
        self.assertIn("--data-offset", self.complete("create", "--data"))


class PplMessages(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-habits-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def killed_dirty(self, name, policy):
        d = os.path.join(self.tmp, name)
        os.makedirs(d)
        m = make_members(d, 3, 32 * MIB)
        run_tool("create", "--assume-clean", "--consistency-policy", policy,
                 *m)
        srv = Server(d, m, extra=["safe-mode-delay=0"])  # dirty at the kill
        h = srv.connect()
        for i in range(8):
            h.pwrite(bytes([i + 1]) * 8192, i * 3 * MIB)
        srv.stop(signal.SIGKILL)
        return d, m

    def serve_output(self, d, m):
        """serve --foreground until it says serving, then uraid stop."""
        ctl = os.path.join(d, "c.ctl")
        log = os.path.join(d, "serve.log")
        with open(log, "w") as out:
            p = subprocess.Popen(
                [harness.ARGS.tool, "serve", "--foreground", "--socket",
                 os.path.join(d, "s.sock"), "--control", ctl, *m],
                stdout=out, stderr=subprocess.STDOUT)
            try:
                deadline = time.time() + 60
                while True:
                    with open(log) as f:
                        if "serving array" in f.read():
                            break
                    self.assertIsNone(p.poll(), "serve exited")
                    self.assertLess(time.time(), deadline, "serve is silent")
                    time.sleep(0.1)
                run_tool("stop", ctl)
                p.wait(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        with open(log) as f:
            return f.read()

    def test_ppl_array_after_kill_9(self):
        d, m = self.killed_dirty("ppl", "ppl")
        out = run_tool("detail", *m).stdout
        self.assertRegex(out, r"State : active, PPL: log replayed at "
                              r"assembly\n")
        self.assertIn("Resync Status : none needed (PPL: log replayed at "
                      "assembly", out)
        self.assertNotIn("PENDING", out)
        info = json.loads(run_tool("detail", "--json", *m).stdout)
        self.assertEqual(info["state"], "active, PPL: log replayed at assembly")
        self.assertEqual(run_tool("detail", "--test", *m,
                                  check=False).returncode, 0)

        out = self.serve_output(d, m)
        self.assertIn("PPL: log replayed at assembly (no resync)", out)
        self.assertIn("ppl: replayed", out)  # the plugin's own account
        self.assertNotIn("resync covers the whole array", out)
        self.assertNotIn("--bitmap FILE", out)
        self.assertNotIn("will be resynced", out)
        # Replayed and stopped cleanly: clean, nothing pending.
        out = run_tool("detail", *m).stdout
        self.assertIn("State : clean\n", out)

    def test_resync_policy_array_after_kill_9_is_the_control(self):
        d, m = self.killed_dirty("resync", "resync")
        out = run_tool("detail", *m).stdout
        self.assertIn("resyncing (PENDING)", out)
        out = self.serve_output(d, m)
        self.assertIn("resync covers the whole array", out)
        self.assertNotIn("PPL", out)


if __name__ == "__main__":
    harness.main()
