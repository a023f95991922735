# SPDX-License-Identifier: MIT
"""Members that behave like disks: nbdkit file exports behind the rate
(and delay) filters, shared by the jobs table (jobs.py) and its RAID6
column part (raid6.py), with the names of the RAID6 part's rows, which
the jobs table prints and targets."""

import os
import shutil
import subprocess

from bench.common import Server, log

# The member rate of these exports: nbdkit's rate=800M, in MB/s each way.
JOB_MEMBER_MBS = 100.0
# Rows of the RAID6 column part (raid6.raid6_slow_column) and their targets
# against the member rate (issue 33's speed section).
RAID6_SLOW_DEGRADED = ("RAID6 degraded by two: seq read 1M qd8 (client "
                       "MB/s / survivors)")
RAID6_SLOW_REBUILD = "RAID6 rebuild of two spares in one pass (per target)"
# The rebuild row's peer: the same member I/O by fio alone (raid6.py's
# pair_io_alone_mbs), per target.
RAID6_SLOW_IO_ALONE = ("RAID6 two spares' member I/O alone (fio: survivors "
                       "read, targets written; per target)")


def log_run(what, directory, lat, rep, samples):
    """One line per repetition of a column: each row's last sample."""
    log(f"bench: {what} on {directory} + {lat} ms, run {rep + 1}: " +
        ", ".join(f"{k} {v[-1]:.0f} MB/s" for k, v in samples.items()))


def stop_and_remove(servers, work):
    """Stops the exports of a column and removes their work directory."""
    for s in servers:
        s.stop()
    shutil.rmtree(work, ignore_errors=True)


def slow_exports(args, work, count, lat, servers, prefix="j"):
    """`count` nbdkit file exports of --job-member-size MiB of random data
    in `work`, each behind --filter=rate rate=800M (JOB_MEMBER_MBS each
    way) and, when `lat` is not 0, --filter=delay (`lat` ms per read and
    write); appended to `servers`; returns their URIs."""
    mib = args.job_member_size
    uris = []
    for i in range(count):
        img = os.path.join(work, f"{prefix}{i}.img")
        subprocess.run(["dd", "if=/dev/urandom", f"of={img}", "bs=1M",
                        f"count={mib}", "status=none"], check=True)
        delay = ([f"delay-read={lat}ms", f"delay-write={lat}ms"]
                 if lat else [])
        s = Server(args, f"{prefix}{i}",
                   ["--filter=rate"] +
                   (["--filter=delay"] if lat else []) +
                   ["file", img, "rate=800M",
                    # No 2 s burst (the default): the members are too
                    # small to hide it.
                    "burstiness=0.1"] + delay, work, member=True)
        servers.append(s)
        uris.append(s.uri)
    return uris
