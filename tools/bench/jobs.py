# SPDX-License-Identifier: MIT
"""Jobs on members that behave like disks (--job-latency-ms): issue 16's
table, nbdkit file exports behind the rate and delay filters."""

import json
import os
import statistics
import subprocess
import time

from bench.common import (RowLoad, Server, loaded_footnote, owned_tempdir,
                          run_tool, seq_read_mbs, wanted)
from bench.raid6 import raid6_slow_column
from bench.slow_members import (JOB_MEMBER_MBS, RAID6_SLOW_DEGRADED,
                                RAID6_SLOW_IO_ALONE, RAID6_SLOW_REBUILD,
                                log_run, slow_exports, stop_and_remove)

# Targets of the RAID6 part's rows against the member rate (issue 33's
# speed section).
JOB_TARGETS = {RAID6_SLOW_DEGRADED: 0.8, RAID6_SLOW_REBUILD: 0.9}


def bench_jobs_on_slow_members(args, plugin, tool):
    """Issue 16's table: jobs_column for every directory of --job-dirs
    (default: --dir) and every latency of --job-latency-ms, one column
    each, in member bytes per second against the nominal member rate."""
    dirs = [d for d in (args.job_dirs or args.dir).split(",") if d]
    lats = [int(x) for x in str(args.job_latency_ms).split(",") if x != ""]
    columns = []
    for d in dirs:
        fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", d],
                            check=True, capture_output=True,
                            text=True).stdout.split("\n")[0].strip()
        for lat in lats:
            name = f"{fs} ({d})" + (f" + {lat} ms" if lat else "")
            load = RowLoad()
            samples = jobs_column(args, plugin, tool, d, lat, load)
            if wanted(args, RAID6_SLOW_DEGRADED + " " + RAID6_SLOW_REBUILD):
                samples.update(raid6_slow_column(args, plugin, tool, d, lat,
                                                 load))
            columns.append((name, samples, load))
    mib = args.job_member_size
    print(f"\njobs on members like disks: 6 nbdkit file exports per column "
          f"({mib} MiB each, full of data) behind rate=800M burstiness=0.1 "
          f"(and the delay filter where a latency is given: delay-read and "
          f"delay-write), chunk 512K, 4 in the array; member bytes per "
          f"second against the nominal {JOB_MEMBER_MBS:.0f} MB/s, median of "
          f"{args.repeat} "
          f"(wall time from the request to idle). The RAID6 rows: "
          f"{args.raid6_members} more exports like them per column, a RAID6 "
          f"of {args.raid6_members} created on them, read with two left "
          f"out (read-only), then two spares rebuilt in one pass:\n")
    print("| job, 4 members | " + " | ".join(n for n, _, _ in columns) +
          " | target |")
    print("|---|" + "---|" * len(columns) + "---|")
    for job in columns[0][1]:
        cells = []
        target = JOB_TARGETS.get(job)
        for _, samples, load in columns:
            v = samples[job]
            if not v:
                cells.append("")
                continue
            med = statistics.median(v)
            ok = ""
            if target is not None:
                ok = " pass" if med / JOB_MEMBER_MBS >= target else " FAIL"
            peer = ""
            alone = samples.get(RAID6_SLOW_IO_ALONE)
            if job == RAID6_SLOW_REBUILD and alone:
                peer = (f"; {med / statistics.median(alone):.2f}x of the "
                        f"I/O alone")
            cells.append(f"{med:.1f} ({med / JOB_MEMBER_MBS:.2f}x{ok}; "
                         f"{', '.join(f'{x:.0f}' for x in v)}{peer})"
                         f"{load.mark(job)}")
        print(f"| {job} | " + " | ".join(cells) + " | " +
              ("-" if target is None else f"≥ {target:.2f}x") + " |")
    if any(load.mark(job) for _, samples, load in columns
           for job in samples):
        print("\n" + loaded_footnote("cell's runs"))
    return columns


