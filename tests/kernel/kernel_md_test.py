# SPDX-License-Identifier: MIT
"""The real kernel md (raid456) as the judge of uraid's md compatibility, in
a throw-away guest booted from Debian's own kernel (vm.py), both ways:

  uraid -> md   arrays made and written by uraid assemble in md with every
                member, read back exactly, md's check finds mismatch_cnt 0;
                md writes, stops, and uraid reads md's writes exactly, with
                superblocks (mdadm --examine) and bitmaps (mdadm -X) agreeing
                with uraid examine / detail;
  md -> uraid   arrays made by mdadm --create are served by uraid, read back
                exactly, uraid check finds 0 mismatches; uraid writes, and md
                assembles them again with no resync and check 0;
  degraded      a slot created `missing` (both ways), a member left out while
                uraid writes (md must leave the stale member out), a member
                md failed (uraid refuses it by name);
  kill -9       nbdkit killed mid-write with the bitmap: mdadm -X and uraid
                agree on the dirty bits, and md resyncs those regions only;
  reshape       3->4 killed in uraid and finished by md; 3->4 crashed in md
                (sysrq-b) and finished by `uraid grow --continue`;
  /dev/nbd0     the README's recipe: nbdkit + plugin + nbd-client, mkfs with
                uraid detail's hints, fsck; then md serves the same files;
  raid6         md creates RAID6 arrays of its layouts (resynced by md, then
                written through md) and raid6_layout_check, which knows only
                uraid's Geometry and P+Q codec, finds md's P and Q in every
                stripe and every written block where Map puts it; Q ordered
                by data index instead of md's slot order must fail wherever
                the two differ;
  bad blocks    md's bad-block log both ways: ranges md was given through
                sysfs (dev-X/bad_blocks) land in its on-disk log, mdadm
                --examine-badblocks and uraid examine --badblocks agree, and
                uraid rebuilds them from parity over garbage on the member
                (a write clears one, and md sees it cleared); a block uraid
                could not read (dm's error target, degraded) is recorded in
                the member's log, and md loads the entry and refuses exactly
                that block and its row's missing block with EIO; (full set)
                uraid create puts the log where mdadm --create does.

The cases of one boot run one after another in the guest (guest.py); a case
that needs a second boot (the md reshape crash) continues in the next one.
Each case is reported by name: "kernel: PASS name" / "kernel: FAIL name:
why". Default: a representative subset in two boots (CI). URAID_KERNEL_FULL=1:
the full grid (every layout and RAID4 x chunk 4K..512K x 3..8 disks x bitmap
x --assume-clean, both ways, plus every special case).
URAID_KERNEL_ONLY=REGEX runs the cases whose names match.

Exit status: 0 all passed, 1 a case failed, 77 no guest can run here
(qemu, the kernel package, busybox-static or root missing; the reason is
printed).
"""

import argparse
import json
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vm  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GUEST = os.path.join(HERE, "guest.py")
MIB = 1 << 20
LAYOUTS = ["left-asymmetric", "right-asymmetric", "left-symmetric",
           "right-symmetric", "parity-first", "parity-last"]


def case(name, kind, ndisks, size_mib=16, steps=1, crash=False, **params):
    params.setdefault("disks", ndisks)
    return {"case": name, "kind": kind, "ndisks": ndisks, "size_mib": size_mib,
            "steps": steps, "crash": crash, "params": params}


def u2m_name(p):
    shape = "raid4" if p.get("level") == 4 else p["layout"]
    return (f"uraid_to_md/{shape}/{p['chunk']}/{p['disks']}disks/"
            f"bitmap-{p['bitmap']}/"
            f"{'assume-clean' if p['assume_clean'] else 'synced'}")


def m2u_name(p):
    return (f"md_to_uraid/{p['layout']}/{p['chunk']}/{p['disks']}disks/"
            f"bitmap-{p['bitmap']}/"
            f"{'assume-clean' if p['assume_clean'] else 'recovered'}")


