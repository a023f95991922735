# SPDX-License-Identifier: MIT
"""Members on other machines: every host is a network namespace.

Four member hosts, each its own network namespace with nbdkit's file plugin
serving one member file on TCP port 10809 of an address that exists only
inside that namespace, hang off a bridge in the array host's namespace (a
small LAN, 10.77.0.0/24). The array host runs the uraid plugin over the
members' nbd://ADDR/ URIs with a short timeout= and a control socket, and
serves the array on a unix socket: unix sockets are file-system objects, so
this process, in the root namespace, reaches the array (and its control
socket) without any route to the member hosts. The array is made with
`uraid create` run on the array host, since only it can reach the members.

Then, while a writer (pattern writes, flushes, read-back) and a reader
verify every reply against a reference copy, one member host is lost
mid-write, either
  - killed (kill -9 of its nbdkit: connections reset, reconnects refused),
  - or cut off (`ip link set down` on its interface: silence, so only the
    plugin's timeout= notices),
service continues degraded with every byte correct and writes going on, a
NEW member host (new namespace, new empty file, new address) is started and
added with `uraid add nbd://NEWADDR/ --control SOCK`, the rebuild onto it
runs while the clients keep going, `uraid detail --control --wait` waits for
it, every byte is verified, detail shows the new member active and the array
not degraded, and an offline `uraid check` over the new member set (from the
array host) finds parity consistent.

Needs root, iproute2 (`ip`) and a kernel that allows network namespaces,
veth pairs and bridges; otherwise it skips and says why (exit status 77, so
ctest reports it as skipped).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import harness
from harness import run_tool
from nbd_members_test import MIB, MemberServer, Verifier, live_detail, wait_for

MEMBER_BYTES = 24 * MIB
PORT = 10809
SUBNET = "10.77.0"  # .1 is the array host, .10+ the member hosts
TIMEOUT_MS = 1500


def run(cmd, check=True, timeout=60):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}: "
                             f"{r.stdout}{r.stderr}")
    return r


def skip_reason():
    """Why this machine cannot make network namespaces, or None."""
    if os.geteuid() != 0:
        return "needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) for ip netns"
    if shutil.which("ip") is None:
        return "`ip` not found (apt-get install iproute2)"
    probe = f"uraidprobe{os.getpid()}"
    r = subprocess.run(["ip", "netns", "add", probe], capture_output=True,
                       text=True, timeout=30)
    if r.returncode != 0:
        return "`ip netns add` failed: " + r.stderr.strip()
    try:
        r = subprocess.run(["ip", "-n", probe, "link", "add", "br0", "type",
                            "bridge"], capture_output=True, text=True,
                           timeout=30)
        if r.returncode != 0:
            return "cannot create a bridge in a namespace: " + r.stderr.strip()
        r = subprocess.run(["ip", "-n", probe, "link", "add", "v0", "type",
                            "veth", "peer", "name", "v1"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            return "cannot create a veth pair: " + r.stderr.strip()
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True,
                       timeout=30)
    return None


SKIP = skip_reason()


class Lab:
    """The array host's namespace with a bridge, and member hosts joined to
    it by veth pairs. Every namespace made is deleted by `close` (which
    also takes the veths and the bridge with it)."""

    def __init__(self, tag):
        self.tag = tag
        self.namespaces = []
        try:
            self.array_ns = self.add_ns("a")
            run(["ip", "-n", self.array_ns, "link", "set", "lo", "up"])
            run(["ip", "-n", self.array_ns, "link", "add", "br0", "type",
                 "bridge"])
            run(["ip", "-n", self.array_ns, "addr", "add", f"{SUBNET}.1/24",
                 "dev", "br0"])
            run(["ip", "-n", self.array_ns, "link", "set", "br0", "up"])
        except BaseException:
            self.close()
            raise

    def add_ns(self, suffix):
        ns = f"{self.tag}{suffix}"
        r = run(["ip", "netns", "add", ns], check=False)
        if r.returncode != 0:
            raise unittest.SkipTest(f"`ip netns add {ns}` failed: "
                                    f"{r.stderr.strip()}")
        self.namespaces.append(ns)
        return ns

    def add_host(self, i):
        """Member host i: namespace, eth0 bridged to the array host,
        address SUBNET.(10 + i). Returns (namespace, address)."""
        ns = self.add_ns(f"h{i}")
        addr = f"{SUBNET}.{10 + i}"
        run(["ip", "-n", self.array_ns, "link", "add", f"p{i}", "type",
             "veth", "peer", "name", "eth0", "netns", ns])
        run(["ip", "-n", self.array_ns, "link", "set", f"p{i}", "master",
             "br0", "up"])
        run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        return ns, addr

    def reachable(self, uri):
        """True when the array host gets an NBD handshake from `uri`."""
        return subprocess.run(self.exec_in(self.array_ns, "nbdinfo",
                                           "--size", uri),
                              capture_output=True, timeout=30).returncode == 0

    def exec_in(self, ns, *args):
        return ["ip", "netns", "exec", ns, *args]

    def close(self):
        # Deleting a namespace removes its interfaces (veth ends, bridge).
        for ns in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True,
                           timeout=30)
        self.namespaces = []


class ArrayServer:
    """The uraid plugin in the array host's namespace, on a unix socket,
    with a control socket. Foreground, exit-with-parent."""

    def __init__(self, lab, tmp, uris, extra=()):
        self.sock = os.path.join(tmp, "arr.sock")
        self.ctl = os.path.join(tmp, "ctl.sock")
        self.pidfile = os.path.join(tmp, "arr.pid")
        self.log = os.path.join(tmp, "arr.log")
        for f in (self.sock, self.pidfile):
            if os.path.exists(f):
                os.unlink(f)
        self.logf = open(self.log, "w")
        # `ip netns exec` execs nbdkit: our process stays its parent.
        self.proc = subprocess.Popen(
            lab.exec_in(lab.array_ns, "nbdkit", "-U", self.sock, "-P",
                        self.pidfile, "-f", "--exit-with-parent",
                        harness.ARGS.plugin, *[f"member={u}" for u in uris],
                        f"timeout={TIMEOUT_MS}", f"control={self.ctl}",
                        *extra),
            stdout=self.logf, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: os.path.exists(self.pidfile)
                     or self.proc.poll() is not None, 30, "the array server")
            if self.proc.poll() is not None:
                raise AssertionError("the array server exited: " +
                                     self.output())
            wait_for(lambda: run_tool("detail", "--control", self.ctl,
                                      check=False).returncode == 0, 10,
                     "the control socket")
        except BaseException:
            self.stop(signal.SIGKILL)
            raise

    def output(self):
        if not self.logf.closed:
            self.logf.flush()
        with open(self.log) as f:
            return f.read()

    def detail(self):
        return json.loads(run_tool("detail", "--control", self.ctl,
                                   "--json").stdout)

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if not self.logf.closed:
            self.logf.close()
        return self.proc.returncode


@unittest.skipIf(SKIP is not None, f"network namespaces unavailable: {SKIP}")
class MembersOnOtherHostsTest(unittest.TestCase):
    count = 0

    def setUp(self):
        MembersOnOtherHostsTest.count += 1
        # Short names: interface and namespace names are limited.
        self.tag = f"ur{os.getpid() % 100000}{MembersOnOtherHostsTest.count}"
        self.tmp = tempfile.mkdtemp(prefix="uraid-netns-", dir="/tmp")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.lab = Lab(self.tag)
        # Runs after every process cleanup registered later (LIFO).
        self.addCleanup(self.lab.close)

    def host(self, i):
        """A member host with a new empty member file; returns
        (namespace, address, server, uri)."""
        ns, addr = self.lab.add_host(i)
        image = os.path.join(self.tmp, f"m{i}.img")
        with open(image, "wb") as f:
            f.truncate(MEMBER_BYTES)
        s = MemberServer(self.tmp, f"m{i}", image, netns=ns, addr=addr,
                         port=PORT)
        self.addCleanup(s.stop)
        uri = f"nbd://{addr}/"
        wait_for(lambda: self.lab.reachable(uri), 10,
                 f"{uri} to answer the array host")
        return ns, addr, s, uri

    def lose_host_then_rebuild(self, lose):
        hosts = [self.host(i) for i in range(4)]
        uris = [h[3] for h in hosts]
        # Only the array host can reach the member hosts.
        run(self.lab.exec_in(self.lab.array_ns, harness.ARGS.tool, "create",
                             "--assume-clean", "--chunk", "64K", *uris))
        srv = ArrayServer(self.lab, self.tmp, uris)
        self.addCleanup(srv.stop, signal.SIGKILL)
        import nbd
        h = nbd.NBD()
        h.connect_unix(srv.sock)
        size = h.get_size()
        h.shutdown()

        v = Verifier(srv.sock, size, seed=60, flush_every=4)
        v.fill()
        # The rebuild below runs beside the clients: keep it from yielding
        # down to md's default 1 MB/s floor.
        run_tool("set", "--control", srv.ctl, "--speed-min", "100M")
        v.start()
        try:
            time.sleep(1.0)
            self.assertGreater(v.writes, 0, "no writes before the fault")
            lost = hosts[1]
            t0 = time.monotonic()
            lose(lost)
            wait_for(lambda: srv.detail()["slots"][1]["state"] == "faulty",
                     TIMEOUT_MS / 1000 + 10, "the lost member to be failed")
            self.detect_s = time.monotonic() - t0
            d = srv.detail()
            self.assertTrue(d["degraded"], d)
            self.assertFalse(d["failed"], d)
            # Degraded service: writes (and flushes) go on.
            writes, flushes = v.writes, v.flushes
            wait_for(lambda: v.writes >= writes + 20 and
                     v.flushes > flushes, 20, "writes after the failure")
            self.assertEqual(v.errors, [], srv.output()[-4000:])
            # Let requests that were in flight to the lost host when it went
            # finish failing: each gives up within one timeout (reconnects
            # included), and a read error's rewrite within one more. A
            # member added sooner can be failed by them (see
            # nbd_members_test's test_hot_spare_takes_over_a_killed_server).
            time.sleep(2 * TIMEOUT_MS / 1000 + 0.5)

            # A new host on a new address, with an empty member file.
            ns, addr, new_srv, new_uri = self.host(4)
            self.assertNotIn(new_uri, uris)
            r = run_tool("add", "--control", srv.ctl, new_uri)
            self.assertIn(new_uri, r.stdout + r.stderr)
            t1 = time.monotonic()
            r = subprocess.run([harness.ARGS.tool, "detail", "--control",
                                srv.ctl, "--wait"], capture_output=True,
                               text=True, timeout=90)
            self.rebuild_s = time.monotonic() - t1
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr +
                             srv.output()[-4000:])
            writes = v.writes
            wait_for(lambda: v.writes >= writes + 10, 20,
                     "writes after the rebuild")
        finally:
            v.finish()
        self.assertEqual(v.errors, [], srv.output()[-4000:])
        self.assertIsNone(v.check_all())

        d = srv.detail()
        self.assertFalse(d["degraded"], d)
        self.assertFalse(d["failed"], d)
        self.assertNotIn("degraded", d["state"])
        self.assertEqual([s["state"] for s in d["slots"]], ["active"] * 4)
        self.assertEqual(d["slots"][1]["name"], new_uri)
        self.assertEqual([s["name"] for i, s in enumerate(d["slots"])
                          if i != 1], [u for i, u in enumerate(uris)
                                       if i != 1])
        self.assertEqual(d["spares"], [])
        self.assertEqual(d["last_job"]["kind"], "recover")
        self.assertEqual(d["last_job"]["result"], "completed")
        c = live_detail(srv.ctl)["counters"]
        self.assertGreater(c["recovered_stripes"], 0, c)
        self.assertGreater(c["degraded_writes"] + c["reconstructions"], 0, c)
        text = run_tool("detail", "--control", srv.ctl).stdout
        self.assertIn(new_uri, text)
        log = srv.output()
        self.assertIn(f"member {lost[3]} (slot 1) failed", log)
        self.assertIn("continues degraded", log)

        self.assertEqual(srv.stop(), 0, srv.output()[-4000:])
        # The new member set assembles clean on the array host and its
        # parity matches every stripe (the rebuilt member is right).
        new_set = uris[:1] + [new_uri] + uris[2:]
        r = run(self.lab.exec_in(self.lab.array_ns, harness.ARGS.tool,
                                 "detail", "--json", *new_set))
        off = json.loads(r.stdout)
        self.assertTrue(off["clean"], off)
        self.assertFalse(off["degraded"], off)
        r = run(self.lab.exec_in(self.lab.array_ns, harness.ARGS.tool,
                                 "check", "--json", *new_set), check=False)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(json.loads(r.stdout)["mismatches"], 0)
        print(f"\n  {self.id().rsplit('.', 1)[-1]}: failure noticed in "
              f"{self.detect_s:.2f} s, rebuild {self.rebuild_s:.2f} s, "
              f"{v.writes} writes, {v.flushes} flushes, {v.ops} requests",
              file=sys.stderr)

    def test_member_host_killed_mid_write(self):
        # kill -9: the kernel resets the connections and refuses new ones.
        self.lose_host_then_rebuild(lambda host: host[2].proc.kill())

    def test_member_host_cut_off_mid_write(self):
        # The host drops off the network: no reset, no reply, only silence;
        # the plugin's timeout= fails the member.
        self.lose_host_then_rebuild(lambda host: run(
            ["ip", "-n", host[0], "link", "set", "eth0", "down"]))


if __name__ == "__main__":
    if SKIP is not None:
        # ctest shows this test as skipped (SKIP_RETURN_CODE 77), not passed.
        print(f"SKIP: netns test: network namespaces unavailable: {SKIP}")
        sys.exit(77)
    harness.main()
