# SPDX-License-Identifier: MIT
"""Rebuild (unthrottled, throttled, beside a client) and check/repair
scrubs on one filled array."""

import os
import shutil
import statistics
import time

from bench.common import (EXTRA_PARTS, MIB, UNTHROTTLED_KIB_S, CtlServer,
                          fill_array, fio, fio_in_background, load_note, log,
                          machine_share, make_array, member_args,
                          member_read_mbs,
                          rebuild_io_ceiling_mbs, run_tool, sample_done,
                          summarize, touched_file, wait_job, wanted)

# An unthrottled rebuild against fio doing its member I/O alone (n-1
# sequential reads and one write at once, rebuild_io_ceiling_mbs).
REBUILD_VS_IO_CEILING = 0.7


def bench_rebuild_scrub(args, plugin, tool, work):
    """Rebuild onto a fresh member (unthrottled, throttled, beside a
    client) and check/repair scrubs, all on one filled array, against one
    member's sequential read bandwidth."""
    parts = [n for n in EXTRA_PARTS
             if n.startswith(("rebuild", "scrub")) and wanted(args, n)]
    if not parts:
        return {}
    d = os.path.join(work, "rb")
    members, info = make_array(tool, d, args, args.rebuild_member_size)
    size = info["array_bytes"]
    member_bytes = info["member_bytes"]
    log(f"bench: rebuild: filling {size // MIB} MiB")
    fill_array(args, plugin, members, work, size)
    read_mbs = member_read_mbs(members[1], 3, args.repeat)
    log(f"bench: one member's sequential read (fio psync 1M): "
        f"{read_mbs:.0f} MB/s")
    ceiling_mbs = rebuild_io_ceiling_mbs(
        members[:-1], os.path.join(d, "ceiling.img"), args.repeat)
    log(f"bench: a rebuild's member I/O alone ({len(members) - 1} reads and "
        f"a write, fio): {ceiling_mbs:.0f} MB/s per member")
    out = {"member_read_mbs": read_mbs, "member_bytes": member_bytes,
           "rebuild_io_ceiling_mbs": ceiling_mbs,
           "member_mib": args.rebuild_member_size, "rows": []}
    srv = CtlServer(member_args(plugin, members, args), work, "rb")
    ctl = srv.ctl
    state = {"cur": members[-1], "n": 0}

    def set_speed(min_kib, max_kib):
        # Raise max before min (and lower min before max): min > max is
        # refused.
        run_tool(tool, "set", "--control", ctl, "--speed-min", str(min_kib),
                 "--speed-max", str(max_kib))

    def degrade():
        """Fails and removes the last slot's member: the array runs
        degraded until start_rebuild adds its replacement."""
        cur = state["cur"]
        run_tool(tool, "fail", "--control", ctl, cur)
        run_tool(tool, "remove", "--control", ctl, cur)

    def start_rebuild(degraded=False):
        """Degrades the array (unless `degraded`: degrade() did), adds a
        fresh file as the rebuild target, its memory touched (touched_file,
        before the old member's pages are freed), as the fio peer's;
        returns (time of the add, last_job before it)."""
        cur = state["cur"]
        if not degraded:
            degrade()
        state["n"] += 1
        new = os.path.join(d, f"new{state['n']}.img")
        touched_file(new, args.rebuild_member_size * MIB)
        os.unlink(cur)
        before = srv.detail()["last_job"]
        t0 = time.time()
        run_tool(tool, "add", "--control", ctl, new)
        state["cur"] = new
        return t0, before

    def finish(before):
        t1, det = wait_job(srv, "recover", before)
        lj = det["last_job"]
        if lj["result"] != "completed":
            raise RuntimeError(f"rebuild: {lj}")
        # The tool's own view of it: exit 0 when the last job completed.
        run_tool(tool, "detail", "--control", ctl, "--wait")
        return t1, lj

    def windowed(t0, settle, window, may_end=False):
        """Rate of the running job over [t0+settle, t0+settle+window]:
        (rate, average from t0, detail, whether it ended in the window).
        With `may_end`, a rebuild that ends inside the window is measured
        up to the sample after its end: its last bytes over the whole
        time to that sample, so the rate is a lower bound (rows that judge
        a floor, such as the rebuild beside a client against speed-min)."""
        time.sleep(max(0.0, t0 + settle - time.time()))
        ta, da, ka, _ = sample_done(srv)
        if ka != "recover":
            raise RuntimeError(
                "rebuild ended before its measuring window began: use "
                "larger --rebuild-member-size")
        time.sleep(max(0.0, t0 + settle + window - time.time()))
        tb, db, kb, det = sample_done(srv)
        if kb == "recover":
            return (db - da) / (tb - ta), db / (tb - t0), det, False
        lj = det["last_job"]
        if not may_end or lj["kind"] != "recover" or \
                lj["result"] != "completed":
            raise RuntimeError(
                "rebuild ended inside the measuring window: use larger "
                f"--rebuild-member-size (last job: {lj})")
        db = lj["total_bytes"]
        return (db - da) / (tb - ta), db / (tb - t0), det, True

    def rebuild_beside(jobs, runtime, ramp, degraded=False):
        """A rebuild started `ramp` s into fio `jobs` (runtime s), at the
        limits in force; returns (rate over the window, average from the
        add, the client's summary) once both are done, unthrottled again.
        `degraded`: degrade() already ran."""
        join = fio_in_background(srv.uri, jobs, runtime, size)
        time.sleep(ramp)  # fio's ramp
        t0, before = start_rebuild(degraded)
        rate, avg, _, ended = windowed(t0, 1.0, args.extra_window,
                                       may_end=True)
        r = join(timeout=120)
        set_speed(UNTHROTTLED_KIB_S, UNTHROTTLED_KIB_S)
        finish(before)
        if isinstance(r, Exception) or r is None:
            raise RuntimeError(f"fio beside the rebuild: {r}")
        return rate, avg, summarize(r, [0]), ended

    try:
        if wanted(args, "rebuild: unthrottled"):
            set_speed(UNTHROTTLED_KIB_S, UNTHROTTLED_KIB_S)
            walls, engines, shares = [], [], [machine_share()]
            for _ in range(args.repeat):
                t0, before = start_rebuild()
                t1, lj = finish(before)
                shares.append(machine_share())
                walls.append(lj["total_bytes"] / (t1 - t0) / 1e6)
                engines.append(lj["bytes_per_s"] / 1e6)
                log(f"bench: rebuild unthrottled: {lj['total_bytes'] // MIB}"
                    f" MiB per member in {t1 - t0:.2f}s = {walls[-1]:.0f} "
                    f"MB/s (engine {engines[-1]:.0f} MB/s)")
            wall = statistics.median(walls)
            out["rows"].append({
                "part": "rebuild: unthrottled", "mbs": wall,
                "engine_mbs": statistics.median(engines),
                # What bounds a rebuild on memory members is the copying
                # of its member I/O (issue 35), not one member's read: the
                # target is against fio doing that I/O alone.
                "vs_read": wall / read_mbs,
                "target": f"≥ {REBUILD_VS_IO_CEILING:.2f}× member I/O alone",
                "vs_io_ceiling": wall / ceiling_mbs,
                "pass": wall / ceiling_mbs >= REBUILD_VS_IO_CEILING,
                "samples": walls, "machine_share": min(shares),
                "how": f"median of {args.repeat} whole rebuilds, add → "
                       f"done, polled every 20 ms; {load_note(shares)}"})
        if wanted(args, "rebuild: throttled"):
            lim = args.throttle_kib
            set_speed(min(1000, lim), lim)
            t0, before = start_rebuild()
            rate, avg, _, _ = windowed(t0, 1.0, args.extra_window)
            set_speed(UNTHROTTLED_KIB_S, UNTHROTTLED_KIB_S)
            finish(before)
            err = rate / (lim * 1024) - 1
            log(f"bench: rebuild throttled to {lim} KiB/s: {rate / 1e6:.1f}"
                f" MB/s ({err * 100:+.1f}%), from the add {avg / 1e6:.1f} MB/s")
            out["rows"].append({
                "part": "rebuild: throttled", "mbs": rate / 1e6,
                "engine_mbs": None, "avg_from_start_mbs": avg / 1e6,
                "vs_read": rate / 1e6 / read_mbs,
                "limit_kib_s": lim, "limit_mbs": lim * 1024 / 1e6,
                "error": err, "target": "±15% of --speed-max",
                "pass": abs(err) <= 0.15,
                "how": f"slope of done_bytes over {args.extra_window}s, "
                       f"from 1s after the add; speed-min {min(1000, lim)}"})
        if wanted(args, "rebuild: under client load"):
            lo = args.load_min_kib
            set_speed(lo, UNTHROTTLED_KIB_S)
            runtime = 1.5 + 1.0 + args.extra_window + 1.5
            rate, avg, client, ended = rebuild_beside(
                [dict(rw="randwrite", bs="4k", iodepth=32)],
                int(runtime + 0.999), 1.5)
            # A rebuild this fast beside the client ends inside the window
            # (2 GiB members rebuilt in about 3 s at a 25% busy share):
            # its rate then counts to the sample after its end, a floor.
            how_end = (" (the rebuild ended inside the window: rate to the "
                       "first sample after its end, a lower bound)"
                       if ended else "")
            ratio = rate / (lo * 1024)
            log(f"bench: rebuild beside fio randwrite 4K qd32 (min {lo} "
                f"KiB/s): {rate / 1e6:.1f} MB/s = {ratio:.2f}x min; client "
                f"{client['iops']:.0f} IOPS")
            out["rows"].append({
                "part": "rebuild: under client load", "mbs": rate / 1e6,
                "engine_mbs": None, "avg_from_start_mbs": avg / 1e6,
                "vs_read": rate / 1e6 / read_mbs,
                "limit_kib_s": lo, "limit_mbs": lo * 1024 / 1e6,
                "error": ratio - 1,
                "target": "≥ --speed-min (-5% for measuring)",
                "pass": ratio >= 0.95, "client": client,
                "how": f"slope of done_bytes over {args.extra_window}s, "
                       f"from 1s after the add, fio randwrite 4K qd32 "
                       f"running; speed-max unthrottled{how_end}"})
        if wanted(args, "rebuild: default limits beside a 1M stream"):
            # Issue 16's point 5: with md's default limits (min 1000 KiB/s,
            # max 200000) and the default busy share, a client stream keeps
            # most of its throughput and the rebuild still moves. The client
            # alone first (median of --repeat each, healthy, then degraded),
            # then the same fio beside a rebuild.
            stream = [dict(rw="write", bs="1m", iodepth=8)]
            run_s = int(1.0 + args.extra_window + 1.5 + 0.999)

            def alone_stream():
                runs = [summarize(fio(srv.uri, stream, run_s, size), [0])
                        for _ in range(args.repeat)]
                return {k: statistics.median(a[k] for a in runs)
                        for k in ("mbs", "iops", "p99_us")}

            # The client alone twice: on the healthy array, and on the same
            # array degraded (its member failed and removed, no rebuild
            # yet). A degraded array acknowledges a write only once its
            # stripe is on the members (the write cache's hold, the
            # `degraded write` rows), whether or not a rebuild runs, so the
            # rebuild's own cost to the client is against the second.
            healthy = alone_stream()
            degrade()
            alone = alone_stream()
            # One request: the pair is checked together (min <= max).
            run_tool(tool, "set", "--control", ctl, "--speed-min", "1000",
                     "--speed-max", "200000", "--busy-share", "25")
            rate, avg, client, _ = rebuild_beside(stream, run_s + 1, 1.0,
                                                  degraded=True)
            keep = client["mbs"] / alone["mbs"] if alone["mbs"] else 0
            keep_healthy = (client["mbs"] / healthy["mbs"]
                            if healthy["mbs"] else 0)
            unthrottled = next((x["mbs"] for x in out["rows"]
                                if x["part"] == "rebuild: unthrottled"),
                               None)
            if unthrottled is None:  # that part was not selected: one run
                set_speed(UNTHROTTLED_KIB_S, UNTHROTTLED_KIB_S)
                t0u, b0 = start_rebuild()
                t1u, lj = finish(b0)
                unthrottled = lj["total_bytes"] / (t1u - t0u) / 1e6
            # The share is of what the rebuild could have had: its own
            # unthrottled rate, capped by md's default max (200000 KiB/s).
            unthrottled = min(unthrottled, 200000 * 1024 / 1e6)
            share = rate / 1e6 / unthrottled
            log(f"bench: rebuild at default limits beside a 1M write stream: "
                f"{rate / 1e6:.1f} MB/s ({share:.2f}x unthrottled); client "
                f"{client['mbs']:.0f} MB/s ({keep:.2f}x alone degraded, "
                f"{alone['mbs']:.0f}; {keep_healthy:.2f}x alone healthy, "
                f"{healthy['mbs']:.0f}), p99 {client['p99_us']:.0f} µs "
                f"(alone degraded {alone['p99_us']:.0f}, healthy "
                f"{healthy['p99_us']:.0f})")
            out["rows"].append({
                "part": "rebuild: default limits beside a 1M stream",
                "mbs": rate / 1e6, "engine_mbs": None,
                "avg_from_start_mbs": avg / 1e6,
                "vs_read": rate / 1e6 / read_mbs, "client": client,
                "client_alone": alone, "client_keep": keep,
                "client_alone_healthy": healthy,
                "client_keep_healthy": keep_healthy, "share": share,
                "target": "rebuild ≥ 0.25× unthrottled, client ≥ 0.70× "
                          "alone on the degraded array",
                "pass": share >= 0.25 and keep >= 0.70,
                "how": f"slope of done_bytes over {args.extra_window}s from 1s "
                       f"after the add; md's default min/max, busy share 25%; "
                       f"rebuild {share:.2f}x unthrottled, capped at the "
                       f"default max ({unthrottled:.0f} MB/s); client keeps "
                       f"{keep:.2f}x of {alone['mbs']:.0f} MB/s alone on the "
                       f"degraded array (p99 {alone['p99_us']:.0f} µs), "
                       f"{keep_healthy:.2f}x of {healthy['mbs']:.0f} MB/s "
                       f"alone healthy (p99 {healthy['p99_us']:.0f} µs)"})
        for kind in ("check", "repair"):
            name = f"scrub: {kind}"
            if not wanted(args, name):
                continue
            set_speed(UNTHROTTLED_KIB_S, UNTHROTTLED_KIB_S)
            walls, engines, mism = [], [], 0
            for _ in range(args.repeat):
                before = srv.detail()["last_job"]
                t0 = time.time()
                run_tool(tool, kind, "--control", ctl)
                t1, det = wait_job(srv, kind, before)
                lj = det["last_job"]
                if lj["result"] != "completed":
                    raise RuntimeError(f"{kind}: {lj}")
                mism += lj["mismatches"]
                walls.append(lj["total_bytes"] / (t1 - t0) / 1e6)
                engines.append(lj["bytes_per_s"] / 1e6)
                log(f"bench: {kind} unthrottled: {walls[-1]:.0f} MB/s "
                    f"(engine {engines[-1]:.0f} MB/s), {lj['mismatches']} "
                    f"mismatches")
            wall = statistics.median(walls)
            out["rows"].append({
                "part": name, "mbs": wall,
                "engine_mbs": statistics.median(engines),
                "vs_read": wall / read_mbs, "target": "-", "pass": None,
                "mismatches": mism, "samples": walls,
                "how": f"median of {args.repeat} whole scrubs"})
    finally:
        srv.stop()
        shutil.rmtree(d, ignore_errors=True)
    return out