def u2m(layout, chunk, disks, bitmap, assume_clean, level=5, size_mib=16):
    p = dict(layout=layout, chunk=chunk, disks=disks, bitmap=bitmap,
             assume_clean=assume_clean)
    if level == 4:
        p["level"] = 4
    if bitmap == "internal":
        p["bitmap_chunk"] = "1M"   # several bits, so their states compare
    name = u2m_name(p)
    del p["disks"]
    return case(name, "uraid_to_md", disks, size_mib, **p)


def m2u(layout, chunk, disks, bitmap, assume_clean, size_mib=16):
    p = dict(layout=layout, chunk=chunk, disks=disks, bitmap=bitmap,
             assume_clean=assume_clean)
    name = m2u_name(p)
    del p["disks"]
    return case(name, "md_to_uraid", disks, size_mib, **p)


RAID6_FAMILIES = [
    ["left-asymmetric", "right-asymmetric"],
    ["left-symmetric", "right-symmetric"],
    ["parity-first", "parity-last"],
    ["ddf-zero-restart", "ddf-N-restart"],
    ["ddf-N-continue", "left-asymmetric-6"],
    ["right-asymmetric-6", "left-symmetric-6"],
    ["right-symmetric-6", "parity-first-6"],
]


def raid6_md(layouts, disk_counts, chunk):
    """md creates RAID6 arrays (resynced, then written through md) of each
    layout and disk count on the case's disks, one after another; uraid's
    Geometry and P+Q codec (raid6_layout_check) must find md's P, Q and
    data in every stripe."""
    name = (f"raid6/md_made/{'+'.join(layouts)}/"
            f"{'-'.join(map(str, disk_counts))}disks/{chunk}")
    return case(name, "raid6_md_layout", max(disk_counts), size_mib=8,
                layouts=layouts, disk_counts=disk_counts, chunk=chunk)


def raid6_interop(layout, disks, chunk):
    """uraid serves RAID6 and md judges it, both ways, with two members
    left out (guest.py's case_raid6_interop)."""
    return case(f"raid6/interop/{layout}/{chunk}/{disks}disks",
                "raid6_interop", disks, size_mib=8, layout=layout,
                chunk=chunk)


def raid6_two_failures(layout, disks, chunk):
    """uraid's RAID6 loses two members under writes and rebuilds two spares
    in one pass; md assembles, reads the same bytes, check 0
    (guest.py's case_raid6_two_failures)."""
    return case(f"raid6/two-failures/{layout}/{chunk}/{disks}disks/"
                "two-spares-one-pass/md-check", "raid6_two_failures",
                disks + 2, size_mib=8, disks=disks, level=6, layout=layout,
                chunk=chunk, bitmap="none", assume_clean=True)


def raid6_cases(full):
    # CI: one layout case, an md layout whose slot order is not the data
    # index, a DDF one and a -6 one, on 5 disks; and one interop case on a
    # layout whose Q order is not the data index.
    out = [raid6_md(["left-asymmetric", "ddf-N-continue", "left-symmetric-6"],
                    [5], "64K"),
           raid6_interop("left-asymmetric", 5, "64K"),
           # RAID5 -> RAID6 (takeover, Q rebuilt) -> a RAID6 grow killed in
           # uraid and finished by md -> RAID5 again.
           case("raid6/takeover-5to6/grow-killed-in-uraid/finished-by-md/"
                "takeover-6to5", "raid6_takeover_reshape", 6,
                layout="left-symmetric", chunk="64K", bitmap="none",
                assume_clean=True),
           # RAID5 -> RAID6 handed over mid-way through Q's rebuild: uraid's
           # finished by md, md's by uraid.
           case("raid6/takeover-5to6/handed-over-mid-rebuild/both-ways",
                "raid6_takeover_handover", 5, layout="left-symmetric",
                chunk="64K", bitmap="none", assume_clean=True),
           # Two members failed under writes, two spares rebuilt by uraid
           # in one pass (the second joins the running recovery); md
           # assembles them, reads the same bytes, check 0. 22-30 s of
           # guest time, 8 disks in the first boot.
           raid6_two_failures("right-asymmetric", 6, "64K")]
    if full:
        chunks = ["4K", "16K", "64K", "128K", "512K"]
        out += [raid6_md(f, [4, 5, 7], chunks[i % len(chunks)])
                for i, f in enumerate(RAID6_FAMILIES)]
        out += [raid6_interop(f[i % 2], 4 + i % 4, chunks[i % len(chunks)])
                for i, f in enumerate(RAID6_FAMILIES)]
    return out


