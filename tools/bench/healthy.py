# SPDX-License-Identifier: MIT
"""The healthy-path table: uraid against nbdkit's file plugin over one file
of the same size, in the same run, and the stripe cache sweep.

For each workload the server is started fresh, so its CPU time
(utime+stime from /proc) and uraid's member-I/O counters (plugin key
stats=FILE) belong to that workload alone. Each workload runs `--repeat`
times (default 3) alternating servers; the table shows medians."""

import json
import os
import statistics
import subprocess

from bench.common import (MIB, ClientAndMachine, Server, ab_runs,
                          cpu_s_per_gib, fill_exports_together, fio, log,
                          memory_balance, summarize, wanted, whole_run_scale)

WORKLOADS = [
    # name, jobs, measured job indices, degraded[, extra plugin keys]
    ("seq read 1M qd8", [dict(rw="read", bs="1m", iodepth=8)], [0], False),
    ("seq read 1M qd8 x2", [dict(rw="read", bs="1m", iodepth=8,
                                 offset="0%"),
                            dict(rw="read", bs="1m", iodepth=8,
                                 offset="50%")], [0, 1], False),
    ("seq write 1M qd8", [dict(rw="write", bs="1m", iodepth=8)], [0], False),
    ("seq write 1M qd8 x2", [dict(rw="write", bs="1m", iodepth=8,
                                  offset="0%", size="50%"),
                             dict(rw="write", bs="1m", iodepth=8,
                                  offset="50%", size="50%")], [0, 1], False),
    ("seq write 64K qd8", [dict(rw="write", bs="64k", iodepth=8)], [0],
     False),
    ("rand read 4K qd32", [dict(rw="randread", bs="4k", iodepth=32)], [0],
     False),
    ("rand read 4K qd32 x2", [dict(rw="randread", bs="4k", iodepth=32)] * 2,
     [0, 1], False),
    ("rand write 4K qd32", [dict(rw="randwrite", bs="4k", iodepth=32)], [0],
     False),
    ("rand write 4K qd32 x2", [dict(rw="randwrite", bs="4k", iodepth=32)] * 2,
     [0, 1], False),
    ("degraded seq read 1M qd8", [dict(rw="read", bs="1m", iodepth=8)], [0],
     True),
    # One stripe per request at the defaults (4 members, chunk 512K): the
    # rebuild's sources are all the client's own chunks.
    ("degraded seq read 1.5M qd8", [dict(rw="read", bs="1536k", iodepth=8)],
     [0], True),
    # Memory: the stripe cache bound at 256 MiB instead of the default
    # 64 MiB; the peak RSS column shows what the cache holds beside the
    # fixed cost (nbdkit, threads, their scratch buffers).
    ("seq write 1M qd8, cache=256M", [dict(rw="write", bs="1m", iodepth=8)],
     [0], False, ("cache=256M",)),
    ("rand write 4K qd32, cache=256M",
     [dict(rw="randwrite", bs="4k", iodepth=32)], [0], False,
     ("cache=256M",)),
    ("4K write+flush qd1, idle", [dict(rw="randwrite", bs="4k", iodepth=1,
                                       fsync=1)], [0], False),
    ("4K write+flush qd1, beside a 1M stream",
     [dict(rw="randwrite", bs="4k", iodepth=1, fsync=1),
      dict(rw="write", bs="1m", iodepth=8)], [0], False),
]

# What --only matches to select the sweep (its rows are "sweep cache=C
# WORKLOAD").
SWEEP_NAMES = ("sweep cache= seq write 64K qd8 seq write 1M qd8 rand write "
               "4K qd32")


