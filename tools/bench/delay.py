# SPDX-License-Identifier: MIT
"""Members behind nbdkit's delay filter (--delay-ms): HDD-like member
latency, what write gathering and the RMW/RCW choice are worth."""

import json
import os
import shutil
import statistics
import subprocess

from bench.common import MIB, Server, fio, log, owned_tempdir, summarize


def bench_delay_members(args, plugin, tool):
    """Four (--members) member exports, each nbdkit's file plugin behind the
    delay filter (--delay-ms per read and per write, like a disk's seek) on
    a unix socket; the uraid array over their nbd+unix URIs. fio sequential
    64K and random 4K writes, with the stripe cache on (default) and off
    (cache=0). Prints MB/s and member I/Os per client write (plugin stats=)
    as a markdown table: with slow members every member I/O saved is
    throughput, so this shows what write gathering (full stripes, no
    reads) and the RMW/RCW choice are worth. Returns the rows."""
    delay = args.delay_ms
    work = owned_tempdir("uraid-bench-delay-", args.dir)
    servers = []
    rows = []
    try:
        uris = []
        for i in range(args.members):
            img = os.path.join(work, f"d{i}.img")
            with open(img, "wb") as f:
                f.truncate(args.member_size * MIB)
            s = Server(args, f"d{i}",
                       ["--filter=delay", "file", img,
                        f"delay-read={delay}ms", f"delay-write={delay}ms"],
                       work, member=True)
            servers.append(s)
            uris.append(s.uri)
        subprocess.run([tool, "create", "--force", "--assume-clean",
                        "--chunk", args.chunk, *uris], check=True,
                       capture_output=True)
        size = json.loads(subprocess.run(
            [tool, "detail", "--json", *uris], check=True,
            capture_output=True, text=True).stdout)["array_bytes"]
        workloads = [("seq write 64K qd8", dict(rw="write", bs="64k",
                                                iodepth=8)),
                     ("rand write 4K qd32", dict(rw="randwrite", bs="4k",
                                                 iodepth=32))]
        for name, job in workloads:
            for cache in ("default", "0"):
                samples = []
                for rep in range(args.repeat):
                    stats = os.path.join(work, "delay-stats.json")
                    if os.path.exists(stats):
                        os.unlink(stats)
                    extra = [] if cache == "default" else [f"cache={cache}"]
                    s = Server(args, "delay-uraid",
                               [plugin] + [f"member={u}" for u in uris] +
                               list(args.uraid_arg) + extra +
                               [f"stats={stats}"], work)
                    try:
                        # No ramp: the counters cover the whole run.
                        r = fio(s.uri, [dict(job, ramp_time=0)],
                                args.runtime, size)
                    finally:
                        s.stop()
                    m = summarize(r, [0])
                    with open(stats) as f:
                        c = json.load(f)
                    writes = max(r["jobs"][0]["write"]["total_ios"], 1)
                    m.update(
                        reads_per_write=c["member_reads"] / writes,
                        writes_per_write=c["member_writes"] / writes,
                        ios_per_write=(c["member_reads"] +
                                       c["member_writes"]) / writes,
                        full_stripe=c["full_stripe_writes"],
                        rmw=c["rmw_writes"], rcw=c["rcw_writes"],
                        gathered=c["cached_writes"] / writes,
                        evictions=c["cache_evictions"])
                    samples.append(m)
                med = {k: statistics.median(x[k] for x in samples)
                       for k in samples[0]}
                rows.append(dict(med, workload=name, cache=cache))
                log(f"bench: delay {delay} ms, {name}, cache={cache}: "
                    f"{med['mbs']:.1f} MB/s, "
                    f"{med['ios_per_write']:.2f} member I/Os per write")
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)

    print(f"\nmembers behind nbdkit's delay filter: {args.members} x "
          f"{args.member_size} MiB, file plugin + delay-read/delay-write="
          f"{delay} ms on unix sockets, chunk {args.chunk}, array over "
          f"nbd+unix URIs; fio {args.runtime}s x {args.repeat} (medians), "
          f"member I/Os from stats= (write-back at exit included):\n")
    print("| workload | cache | MB/s | IOPS | p99 µs | member reads/write | "
          "member writes/write | member I/Os/write | full-stripe | RMW | "
          "RCW | gathered/write | cache evictions |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workload']} | {r['cache']} | {r['mbs']:.1f} | "
              f"{r['iops']:.0f} | {r['p99_us']:.0f} | "
              f"{r['reads_per_write']:.2f} | {r['writes_per_write']:.2f} | "
              f"{r['ios_per_write']:.2f} | {r['full_stripe']:.0f} | "
              f"{r['rmw']:.0f} | {r['rcw']:.0f} | {r['gathered']:.2f} | "
              f"{r['evictions']:.0f} |")
    by = {(r["workload"], r["cache"]): r for r in rows}
    for name, _ in workloads:
        on, off = by.get((name, "default")), by.get((name, "0"))
        if on and off and off["mbs"] and on["ios_per_write"]:
            print(f"{name}: cache on / off = {on['mbs'] / off['mbs']:.2f}x "
                  f"MB/s, {off['ios_per_write'] / on['ios_per_write']:.2f}x "
                  f"fewer member I/Os per write")
    return rows
