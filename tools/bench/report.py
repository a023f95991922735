# SPDX-License-Identifier: MIT
"""The tables bench.py prints: the healthy-path table and the extra
parts' tables."""

import os
import platform
import statistics
import subprocess
import time

from bench.common import (FIRST_TOUCH_NOTE, LOADED_SHARE, MIB,
                          loaded_footnote, loaded_mark, memory_footnote,
                          memory_note, threads_header)
from bench.degraded_sweep import report_degraded_sweep
from bench.degraded_write import report_degraded_write

# Issue 35's goals for the healthy paths, as ratios to the file plugin in
# the same run (what bounds them): uraid/file MB/s at least this, and for
# the sequential read also CPU per GiB at most 1.2x the file plugin's.
HEALTHY_TARGETS = {
    "seq read 1M qd8": 0.9,
    "seq write 1M qd8": 0.75,  # (n-1)/n of the bytes are data
    "rand write 4K qd32": 0.5,  # four member I/Os each
    "degraded seq read 1M qd8": 0.85,
    "degraded seq read 1.5M qd8": 0.85,
}
CPU_READ_TARGET = 1.2


def healthy_target(r):
    """(the target cell, pass) of a healthy row; ("-", None) without."""
    t = HEALTHY_TARGETS.get(r["workload"])
    if t is None:
        return "-", None
    ok = r["ratio"] >= t
    cell = f"≥ {t:.2f}"
    if r["workload"] == "seq read 1M qd8" and r["file"]["cpu_s_per_gib"]:
        cpu = r["uraid"]["cpu_s_per_gib"] / r["file"]["cpu_s_per_gib"]
        ok = ok and cpu <= CPU_READ_TARGET
        cell += f", CPU {cpu:.2f}x ≤ {CPU_READ_TARGET:.1f}x"
    return f"{cell} {'pass' if ok else 'FAIL'}", ok


UNSURE = "unsure (the readings disagree: machine load; run again)"


def agreed_verdict(readings, target):
    """A row read two ways against one target (its median MB/s against the
    peer's, and the median of each run over the peer's run beside it):
    "pass" when both are at or above it, "FAIL" when neither is, and
    UNSURE when they disagree. The second reading cancels a load that moves
    both sides between runs; where the machine moved one side only, the
    two readings part, and neither alone is a verdict."""
    above = [v >= target for v in readings]
    return "pass" if all(above) else "FAIL" if not any(above) else UNSURE


POLICY_VERDICT = (
    "The target holds for both the ratio of the medians and the paired "
    "ratio (the median of each run over the other side's run beside it): "
    "pass when both meet it, FAIL when neither does, unsure when they "
    "disagree.")