def run_healthy(args, plugin, tool, work):
    """The healthy-path workloads (WORKLOADS) and the stripe cache sweep
    that --only selects, on an array of --members members of
    --member-size MiB in `work` and the file plugin over one file of
    the same size; returns (rows, sweep) for report(). Makes and fills
    nothing when --only selects none of them: the parts after it get the
    memory (members on /dev/shm are memory) and the time."""
    if not any(wanted(args, w[0]) for w in WORKLOADS) and not (
            args.sweep and wanted(args, SWEEP_NAMES)):
        return [], []
    members = []
    for i in range(args.members):
        p = os.path.join(work, f"m{i}.img")
        with open(p, "wb") as f:
            f.truncate(args.member_size * MIB)
        members.append(p)
    subprocess.run([tool, "create", "--force", "--chunk", args.chunk,
                    *members], check=True, capture_output=True)
    info = json.loads(subprocess.run(
        [tool, "detail", "--json", *members], check=True,
        capture_output=True, text=True).stdout)
    size = info["array_bytes"]
    peer_file = os.path.join(work, "file.img")
    with open(peer_file, "wb") as f:
        f.truncate(size)

    def uraid_args(extra=(), degraded=False):
        ms = members[1:] if degraded else members
        # Degraded on purpose (md's --run rule wants it said) and
        # read-only, so the member left out does not go stale for the
        # rows after.
        run = ["run=true", "readonly=true"] if degraded else []
        return ([plugin] + [f"member={m}" for m in ms] + run +
                list(args.uraid_arg) + list(extra))

    # Fill both with data so reads read data, not holes.
    log(f"bench: filling {size // MIB} MiB on each side")
    fill_exports_together(args, [["file", peer_file], uraid_args()], work,
                          size)
    balance = memory_balance(members, peer_file, "healthy table")

    rows = []
    for name, jobs, measured, degraded, *extra in WORKLOADS:
        extra = extra[0] if extra else ()
        if args.only and args.only not in name:
            continue
        samples = {"file": [], "uraid": []}
        shares = []
        # The server's counts and CPU cover fio's ramp as well.
        whole = whole_run_scale(jobs, args.runtime)
        for _, side in ab_runs(args.repeat, shares):
            stats = os.path.join(work, "stats.json")
            if side == "file":
                pargs = ["file", peer_file]
            else:
                pargs = uraid_args([f"stats={stats}", *extra],
                                   degraded)
            s = Server(args, side, pargs, work)
            cpu0, calls0 = s.cpu_seconds(), s.io_calls()
            client = ClientAndMachine()
            client.start()
            r = fio(s.uri, jobs, args.runtime, size)
            client.stop()
            cpu, calls = s.cpu_seconds() - cpu0, s.io_calls() - calls0
            rss = s.peak_rss_mib()
            s.stop()
            m = summarize(r, measured)
            others = [i for i in range(len(jobs)) if i not in measured]
            if others:
                # The jobs beside the measured one (the 1M stream
                # beside the 4K write+flush): what they kept matters
                # as much as the measured job's latency (issue 35
                # point 5: the stream at >= 0.7 of the file plugin's).
                m["beside_mbs"] = summarize(r, others)["mbs"]
            all_jobs = summarize(r, range(len(jobs)))
            m["cpu_s_per_gib"] = cpu_s_per_gib(cpu, all_jobs["mbs"], whole,
                                               args.runtime)
            # Per client request, where this machine's system calls are
            # dear (a paravirtual guest: most of a 4K request's CPU is
            # entering and leaving the kernel).
            if all_jobs["requests"]:
                m["io_calls_per_req"] = calls / (all_jobs["requests"] * whole)
                # fio's sleeps cover its ramp and its start too.
                m["client_sleeps_per_req"] = client.sleeps / (
                    all_jobs["requests"] * whole)
            m["idle_share"] = client.idle
            m["rss_mib"] = rss
            if side == "uraid" and os.path.exists(stats):
                with open(stats) as f:
                    c = json.load(f)
                os.unlink(stats)
                writes = sum(
                    r["jobs"][i]["write"]["total_ios"]
                    for i in range(len(jobs)))
                if writes:
                    m["reads_per_write"] = c["member_reads"] / (
                        writes * whole)
                    m["writes_per_write"] = c["member_writes"] / (
                        writes * whole)
                read_bytes = sum(
                    r["jobs"][i]["read"]["io_bytes"]
                    for i in range(len(jobs)))
                if read_bytes and not writes:
                    # Member bytes read per byte delivered: 1.0 is
                    # each member byte read once (degraded too).
                    m["member_bytes_per_byte"] = (
                        c["member_read_bytes"] / (read_bytes * whole))
                m["counters"] = c
            samples[side].append(m)
        med = {side: {k: statistics.median(x[k] for x in v)
                      for k in v[0] if k != "counters"}
               for side, v in samples.items()}
        row = {"workload": name, "file": med["file"],
               "uraid": med["uraid"],
               "counters": samples["uraid"][-1].get("counters", {})}
        f_, u_ = med["file"], med["uraid"]
        row["ratio"] = (u_["mbs"] / f_["mbs"]) if f_["mbs"] else 0
        row["machine_share"] = min(shares)
        row["memory"] = balance
        rows.append(row)
        log(f"bench: {name}: file {f_['mbs']:.0f} MB/s, uraid "
            f"{u_['mbs']:.0f} MB/s, ratio {row['ratio']:.2f}")

    sweep = []
    # Its rows are named "sweep cache=C WORKLOAD"; --only selects them
    # like any other part. The repeats go round every size in turn rather
    # than one size at a time, so a machine that slows or speeds up over
    # the sweep spreads over all sizes instead of reading as a trend from
    # the smallest cache to the largest.
    if args.sweep and wanted(args, SWEEP_NAMES):
        workloads = (
            ("seq write 64K qd8", [dict(rw="write", bs="64k", iodepth=8)]),
            ("seq write 1M qd8", [dict(rw="write", bs="1m", iodepth=8)]),
            ("rand write 4K qd32",
             [dict(rw="randwrite", bs="4k", iodepth=32)]))
        caches = args.sweep.split(",")
        vals = {(c, n): [] for c in caches for n, _ in workloads}
        # The sequential writes are judged (report_sweep_verdict) both on
        # uraid's MB/s and on each run over the file plugin's run just
        # before it: on a shared 2-CPU machine the load moves by more than
        # the 10% judged from one run to the next, and it moves the peer
        # with it, but the peer has noise of its own.
        ratios = {(c, n): [] for c in caches for n, _ in workloads}
        peers = {(c, n): [] for c in caches for n, _ in workloads}

        def run(side, pargs, jobs):
            s = Server(args, side, pargs, work)
            r = fio(s.uri, jobs, args.runtime, size)
            s.stop()
            return summarize(r, [0])["mbs"]
        for rep in range(args.repeat):
            for cache in caches:
                for name, jobs in workloads:
                    peer = (run("file", ["file", peer_file], jobs)
                            if name.startswith("seq write") else None)
                    mbs = run("uraid", uraid_args([f"cache={cache}"]), jobs)
                    vals[(cache, name)].append(mbs)
                    if peer:
                        ratios[(cache, name)].append(mbs / peer)
                        peers[(cache, name)].append(peer)
        for cache in caches:
            for name, _ in workloads:
                mbs = statistics.median(vals[(cache, name)])
                entry = {"cache": cache, "workload": name, "mbs": mbs,
                         "samples": vals[(cache, name)]}
                if ratios[(cache, name)]:
                    entry["vs_file"] = statistics.median(
                        ratios[(cache, name)])
                    entry["vs_file_samples"] = ratios[(cache, name)]
                    entry["file_samples"] = peers[(cache, name)]
                sweep.append(entry)
                log(f"bench: sweep cache={cache} {name}: {mbs:.0f} MB/s" +
                    (f", {entry['vs_file']:.2f}x the file plugin beside it"
                     if "vs_file" in entry else ""))
    return rows, sweep
