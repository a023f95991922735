# SPDX-License-Identifier: MIT
"""Switching the consistency policy of a served array (issue 18):
`uraid grow --consistency-policy ppl|resync --control SOCKET` while
clients write, and offline on the members.

test_switch_to_ppl_while_writing_then_kill_9: a resync array (create
--consistency-policy resync --no-bbl: with no bad-block log the log may
take the room up to the data; on these small members mdadm's log, 16
sectors past the superblock, leaves none, and the switch is refused as
md refuses it) is served with a control socket; writers
send random partial-stripe writes (the write-hole test's Writers) while
`uraid grow --consistency-policy ppl --control` switches the policy; then
nbdkit is killed with SIGKILL while they write, one member is lost, and
the survivors must start degraded WITHOUT force (as a PPL array does) with
every block outside the writes in flight reading back exactly. mdadm
--examine agrees with uraid's examine byte for byte (Feature Map 0x400,
the PPL line) on every member.

test_kill_9_while_switching: rounds of writers on a served array whose
policy a control client flips between resync and ppl as fast as it can,
killed with SIGKILL at a random moment, so kills land before, inside and
between switches (in the middle of a switch's superblock writes too); in
every other round the client stops at a switch to ppl past half the run,
so kills also find ppl on the members (a switch to ppl takes the longest,
so random kills mostly find resync). Each
round the array must start again on all its members without force, every
block outside the writes in flight must read back exactly, and a check
scrub must find no mismatched stripe: whatever the superblocks said at
the kill, the log was replayed or the array resynced, never neither.

test_switch_back_offline_and_refusals: on a PPL array, what md refuses
(the same policy again, bitmap, a reshape, a switch combined with a
reshape) is refused naming the cause; online back to resync (mdadm sees
no PPL), then offline to ppl again (`uraid grow --consistency-policy ppl
MEMBER...`).
"""

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import harness
from harness import Server, make_members, run_tool
import ppl_write_hole_test as wh
from mdadm_interop_test import mdadm_examine

MIB = 1 << 20
DISKS = 4
MEMBER = 16 * MIB
CHUNK = 64 * 1024


def wait_control(path, timeout=10):
    deadline = time.time() + timeout
    while not os.path.exists(path):
        if time.time() > deadline:
            raise AssertionError(f"control socket {path} did not appear")
        time.sleep(0.02)


