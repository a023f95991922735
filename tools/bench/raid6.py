# SPDX-License-Identifier: MIT
"""RAID6 against RAID5 on the same members, and RAID6 on members like
disks (issue 33's speed figures)."""

import json
import os
import shutil
import statistics
import subprocess

from bench.common import (EXTRA_PARTS, MIB, UNTHROTTLED_KIB_S, CtlServer,
                          Server, fill_arrays_together, fio, log, member_args,
                          member_files, owned_tempdir, run_tool, sample_done,
                          seq_read_mbs, summarize, wait_job, wanted)
from bench.slow_members import (RAID6_SLOW_DEGRADED, RAID6_SLOW_IO_ALONE,
                                RAID6_SLOW_REBUILD, log_run, slow_exports,
                                stop_and_remove)


RAID6_JOBS = {
    "seq read 1M qd8": [dict(rw="read", bs="1m", iodepth=8)],
    "seq write 1M qd8": [dict(rw="write", bs="1m", iodepth=8)],
    "rand write 4K qd32": [dict(rw="randwrite", bs="4k", iodepth=32)],
    "degraded seq read 1M qd8": [dict(rw="read", bs="1m", iodepth=8)],
}
# RAID6 / RAID5 targets (issue 33). A full-stripe write carries n-2 data
# chunks against RAID5's n-1: (n-2)/(n-1) is the target there.
RAID6_TARGETS = {"seq read 1M qd8": 0.9, "rand write 4K qd32": 0.7}


def bench_raid6(args, plugin, tool, work):
    """RAID6 against RAID5 in the same run, on two arrays of
    --raid6-members members of --raid6-member-size MiB in the same
    directory (filled): healthy sequential read, full-stripe sequential
    write, random 4K write (each median of --repeat, the two levels
    alternating), degraded reads (RAID6 with two members left out, RAID5
    with one), and a rebuild (RAID6: two spares in one pass; RAID5: one),
    rates in member bytes per second per target."""
    names = [n for n in EXTRA_PARTS if n.startswith("raid6:")
             and wanted(args, n)]
    if not names:
        return {}
    n = args.raid6_members
    mib = args.raid6_member_size
    arrays = {}
    try:
        for level in (6, 5):
            d = os.path.join(work, f"r6-{level}")
            os.makedirs(d, exist_ok=True)
            members = member_files(d, n, mib)
            run_tool(tool, "create", "--force", "--level", str(level),
                     "--chunk", args.chunk, "--assume-clean", *members)
            info = json.loads(run_tool(tool, "detail", "--json", *members))
            arrays[level] = {"dir": d, "members": members,
                             "size": info["array_bytes"], "spares": 0}
        # Together: on /dev/shm the array filled last reads faster
        # (fill_exports_together), which read RAID6's seq read at 0.81 of
        # RAID5's, filled after it, in session 37's full run.
        log("bench: raid6: filling the RAID6 and RAID5 arrays together")
        fill_arrays_together(args, plugin, [
            (a["members"], a["size"]) for a in arrays.values()], work)
        rows = []
        for name in names:
            part = name.split(": ", 1)[1]
            if part == "rebuild":
                rows.append(raid6_rebuild_row(args, plugin, tool, work,
                                              arrays))
                continue
            samples = {6: [], 5: []}
            for rep in range(args.repeat):
                for level in ((6, 5) if rep % 2 == 0 else (5, 6)):
                    a = arrays[level]
                    ms = a["members"]
                    extra = []
                    if part.startswith("degraded"):
                        # As many left out as the level survives, served
                        # read-only so they do not go stale.
                        ms = ms[level - 4:]
                        extra = ["run=true", "readonly=true"]
                    s = Server(args, f"r6-{level}",
                               member_args(plugin, ms, args, extra), work)
                    r = fio(s.uri, RAID6_JOBS[part], args.runtime, a["size"])
                    s.stop()
                    samples[level].append(summarize(r, [0])["mbs"])
            med = {lv: statistics.median(v) for lv, v in samples.items()}
            ratio = med[6] / med[5] if med[5] else 0.0
            target = RAID6_TARGETS.get(part)
            if part == "seq write 1M qd8":
                target = (n - 2) / (n - 1)
            rows.append({"part": name, "raid6_mbs": med[6],
                         "raid5_mbs": med[5], "ratio": ratio,
                         "target": target, "samples": samples,
                         "how": f"median of {args.repeat} x {args.runtime}s"
                                + (", RAID6 less 2 members, RAID5 less 1, "
                                   "read-only" if part.startswith("degraded")
                                   else "")})
            log(f"bench: {name}: RAID5 {med[5]:.0f} MB/s, RAID6 "
                f"{med[6]:.0f} MB/s, ratio {ratio:.2f}")
        return {"members": n, "member_mib": mib, "rows": rows}
    finally:
        for a in arrays.values():
            shutil.rmtree(a["dir"], ignore_errors=True)


