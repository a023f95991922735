# SPDX-License-Identifier: MIT
"""The write-intent bitmap's and the ppl consistency policy's cost: the
same filled array made with and without, measured side by side."""

import json
import os
import shutil
import statistics

from bench.common import (EXTRA_PARTS, Server, cpu_s_per_gib,
                          fill_arrays_together, fio, log, make_array,
                          member_args, summarize, wanted, whole_run_scale)


COST_JOBS = {
    "seq write 1M qd8": [dict(rw="write", bs="1m", iodepth=8)],
    "rand write 4K qd32": [dict(rw="randwrite", bs="4k", iodepth=32)],
}


def bench_policy_cost(args, plugin, tool, work, prefix, sides, targets):
    """The parts "PREFIX: WORKLOAD" that --only selects, on two filled
    arrays made alike but for their consistency policy: `sides` is
    ((name, make_array keyword arguments), (peer name, ...)); the ratio is
    the first side's MB/s over the peer's. Per side, member writes and
    flushes per client write (the plugin's stats=FILE counters) show
    where a difference comes from."""
    names = [n for n in EXTRA_PARTS if n.startswith(prefix + ":")
             and wanted(args, n)]
    if not names:
        return []
    arrays, sizes = {}, {}
    for side, make in sides:
        members, info = make_array(tool, os.path.join(work, f"pc-{side}"),
                                   args, args.member_size, **make)
        size = info["array_bytes"]
        arrays[side], sizes[side] = members, size
    # Together, as the table's arrays are (fill_exports_together): on
    # /dev/shm the array filled last is the faster one.
    log(f"bench: {prefix}: filling both arrays together")
    fill_arrays_together(args, plugin,
                         [(arrays[side], sizes[side]) for side in arrays], work)
    (a, _), (b, _) = sides
    rows = []
    stats = os.path.join(work, "pc-stats.json")
    for name in names:
        samples = {a: [], b: []}
        jobs = COST_JOBS[name.split(": ", 1)[1]]
        # The server's counts and CPU cover fio's ramp as well.
        whole = whole_run_scale(jobs, args.runtime)
        for rep in range(args.repeat):
            # Alternate which side goes first against drift on a noisy box.
            for side in ((a, b) if rep % 2 == 0 else (b, a)):
                s = Server(args, f"pc-{side}", member_args(
                    plugin, arrays[side], args, [f"stats={stats}"]), work)
                cpu0 = s.cpu_seconds()
                r = fio(s.uri, jobs, args.runtime, size)
                cpu = s.cpu_seconds() - cpu0
                s.stop()
                m = summarize(r, [0])
                m["cpu_s_per_gib"] = cpu_s_per_gib(cpu, m["mbs"], whole,
                                                   args.runtime)
                with open(stats) as f:
                    c = json.load(f)
                os.unlink(stats)
                writes = r["jobs"][0]["write"]["total_ios"] * whole
                m["writes_per_write"] = (c["member_writes"] / writes
                                         if writes else 0.0)
                m["flushes_per_write"] = (c["member_flushes"] / writes
                                          if writes else 0.0)
                m["fua_per_write"] = (c.get("member_fua_writes", 0) / writes
                                      if writes else 0.0)
                samples[side].append(m)
        med = {side: {k: statistics.median(x[k] for x in v) for k in v[0]}
               for side, v in samples.items()}
        ratio = med[a]["mbs"] / med[b]["mbs"] if med[b]["mbs"] else 0.0
        # Ratio within each repetition (the two runs next to each other),
        # less sensitive to a noisy neighbour's drift than the medians'.
        paired = statistics.median(
            x["mbs"] / y["mbs"] for x, y in zip(samples[a], samples[b])
            if y["mbs"])
        rows.append({"part": name, a: med[a], b: med[b], "ratio": ratio,
                     "paired": paired, "target": targets[name],
                     "samples": {k: [x["mbs"] for x in v]
                                 for k, v in samples.items()}})
        log(f"bench: {name}: {b} {med[b]['mbs']:.0f} MB/s, {a} "
            f"{med[a]['mbs']:.0f} MB/s, ratio {ratio:.2f}")
    for side in arrays:
        shutil.rmtree(os.path.join(work, f"pc-{side}"), ignore_errors=True)
    return rows


def bench_bitmap_cost(args, plugin, tool, work):
    return bench_policy_cost(
        args, plugin, tool, work, "bitmap cost",
        (("bitmap", dict(bitmap=True)), ("none", dict(bitmap=False))),
        {"bitmap cost: seq write 1M qd8": 0.95,
         "bitmap cost: rand write 4K qd32": 0.90})


def bench_ppl_cost(args, plugin, tool, work):
    """md's consistency policy ppl (a partial parity log write and flush
    on the parity member before each stripe write) against the default,
    bitmap (issue 18: >= 0.9x sequential, >= 0.75x random 4K)."""
    return bench_policy_cost(
        args, plugin, tool, work, "ppl cost",
        (("ppl", dict(policy="ppl")), ("bitmap", dict(bitmap=True))),
        {"ppl cost: seq write 1M qd8": 0.90,
         "ppl cost: rand write 4K qd32": 0.75})