def report(rows, sweep, args):
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo"],
                         capture_output=True, text=True).stdout.split(":")[-1]
    print(f"uraid bench, {time.strftime('%Y-%m-%d %H:%M')} on "
          f"{platform.node()} ({os.cpu_count()} CPUs,{cpu.strip()}), "
          f"members on {args.dir}, {args.members} x {args.member_size} MiB, "
          f"chunk {args.chunk}, {args.runtime}s x {args.repeat} "
          f"(medians), {threads_header()}, on both sides\n")
    print("| workload | file MB/s | uraid MB/s | uraid/file | file IOPS | "
          "uraid IOPS | file p99 µs | uraid p99 µs | CPU s/GiB file | "
          "CPU s/GiB uraid | member reads/write (read rows: member B/B) | "
          "member writes/write | read/write calls per request file / "
          "uraid | uraid peak RSS MiB | target (uraid/file) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f, u = r["file"], r["uraid"]
        rpw = f"{u['reads_per_write']:.2f}" if "reads_per_write" in u else "-"
        if "member_bytes_per_byte" in u:
            # Read-only rows: the column shows member bytes per byte read.
            rpw = f"{u['member_bytes_per_byte']:.2f} B/B"
        wpw = f"{u['writes_per_write']:.2f}" if "writes_per_write" in u else "-"
        calls = (f"{f['io_calls_per_req']:.1f} / {u['io_calls_per_req']:.1f}"
                 if "io_calls_per_req" in f and "io_calls_per_req" in u
                 else "-")
        name = r["workload"]
        name += loaded_mark([r.get("machine_share", 1.0)])
        print(f"| {name} | {f['mbs']:.0f} | {u['mbs']:.0f} | "
              f"{r['ratio']:.2f} | {f['iops']:.0f} | {u['iops']:.0f} | "
              f"{f['p99_us']:.0f} | {u['p99_us']:.0f} | "
              f"{f['cpu_s_per_gib']:.2f} | {u['cpu_s_per_gib']:.2f} | "
              f"{rpw} | {wpw} | {calls} | {u.get('rss_mib', 0):.0f} | "
              f"{healthy_target(r)[0]} |")
    if any(r.get("machine_share", 1.0) < LOADED_SHARE for r in rows):
        print("\n" + loaded_footnote("row's runs"))
    print_client_table(rows)
    if rows and "memory" in rows[0]:
        b = rows[0]["memory"]
        print(f"\nmemory under the sides, read as files just after the "
              f"fill: the members {b['members_mbs']:.0f} MB/s (median), the "
              f"peer file {b['peer_mbs']:.0f} MB/s: {b['ratio']:.2f}"
              f"{memory_note(b)}")
        if memory_note(b):
            print(memory_footnote())
    byname = {r["workload"]: r for r in rows}
    idle = byname.get("4K write+flush qd1, idle")
    busy = byname.get("4K write+flush qd1, beside a 1M stream")
    if idle and busy and idle["uraid"]["p99_us"]:
        print(f"\nlatency isolation: uraid p99 of 4K write+flush beside a "
              f"1 MiB stream / idle = "
              f"{busy['uraid']['p99_us'] / idle['uraid']['p99_us']:.1f}x "
              f"(file plugin: "
              f"{busy['file']['p99_us'] / max(idle['file']['p99_us'], 1):.1f}x)"
              f"; target ≤ 10x (issue 35)")
        if busy["file"].get("beside_mbs"):
            print(f"the 1 MiB stream beside it: uraid "
                  f"{busy['uraid']['beside_mbs']:.0f} MB/s, file plugin "
                  f"{busy['file']['beside_mbs']:.0f} MB/s, ratio "
                  f"{busy['uraid']['beside_mbs'] / busy['file']['beside_mbs']:.2f}"
                  f"; target ≥ 0.70 (issue 35)")
    for one, two in (("seq read 1M qd8", "seq read 1M qd8 x2"),
                     ("seq write 1M qd8", "seq write 1M qd8 x2"),
                     ("rand read 4K qd32", "rand read 4K qd32 x2"),
                     ("rand write 4K qd32", "rand write 4K qd32 x2")):
        if one in byname and two in byname:
            f1, f2 = byname[one]["file"]["mbs"], byname[two]["file"]["mbs"]
            u1, u2 = byname[one]["uraid"]["mbs"], byname[two]["uraid"]["mbs"]
            print(f"scaling {one}: 2 jobs / 1 job = file {f2 / f1:.2f}x, "
                  f"uraid {u2 / u1:.2f}x")
    peak = max((r["uraid"].get("rss_mib", 0) for r in rows), default=0)
    print(f"uraid nbdkit peak RSS over all workloads: {peak:.0f} MiB")
    if sweep:
        print("\nstripe cache sweep (uraid MB/s):\n")
        print_sweep_table(sweep, "mbs", "{:.0f}")
        if any("vs_file" in s for s in sweep):
            print("\nthe same, each run over the file plugin's run just "
                  "before it (median of the ratios):\n")
            print_sweep_table(sweep, "vs_file", "{:.2f}")
        report_sweep_verdict(sweep)


def print_client_table(rows):
    """The client and the machine under each healthy row (medians of the
    same runs): how often fio slept waiting for a reply, and how much of
    the machine's CPU time was idle. A server that keeps the client busy
    is not waking it per reply; one that does pays an interrupt per reply
    and leaves CPU idle (common.ClientAndMachine)."""
    have = [r for r in rows if "client_sleeps_per_req" in r["file"] and
            "client_sleeps_per_req" in r["uraid"]]
    if not have:
        return
    print("\nthe client and the machine under each row: fio's sleeps per "
          "request (voluntary context switches, waiting for a reply) and "
          "the share of the machine's CPU time left idle, during each "
          "side's runs:\n")
    print("| workload | fio sleeps per request file / uraid | "
          "machine idle file / uraid |")
    print("|---|---|---|")
    for r in have:
        f, u = r["file"], r["uraid"]
        print(f"| {r['workload']} | {f['client_sleeps_per_req']:.3f} / "
              f"{u['client_sleeps_per_req']:.3f} | "
              f"{f['idle_share']:.0%} / {u['idle_share']:.0%} |")


def print_sweep_table(sweep, key, fmt):
    """One row per workload, one column per cache size, of each cell's
    `key`; workloads without it in every cell are left out."""
    caches = list(dict.fromkeys(s["cache"] for s in sweep))
    print("| workload | " + " | ".join(f"cache={c}" for c in caches) + " |")
    print("|---|" + "---|" * len(caches))
    for n in dict.fromkeys(s["workload"] for s in sweep):
        vals = {s["cache"]: s.get(key) for s in sweep if s["workload"] == n}
        if any(v is None for v in vals.values()):
            continue
        print(f"| {n} | " + " | ".join(fmt.format(vals[c]) for c in caches) +
              " |")


# A size within this share of the sweep's best counts as no cliff (issue
# 35's point 4).
SWEEP_CLIFF_SHARE = 0.90


def report_sweep_verdict(sweep):
    """Judges each sequential-write workload of the sweep: every cache size
    above 0 within SWEEP_CLIFF_SHARE of the best of them. cache=0 is no
    cache at all, shown for reference and not judged: without one, every
    write smaller than a stripe is a read-modify-write, so small writes are
    slower there by design; the cliff the target is about is a cache that
    gets slower as it grows.

    Where the file plugin ran beside each run, the share is taken two ways:
    from uraid's median MB/s, and from the median of each run over the
    peer's run just before it (which cancels a load that moves both). A
    cliff is in both; when only one of them is under the line, the row is
    "unsure", not a pass: the peer's own spread over the sweep is printed
    beside it, the load that made the two readings disagree (measured: the
    file plugin moved by 20% between runs while uraid's figures 1.6% apart
    read as a 0.75 share by the ratios, 0.92 by MB/s)."""
    print()
    for n in dict.fromkeys(s["workload"] for s in sweep):
        if not n.startswith("seq write"):
            continue
        cells = [s for s in sweep
                 if s["workload"] == n and s["cache"] not in ("0", "0M")]
        if len(cells) < 2:
            continue

        def share(key):
            vals = {s["cache"]: s[key] for s in cells}
            best = max(vals.values())
            worst = min(vals, key=vals.get)
            return (vals[worst] / best if best else 0), worst
        by_mbs, worst_mbs = share("mbs")
        if not all("vs_file" in s for s in cells):
            ok = "pass" if by_mbs >= SWEEP_CLIFF_SHARE else "FAIL"
            print(f"sweep {n}: slowest cache size ({worst_mbs}) is "
                  f"{by_mbs:.2f} of the best, target >= "
                  f"{SWEEP_CLIFF_SHARE:.2f} (cache=0 not judged): {ok}")
            continue
        by_ratio, worst_ratio = share("vs_file")
        peer = [v for s in cells for v in s.get("file_samples", [])]
        spread = ((max(peer) - min(peer)) / statistics.median(peer)
                  if peer else 0)
        ok = agreed_verdict((by_mbs, by_ratio), SWEEP_CLIFF_SHARE)
        print(f"sweep {n}: slowest cache size is {by_mbs:.2f} of the best "
              f"by MB/s ({worst_mbs}), {by_ratio:.2f} by the runs over the "
              f"file plugin beside each ({worst_ratio}); the file plugin "
              f"itself spread {spread:.0%} over the sweep; target >= "
              f"{SWEEP_CLIFF_SHARE:.2f} both ways (cache=0 not judged): "
              f"{ok}")


def report_extras(extras, args):
    rs = extras.get("reshape") or {}
    if rs.get("rows"):
        rd = rs.get("member_read_mbs")
        print(f"\nonline reshape: grow {args.members} -> {args.members + 1} "
              f"members of {rs['member_mib']} MiB, filled; rate in member "
              f"bytes per second per member (md's unit)"
              + (f"; one member's sequential read: {rd:.0f} MB/s" if rd
                 else "") + f". {FIRST_TOUCH_NOTE}\n")
        print("| measurement | MB/s | engine MB/s | / member read | rebuild "
              "MB/s | / rebuild (paired) | target | | how |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rs["rows"]:
            if "vs_read" in r:
                ok = "pass" if r["pass"] else "FAIL"
                samples = ", ".join(f"{x:.0f}" for x in r["samples"])
                paired = ", ".join(f"{x:.2f}" for x in r["paired"])
                print(f"| {r['part']} | {r['mbs']:.0f} ({samples}) | "
                      f"{r['engine_mbs']:.0f} | {r['vs_read']:.2f} | "
                      f"{r['rebuild_mbs']:.0f} | {r['vs_rebuild']:.2f} "
                      f"({paired}) | "
                      f"{r['target']} | {ok} | {r['how']} |")
            else:
                print(f"| {r['part']} | {r['mbs']:.0f} (idle "
                      f"{r['idle_mbs']:.0f}; p99 {r['p99_us']:.0f} µs, idle "
                      f"{r['idle_p99_us']:.0f} µs) | - | - | - | - | - | "
                      f"{'' if r['covered'] else 'reshape ended early'} | "
                      f"{r['how']} |")
    rows = extras.get("bitmap_cost") or []
    if rows:
        print(f"\nwrite-intent bitmap cost: the same array created with the "
              f"bitmap (default) and with --bitmap none, {args.members} x "
              f"{args.member_size} MiB each, same run, {args.runtime}s x "
              f"{args.repeat} (medians). {POLICY_VERDICT}\n")
        print("| workload | no bitmap MB/s | bitmap MB/s | bitmap/none | "
              "paired ratio | target | no bitmap p99 µs | bitmap p99 µs | CPU s/GiB none "
              "| CPU s/GiB bitmap |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            n, b = r["none"], r["bitmap"]
            ok = agreed_verdict((r["ratio"], r["paired"]), r["target"])
            print(f"| {r['part'].split(': ', 1)[1]} | {n['mbs']:.0f} | "
                  f"{b['mbs']:.0f} | {r['ratio']:.2f} | {r['paired']:.2f} | "
                  f"≥ {r['target']:.2f} "
                  f"{ok} | {n['p99_us']:.0f} | {b['p99_us']:.0f} | "
                  f"{n['cpu_s_per_gib']:.2f} | {b['cpu_s_per_gib']:.2f} |")
    rows = extras.get("ppl_cost") or []
    if rows:
        print(f"\nconsistency policy ppl against bitmap (the default): the "
              f"same array created with --consistency-policy ppl and with "
              f"the bitmap, {args.members} x {args.member_size} MiB each, "
              f"same run, {args.runtime}s x {args.repeat} (medians); member "
              f"writes (of which FUA) and flushes per client write from "
              f"the plugin's counters, which leave out the PPL header "
              f"writes (one FUA write per log batch). {POLICY_VERDICT}\n")
        print("| workload | bitmap MB/s | ppl MB/s | ppl/bitmap | paired "
              "ratio | target | member writes per write bitmap / ppl "
              "(FUA) | "
              "member flushes per write bitmap / ppl | bitmap p99 µs | "
              "ppl p99 µs |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            b, p = r["bitmap"], r["ppl"]
            ok = agreed_verdict((r["ratio"], r["paired"]), r["target"])
            print(f"| {r['part'].split(': ', 1)[1]} | {b['mbs']:.0f} | "
                  f"{p['mbs']:.0f} | {r['ratio']:.2f} | {r['paired']:.2f} | "
                  f"≥ {r['target']:.2f} {ok} | "
                  f"{b['writes_per_write']:.2f} / {p['writes_per_write']:.2f}"
                  f" ({p['fua_per_write']:.2f})"
                  f" | {b['flushes_per_write']:.2f} / "
                  f"{p['flushes_per_write']:.2f} | {b['p99_us']:.0f} | "
                  f"{p['p99_us']:.0f} |")
    rb = extras.get("rebuild") or {}
    if rb.get("rows"):
        print(f"\nrebuild and scrub: {args.members} x {rb['member_mib']} MiB "
              f"members filled with data, rebuild onto a fresh file; "
              f"rates are member bytes per second (per member, as md's "
              f"speed limits). One member's sequential read (fio psync "
              f"bs=1M on the member file, median of {args.repeat} x 3s): "
              f"{rb['member_read_mbs']:.0f} MB/s. A rebuild's member I/O "
              f"alone ({args.members - 1} member reads and a write to a "
              f"fresh file at once, fio psync 512K, no XOR): "
              f"{rb['rebuild_io_ceiling_mbs']:.0f} MB/s per member. "
              f"{FIRST_TOUCH_NOTE}\n")
        print("| measurement | MB/s | engine MB/s | / member read | limit "
              "MB/s | vs limit | target | | how |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in rb["rows"]:
            eng = (f"{r['engine_mbs']:.0f}" if r.get("engine_mbs") is not None
                   else "-")
            lim = (f"{r['limit_mbs']:.1f}" if r.get("limit_mbs") else "-")
            err = (f"{r['error'] * 100:+.1f}%" if r.get("limit_mbs") else "-")
            ok = {True: "pass", False: "FAIL", None: ""}[r["pass"]]
            extra = ""
            if "mismatches" in r:
                extra = f"; {r['mismatches']} mismatches"
            if "vs_io_ceiling" in r:
                extra = (f"; {r['vs_io_ceiling']:.2f}x the member I/O "
                         f"alone")
            if "client" in r:
                extra = (f"; client {r['client']['mbs']:.0f} MB/s, "
                         f"{r['client']['iops']:.0f} IOPS, p99 "
                         f"{r['client']['p99_us']:.0f} µs")
            print(f"| {r['part']} | {r['mbs']:.1f} | {eng} | "
                  f"{r['vs_read']:.2f} | {lim} | {err} | {r['target']} | "
                  f"{ok} | {r['how']}{extra} |")
    r6 = extras.get("raid6") or {}
    if r6.get("rows"):
        print(f"\nRAID6 against RAID5 on the same members: two arrays of "
              f"{r6['members']} x {r6['member_mib']} MiB on {args.dir}, "
              f"filled, chunk {args.chunk}, the levels alternating:\n")
        print("| workload | RAID5 MB/s | RAID6 MB/s | RAID6/RAID5 | target "
              "| | how |")
        print("|---|---|---|---|---|---|---|")
        for r in r6["rows"]:
            t = r["target"]
            ok = "" if t is None else ("pass" if r["ratio"] >= t else "FAIL")
            extra = ""
            if "engine" in r:
                extra = (f"; engine RAID5 {r['engine'][5]:.0f}, RAID6 "
                         f"{r['engine'][6]:.0f} MB/s")
            print(f"| {r['part'].split(': ', 1)[1]} | {r['raid5_mbs']:.0f} | "
                  f"{r['raid6_mbs']:.0f} | {r['ratio']:.2f} | "
                  f"{'-' if t is None else f'≥ {t:.2f}'} | {ok} | "
                  f"{r['how']}{extra} |")
    rows = extras.get("resync") or []
    if rows:
        print(f"\nresync after kill -9 during random 4K writes into "
              f"{len(args.resync_regions)} regions of {args.members} x "
              f"{args.member_size} MiB filled members (time: new server "
              f"start to resyncing=false, median of {args.resync_repeat}; "
              f"the resync keeps md's default speed limits, as md's does "
              f"after a restart: at most 200,000 KiB/s (205 MB/s) per "
              f"member):\n")
        print("| array | dirty bits at kill | bitmap chunk | expected "
              "MiB/member | resync MiB/member (resync_bytes) | "
              "resync_bitmap_chunks | stripes resynced | repaired | "
              "seconds | MB/s | mismatches after |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            secs = r["seconds"]
            print(f"| {r['part'].split(': ', 1)[1]} | "
                  f"{'-' if r['dirty_chunks'] is None else r['dirty_chunks']}"
                  f" | {'-' if not r['bitmap_chunk'] else str(r['bitmap_chunk'] // MIB) + ' MiB'}"
                  f" | {r['expected_bytes'] / MIB:.0f} | "
                  f"{r['resync_bytes'] / MIB:.0f} | "
                  f"{r['resync_bitmap_chunks']} | {r['resynced_stripes']} | "
                  f"{r['resync_repairs']} | {secs:.2f} | "
                  f"{r['resync_bytes'] / secs / 1e6:.0f} | "
                  f"{r['mismatches_after']} |")
        by = {r["part"]: r for r in rows}
        a = by.get("resync after crash: bitmap")
        b = by.get("resync after crash: no bitmap")
        if a and b and b["resync_bytes"]:
            print(f"\nbitmap / no bitmap: resync bytes "
                  f"{a['resync_bytes'] / b['resync_bytes']:.3f}x, time "
                  f"{a['seconds'] / b['seconds']:.3f}x")
    report_degraded_sweep(extras.get("degraded_sweep") or [], args)
    report_degraded_write(extras.get("degraded_write") or [], args)