def jobs_column(args, plugin, tool, directory, lat, load):
    """Six nbdkit file exports on `directory`, each behind --filter=rate
    rate=800M (JOB_MEMBER_MBS each way, the nominal member rate) and, when
    `lat` is not 0, --filter=delay (`lat` ms per read and write); the array
    over the first four, served with a control socket. Times, in member
    bytes per second against the nominal rate: a rebuild onto the fifth
    (fail + remove + add, until idle), a check (--wait), the resync of a
    fresh array (uraid create's initial parity over members full of data)
    and a 4 -> 5 reshape onto the sixth (grow --wait). Returns the
    samples; `load` (a RowLoad) gets the machine's share around each row's
    runs."""
    work = owned_tempdir("uraid-bench-jobs-", directory)
    servers = []
    degraded = "degraded seq read 1M qd8 (client MB/s / 3 survivors)"
    samples = {"rebuild": [], "check": [], "resync": [], "reshape 4->5": [],
               degraded: []}

    def idle(ctl):
        while True:
            j = json.loads(subprocess.run(
                [tool, "detail", "--control", ctl, "--json"], check=True,
                capture_output=True, text=True).stdout)
            if (j["job"]["kind"] == "idle" and not j["degraded"] and
                    not j.get("resyncing")):
                return j
            time.sleep(0.02)

    try:
        for rep in range(args.repeat):
            for s in servers:
                s.stop()
            servers.clear()
            uris = slow_exports(args, work, 6, lat, servers)
            load.start()
            # Resync: create's initial parity pass over members of data.
            t0 = time.time()
            subprocess.run([tool, "create", "--force", "--bitmap", "none",
                            "--chunk", "512K", *uris[:4]], check=True,
                           capture_output=True)
            t = time.time() - t0
            det = json.loads(subprocess.run(
                [tool, "detail", "--json", *uris[:4]], check=True,
                capture_output=True, text=True).stdout)
            member = det["member_bytes"] if "member_bytes" in det else \
                det["array_bytes"] // 3
            samples["resync"].append(member / t / 1e6)
            load.ran("resync")
            # Degraded read (issue 16 point 4): the array without its
            # second member, read-only (nothing changes for the jobs
            # below); what the client gets per surviving member, against
            # the member rate: 1.0x is every survivor byte delivered once.
            mbs = seq_read_mbs(args, "jobs-degraded",
                               [plugin] + [f"member={u}" for i, u in
                                           enumerate(uris[:4]) if i != 1] +
                               ["run=true", "readonly=true"], work,
                               det["array_bytes"])
            samples[degraded].append(mbs / 3)
            load.ran(degraded)
            ctl = os.path.join(work, "ctl.sock")
            srv = Server(args, "jobs-uraid",
                         [plugin] + [f"member={u}" for u in uris[:4]] +
                         [f"control={ctl}"], work)
            try:
                # Rebuild onto the fifth export.
                run_tool(tool, "fail", "--control", ctl, uris[1])
                run_tool(tool, "remove", "--control", ctl, uris[1])
                t0 = time.time()
                run_tool(tool, "add", "--control", ctl, uris[4])
                idle(ctl)
                samples["rebuild"].append(member / (time.time() - t0) / 1e6)
                load.ran("rebuild")
                t0 = time.time()
                run_tool(tool, "check", "--control", ctl, "--wait")
                samples["check"].append(member / (time.time() - t0) / 1e6)
                load.ran("check")
                # Reshape 4 -> 5 with the member the rebuild freed.
                t0 = time.time()
                run_tool(tool, "grow", "--control", ctl, "--raid-devices",
                         "5", "--add", uris[5], "--wait")
                samples["reshape 4->5"].append(
                    member / (time.time() - t0) / 1e6)
                load.ran("reshape 4->5")
            finally:
                srv.stop()
            log_run("jobs", directory, lat, rep, samples)
    finally:
        stop_and_remove(servers, work)
    return samples