def raid6_rebuild_row(args, plugin, tool, work, arrays):
    """Each level's array loses as many members as it survives (RAID6: 2,
    RAID5: 1) and is served again with as many fresh spares, which join
    while it was whole, so that recovery finds them all at once (RAID6
    rebuilds both in one pass). Rate: member bytes per target over the
    time from the limits' lift (the job starts with the server at md's
    default limits, lifted at once) to the job's end, and the engine's own
    rate; median of --repeat, the levels alternating. The rebuilt array
    is the next repetition's."""
    samples = {6: [], 5: []}
    engines = {6: [], 5: []}
    for rep in range(args.repeat):
        for level in ((6, 5) if rep % 2 == 0 else (5, 6)):
            a = arrays[level]
            lost = level - 4
            srv = CtlServer(member_args(plugin, a["members"], args), work,
                            f"r6rb-{level}")
            spares = []
            try:
                for _ in range(lost):
                    a["spares"] += 1
                    p = os.path.join(a["dir"], f"s{a['spares']}.img")
                    with open(p, "wb") as f:
                        f.truncate(args.raid6_member_size * MIB)
                    run_tool(tool, "add", "--control", srv.ctl, p)
                    spares.append(p)
            finally:
                srv.stop()
            gone, keep = a["members"][:lost], a["members"][lost:]
            for p in gone:
                os.unlink(p)
            srv = CtlServer(member_args(plugin, keep + spares, args,
                                        ["run=true"]), work, f"r6rb-{level}")
            try:
                rate, lj = timed_recovery(tool, srv, f"RAID{level}",
                                          level == 6)
                samples[level].append(rate)
                engines[level].append(lj["bytes_per_s"] / 1e6)
            finally:
                srv.stop()
            a["members"] = keep + spares
            log(f"bench: raid6: rebuild RAID{level} ({lost} target(s)): "
                f"{samples[level][-1]:.0f} MB/s per target (engine "
                f"{engines[level][-1]:.0f})")
    med = {lv: statistics.median(v) for lv, v in samples.items()}
    return {"part": "raid6: rebuild", "raid6_mbs": med[6],
            "raid5_mbs": med[5],
            "ratio": med[6] / med[5] if med[5] else 0.0, "target": None,
            "samples": samples,
            "engine": {lv: statistics.median(v) for lv, v in engines.items()},
            "how": f"median of {args.repeat}; RAID6 two spares in one pass, "
                   f"RAID5 one; MB/s per target member from the limits' "
                   f"lift to the job's end"}


def timed_recovery(tool, srv, what, two):
    """The recovery that started with `srv` (at md's default limits),
    unthrottled at once and timed from then to its end; `two`: it must
    have rebuilt two targets in one pass. Returns (member bytes per
    target per second, the job's last_job)."""
    run_tool(tool, "set", "--control", srv.ctl, "--speed-min",
             str(UNTHROTTLED_KIB_S), "--speed-max", str(UNTHROTTLED_KIB_S))
    t0, done0, _, _ = sample_done(srv)
    t1, det = wait_job(srv, "recover", None)
    lj = det["last_job"]
    if lj["result"] != "completed":
        raise RuntimeError(f"raid6: rebuild {what}: {lj}")
    if two and lj.get("second_slot", -1) < 0 and "second_slot" in lj:
        raise RuntimeError(f"raid6: rebuild {what}: the two spares were "
                           f"not rebuilt in one pass")
    return (lj["total_bytes"] - done0) / (t1 - t0) / 1e6, lj


