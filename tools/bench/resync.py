# SPDX-License-Identifier: MIT
"""Resync after a kill -9, with the write-intent bitmap and without."""

import os
import shutil
import statistics
import time

from bench.common import (MIB, UNTHROTTLED_KIB_S, CtlServer, fill_array,
                          fio_in_background, log, make_array, member_args,
                          run_tool, wait_job, wanted)


def bench_resync(args, plugin, tool, work):
    """Random writes into a few bitmap regions, kill -9, serve again: how
    much the resync goes through and how long until the array is clean,
    with the bitmap and without."""
    rows = []
    bitmap_chunk = None
    for side, bitmap in (("bitmap", True), ("no bitmap", False)):
        name = f"resync after crash: {side}"
        if not wanted(args, name):
            continue
        d = os.path.join(work, "rs-" + side.replace(" ", ""))
        members, info = make_array(tool, d, args, args.member_size, bitmap)
        size = info["array_bytes"]
        member_bytes = info["member_bytes"]
        dd = info["data_disks"]
        log(f"bench: {name}: filling {size // MIB} MiB")
        fill_array(args, plugin, members, work, size)
        samples = []
        for rep in range(args.resync_repeat):
            srv = CtlServer(member_args(plugin, members, args), work, "rs")
            try:
                det = srv.detail()
                if det["bitmap"]["present"]:
                    bitmap_chunk = det["bitmap"]["chunk_bytes"]
                # The same array offsets on both sides: regions of the
                # bitmap's chunk (64 MiB of each member by default).
                b = bitmap_chunk or 64 * MIB
                regions = [r for r in args.resync_regions if
                           (r + 1) * b <= member_bytes]
                jobs = [dict(rw="randwrite", bs="4k", iodepth=16,
                             offset=r * b * dd + b * dd // 4,
                             size=b * dd // 2) for r in regions]
                join = fio_in_background(srv.uri, jobs, 60, size)
                time.sleep(1.0 + args.resync_write_s)  # ramp + writes
                det = srv.detail()
                srv.kill9()
                join(timeout=60)
            finally:
                srv.stop()
            dirty = det["bitmap"]["dirty_chunks"] if bitmap else None
            was_clean = det["clean"]
            t0 = time.time()
            srv = CtlServer(member_args(plugin, members, args), work, "rs")
            try:
                saw = False
                while True:
                    d2 = srv.detail()
                    saw = saw or d2["resyncing"]
                    if not d2["resyncing"] and d2["job"]["kind"] == "idle":
                        t1 = time.time()
                        break
                    if time.time() - t0 > 900:
                        raise RuntimeError("resync did not end in 900 s")
                    time.sleep(0.02)
                c = d2["counters"]
                # Parity must be right afterwards.
                before = d2["last_job"]
                run_tool(tool, "set", "--control", srv.ctl, "--speed-min",
                         str(UNTHROTTLED_KIB_S), "--speed-max",
                         str(UNTHROTTLED_KIB_S))
                run_tool(tool, "check", "--control", srv.ctl)
                _, d3 = wait_job(srv, "check", before)
                mism = d3["last_job"]["mismatches"]
            finally:
                srv.stop()
            expect = (dirty * bitmap_chunk if bitmap else member_bytes)
            samples.append({
                "regions_written": len(regions), "dirty_chunks": dirty,
                "clean_at_kill": was_clean, "saw_resyncing": saw,
                "bitmap_chunk": bitmap_chunk if bitmap else None,
                "expected_bytes": expect,
                "resync_bytes": c["resync_bytes"],
                "resync_bitmap_chunks": c["resync_bitmap_chunks"],
                "resynced_stripes": c["resynced_stripes"],
                "resync_repairs": c["resync_repairs"],
                "seconds": t1 - t0, "mismatches_after": mism})
            log(f"bench: {name}: {dirty} dirty regions at the kill, resync "
                f"went through {c['resync_bytes'] // MIB} MiB per member "
                f"({c['resync_bitmap_chunks']} bitmap chunks) in "
                f"{t1 - t0:.2f}s; check after: {mism} mismatches")
        row = dict(samples[-1])
        row["seconds"] = statistics.median(s["seconds"] for s in samples)
        row["part"] = name
        row["member_bytes"] = member_bytes
        row["mismatches_after"] = sum(s["mismatches_after"] for s in samples)
        row["samples"] = samples
        rows.append(row)
        shutil.rmtree(d, ignore_errors=True)
    for f in ("rs.ctl",):
        p = os.path.join(work, f)
        if os.path.exists(p):
            os.unlink(p)
    return rows