@unittest.skipUnless(shutil.which("mdadm"), "mdadm is needed")
class PplSwitchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="uraid-pplsw-")
        self.ctl = os.path.join(self.tmp, "ctl.sock")

    def tearDown(self):
        subprocess.run(["rm", "-rf", self.tmp])

    def examine_agrees(self, paths, ppl):
        for p in paths:
            md = mdadm_examine(p)
            r = subprocess.run(["mdadm", "--examine", p],
                               capture_output=True, text=True)
            self.assertEqual(run_tool("examine", p).stdout, r.stdout, p)
            if ppl:
                self.assertEqual(md["Feature Map"], "0x400", p)
                self.assertRegex(md["PPL"], r"^\d+ sectors at offset 8 "
                                 r"sectors from superblock$")
            else:
                self.assertEqual(md["Feature Map"], "0x0", p)
                self.assertNotIn("PPL", md)
            ours = json.loads(run_tool("examine", "--json", p).stdout)[0]
            self.assertEqual(ours["consistency_policy"],
                             "ppl" if ppl else "resync")

    def test_switch_to_ppl_while_writing_then_kill_9(self):
        paths = make_members(self.tmp, DISKS, MEMBER)
        run_tool("create", "--force", "--assume-clean", "--chunk",
                 f"{CHUNK // 1024}K", "--consistency-policy", "resync", "--no-bbl",
                 *paths)
        srv = Server(self.tmp, paths,
                     extra=[f"control={self.ctl}", "cache=0"])
        h = srv.connect()
        size = h.get_size()
        rng = random.Random(18)
        hot_blk = rng.randrange(0, (size - wh.HOT) // wh.BLK)
        # The fill of the hot window: what a block never written holds.
        h.pwrite(b"".join(wh.block_data(0, b) for b in
                          range(hot_blk, hot_blk + wh.HOT // wh.BLK)),
                 hot_blk * wh.BLK)
        h.flush()
        h.shutdown()
        wait_control(self.ctl)
        self.assertFalse(json.loads(run_tool(
            "detail", "--control", self.ctl, "--json").stdout)["ppl"])

        grow = {}

        def switch():
            time.sleep(0.3)  # the writers are going
            grow["r"] = run_tool("grow", "--consistency-policy", "ppl",
                                 "--control", self.ctl, check=False)
            grow["detail"] = json.loads(run_tool(
                "detail", "--control", self.ctl, "--json").stdout)

        t = threading.Thread(target=switch)
        t.start()
        w = wh.Writers(hot_blk, rng)
        w.run(srv, 2.5)  # ends with SIGKILL, the writers still writing
        t.join(timeout=60)
        self.assertIn("r", grow, "the switch did not return")
        r = grow["r"]
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("consistency policy is now ppl", r.stdout)
        self.assertTrue(grow["detail"]["ppl"])
        self.assertGreater(len(w.last_done), 100, "the writers did not write")
        self.assertTrue(wh.dirty(paths[0]), "the kill found the array clean")
        self.examine_agrees(paths, ppl=True)

        in_flight = {b for blk, n in w.dead for b in range(blk, blk + n)}
        lost = 1
        os.truncate(paths[lost], 0)
        survivors = [p for i, p in enumerate(paths) if i != lost]
        # run=true: start without the lost slot; no force.
        srv = Server(self.tmp, survivors, extra=["run=true"])
        try:
            h = srv.connect()
            data = h.pread(wh.HOT, hot_blk * wh.BLK)
            h.shutdown()
        finally:
            out = srv.output()
            self.assertEqual(srv.stop(), 0, out)
        self.assertIn("ppl: replayed", out)
        checked = 0
        for k in range(wh.HOT // wh.BLK):
            blk = hot_blk + k
            if blk in in_flight:
                continue
            checked += 1
            got = data[k * wh.BLK:(k + 1) * wh.BLK]
            self.assertEqual(
                got, wh.block_data(w.last_done.get(blk, 0), blk),
                f"block {blk}, written by no write in flight, reads back "
                f"wrong with slot {lost} lost; server log:\n{out}")
        self.assertGreater(checked, 0)

    def test_kill_9_while_switching(self):
        rounds = int(os.environ.get("URAID_PPL_SWITCH_ROUNDS", "8"))
        paths = make_members(self.tmp, DISKS, MEMBER)
        run_tool("create", "--force", "--assume-clean", "--chunk",
                 f"{CHUNK // 1024}K", "--consistency-policy", "resync", "--no-bbl",
                 *paths)
        srv = Server(self.tmp, paths)
        try:
            h = srv.connect()
            size = h.get_size()
            for off in range(0, size, MIB):
                h.pwrite(b"".join(wh.block_data(0, b) for b in range(
                    off // wh.BLK, (off + MIB) // wh.BLK)), off)
            h.flush()
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())
        for p in paths:
            shutil.copyfile(p, p + ".pristine")
        rng = random.Random(1818)
        policies_seen = set()
        switches = 0
        for r in range(rounds):
            for p in paths:
                shutil.copyfile(p + ".pristine", p)
            hot_blk = rng.randrange(0, (size - wh.HOT) // wh.BLK)
            srv = Server(self.tmp, paths,
                         extra=[f"control={self.ctl}", "cache=0"])
            wait_control(self.ctl)
            stop = threading.Event()
            done = []
            secs = rng.uniform(0.3, 1.5)
            # Even rounds flip until the kill, which then mostly finds the
            # members at resync or on the way to ppl (the longer switch);
            # odd rounds stop at the first switch to ppl past half the run,
            # so their kill finds ppl on the members, after switches made
            # under load.
            settle = "ppl" if r % 2 else None
            settle_after = time.time() + secs / 2

            def flip():
                want = "ppl"
                while not stop.is_set():
                    try:
                        reply = harness.control_call(
                            self.ctl, {"cmd": "grow",
                                       "consistency_policy": want},
                            timeout=5, must=False)
                    except OSError:
                        return  # the server is gone
                    if reply["ok"]:
                        done.append(want)
                        if want == settle and time.time() >= settle_after:
                            return
                        want = "resync" if want == "ppl" else "ppl"

            t = threading.Thread(target=flip)
            t.start()
            w = wh.Writers(hot_blk, rng)
            try:
                w.run(srv, secs)  # ends with SIGKILL
            finally:
                stop.set()
                t.join(timeout=60)
            self.assertFalse(t.is_alive(), "the switching client hangs")
            switches += len(done)
            at_kill = [json.loads(run_tool("examine", "--json", p).stdout)
                       [0]["consistency_policy"] for p in paths]
            policies_seen.update(at_kill)
            in_flight = {b for blk, n in w.dead for b in range(blk, blk + n)}
            # All members, no force: a dirty array replays its log (ppl)
            # or resyncs (resync).
            srv = Server(self.tmp, paths, extra=[f"control={self.ctl}"])
            try:
                wait_control(self.ctl)
                deadline = time.time() + 120
                while True:
                    d = json.loads(run_tool("detail", "--control", self.ctl,
                                            "--json").stdout)
                    if d["job"]["kind"] == "idle":
                        break
                    self.assertLess(time.time(), deadline, d)
                    time.sleep(0.05)
                h = srv.connect()
                data = h.pread(wh.HOT, hot_blk * wh.BLK)
                h.shutdown()
                c = json.loads(run_tool("check", "--control", self.ctl,
                                        "--wait", "--json").stdout)
            finally:
                out = srv.output()
                self.assertEqual(srv.stop(), 0, out)
            where = (f"round {r}: {len(done)} switches before the kill, "
                     f"members said {at_kill}; server log:\n{out}")
            for k in range(wh.HOT // wh.BLK):
                blk = hot_blk + k
                if blk in in_flight:
                    continue
                self.assertEqual(
                    data[k * wh.BLK:(k + 1) * wh.BLK],
                    wh.block_data(w.last_done.get(blk, 0), blk),
                    f"block {blk}, written by no write in flight, reads "
                    f"back wrong; {where}")
            self.assertEqual((c["result"], c["mismatches"]), ("completed", 0),
                             where)
            print(f"switch round {r}: {len(done)} switches, members said "
                  f"{at_kill}, {len(w.last_done)} blocks written",
                  file=sys.stderr, flush=True)
        # The kills found both policies on the members.
        self.assertGreater(switches, rounds)
        self.assertEqual(policies_seen, {"ppl", "resync"})

    def test_switch_back_offline_and_refusals(self):
        paths = make_members(self.tmp, DISKS, MEMBER)
        run_tool("create", "--force", "--assume-clean", "--chunk",
                 f"{CHUNK // 1024}K", "--consistency-policy", "ppl", *paths)
        srv = Server(self.tmp, paths, extra=[f"control={self.ctl}"])
        try:
            h = srv.connect()
            ref = random.Random(5).randbytes(2 * MIB)
            h.pwrite(ref, 3 * MIB + 4096)
            wait_control(self.ctl)
            r = run_tool("grow", "--consistency-policy", "ppl", "--control",
                         self.ctl, check=False)
            self.assertEqual(r.returncode, 1)
            self.assertIn("already ppl", r.stderr)
            r = run_tool("grow", "--consistency-policy", "bitmap",
                         "--control", self.ctl, check=False)
            self.assertEqual(r.returncode, 1)
            self.assertIn("--grow --bitmap", r.stderr)
            r = run_tool("grow", "--consistency-policy", "journal",
                         "--control", self.ctl, check=False)
            self.assertEqual(r.returncode, 2)
            r = run_tool("grow", "--consistency-policy", "resync", "--level",
                         "4", "--control", self.ctl, check=False)
            self.assertEqual(r.returncode, 2)
            self.assertIn("nothing else", r.stderr)
            r = run_tool("grow", "--layout", "right-symmetric", "--control",
                         self.ctl, check=False)
            self.assertEqual(r.returncode, 1)
            self.assertIn("consistency-policy resync", r.stderr)
            # A raw request combining both is refused by the protocol.
            reply = harness.control_call(
                self.ctl, {"cmd": "grow", "consistency_policy": "resync",
                           "level": 4}, must=False)
            self.assertFalse(reply["ok"])
            self.assertIn("cannot be combined", reply["error"])

            r = run_tool("grow", "--consistency-policy", "resync",
                         "--control", self.ctl)
            self.assertIn("consistency policy is now resync", r.stdout)
            d = json.loads(run_tool("detail", "--control", self.ctl,
                                    "--json").stdout)
            self.assertFalse(d["ppl"])
            self.assertIn("Consistency Policy : resync",
                          run_tool("detail", "--control", self.ctl).stdout)
            h.pwrite(ref[:65536], 7 * MIB + 4096)  # under resync
            h.flush()
        finally:
            h.shutdown()  # nbdkit waits for its clients at SIGTERM
            self.assertEqual(srv.stop(), 0, srv.output())
        self.examine_agrees(paths, ppl=False)

        r = run_tool("grow", "--consistency-policy", "ppl", *paths)
        self.assertIn("consistency policy is now ppl", r.stdout)
        self.examine_agrees(paths, ppl=True)
        self.assertIn("Consistency Policy : ppl",
                      run_tool("detail", *paths).stdout)
        # Served again: the data written under each policy reads back.
        srv = Server(self.tmp, paths)
        try:
            h = srv.connect()
            self.assertEqual(h.pread(2 * MIB, 3 * MIB + 4096), ref)
            self.assertEqual(h.pread(65536, 7 * MIB + 4096), ref[:65536])
            h.shutdown()
        finally:
            self.assertEqual(srv.stop(), 0, srv.output())


if __name__ == "__main__":
    harness.main()
