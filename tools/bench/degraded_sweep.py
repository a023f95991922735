# SPDX-License-Identifier: MIT
"""Issue 35 point 3: degraded sequential reads in the shapes the bench can
ask for (3-8 members, chunks 64K-1M, requests 64K-4M, qd 1-32), each
against nbdkit's file plugin in the same run and with the member bytes
read per byte delivered.

The grid (SHAPES) is pruned from the full cross of members {3,4,6,8} x
chunk {64K,512K,1M} x request {64K,1M,4M} x qd {1,8,32} (108 shapes, about
half an hour here) to 24 that run in about seven minutes: the client axes
(request x qd) crossed in full on the bench's default array (4 members,
512K chunk), where the issue's failing reading was taken (1M qd8); the
array axes at their corners (3 and 8 members, 64K and 1M chunks) and one
between (6 x 512K), each with the diagonal from the smallest request at
qd 1 (per-request cost; a short read of the missing chunk reads every
survivor's piece of it, which later requests must not read again) through
1M qd 8 to the largest at qd 32 (bandwidth)."""

import os
import shutil
import statistics

from bench.common import (ab_with_counters, filled_array_and_peer, log,
                          loaded_footnote, loaded_mark, member_args,
                          memory_balance, memory_footnote, memory_note,
                          wanted)

PART = "degraded sweep"
EVERY_CLIENT = [(req, qd) for req in ("64K", "1M", "4M") for qd in (1, 8, 32)]
DIAGONAL = [("64K", 1), ("1M", 8), ("4M", 32)]
# (members, chunk, [(request, qd), ...]): see the module's note.
SHAPES = [(4, "512K", EVERY_CLIENT),
          (3, "64K", DIAGONAL), (3, "1M", DIAGONAL),
          (8, "64K", DIAGONAL), (8, "1M", DIAGONAL),
          (6, "512K", DIAGONAL)]
# Issue 35's goals: uraid/file MB/s at least this, and member bytes read
# per byte delivered at most TARGET_BYTES (each survivor byte read once,
# as data or as what rebuilds the missing chunk). BYTES_SLACK covers the
# superblock and bitmap reads of assembly and the last stripe's survivors
# read for a request the run's end cut short.
TARGET_RATIO = 0.85
TARGET_BYTES = 1.0
BYTES_SLACK = 0.02


def row_name(members, chunk, req, qd):
    return f"{PART}: {members} x {chunk}, {req} qd{qd}"


def bench_degraded_sweep(args, plugin, tool, work):
    """The SHAPES that --only selects (by row_name), each array made in
    `work` (--degraded-member-size MiB per member, RAID5, left-symmetric,
    no bitmap) and filled, a peer file of the array's size filled beside
    it; each row served without the array's second member (run=true,
    read-only) against the file plugin over the peer, the same fio
    sequential read (ramp_time=0, so that fio's bytes and the array's
    counters cover the same run), --degraded-runtime s, median of
    --repeat with the sides alternating. Returns the rows."""
    rows = []
    for members, chunk, clients in SHAPES:
        clients = [(req, qd) for req, qd in clients
                   if wanted(args, row_name(members, chunk, req, qd))]
        if not clients:
            continue
        d = os.path.join(work, f"dsweep-{members}-{chunk}")
        os.makedirs(d)
        try:
            paths, peer, size = filled_array_and_peer(
                args, plugin, tool, d, members, chunk,
                args.degraded_member_size, PART, ["--bitmap", "none"])
            balance = memory_balance(paths[:1] + paths[2:], peer,
                                     f"{PART}: {members} x {chunk}")
            for req, qd in clients:
                row = measure(args, plugin, paths, peer, size, d,
                              (members, chunk, req, qd))
                row["memory"] = balance
                rows.append(row)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    return rows


def measure(args, plugin, paths, peer, size, work, shape):
    """One row: `shape` is (members, chunk, request, qd)."""
    members, chunk, req, qd = shape
    job = [dict(rw="read", bs=req.lower(), iodepth=qd, ramp_time=0)]
    stats = os.path.join(work, "stats.json")
    degraded = member_args(plugin, paths[:1] + paths[2:], args,
                           ["run=true", "readonly=true", f"stats={stats}"])
    mbs, runs, shares = ab_with_counters(args, "dsweep", peer, degraded,
                                         stats, work, job,
                                         args.degraded_runtime, size)
    per_byte = [c["member_read_bytes"] /
                max(r["jobs"][0]["read"]["io_bytes"], 1) for r, c in runs]
    med = {side: statistics.median(v) for side, v in mbs.items()}
    row = {"part": row_name(*shape), "members": members, "chunk": chunk,
           "request": req, "qd": qd, "file_mbs": med["file"],
           "uraid_mbs": med["uraid"],
           "ratio": med["uraid"] / med["file"] if med["file"] else 0.0,
           "member_bytes_per_byte": statistics.median(per_byte),
           "samples": mbs, "machine_share": min(shares)}
    row["pass"] = (row["ratio"] >= TARGET_RATIO and
                   row["member_bytes_per_byte"] <= TARGET_BYTES + BYTES_SLACK)
    log(f"bench: {row['part']}: file {med['file']:.0f} MB/s, uraid "
        f"{med['uraid']:.0f} MB/s, ratio {row['ratio']:.2f}, "
        f"{row['member_bytes_per_byte']:.3f} member B/B")
    return row


def report_degraded_sweep(rows, args):
    """The sweep's table: a row per shape against both targets."""
    if not rows:
        return
    print(f"\n{PART} (issue 35 point 3): RAID5 arrays of "
          f"{args.degraded_member_size} MiB members on {args.dir}, filled, "
          f"served without their second member (read-only), against the "
          f"file plugin over a filled file of the array's size; fio "
          f"sequential read, {args.degraded_runtime}s x {args.repeat} "
          f"(medians, sides alternating, no ramp). Targets: uraid/file "
          f"≥ {TARGET_RATIO:.2f} and member bytes read per byte delivered "
          f"≤ {TARGET_BYTES:.1f} (+{BYTES_SLACK:.2f} for assembly's "
          f"metadata reads and the run's cut-off last stripe):\n")
    print("| members | chunk | request | qd | file MB/s | uraid MB/s | "
          "uraid/file | member B/B | | memory members / peer | "
          "samples uraid / file |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        s = r["samples"]
        print(f"| {r['members']} | {r['chunk']} | {r['request']} | "
              f"{r['qd']} | {r['file_mbs']:.0f} | {r['uraid_mbs']:.0f} | "
              f"{r['ratio']:.2f} | {r['member_bytes_per_byte']:.3f} | "
              f"{'pass' if r['pass'] else 'FAIL'}"
              f"{loaded_mark([r['machine_share']])} | "
              f"{r['memory']['ratio']:.2f}{memory_note(r['memory'])} | "
              f"{', '.join(f'{x:.0f}' for x in s['uraid'])} / "
              f"{', '.join(f'{x:.0f}' for x in s['file'])} |")
    failed = [r for r in rows if not r["pass"]]
    print(f"\n{len(rows) - len(failed)} of {len(rows)} shapes pass" +
          (": FAIL " + "; ".join(r["part"].split(": ", 1)[1]
                                  for r in failed) if failed else "."))
    if any(loaded_mark([r["machine_share"]]) for r in rows):
        print("\n" + loaded_footnote("row's runs"))
    if any(memory_note(r["memory"]) for r in rows):
        print("\n" + memory_footnote())
