# SPDX-License-Identifier: MIT
"""Sequential writes to a degraded RAID5 array against nbdkit's file
plugin: what the write cache's hold gives back (docs/architecture.md,
"What the write cache gathers"). While the array cannot spare a member a
gathered write is acknowledged only once its stripe is on the members, so
a client whose requests in flight span a stripe still gets full-stripe
writes, and one whose queue is shallower writes partial stripes. No
target: the rows keep that cost in sight (it was 25-40% when the cache
wrote every piece through on a degraded array)."""

import os
import shutil
import statistics

from bench.common import (ab_with_counters, filled_array_and_peer, log,
                          loaded_footnote, loaded_mark, member_args, wanted)

PART = "degraded write"
# (request, qd): a 1.5 MiB stripe (4 members, 512K chunks) is spanned by
# the requests in flight at 1M and 256K qd8, not at 64K qd8.
CLIENTS = [("1M", 8), ("256K", 8), ("64K", 8)]
MEMBERS = 4
CHUNK = "512K"


def row_name(req, qd):
    return f"{PART}: seq write {req} qd{qd}"


def bench_degraded_write(args, plugin, tool, work):
    """The CLIENTS that --only selects, on one RAID5 array of MEMBERS x
    --degraded-member-size MiB (chunk CHUNK) made in `work` and filled,
    served without its second member (run=true, writable), against the
    file plugin over a filled peer file of the array's size; fio
    sequential write, --degraded-runtime s, median of --repeat with the
    sides alternating. Returns the rows."""
    clients = [(req, qd) for req, qd in CLIENTS
               if wanted(args, row_name(req, qd))]
    if not clients:
        return []
    d = os.path.join(work, "dwrite")
    os.makedirs(d)
    rows = []
    try:
        paths, peer, size = filled_array_and_peer(
            args, plugin, tool, d, MEMBERS, CHUNK, args.degraded_member_size,
            PART)
        for req, qd in clients:
            rows.append(measure(args, plugin, paths, peer, size, d, req, qd))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return rows


def measure(args, plugin, paths, peer, size, work, req, qd):
    job = [dict(rw="write", bs=req.lower(), iodepth=qd, ramp_time=0)]
    stats = os.path.join(work, "stats.json")
    degraded = member_args(plugin, paths[:1] + paths[2:], args,
                           ["run=true", f"stats={stats}"])
    mbs, runs, shares = ab_with_counters(args, "dwrite", peer, degraded,
                                         stats, work, job,
                                         args.degraded_runtime, size)
    held = [c["cache_held_writes"] for _, c in runs]
    timeouts = [c["cache_hold_timeouts"] for _, c in runs]
    reads = [c["member_read_bytes"] / max(r["jobs"][0]["write"]["io_bytes"], 1)
             for r, c in runs]
    med = {side: statistics.median(v) for side, v in mbs.items()}
    row = {"part": row_name(req, qd), "request": req, "qd": qd,
           "file_mbs": med["file"], "uraid_mbs": med["uraid"],
           "ratio": med["uraid"] / med["file"] if med["file"] else 0.0,
           "held_writes": statistics.median(held),
           "hold_timeouts": statistics.median(timeouts),
           "member_read_bytes_per_byte": statistics.median(reads),
           "samples": mbs, "machine_share": min(shares)}
    log(f"bench: {row['part']}: file {med['file']:.0f} MB/s, uraid "
        f"{med['uraid']:.0f} MB/s, ratio {row['ratio']:.2f}, held "
        f"{row['held_writes']:.0f}, timeouts {row['hold_timeouts']:.0f}")
    return row


def report_degraded_write(rows, args):
    if not rows:
        return
    print(f"\n{PART}: a RAID5 array of {MEMBERS} x {args.degraded_member_size}"
          f" MiB on {args.dir}, chunk {CHUNK}, filled, served without its "
          f"second member (writable), against the file plugin over a filled "
          f"file of the array's size; fio sequential write, "
          f"{args.degraded_runtime}s x {args.repeat} (medians, sides "
          f"alternating, no ramp). Held: pieces acknowledged once their "
          f"stripe was on the members; timeouts: holds whose stripe did not "
          f"fill (written partial). No target:\n")
    print("| workload | file MB/s | uraid MB/s | uraid/file | held pieces | "
          "hold timeouts | member read B per B written | samples uraid / "
          "file |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["samples"]
        print(f"| {r['part'].split(': ', 1)[1]} | {r['file_mbs']:.0f} | "
              f"{r['uraid_mbs']:.0f} | {r['ratio']:.2f}"
              f"{loaded_mark([r['machine_share']])} | "
              f"{r['held_writes']:.0f} | {r['hold_timeouts']:.0f} | "
              f"{r['member_read_bytes_per_byte']:.2f} | "
              f"{', '.join(f'{x:.0f}' for x in s['uraid'])} / "
              f"{', '.join(f'{x:.0f}' for x in s['file'])} |")
    if any(loaded_mark([r["machine_share"]]) for r in rows):
        print("\n" + loaded_footnote("row's runs"))
