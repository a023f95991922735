#!/usr/bin/python3
"""uraid benchmark driver (run by scripts/bench.sh).

Serves, in the same run, (a) a uraid array (4 members, 512 KiB chunk by
default) and (b) nbdkit's file plugin over one file of the same size, both
on the same directory (/dev/shm by default), and drives both with fio's nbd
engine over a unix socket. Every uraid number is reported as a ratio against
the file plugin measured in the same run, never as an absolute target.

For each workload the server is started fresh, so its CPU time
(utime+stime from /proc) and uraid's member-I/O counters (plugin key
stats=FILE) belong to that workload alone. Each workload runs `--repeat`
times (default 3) alternating servers; the table shows medians.
"""

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

MIB = 1 << 20


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Server:
    def __init__(self, args, name, plugin_args, workdir):
        self.sock = os.path.join(workdir, f"{name}.sock")
        self.pidfile = os.path.join(workdir, f"{name}.pid")
        for f in (self.sock, self.pidfile):
            if os.path.exists(f):
                os.unlink(f)
        cmd = ["nbdkit", "-U", self.sock, "-P", self.pidfile, "-f",
               "--exit-with-parent"] + plugin_args
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE)
        deadline = time.time() + 30
        while not os.path.exists(self.pidfile):
            if self.proc.poll() is not None or time.time() > deadline:
                raise RuntimeError(f"{name} did not start: "
                                   f"{self.proc.stderr.read().decode()}")
            time.sleep(0.02)
        self.uri = f"nbd+unix:///?socket={self.sock}"

    def cpu_seconds(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / tick

    def peak_rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=120)