def pair_io_alone_mbs(sources, targets, work, runtime=4):
    """What the two-spare rebuild's member I/O alone runs at on these
    exports: fio over NBD reading every source and writing every target
    at once (1M pieces, qd 8 each, `runtime` s); the targets' mean write
    MB/s. The peer that bounds the rebuild row where the members' backing
    (a disk under /var/tmp) cannot give every export its nominal rate at
    once."""
    lines = ["[global]", "ioengine=nbd", "time_based=1", f"runtime={runtime}",
             "ramp_time=1", "bs=1m", "iodepth=8", "size=128m"]
    for i, u in enumerate(sources):
        lines += [f"[src{i}]", f"uri={u}", "rw=read"]
    for i, u in enumerate(targets):
        lines += [f"[dst{i}]", f"uri={u}", "rw=write"]
    path = os.path.join(work, "pair-io.fio")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    out = subprocess.run(["fio", "--output-format=json", path],
                         capture_output=True, text=True, check=True).stdout
    jobs = json.loads(out[out.index("{"):])["jobs"][len(sources):]
    return statistics.mean(j["write"]["bw_bytes"] / 1e6 for j in jobs)


def raid6_slow_column(args, plugin, tool, directory, lat, load):
    """Issue 33's speed rows on members like disks, for one column of the
    jobs part: --raid6-members + 2 exports made as jobs_column makes them
    (rate=800M, `lat` ms of delay), a RAID6 created on the first
    --raid6-members (parity computed over their random data). Measured:
    a sequential read with the first two left out (read-only), client
    MB/s per survivor against the member rate (1.0x: every survivor byte
    delivered once, as data or as what rebuilds it); and the rebuild of
    two spares in one pass (they joined while the array was whole, the
    array then served without its first two members, so that recovery
    starts with both), member bytes per target per second from the
    limits' lift to the job's end. Returns the samples per row; `load`
    (a RowLoad) gets the machine's share around each row's runs."""
    n = args.raid6_members
    work = owned_tempdir("uraid-bench-r6slow-", directory)
    servers = []
    samples = {RAID6_SLOW_DEGRADED: [], RAID6_SLOW_REBUILD: []}
    try:
        for rep in range(args.repeat):
            for s in servers:
                s.stop()
            servers.clear()
            uris = slow_exports(args, work, n + 2, lat, servers, "r")
            load.start()
            samples.setdefault(RAID6_SLOW_IO_ALONE, []).append(
                pair_io_alone_mbs(uris[2:n], uris[n:], work))
            load.ran(RAID6_SLOW_IO_ALONE)
            run_tool(tool, "create", "--force", "--level", "6", "--chunk",
                     "512K", *uris[:n])
            det = json.loads(run_tool(tool, "detail", "--json", *uris[:n]))
            mbs = seq_read_mbs(args, "r6slow-degraded",
                               member_args(plugin, uris[2:n], args,
                                           ["run=true", "readonly=true"]),
                               work, det["array_bytes"])
            samples[RAID6_SLOW_DEGRADED].append(mbs / (n - 2))
            load.ran(RAID6_SLOW_DEGRADED)
            srv = CtlServer(member_args(plugin, uris[:n], args), work,
                            "r6slow")
            try:
                for u in uris[n:]:
                    run_tool(tool, "add", "--control", srv.ctl, u)
            finally:
                srv.stop()
            srv = CtlServer(member_args(plugin, uris[2:], args,
                                        ["run=true"]), work, "r6slow")
            try:
                samples[RAID6_SLOW_REBUILD].append(
                    timed_recovery(tool, srv, "slow RAID6", True)[0])
                load.ran(RAID6_SLOW_REBUILD)
            finally:
                srv.stop()
            log_run("RAID6", directory, lat, rep, samples)
    finally:
        stop_and_remove(servers, work)
    return samples