def special_cases(full):
    out = [
        case("degraded/uraid_to_md/stale-member-left-out", "uraid_to_md", 4,
             layout="right-symmetric", chunk="32K", bitmap="internal",
             assume_clean=True, leave_out=2),
        case("degraded/md_to_uraid/created-missing", "md_to_uraid", 4,
             layout="left-symmetric", chunk="64K", bitmap="internal",
             assume_clean=True, missing=3),
        case("degraded/md_to_uraid/failed-member-refused", "md_to_uraid", 4,
             layout="left-asymmetric", chunk="16K", bitmap="none",
             assume_clean=True, fail=1),
        case("kill9/bitmap/md-resyncs-dirty-regions-only", "kill9_bitmap", 4,
             layout="left-symmetric", chunk="64K", bitmap="internal",
             bitmap_chunk="1M", assume_clean=True),
        case("kill9/ppl/md-replays-uraid-log", "kill9_ppl", 4,
             layout="left-symmetric", chunk="64K", bitmap="none",
             assume_clean=True),
        case("kill9/ppl/switched-online/md-replays-uraid-log", "kill9_ppl",
             4, layout="left-symmetric", chunk="64K", bitmap="none",
             assume_clean=True, switch=True),
        case("crash/ppl/uraid-replays-md-log", "ppl_md_crashed", 4,
             steps=2, crash=True, chunk="64K"),
        case("crash/ppl/uraid-replays-md-log/degraded", "ppl_md_crashed", 4,
             steps=2, crash=True, chunk="64K", leave_out=2),
        case("reshape/3to4/killed-in-uraid/finished-by-md",
             "reshape_uraid_killed", 4, layout="left-symmetric", chunk="64K",
             bitmap="none", assume_clean=True),
        case("nbd0/ext4/plugin-then-md", "nbd0", 4, size_mib=32,
             layout="left-symmetric", chunk="64K", bitmap="internal",
             assume_clean=True, fs="ext4"),
        case("reshape/3to4/crashed-in-md/finished-by-uraid",
             "reshape_md_crashed", 4, steps=2, crash=True, chunk="64K",
             bitmap="none"),
        # md's bad-block log both ways: md's lists (written through sysfs)
        # honoured by uraid over garbage, and uraid's entry for a block it
        # could not read honoured by md.
        case("badblocks/md_to_uraid/sysfs-entries-rebuilt-from-parity",
             "bad_blocks_md_to_uraid", 4, layout="left-symmetric",
             chunk="64K"),
        case("badblocks/uraid_to_md/unreadable-block-refused-by-md",
             "bad_blocks_uraid_to_md", 4, layout="left-symmetric",
             chunk="64K", bitmap="internal", assume_clean=True),
    ]
    if full:
        out += [
            case("degraded/uraid_to_md/created-missing", "uraid_to_md", 4,
                 layout="left-symmetric", chunk="64K", bitmap="internal",
                 assume_clean=False, missing=1),
            case("degraded/uraid_to_md/created-missing-parity-slot",
                 "uraid_to_md", 5, layout="parity-last", chunk="128K",
                 bitmap="none", assume_clean=True, missing=4),
            case("degraded/uraid_to_md/stale-member-left-out-raid4",
                 "uraid_to_md", 4, level=4, layout="parity-last",
                 chunk="64K", bitmap="none", assume_clean=True, leave_out=0),
            case("degraded/md_to_uraid/created-missing-bitmap-none",
                 "md_to_uraid", 3, layout="right-asymmetric", chunk="4K",
                 bitmap="none", assume_clean=True, missing=0),
            case("degraded/md_to_uraid/failed-member-refused-bitmap",
                 "md_to_uraid", 5, layout="right-symmetric", chunk="64K",
                 bitmap="internal", assume_clean=True, fail=4),
            case("kill9/bitmap/md-resyncs-dirty-regions-only/right-asym",
                 "kill9_bitmap", 5, layout="right-asymmetric", chunk="16K",
                 bitmap="internal", bitmap_chunk="512K", assume_clean=True),
            case("reshape/3to4/killed-in-uraid/finished-by-md/bitmap",
                 "reshape_uraid_killed", 4, layout="left-symmetric",
                 chunk="64K", bitmap="internal", assume_clean=True),
            # mkfs.xfs wants a 64 MB log, which takes about 600 MB of
            # file system: 6 x 128 MiB (sparse; little is written).
            case("nbd0/xfs/plugin-then-md", "nbd0", 6, size_mib=128,
                 layout="left-symmetric", chunk="64K", bitmap="internal",
                 assume_clean=True, fs="xfs"),
            case("reshape/3to4/crashed-in-md/finished-by-uraid/bitmap",
                 "reshape_md_crashed", 4, steps=2, crash=True, chunk="64K",
                 bitmap="internal"),
            case("badblocks/create/log-where-mdadm-puts-it",
                 "bad_blocks_create_log", 4, size_mib=64),
            case("raid6/reshape/4to5/crashed-in-md/finished-by-uraid",
                 "reshape_md_crashed", 5, steps=2, crash=True, chunk="64K",
                 bitmap="internal", level=6),
        ]
    return out


