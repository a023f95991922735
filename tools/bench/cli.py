# SPDX-License-Identifier: MIT
"""bench.py's options and the order in which the parts run."""

import argparse
import json
import os
import shutil
import signal
import sys

from bench import common
from bench.common import exit_on_signal, owned_tempdir
from bench.degraded_sweep import bench_degraded_sweep
from bench.degraded_write import bench_degraded_write
from bench.delay import bench_delay_members
from bench.healthy import run_healthy
from bench.jobs import bench_jobs_on_slow_members
from bench.policy import bench_bitmap_cost, bench_ppl_cost
from bench.raid6 import bench_raid6
from bench.rebuild import bench_rebuild_scrub
from bench.report import report, report_extras
from bench.reshape import bench_reshape
from bench.resync import bench_resync


def threads_choice(text):
    """--threads: auto, default, or a thread count of at least 1."""
    if text in ("auto", "default"):
        return text
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r}: want auto, default or a thread count (at least 1)")
    return n


def main():
    signal.signal(signal.SIGTERM, exit_on_signal)
    signal.signal(signal.SIGHUP, exit_on_signal)
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--member-size", default=512, type=int, help="MiB")
    ap.add_argument("--members", default=4, type=int)
    ap.add_argument("--chunk", default="512K")
    ap.add_argument("--runtime", default=5, type=int)
    ap.add_argument("--repeat", default=3, type=int)
    ap.add_argument("--sweep", default="0,16M,32M,64M,128M,256M")
    ap.add_argument("--only", default="", help="substring filter")
    ap.add_argument("--uraid-arg", action="append", default=[],
                    help="extra plugin key=value for uraid (repeatable)")
    ap.add_argument("--json", default="")
    # What `uraid serve` gives nbdkit (tools/serve_threads.h), the same -t
    # on both sides of a row (common.threads_args).
    ap.add_argument("--threads", default="auto", type=threads_choice,
                    help="nbdkit -t of the servers measured, uraid's and "
                    "the peers' alike: auto (the default) as `uraid serve` "
                    "chooses, the CPUs (at least 2) where every file a "
                    "server serves is in memory and nbdkit's default "
                    "elsewhere; default: nbdkit's own (16) everywhere; or "
                    "a number")
    # Bitmap cost, rebuild, resync and scrub (EXTRA_PARTS, filtered by --only).
    ap.add_argument("--rebuild-member-size", default=0, type=int,
                    help="MiB per member of the rebuild/scrub array "
                         "(default: --member-size)")
    ap.add_argument("--throttle-kib", default=51200, type=int,
                    help="speed-max (KiB/s) of the throttled rebuild")
    ap.add_argument("--load-min-kib", default=20480, type=int,
                    help="speed-min (KiB/s) of the rebuild beside a client")
    ap.add_argument("--extra-window", default=6.0, type=float,
                    help="seconds over which a throttled rebuild's rate is "
                         "measured")
    ap.add_argument("--resync-repeat", default=1, type=int,
                    help="kill -9 / resync cycles per array")
    ap.add_argument("--resync-regions", default="1,5",
                    type=lambda t: [int(x) for x in t.split(",") if x],
                    help="bitmap regions written before the kill -9")
    ap.add_argument("--resync-write-s", default=1.5, type=float,
                    help="seconds of writes before the kill -9")
    ap.add_argument("--job-latency-ms", default=None,
                    help="also run the jobs-on-slow-members part: rebuild, "
                         "check, resync and reshape over nbdkit file "
                         "exports behind rate=800M and this latency in ms "
                         "(0: the rate filter alone); a comma list gives a "
                         "column each, e.g. 0,2")
    ap.add_argument("--job-dirs", default=None,
                    help="comma list of directories for the members of the "
                         "jobs part, a column each (default: --dir, else "
                         "/dev/shm); e.g. /var/tmp,/dev/shm for disk-like "
                         "and memory-speed files")
    ap.add_argument("--job-member-size", default=256, type=int,
                    help="MiB per member of the jobs-on-slow-members part")
    ap.add_argument("--raid6-members", default=6, type=int,
                    help="members of the RAID6 part's arrays (RAID6 and "
                         "RAID5 alike)")
    ap.add_argument("--raid6-member-size", default=256, type=int,
                    help="MiB per member of the RAID6 part's arrays")
    ap.add_argument("--degraded-member-size", default=256, type=int,
                    help="MiB per member of the degraded sweep's arrays")
    ap.add_argument("--degraded-runtime", default=2, type=int,
                    help="seconds of each run of the degraded sweep")
    ap.add_argument("--delay-ms", default=0, type=int,
                    help="also run the members-behind-the-delay-filter "
                         "benchmark with this member latency (e.g. 2)")
    args = ap.parse_args()
    args.rebuild_member_size = args.rebuild_member_size or args.member_size
    common.NBDKIT_THREADS = args.threads

    plugin = os.path.join(args.build, "nbdplugin", "nbdkit-uraid-plugin.so")
    tool = os.path.join(args.build, "tools", "uraid")
    work = owned_tempdir("uraid-bench-", args.dir)
    try:
        rows, sweep = run_healthy(args, plugin, tool, work)
        report(rows, sweep, args)
        sys.stdout.flush()  # the tables above survive a failing part below
        extras = run_extras(args, plugin, tool, work)
        report_extras(extras, args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": rows, "sweep": sweep, "extras": extras},
                          f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.delay_ms:
        bench_delay_members(args, plugin, tool)
    if args.job_latency_ms is not None:
        bench_jobs_on_slow_members(args, plugin, tool)


def run_extras(args, plugin, tool, work):
    """Runs the parts of EXTRA_PARTS that --only selects."""
    return {"bitmap_cost": bench_bitmap_cost(args, plugin, tool, work),
            "ppl_cost": bench_ppl_cost(args, plugin, tool, work),
            "rebuild": bench_rebuild_scrub(args, plugin, tool, work),
            "resync": bench_resync(args, plugin, tool, work),
            "reshape": bench_reshape(args, plugin, tool, work),
            "raid6": bench_raid6(args, plugin, tool, work),
            "degraded_sweep": bench_degraded_sweep(args, plugin, tool, work),
            "degraded_write": bench_degraded_write(args, plugin, tool, work)}