def fio(uri, jobs, runtime, size):
    """Runs fio jobs (a list of dicts of options, one section each)
    concurrently against `uri`; returns the parsed JSON."""
    lines = ["[global]", "ioengine=nbd", f"uri={uri}", "time_based=1",
             f"runtime={runtime}", "ramp_time=1", "group_reporting=0",
             f"size={size}"]
    for i, job in enumerate(jobs):
        lines.append(f"[job{i}]")
        lines += [f"{k}={v}" for k, v in job.items()]
    with tempfile.NamedTemporaryFile("w", suffix=".fio", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        path = f.name
    try:
        out = subprocess.run(["fio", "--output-format=json", path],
                             capture_output=True, text=True, check=True)
    finally:
        os.unlink(path)
    text = out.stdout
    return json.loads(text[text.index("{"):])


def summarize(result, measured):
    """MB/s, IOPS and p99 (µs) over the jobs in `measured` (indices)."""
    bw = iops = 0.0
    p99 = []
    ios = 0
    for i in measured:
        job = result["jobs"][i]
        for d in ("read", "write"):
            bw += job[d]["bw_bytes"] / 1e6
            iops += job[d]["iops"]
            ios += job[d]["total_ios"]
            pct = job[d]["clat_ns"].get("percentile", {})
            if job[d]["total_ios"] and "99.000000" in pct:
                p99.append(pct["99.000000"] / 1000)
        sync = job.get("sync", {})
        if sync.get("total_ios"):
            pct = sync["lat_ns"].get("percentile", {})
            if "99.000000" in pct:
                p99.append(pct["99.000000"] / 1000)
    return {"mbs": bw, "iops": iops, "p99_us": max(p99) if p99 else 0.0,
            "ios": ios}


WORKLOADS = [
    # name, jobs, measured job indices, degraded
    ("seq read 1M qd8", [dict(rw="read", bs="1m", iodepth=8)], [0], False),
    ("seq read 1M qd8 x2", [dict(rw="read", bs="1m", iodepth=8,
                                 offset="0%"),
                            dict(rw="read", bs="1m", iodepth=8,
                                 offset="50%")], [0, 1], False),
    ("seq write 1M qd8", [dict(rw="write", bs="1m", iodepth=8)], [0], False),
    ("seq write 1M qd8 x2", [dict(rw="write", bs="1m", iodepth=8,
                                  offset="0%", size="50%"),
                             dict(rw="write", bs="1m", iodepth=8,
                                  offset="50%", size="50%")], [0, 1], False),
    ("seq write 64K qd8", [dict(rw="write", bs="64k", iodepth=8)], [0],
     False),
    ("rand read 4K qd32", [dict(rw="randread", bs="4k", iodepth=32)], [0],
     False),
    ("rand read 4K qd32 x2", [dict(rw="randread", bs="4k", iodepth=32)] * 2,
     [0, 1], False),
    ("rand write 4K qd32", [dict(rw="randwrite", bs="4k", iodepth=32)], [0],
     False),
    ("rand write 4K qd32 x2", [dict(rw="randwrite", bs="4k", iodepth=32)] * 2,
     [0, 1], False),
    ("degraded seq read 1M qd8", [dict(rw="read", bs="1m", iodepth=8)], [0],
     True),
    ("4K write+flush qd1, idle", [dict(rw="randwrite", bs="4k", iodepth=1,
                                       fsync=1)], [0], False),
    ("4K write+flush qd1, beside a 1M stream",
     [dict(rw="randwrite", bs="4k", iodepth=1, fsync=1),
      dict(rw="write", bs="1m", iodepth=8)], [0], False),
]


def main():
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
    args = ap.parse_args()

    plugin = os.path.join(args.build, "nbdplugin", "nbdkit-uraid-plugin.so")
    tool = os.path.join(args.build, "tools", "uraid")
    work = tempfile.mkdtemp(prefix="uraid-bench-", dir=args.dir)
    try:
        members = []
        for i in range(args.members):
            p = os.path.join(work, f"m{i}.img")
            with open(p, "wb") as f:
                f.truncate(args.member_size * MIB)
            members.append(p)
        subprocess.run([tool, "create", "--force", "--chunk", args.chunk,
                        *members], check=True, capture_output=True)
        info = json.loads(subprocess.run(
            [tool, "detail", "--json", *members], check=True,
            capture_output=True, text=True).stdout)
        size = info["array_bytes"]
        peer = os.path.join(work, "file.img")
        with open(peer, "wb") as f:
            f.truncate(size)

        def uraid_args(extra=(), degraded=False):
            ms = members[1:] if degraded else members
            return ([plugin] + [f"member={m}" for m in ms] +
                    list(args.uraid_arg) + list(extra))

        # Fill both with data so reads read data, not holes.
        log(f"bench: filling {size // MIB} MiB on each side")
        for name, pargs in (("file", ["file", peer]),
                            ("uraid", uraid_args())):
            s = Server(args, name, pargs, work)
            fio(s.uri, [dict(rw="write", bs="1m", iodepth=8,
                             time_based=0)], 600, size)
            s.stop()

        rows = []
        for name, jobs, measured, degraded in WORKLOADS:
            if args.only and args.only not in name:
                continue
            samples = {"file": [], "uraid": []}
            for rep in range(args.repeat):
                for side in ("file", "uraid"):
                    stats = os.path.join(work, "stats.json")
                    if side == "file":
                        pargs = ["file", peer]
                    else:
                        pargs = uraid_args([f"stats={stats}"], degraded)
                    s = Server(args, side, pargs, work)
                    cpu0 = s.cpu_seconds()
                    r = fio(s.uri, jobs, args.runtime, size)
                    cpu = s.cpu_seconds() - cpu0
                    rss = s.peak_rss_mib()
                    s.stop()
                    m = summarize(r, measured)
                    all_jobs = summarize(r, range(len(jobs)))
                    gib = max(all_jobs["mbs"] * args.runtime * 1e6 / (1 << 30),
                              1e-9)
                    m["cpu_s_per_gib"] = cpu / gib
                    m["rss_mib"] = rss
                    if side == "uraid" and os.path.exists(stats):
                        with open(stats) as f:
                            c = json.load(f)
                        os.unlink(stats)
                        writes = sum(
                            r["jobs"][i]["write"]["total_ios"]
                            for i in range(len(jobs)))
                        if writes:
                            m["reads_per_write"] = c["member_reads"] / writes
                            m["writes_per_write"] = c["member_writes"] / writes
                        m["counters"] = c
                    samples[side].append(m)
            med = {side: {k: statistics.median(x[k] for x in v)
                          for k in v[0] if k != "counters"}
                   for side, v in samples.items()}
            row = {"workload": name, "file": med["file"],
                   "uraid": med["uraid"],
                   "counters": samples["uraid"][-1].get("counters", {})}
            f_, u_ = med["file"], med["uraid"]
            row["ratio"] = (u_["mbs"] / f_["mbs"]) if f_["mbs"] else 0
            rows.append(row)
            log(f"bench: {name}: file {f_['mbs']:.0f} MB/s, uraid "
                f"{u_['mbs']:.0f} MB/s, ratio {row['ratio']:.2f}")

        sweep = []
        if args.sweep:
            for cache in args.sweep.split(","):
                for name, jobs in (
                        ("seq write 64K qd8",
                         [dict(rw="write", bs="64k", iodepth=8)]),
                        ("seq write 1M qd8",
                         [dict(rw="write", bs="1m", iodepth=8)]),
                        ("rand write 4K qd32",
                         [dict(rw="randwrite", bs="4k", iodepth=32)])):
                    vals = []
                    for rep in range(args.repeat):
                        s = Server(args, "uraid",
                                   uraid_args([f"cache={cache}"]), work)
                        r = fio(s.uri, jobs, args.runtime, size)
                        s.stop()
                        vals.append(summarize(r, [0])["mbs"])
                    sweep.append({"cache": cache, "workload": name,
                                  "mbs": statistics.median(vals)})
                    log(f"bench: sweep cache={cache} {name}: "
                        f"{statistics.median(vals):.0f} MB/s")
        report(rows, sweep, args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": rows, "sweep": sweep}, f, indent=1)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def report(rows, sweep, args):
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo"],
                         capture_output=True, text=True).stdout.split(":")[-1]
    print(f"uraid bench, {time.strftime('%Y-%m-%d %H:%M')} on "
          f"{platform.node()} ({os.cpu_count()} CPUs,{cpu.strip()}), "
          f"members on {args.dir}, {args.members} x {args.member_size} MiB, "
          f"chunk {args.chunk}, {args.runtime}s x {args.repeat} "
          f"(medians)\n")
    print("| workload | file MB/s | uraid MB/s | uraid/file | file IOPS | "
          "uraid IOPS | file p99 µs | uraid p99 µs | CPU s/GiB file | "
          "CPU s/GiB uraid | member reads/write | member writes/write |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f, u = r["file"], r["uraid"]
        rpw = f"{u['reads_per_write']:.2f}" if "reads_per_write" in u else "-"
        wpw = f"{u['writes_per_write']:.2f}" if "writes_per_write" in u else "-"
        print(f"| {r['workload']} | {f['mbs']:.0f} | {u['mbs']:.0f} | "
              f"{r['ratio']:.2f} | {f['iops']:.0f} | {u['iops']:.0f} | "
              f"{f['p99_us']:.0f} | {u['p99_us']:.0f} | "
              f"{f['cpu_s_per_gib']:.2f} | {u['cpu_s_per_gib']:.2f} | "
              f"{rpw} | {wpw} |")
    byname = {r["workload"]: r for r in rows}
    idle = byname.get("4K write+flush qd1, idle")
    busy = byname.get("4K write+flush qd1, beside a 1M stream")
    if idle and busy and idle["uraid"]["p99_us"]:
        print(f"\nlatency isolation: uraid p99 of 4K write+flush beside a "
              f"1 MiB stream / idle = "
              f"{busy['uraid']['p99_us'] / idle['uraid']['p99_us']:.1f}x "
              f"(file plugin: "
              f"{busy['file']['p99_us'] / max(idle['file']['p99_us'], 1):.1f}x)")
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
        caches = list(dict.fromkeys(s["cache"] for s in sweep))
        names = list(dict.fromkeys(s["workload"] for s in sweep))
        print("| workload | " + " | ".join(f"cache={c}" for c in caches) +
              " |")
        print("|---|" + "---|" * len(caches))
        for n in names:
            vals = {s["cache"]: s["mbs"] for s in sweep if s["workload"] == n}
            print(f"| {n} | " + " | ".join(f"{vals[c]:.0f}" for c in caches) +
                  " |")


if __name__ == "__main__":
    main()