def default_cases():
    # CI's subset (24 cases, about 8 minutes under TCG): chunks 4K..512K, 3..8
    # disks, bitmap on and off, with and without --assume-clean, RAID4, both
    # directions (md -> uraid with md's initial recovery and without, and
    # degraded), then one of each special case (the two bad-block cases
    # cost about 30 s of guest time). The other layouts are in the full
    # set (URAID_KERNEL_FULL=1).
    return [
        u2m("left-asymmetric", "4K", 3, "none", True),
        u2m("right-symmetric", "128K", 8, "none", False),
        u2m("parity-first", "16K", 4, "internal", True),
        u2m("parity-last", "64K", 4, "internal", False, level=4),
        m2u("left-symmetric", "64K", 4, "internal", False),
        m2u("right-asymmetric", "512K", 3, "none", True),
    ] + special_cases(False) + raid6_cases(False)


def full_cases():
    """The grid (every layout and RAID4, bitmap x --assume-clean, chunks
    and disk counts cycled through 4K..512K and 3..10), the default set's
    cases, and every special case."""
    out = []
    chunks = ["4K", "16K", "64K", "128K", "512K"]
    disks = [3, 4, 5, 6, 8, 10]
    i = 0
    for shape in LAYOUTS + ["raid4"]:
        for bitmap in ("internal", "none"):
            for assume_clean in (True, False):
                c, n = chunks[i % len(chunks)], disks[i % len(disks)]
                i += 1
                if shape == "raid4":
                    out.append(u2m("parity-last", c, n, bitmap, assume_clean,
                                   level=4))
                else:
                    out.append(u2m(shape, c, n, bitmap, assume_clean))
    for shape in LAYOUTS:
        for bitmap in ("internal", "none"):
            for assume_clean in (True, False):
                c, n = chunks[i % len(chunks)], disks[i % len(disks)]
                i += 1
                out.append(m2u(shape, c, n, bitmap, assume_clean))
    out += special_cases(True) + raid6_cases(True)
    names = set(c["case"] for c in out)
    return out + [c for c in default_cases() if c["case"] not in names]


def plan_boots(cases, max_disks=128, max_cases=24):
    """Boots, each a list of (case, step): every case's step k runs in some
    boot after its step k-1; a step that crashes the guest runs last in its
    boot (and only one such a boot). At most 128 disks a boot: qemu takes
    more (vm.py's PCI slots hold 200), but the guest's kernel brought up
    only 130 of a 160-disk boot, and the full grid's cases on the others
    failed with "disks ... are not in the guest"."""
    boots = []
    pending = [(c, 0) for c in cases]
    while pending:
        normal = [(c, s) for c, s in pending
                  if not (c["crash"] and s == 0)]
        crashing = [(c, s) for c, s in pending if c["crash"] and s == 0]
        boot, disks = [], 0
        for c, s in normal:
            if len(boot) < max_cases and disks + c["ndisks"] <= max_disks:
                boot.append((c, s))
                disks += c["ndisks"]
        if crashing and disks + crashing[0][0]["ndisks"] <= max_disks:
            boot.append(crashing[0])
        boots.append(boot)
        done = set(id(c) for c, _ in boot)
        rest = [(c, s) for c, s in pending if id(c) not in done]
        nxt = [(c, s + 1) for c, s in boot if s + 1 < c["steps"]]
        pending = rest + nxt
    return boots


class Runner:
    def __init__(self, args, cases):
        self.args, self.cases = args, cases
        self.tmp = vm.owned_tempdir("uraid-kernel-")
        self.results = os.path.join(self.tmp, "results")
        os.mkdir(self.results)
        self.outcome = {}    # case name -> (status, message)
        self.retried = set()  # cases whose boot ended early once
        self.images = {}     # case name -> [(path, serial)]
        for n, c in enumerate(cases):
            paths = []
            for j in range(c["ndisks"]):
                p = os.path.join(self.tmp, f"c{n:03d}d{j}.img")
                with open(p, "wb") as f:
                    f.truncate(c["size_mib"] * MIB)
                paths.append((p, f"c{n:03d}d{j}"))
            self.images[c["case"]] = paths

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def boot(self, number, boot, retry=True):
        steps, disks = [], []
        for c, s in boot:
            if c["case"] in self.outcome:    # failed in an earlier step
                continue
            steps.append({"case": c["case"].replace("/", "~"), "kind": c["kind"], "step": s,
                          "steps": c["steps"], "params": c["params"],
                          "disks": [ser for _, ser in self.images[c["case"]]],
                          "seed": 1 + self.cases.index(c)})
            disks += [vm.Disk(p, ser) for p, ser in self.images[c["case"]]]
        if not steps:
            return
        for st in steps:
            r = os.path.join(self.results, f"{st['case']}.result.json")
            if os.path.exists(r):
                os.unlink(r)
        # Case names hold slashes; in the plan and the results files they
        # are flat names ("/" -> "~").
        plan = {"tool": self.args.tool, "plugin": self.args.plugin,
                "raid6_check": self.args.raid6_check,
                "results": "/mnt/results", "steps": steps}
        with open(os.path.join(self.results, "plan.json"), "w") as f:
            json.dump(plan, f, indent=1)
        timeout = 240 + 150 * len(steps)
        print(f"kernel: boot {number}: {len(steps)} case steps, "
              f"{len(disks)} disks (timeout {timeout}s)", flush=True)
        script = (f"exec /usr/bin/python3 -u {GUEST} /mnt/results/plan.json"
                  " 2>&1\n")
        r = vm.run(script, disks, [vm.Share(self.results, "/mnt/results")],
                   timeout=timeout)
        print(f"kernel: boot {number} took {r.seconds:.0f}s "
              f"(guest status {r.status})", flush=True)
        crash_expected = any(c["crash"] and s == 0 for c, s in boot)
        # Steps the guest never reported on, though it neither timed out
        # nor was crashed on purpose before them: the guest itself ended
        # early (its console, above, says how). They get one fresh boot,
        # said here and in their PASS lines; a step that reported a
        # verdict never runs again, and a timed-out boot is not retried.
        if not crash_expected and r.status is None:
            print("kernel: the guest ended without a status", flush=True)
        lost = [(c, s) for c, s in boot
                if c["case"] not in self.outcome and not os.path.exists(
                    os.path.join(self.results,
                                 f"{c['case'].replace('/', '~')}"
                                 ".result.json"))]
        if lost and retry and not r.timed_out:
            print(f"kernel: boot {number} ended (guest status {r.status}) "
                  f"before {len(lost)} of its {len(steps)} case steps "
                  f"reported: they run once more in a fresh boot",
                  flush=True)
            for c, _ in lost:
                self.retried.add(c["case"])
            self.boot(f"{number} (again)", lost, retry=False)
            steps = [st for st in steps if st["case"].replace("~", "/")
                     not in set(c["case"] for c, _ in lost)]
        for st in steps:
            name = st["case"].replace("~", "/")
            c = next(c for c in self.cases if c["case"] == name)
            path = os.path.join(self.results, f"{st['case']}.result.json")
            if not os.path.exists(path):
                why = ("the guest timed out" if r.timed_out else
                       "the guest ended without its result")
                self.outcome[name] = ("fail", f"step {st['step'] + 1}: {why}")
                continue
            with open(path) as f:
                res = json.load(f)
            last = st["step"] + 1 == c["steps"]
            if res["status"] == "crash-armed":
                if r.status is not None:
                    self.outcome[name] = ("fail", "the guest did not crash "
                                          "when the case crashed it")
                continue
            if res["status"] != "pass":
                self.outcome[name] = ("fail", f"step {st['step'] + 1}: "
                                      f"{res['message']}")
            elif last:
                again = (", in a second boot after the first ended early"
                         if name in self.retried else "")
                self.outcome[name] = ("pass",
                                      f"{res['seconds']:.1f}s guest{again}")

    def run(self, boots):
        for i, b in enumerate(boots, 1):
            self.boot(i, b)
        for c in self.cases:
            self.outcome.setdefault(c["case"], ("fail", "never finished"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True)
    p.add_argument("--plugin", required=True)
    p.add_argument("--raid6-check", default=None,
                   help="raid6_layout_check (the RAID6 cases need it)")
    args = p.parse_args()
    args.tool, args.plugin = (os.path.abspath(args.tool),
                              os.path.abspath(args.plugin))
    if args.raid6_check:
        args.raid6_check = os.path.abspath(args.raid6_check)
    full = os.environ.get("URAID_KERNEL_FULL") == "1"
    try:
        vm.check_available()
    except vm.Unavailable as e:
        print(f"kernel: SKIP: {e}")
        sys.exit(77)
    cases = full_cases() if full else default_cases()
    only = os.environ.get("URAID_KERNEL_ONLY")
    if only:
        cases = [c for c in cases if re.search(only, c["case"])]
    names = [c["case"] for c in cases]
    assert len(names) == len(set(names)), "duplicate case names"
    boots = plan_boots(cases)
    print(f"kernel: {'full' if full else 'default'} set: {len(cases)} cases "
          f"in {len(boots)} boots (URAID_KERNEL_FULL=1 for the full set)",
          flush=True)
    t0 = time.time()
    runner = Runner(args, cases)
    try:
        runner.run(boots)
    finally:
        runner.cleanup()
    failed = 0
    for c in cases:
        status, msg = runner.outcome[c["case"]]
        print(f"kernel: {status.upper()} {c['case']}" +
              (f": {msg}" if status != "pass" else f" ({msg})"))
        failed += status != "pass"
    print(f"kernel: {len(cases) - failed} passed, {failed} failed, "
          f"{time.time() - t0:.0f}s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
