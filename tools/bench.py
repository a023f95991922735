#!/usr/bin/python3
# SPDX-License-Identifier: MIT
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


def owned_tempdir(prefix, directory):
    """mkdtemp in `directory` with an owner.pid naming this process. First
    removes the `prefix`'s earlier directories whose owner is gone: members
    on /dev/shm are memory, and a bench stopped by SIGKILL (or by a session
    ending) leaves gigabytes there that starve the next build or CI run of
    memory (the compiler was OOM-killed on such a machine). Directories
    without an owner.pid are left alone: not provably ours."""
    try:
        names = os.listdir(directory)
    except OSError:
        names = []
    for name in names:
        if not name.startswith(prefix):
            continue
        path = os.path.join(directory, name)
        try:
            with open(os.path.join(path, "owner.pid")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
            continue  # alive: not ours to remove
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        log(f"bench: removing {path}, left by process {pid} that is gone")
        shutil.rmtree(path, ignore_errors=True)
    work = tempfile.mkdtemp(prefix=prefix, dir=directory)
    with open(os.path.join(work, "owner.pid"), "w") as f:
        f.write(f"{os.getpid()}\n")
    return work


def exit_on_signal(signum, frame):
    """SIGTERM and SIGHUP end the bench through SystemExit, so that every
    finally: block stops its servers and removes its member files (Python's
    default for SIGTERM kills without running them)."""
    sys.exit(128 + signum)


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
    # name, jobs, measured job indices, degraded[, extra plugin keys]
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
    # One stripe per request at the defaults (4 members, chunk 512K): the
    # rebuild's sources are all the client's own chunks.
    ("degraded seq read 1.5M qd8", [dict(rw="read", bs="1536k", iodepth=8)],
     [0], True),
    # Memory: the stripe cache bound at 256 MiB instead of the default
    # 64 MiB; the peak RSS column shows what the cache holds beside the
    # fixed cost (nbdkit, threads, their scratch buffers).
    ("seq write 1M qd8, cache=256M", [dict(rw="write", bs="1m", iodepth=8)],
     [0], False, ("cache=256M",)),
    ("rand write 4K qd32, cache=256M",
     [dict(rw="randwrite", bs="4k", iodepth=32)], [0], False,
     ("cache=256M",)),
    ("4K write+flush qd1, idle", [dict(rw="randwrite", bs="4k", iodepth=1,
                                       fsync=1)], [0], False),
    ("4K write+flush qd1, beside a 1M stream",
     [dict(rw="randwrite", bs="4k", iodepth=1, fsync=1),
      dict(rw="write", bs="1m", iodepth=8)], [0], False),
]


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
    ap.add_argument("--delay-ms", default=0, type=int,
                    help="also run the members-behind-the-delay-filter "
                         "benchmark with this member latency (e.g. 2)")
    args = ap.parse_args()
    args.rebuild_member_size = args.rebuild_member_size or args.member_size

    plugin = os.path.join(args.build, "nbdplugin", "nbdkit-uraid-plugin.so")
    tool = os.path.join(args.build, "tools", "uraid")
    work = owned_tempdir("uraid-bench-", args.dir)
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
            # Degraded on purpose (md's --run rule wants it said) and
            # read-only, so the member left out does not go stale for the
            # rows after.
            run = ["run=true", "readonly=true"] if degraded else []
            return ([plugin] + [f"member={m}" for m in ms] + run +
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
        for name, jobs, measured, degraded, *extra in WORKLOADS:
            extra = extra[0] if extra else ()
            if args.only and args.only not in name:
                continue
            samples = {"file": [], "uraid": []}
            for rep in range(args.repeat):
                for side in ("file", "uraid"):
                    stats = os.path.join(work, "stats.json")
                    if side == "file":
                        pargs = ["file", peer]
                    else:
                        pargs = uraid_args([f"stats={stats}", *extra],
                                           degraded)
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
                        read_bytes = sum(
                            r["jobs"][i]["read"]["io_bytes"]
                            for i in range(len(jobs)))
                        if read_bytes and not writes:
                            # Member bytes read per byte delivered: 1.0 is
                            # each member byte read once (degraded too).
                            # fio leaves its 1 s ramp out of io_bytes, the
                            # counters do not: scaled to the whole run.
                            whole = read_bytes * (args.runtime + 1) / (
                                args.runtime)
                            m["member_bytes_per_byte"] = (
                                c["member_read_bytes"] / whole)
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
        # Its rows are named "sweep cache=C WORKLOAD"; --only selects them
        # like any other part.
        if args.sweep and wanted(args, "sweep cache= seq write 64K qd8 "
                                       "seq write 1M qd8 rand write 4K qd32"):
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
          "CPU s/GiB uraid | member reads/write (read rows: member B/B) | "
          "member writes/write | uraid peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f, u = r["file"], r["uraid"]
        rpw = f"{u['reads_per_write']:.2f}" if "reads_per_write" in u else "-"
        if "member_bytes_per_byte" in u:
            # Read-only rows: the column shows member bytes per byte read.
            rpw = f"{u['member_bytes_per_byte']:.2f} B/B"
        wpw = f"{u['writes_per_write']:.2f}" if "writes_per_write" in u else "-"
        print(f"| {r['workload']} | {f['mbs']:.0f} | {u['mbs']:.0f} | "
              f"{r['ratio']:.2f} | {f['iops']:.0f} | {u['iops']:.0f} | "
              f"{f['p99_us']:.0f} | {u['p99_us']:.0f} | "
              f"{f['cpu_s_per_gib']:.2f} | {u['cpu_s_per_gib']:.2f} | "
              f"{rpw} | {wpw} | {u.get('rss_mib', 0):.0f} |")
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


# --- Bitmap cost, rebuild, resync after a crash, scrub ----------------------
#
# Each part below runs on arrays of its own, created here in the bench's work
# directory, whose members are filled with data (so that recovery, resync
# and scrub cannot skip holes), and compares uraid with a peer measured in
# the same run: the same array without a bitmap, or one member's sequential
# read bandwidth. Each part is named in EXTRA_PARTS; --only TEXT keeps the
# parts whose name contains TEXT, like the workloads above.

EXTRA_PARTS = [
    "bitmap cost: seq write 1M qd8",
    "bitmap cost: rand write 4K qd32",
    "ppl cost: seq write 1M qd8",
    "ppl cost: rand write 4K qd32",
    "rebuild: unthrottled",
    "rebuild: throttled",
    "rebuild: under client load",
    "rebuild: default limits beside a 1M stream",
    "scrub: check",
    "scrub: repair",
    "resync after crash: bitmap",
    "resync after crash: no bitmap",
    "reshape: grow unthrottled",
    "reshape: client during grow",
    # RAID6 against RAID5 on the same number of members of the same size
    # (issue 33); bench_raid6.
    "raid6: seq read 1M qd8",
    "raid6: seq write 1M qd8",
    "raid6: rand write 4K qd32",
    "raid6: degraded seq read 1M qd8",
    "raid6: rebuild",
]
# Speed limits as `uraid set` takes them (KiB/s per member); the highest the
# control protocol accepts (1 TiB/s) means unthrottled.
UNTHROTTLED_KIB_S = 1 << 30


def wanted(args, name):
    return not args.only or args.only in name


def run_tool(tool, *argv):
    """Runs `uraid ARGV...`; returns stdout, raises with its stderr."""
    p = subprocess.run([tool, *argv], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"uraid {' '.join(argv)}: exit {p.returncode}: "
                           f"{p.stderr.strip()}")
    return p.stdout


def ctl_request(path, request):
    """One request on a control socket (JSON lines); returns the reply."""
    import socket
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(path)
        s.sendall(json.dumps(request).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            buf += chunk
    reply = json.loads(buf)
    if not reply.get("ok"):
        raise RuntimeError(f"control {request}: {reply}")
    return reply


class CtlServer:
    """nbdkit serving a uraid array with control=SOCKET; its stderr (the
    array's log lines) goes to NAME.log in `workdir`."""

    def __init__(self, plugin_args, workdir, name):
        self.sock = os.path.join(workdir, f"{name}.sock")
        self.pidfile = os.path.join(workdir, f"{name}.pid")
        self.ctl = os.path.join(workdir, f"{name}.ctl")
        self.log = os.path.join(workdir, f"{name}.log")
        for f in (self.sock, self.pidfile):
            if os.path.exists(f):
                os.unlink(f)
        # A stale control socket of a killed server stays: the plugin must
        # replace it.
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                ["nbdkit", "-U", self.sock, "-P", self.pidfile, "-f",
                 "--exit-with-parent"] + plugin_args + [f"control={self.ctl}"],
                stderr=log)
        self.uri = f"nbd+unix:///?socket={self.sock}"
        deadline = time.time() + 30
        while True:
            if self.proc.poll() is not None or time.time() > deadline:
                with open(self.log) as f:
                    raise RuntimeError(f"{name} did not start: {f.read()}")
            if os.path.exists(self.pidfile):
                try:
                    self.detail()
                    break
                except (OSError, ValueError):
                    pass
            time.sleep(0.01)

    def detail(self):
        return ctl_request(self.ctl, {"cmd": "detail"})["detail"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=300)

    def kill9(self):
        self.proc.kill()
        self.proc.wait(timeout=60)


def make_array(tool, directory, args, size_mib, bitmap=True, policy=None):
    """Creates args.members sparse member files of size_mib MiB in
    `directory` and an array on them (with --consistency-policy POLICY when
    given); returns (members, offline detail)."""
    os.makedirs(directory, exist_ok=True)
    members = []
    for i in range(args.members):
        p = os.path.join(directory, f"m{i}.img")
        with open(p, "wb") as f:
            f.truncate(size_mib * MIB)
        members.append(p)
    run_tool(tool, "create", "--force", "--chunk", args.chunk,
             *([] if bitmap or policy else ["--bitmap", "none"]),
             *(["--consistency-policy", policy] if policy else []), *members)
    info = json.loads(run_tool(tool, "detail", "--json", *members))
    return members, info


def member_args(plugin, members, args, extra=()):
    return ([plugin] + [f"member={m}" for m in members] +
            list(args.uraid_arg) + list(extra))


def fill_array(args, plugin, members, work, size):
    s = Server(args, "fill", member_args(plugin, members, args), work)
    try:
        fio(s.uri, [dict(rw="write", bs="1m", iodepth=8, time_based=0)], 600,
            size)
    finally:
        s.stop()


def member_read_mbs(path, runtime, repeat):
    """One member's sequential read bandwidth: fio, ioengine=psync, bs=1M,
    on the member file itself (buffered; O_DIRECT does not exist on tmpfs);
    median MB/s of `repeat` runs of `runtime` seconds."""
    vals = []
    for _ in range(repeat):
        out = subprocess.run(
            ["fio", "--output-format=json", "--name=member", f"--filename={path}",
             "--ioengine=psync", "--rw=read", "--bs=1m",
             f"--size={os.path.getsize(path)}", "--time_based=1",
             f"--runtime={runtime}"],
            capture_output=True, text=True, check=True).stdout
        r = json.loads(out[out.index("{"):])
        vals.append(r["jobs"][0]["read"]["bw_bytes"] / 1e6)
    return statistics.median(vals)


def rebuild_io_ceiling_mbs(sources, scratch, repeat):
    """What a rebuild's member I/O alone runs at on these members: fio
    reading each source member once, sequentially (psync, 512K pieces like
    the rebuild's), while writing a fresh sparse file of the same size, one
    job per file, all at once; median over `repeat` runs of member size /
    time of the slowest job. That is the most a rebuild that copies through
    read()/write() can reach here: on memory members a CPU (copy) bound,
    not a device one."""
    size = os.path.getsize(sources[0])
    vals = []
    for _ in range(repeat):
        with open(scratch, "wb") as f:
            f.truncate(size)
        jobs = []
        for i, src in enumerate(sources):
            jobs += [f"--name=src{i}", "--rw=read", f"--filename={src}"]
        jobs += ["--name=dst", "--rw=write", f"--filename={scratch}"]
        out = subprocess.run(
            ["fio", "--output-format=json", "--ioengine=psync", "--bs=512k",
             f"--size={size}", *jobs],
            capture_output=True, text=True, check=True).stdout
        os.unlink(scratch)
        r = json.loads(out[out.index("{"):])
        secs = max(j["job_runtime"] for j in r["jobs"]) / 1e3
        vals.append(size / secs / 1e6)
    return statistics.median(vals)


def fio_in_background(uri, jobs, runtime, size):
    """fio() in a thread; returns a function that joins it and returns the
    parsed JSON (or the exception it raised)."""
    import threading
    box = {}

    def run():
        try:
            box["r"] = fio(uri, jobs, runtime, size)
        except Exception as e:  # the server may be killed under it
            box["r"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()

    def join(timeout=None):
        t.join(timeout)
        return box.get("r")
    return join


def wait_job(srv, kind, before_last, timeout=900, poll=0.02):
    """Polls until the `kind` job started after `before_last` (the previous
    last_job) has ended; returns (end time, detail)."""
    deadline = time.time() + timeout
    seen = False
    while time.time() < deadline:
        d = srv.detail()
        t = time.time()
        if d["job"]["kind"] == kind:
            seen = True
        elif d["job"]["kind"] == "idle" and (
                seen or (d["last_job"] != before_last and
                         d["last_job"]["kind"] == kind)):
            return t, d
        time.sleep(poll)
    raise RuntimeError(f"{kind} did not end within {timeout}s")


def sample_done(srv):
    """(time, job done_bytes, job kind) from one detail request, the time
    taken half-way through the request."""
    t0 = time.time()
    d = srv.detail()
    t1 = time.time()
    return (t0 + t1) / 2, d["job"]["done_bytes"], d["job"]["kind"], d


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
    arrays = {}
    for side, make in sides:
        members, info = make_array(tool, os.path.join(work, f"pc-{side}"),
                                   args, args.member_size, **make)
        size = info["array_bytes"]
        log(f"bench: {prefix}: filling the array with {side}")
        fill_array(args, plugin, members, work, size)
        arrays[side] = members
    (a, _), (b, _) = sides
    rows = []
    stats = os.path.join(work, "pc-stats.json")
    for name in names:
        samples = {a: [], b: []}
        for rep in range(args.repeat):
            # Alternate which side goes first against drift on a noisy box.
            for side in ((a, b) if rep % 2 == 0 else (b, a)):
                s = Server(args, f"pc-{side}", member_args(
                    plugin, arrays[side], args, [f"stats={stats}"]), work)
                cpu0 = s.cpu_seconds()
                r = fio(s.uri, COST_JOBS[name.split(": ", 1)[1]],
                        args.runtime, size)
                cpu = s.cpu_seconds() - cpu0
                s.stop()
                m = summarize(r, [0])
                m["cpu_s_per_gib"] = cpu / max(
                    m["mbs"] * args.runtime * 1e6 / (1 << 30), 1e-9)
                with open(stats) as f:
                    c = json.load(f)
                os.unlink(stats)
                writes = r["jobs"][0]["write"]["total_ios"]
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


def bench_rebuild_scrub(args, plugin, tool, work):
    """Rebuild onto a fresh sparse member (unthrottled, throttled, beside a
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

    def start_rebuild():
        """Fails and removes the last slot's member, adds a fresh sparse
        file as the rebuild target; returns (time of the add, last_job
        before it)."""
        cur = state["cur"]
        run_tool(tool, "fail", "--control", ctl, cur)
        run_tool(tool, "remove", "--control", ctl, cur)
        os.unlink(cur)
        state["n"] += 1
        new = os.path.join(d, f"new{state['n']}.img")
        with open(new, "wb") as f:
            f.truncate(args.rebuild_member_size * MIB)
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

    def windowed(t0, settle, window):
        """Rate of the running job over [t0+settle, t0+settle+window]."""
        time.sleep(max(0.0, t0 + settle - time.time()))
        ta, da, ka, _ = sample_done(srv)
        time.sleep(max(0.0, t0 + settle + window - time.time()))
        tb, db, kb, det = sample_done(srv)
        if ka != "recover" or kb != "recover":
            raise RuntimeError(
                "rebuild ended inside the measuring window: use larger "
                "--rebuild-member-size")
        return (db - da) / (tb - ta), db / (tb - t0), det

    def rebuild_beside(jobs, runtime, ramp):
        """A rebuild started `ramp` s into fio `jobs` (runtime s), at the
        limits in force; returns (rate over the window, average from the
        add, the client's summary) once both are done, unthrottled again."""
        join = fio_in_background(srv.uri, jobs, runtime, size)
        time.sleep(ramp)  # fio's ramp
        t0, before = start_rebuild()
        rate, avg, _ = windowed(t0, 1.0, args.extra_window)
        r = join(timeout=120)
        set_speed(UNTHROTTLED_KIB_S, UNTHROTTLED_KIB_S)
        finish(before)
        if isinstance(r, Exception) or r is None:
            raise RuntimeError(f"fio beside the rebuild: {r}")
        return rate, avg, summarize(r, [0])

    try:
        if wanted(args, "rebuild: unthrottled"):
            set_speed(UNTHROTTLED_KIB_S, UNTHROTTLED_KIB_S)
            walls, engines = [], []
            for _ in range(args.repeat):
                t0, before = start_rebuild()
                t1, lj = finish(before)
                walls.append(lj["total_bytes"] / (t1 - t0) / 1e6)
                engines.append(lj["bytes_per_s"] / 1e6)
                log(f"bench: rebuild unthrottled: {lj['total_bytes'] // MIB}"
                    f" MiB per member in {t1 - t0:.2f}s = {walls[-1]:.0f} "
                    f"MB/s (engine {engines[-1]:.0f} MB/s)")
            wall = statistics.median(walls)
            out["rows"].append({
                "part": "rebuild: unthrottled", "mbs": wall,
                "engine_mbs": statistics.median(engines),
                "vs_read": wall / read_mbs, "target": "≥ 0.70× member read",
                "vs_io_ceiling": wall / ceiling_mbs,
                "pass": wall / read_mbs >= 0.7, "samples": walls,
                "how": f"median of {args.repeat} whole rebuilds, add → "
                       f"done, polled every 20 ms"})
        if wanted(args, "rebuild: throttled"):
            lim = args.throttle_kib
            set_speed(min(1000, lim), lim)
            t0, before = start_rebuild()
            rate, avg, _ = windowed(t0, 1.0, args.extra_window)
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
            rate, avg, client = rebuild_beside(
                [dict(rw="randwrite", bs="4k", iodepth=32)],
                int(runtime + 0.999), 1.5)
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
                       f"running; speed-max unthrottled"})
        if wanted(args, "rebuild: default limits beside a 1M stream"):
            # Issue 16's point 5: with md's default limits (min 1000 KiB/s,
            # max 200000) and the default busy share, a client stream keeps
            # most of its throughput and the rebuild still moves. The client
            # alone first (median of --repeat), then the same fio beside a
            # rebuild.
            stream = [dict(rw="write", bs="1m", iodepth=8)]
            run_s = int(1.0 + args.extra_window + 1.5 + 0.999)
            alones = [summarize(fio(srv.uri, stream, run_s, size), [0])
                      for _ in range(args.repeat)]
            alone = {k: statistics.median(a[k] for a in alones)
                     for k in ("mbs", "iops", "p99_us")}
            # One request: the pair is checked together (min <= max).
            run_tool(tool, "set", "--control", ctl, "--speed-min", "1000",
                     "--speed-max", "200000", "--busy-share", "25")
            rate, avg, client = rebuild_beside(stream, run_s + 1, 1.0)
            keep = client["mbs"] / alone["mbs"] if alone["mbs"] else 0
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
                f"{client['mbs']:.0f} MB/s ({keep:.2f}x alone, "
                f"{alone['mbs']:.0f}), p99 {client['p99_us']:.0f} µs "
                f"(alone {alone['p99_us']:.0f})")
            out["rows"].append({
                "part": "rebuild: default limits beside a 1M stream",
                "mbs": rate / 1e6, "engine_mbs": None,
                "avg_from_start_mbs": avg / 1e6,
                "vs_read": rate / 1e6 / read_mbs, "client": client,
                "client_alone": alone, "client_keep": keep, "share": share,
                "target": "rebuild ≥ 0.25× unthrottled, client ≥ 0.70× alone",
                "pass": share >= 0.25 and keep >= 0.70,
                "how": f"slope of done_bytes over {args.extra_window}s from 1s "
                       f"after the add; md's default min/max, busy share 25%; "
                       f"rebuild {share:.2f}x unthrottled, capped at the "
                       f"default max ({unthrottled:.0f} MB/s); client keeps "
                       f"{keep:.2f}x "
                       f"of {alone['mbs']:.0f} MB/s alone (p99 "
                       f"{alone['p99_us']:.0f} µs alone)"})
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


RAID6_JOBS = {
    "seq read 1M qd8": [dict(rw="read", bs="1m", iodepth=8)],
    "seq write 1M qd8": [dict(rw="write", bs="1m", iodepth=8)],
    "rand write 4K qd32": [dict(rw="randwrite", bs="4k", iodepth=32)],
    "degraded seq read 1M qd8": [dict(rw="read", bs="1m", iodepth=8)],
}
# RAID6 / RAID5 targets (issue 33). A full-stripe write carries n-2 data
# chunks against RAID5's n-1: (n-2)/(n-1) is the target there.
RAID6_TARGETS = {"seq read 1M qd8": 0.9, "rand write 4K qd32": 0.7}


def bench_raid6(args, plugin, tool, work):
    """RAID6 against RAID5 in the same run, on two arrays of
    --raid6-members members of --raid6-member-size MiB in the same
    directory (filled): healthy sequential read, full-stripe sequential
    write, random 4K write (each median of --repeat, the two levels
    alternating), degraded reads (RAID6 with two members left out, RAID5
    with one), and a rebuild (RAID6: two spares in one pass; RAID5: one),
    rates in member bytes per second per target."""
    names = [n for n in EXTRA_PARTS if n.startswith("raid6:")
             and wanted(args, n)]
    if not names:
        return {}
    n = args.raid6_members
    mib = args.raid6_member_size
    arrays = {}
    try:
        for level in (6, 5):
            d = os.path.join(work, f"r6-{level}")
            os.makedirs(d, exist_ok=True)
            members = []
            for i in range(n):
                p = os.path.join(d, f"m{i}.img")
                with open(p, "wb") as f:
                    f.truncate(mib * MIB)
                members.append(p)
            run_tool(tool, "create", "--force", "--level", str(level),
                     "--chunk", args.chunk, "--assume-clean", *members)
            info = json.loads(run_tool(tool, "detail", "--json", *members))
            log(f"bench: raid6: filling the RAID{level} array "
                f"({info['array_bytes'] // MIB} MiB)")
            fill_array(args, plugin, members, work, info["array_bytes"])
            arrays[level] = {"dir": d, "members": members,
                             "size": info["array_bytes"], "spares": 0}
        rows = []
        for name in names:
            part = name.split(": ", 1)[1]
            if part == "rebuild":
                rows.append(raid6_rebuild_row(args, plugin, tool, work,
                                              arrays))
                continue
            samples = {6: [], 5: []}
            for rep in range(args.repeat):
                for level in ((6, 5) if rep % 2 == 0 else (5, 6)):
                    a = arrays[level]
                    ms = a["members"]
                    extra = []
                    if part.startswith("degraded"):
                        # As many left out as the level survives, served
                        # read-only so they do not go stale.
                        ms = ms[level - 4:]
                        extra = ["run=true", "readonly=true"]
                    s = Server(args, f"r6-{level}",
                               member_args(plugin, ms, args, extra), work)
                    r = fio(s.uri, RAID6_JOBS[part], args.runtime, a["size"])
                    s.stop()
                    samples[level].append(summarize(r, [0])["mbs"])
            med = {lv: statistics.median(v) for lv, v in samples.items()}
            ratio = med[6] / med[5] if med[5] else 0.0
            target = RAID6_TARGETS.get(part)
            if part == "seq write 1M qd8":
                target = (n - 2) / (n - 1)
            rows.append({"part": name, "raid6_mbs": med[6],
                         "raid5_mbs": med[5], "ratio": ratio,
                         "target": target, "samples": samples,
                         "how": f"median of {args.repeat} x {args.runtime}s"
                                + (", RAID6 less 2 members, RAID5 less 1, "
                                   "read-only" if part.startswith("degraded")
                                   else "")})
            log(f"bench: {name}: RAID5 {med[5]:.0f} MB/s, RAID6 "
                f"{med[6]:.0f} MB/s, ratio {ratio:.2f}")
        return {"members": n, "member_mib": mib, "rows": rows}
    finally:
        for a in arrays.values():
            shutil.rmtree(a["dir"], ignore_errors=True)


def raid6_rebuild_row(args, plugin, tool, work, arrays):
    """Each level's array loses as many members as it survives (RAID6: 2,
    RAID5: 1) and is served again with as many fresh spares, which join
    while it was whole, so that recovery finds them all at once (RAID6
    rebuilds both in one pass). Rate: member bytes per target over the
    time from the limits' lift (the job starts with the server at md's
    default limits, lifted at once) to the job's end, and the engine's own
    rate; median of --repeat, the levels alternating. The rebuilt array
    is the next repetition's."""
    samples = {6: [], 5: []}
    engines = {6: [], 5: []}
    for rep in range(args.repeat):
        for level in ((6, 5) if rep % 2 == 0 else (5, 6)):
            a = arrays[level]
            lost = level - 4
            srv = CtlServer(member_args(plugin, a["members"], args), work,
                            f"r6rb-{level}")
            spares = []
            try:
                for _ in range(lost):
                    a["spares"] += 1
                    p = os.path.join(a["dir"], f"s{a['spares']}.img")
                    with open(p, "wb") as f:
                        f.truncate(args.raid6_member_size * MIB)
                    run_tool(tool, "add", "--control", srv.ctl, p)
                    spares.append(p)
            finally:
                srv.stop()
            gone, keep = a["members"][:lost], a["members"][lost:]
            for p in gone:
                os.unlink(p)
            srv = CtlServer(member_args(plugin, keep + spares, args,
                                        ["run=true"]), work, f"r6rb-{level}")
            try:
                # The recovery starts with the server, at md's default
                # limits: unthrottled at once, and timed from then.
                run_tool(tool, "set", "--control", srv.ctl, "--speed-min",
                         str(UNTHROTTLED_KIB_S), "--speed-max",
                         str(UNTHROTTLED_KIB_S))
                t0, done0, _, _ = sample_done(srv)
                t1, det = wait_job(srv, "recover", None)
                lj = det["last_job"]
                if lj["result"] != "completed":
                    raise RuntimeError(f"raid6: rebuild RAID{level}: {lj}")
                if level == 6 and lj.get("second_slot", -1) < 0 and \
                        "second_slot" in lj:
                    raise RuntimeError("raid6: the two spares were not "
                                       "rebuilt in one pass")
                samples[level].append(
                    (lj["total_bytes"] - done0) / (t1 - t0) / 1e6)
                engines[level].append(lj["bytes_per_s"] / 1e6)
            finally:
                srv.stop()
            a["members"] = keep + spares
            log(f"bench: raid6: rebuild RAID{level} ({lost} target(s)): "
                f"{samples[level][-1]:.0f} MB/s per target (engine "
                f"{engines[level][-1]:.0f})")
    med = {lv: statistics.median(v) for lv, v in samples.items()}
    return {"part": "raid6: rebuild", "raid6_mbs": med[6],
            "raid5_mbs": med[5],
            "ratio": med[6] / med[5] if med[5] else 0.0, "target": None,
            "samples": samples,
            "engine": {lv: statistics.median(v) for lv, v in engines.items()},
            "how": f"median of {args.repeat}; RAID6 two spares in one pass, "
                   f"RAID5 one; MB/s per target member from the limits' "
                   f"lift to the job's end"}


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


def bench_reshape(args, plugin, tool, work):
    """Online grow by one member of a filled array: the reshape rate
    (member bytes per second, per member, as md reports it) unthrottled and
    idle, against one member's sequential read; then a client's sequential
    1M writes while a grow runs at the default limits, against the same
    client on the idle array."""
    parts = [n for n in EXTRA_PARTS
             if n.startswith("reshape") and wanted(args, n)]
    if not parts:
        return {}
    d = os.path.join(args.dir, "uraid-bench-reshape")
    out = {"rows": [], "member_mib": args.rebuild_member_size}
    read_mbs = None

    def filled_server():
        """A fresh array filled with data (no holes to read fast), served
        with a control socket, and a sparse file to grow onto: (members,
        that file, the server, the array's bytes)."""
        shutil.rmtree(d, ignore_errors=True)
        members, _ = make_array(tool, d, args, args.rebuild_member_size)
        extra = os.path.join(d, "new.img")
        with open(extra, "wb") as f:
            f.truncate(args.rebuild_member_size * MIB)
        srv = CtlServer(member_args(plugin, members, args), work, "reshape")
        try:
            size = srv.detail()["member_bytes"] * (args.members - 1)
            fio(srv.uri, [dict(rw="write", bs="1m", iodepth=8,
                               time_based=0)], 600, size)
        except BaseException:
            srv.stop()
            raise
        return members, extra, srv, size

    def grow(srv, extra):
        before = srv.detail()["last_job"]
        t0 = time.time()
        ctl_request(srv.ctl, {"cmd": "grow", "raid_devices": args.members + 1,
                              "add": [extra]})
        t1, det = wait_job(srv, "reshape", before)
        lj = det["last_job"]
        if lj["result"] != "completed":
            raise RuntimeError(f"reshape: {lj}")
        return t1 - t0, lj

    try:
        if wanted(args, "reshape: grow unthrottled"):
            vals, engine = [], []
            for _ in range(args.repeat):
                members, extra, srv, size = filled_server()
                try:
                    if read_mbs is None:
                        read_mbs = member_read_mbs(members[0], 3, args.repeat)
                    ctl_request(srv.ctl, {"cmd": "set",
                                          "speed_max": UNTHROTTLED_KIB_S})
                    secs, lj = grow(srv, extra)
                    vals.append(lj["total_bytes"] / secs / 1e6)
                    engine.append(lj["bytes_per_s"] / 1e6)
                    log(f"bench: reshape {args.members}->{args.members + 1}: "
                        f"{lj['total_bytes'] // MIB} MiB/member in "
                        f"{secs:.2f}s = {vals[-1]:.0f} MB/s per member")
                finally:
                    srv.stop()
            mbs = statistics.median(vals)
            out["rows"].append({
                "part": "reshape: grow unthrottled", "mbs": mbs,
                "engine_mbs": statistics.median(engine),
                "vs_read": mbs / read_mbs, "target": "≥ 0.50",
                "pass": mbs / read_mbs >= 0.5,
                "how": f"median of {args.repeat} whole grows "
                       f"{args.members}->{args.members + 1}, request to "
                       f"job end, idle array"})
        if wanted(args, "reshape: client during grow"):
            members, extra, srv, size = filled_server()
            try:
                jobs = [dict(rw="write", bs="1m", iodepth=8)]
                idle = summarize(fio(srv.uri, jobs, args.runtime, size), [0])
                before = srv.detail()["last_job"]
                ctl_request(srv.ctl, {"cmd": "grow",
                                      "raid_devices": args.members + 1,
                                      "add": [extra]})
                during = summarize(fio(srv.uri, jobs, args.runtime, size),
                                   [0])
                still = srv.detail()["job"]["kind"] == "reshape"
                t1, det = wait_job(srv, "reshape", before)
                out["rows"].append({
                    "part": "reshape: client during grow",
                    "mbs": during["mbs"], "idle_mbs": idle["mbs"],
                    "p99_us": during["p99_us"],
                    "idle_p99_us": idle["p99_us"],
                    "covered": still,
                    "how": f"fio seq write 1M qd8 for {args.runtime}s, "
                           f"idle vs during a grow at the default speed "
                           f"limits (the reshape yields to clients down to "
                           f"its minimum)"})
            finally:
                srv.stop()
        out["member_read_mbs"] = read_mbs
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return out


def run_extras(args, plugin, tool, work):
    """Runs the parts of EXTRA_PARTS that --only selects."""
    return {"bitmap_cost": bench_bitmap_cost(args, plugin, tool, work),
            "ppl_cost": bench_ppl_cost(args, plugin, tool, work),
            "rebuild": bench_rebuild_scrub(args, plugin, tool, work),
            "resync": bench_resync(args, plugin, tool, work),
            "reshape": bench_reshape(args, plugin, tool, work),
            "raid6": bench_raid6(args, plugin, tool, work)}


def report_extras(extras, args):
    rs = extras.get("reshape") or {}
    if rs.get("rows"):
        rd = rs.get("member_read_mbs")
        print(f"\nonline reshape: grow {args.members} -> {args.members + 1} "
              f"members of {rs['member_mib']} MiB, filled; rate in member "
              f"bytes per second per member (md's unit)"
              + (f"; one member's sequential read: {rd:.0f} MB/s" if rd
                 else "") + ".\n")
        print("| measurement | MB/s | engine MB/s | / member read | target "
              "| | how |")
        print("|---|---|---|---|---|---|---|")
        for r in rs["rows"]:
            if "vs_read" in r:
                ok = "pass" if r["pass"] else "FAIL"
                print(f"| {r['part']} | {r['mbs']:.0f} | "
                      f"{r['engine_mbs']:.0f} | {r['vs_read']:.2f} | "
                      f"{r['target']} | {ok} | {r['how']} |")
            else:
                print(f"| {r['part']} | {r['mbs']:.0f} (idle "
                      f"{r['idle_mbs']:.0f}; p99 {r['p99_us']:.0f} µs, idle "
                      f"{r['idle_p99_us']:.0f} µs) | - | - | - | "
                      f"{'' if r['covered'] else 'reshape ended early'} | "
                      f"{r['how']} |")
    rows = extras.get("bitmap_cost") or []
    if rows:
        print(f"\nwrite-intent bitmap cost: the same array created with the "
              f"bitmap (default) and with --bitmap none, {args.members} x "
              f"{args.member_size} MiB each, same run, {args.runtime}s x "
              f"{args.repeat} (medians):\n")
        print("| workload | no bitmap MB/s | bitmap MB/s | bitmap/none | "
              "paired ratio | target | no bitmap p99 µs | bitmap p99 µs | CPU s/GiB none "
              "| CPU s/GiB bitmap |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            n, b = r["none"], r["bitmap"]
            ok = "pass" if r["ratio"] >= r["target"] else "FAIL"
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
              f"writes (one FUA write per log batch):\n")
        print("| workload | bitmap MB/s | ppl MB/s | ppl/bitmap | paired "
              "ratio | target | member writes per write bitmap / ppl "
              "(FUA) | "
              "member flushes per write bitmap / ppl | bitmap p99 µs | "
              "ppl p99 µs |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for r in rows:
            b, p = r["bitmap"], r["ppl"]
            ok = "pass" if r["ratio"] >= r["target"] else "FAIL"
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
              f"members filled with data, rebuild onto a fresh sparse file; "
              f"rates are member bytes per second (per member, as md's "
              f"speed limits). One member's sequential read (fio psync "
              f"bs=1M on the member file, median of {args.repeat} x 3s): "
              f"{rb['member_read_mbs']:.0f} MB/s. A rebuild's member I/O "
              f"alone ({args.members - 1} member reads and a write to a "
              f"fresh file at once, fio psync 512K, no XOR): "
              f"{rb['rebuild_io_ceiling_mbs']:.0f} MB/s per member.\n")
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
              f"uraid's resync ignores the speed limits):\n")
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


# ---------------------------------------------------------------------------
# Members behind the delay filter (--delay-ms): HDD-like member latency.
# Self-contained: uses only Server, fio, summarize and log from above.


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
                       work)
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


# ---------------------------------------------------------------------------
# Jobs on members that behave like disks (--job-latency-ms): issue 16's table.


# The jobs part's member rate: nbdkit's rate=800M, in MB/s each way.
JOB_MEMBER_MBS = 100.0


def bench_jobs_on_slow_members(args, plugin, tool):
    """Issue 16's table: jobs_column for every directory of --job-dirs
    (default: --dir) and every latency of --job-latency-ms, one column
    each, in member bytes per second against the nominal member rate."""
    dirs = [d for d in (args.job_dirs or args.dir).split(",") if d]
    lats = [int(x) for x in str(args.job_latency_ms).split(",") if x != ""]
    columns = []
    for d in dirs:
        fs = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "-T", d],
                            check=True, capture_output=True,
                            text=True).stdout.split("\n")[0].strip()
        for lat in lats:
            name = f"{fs} ({d})" + (f" + {lat} ms" if lat else "")
            columns.append((name, jobs_column(args, plugin, tool, d, lat)))
    mib = args.job_member_size
    print(f"\njobs on members like disks: 6 nbdkit file exports per column "
          f"({mib} MiB each, full of data) behind rate=800M burstiness=0.1 "
          f"(and the delay filter where a latency is given: delay-read and "
          f"delay-write), chunk 512K, 4 in the array; member bytes per "
          f"second against the nominal {JOB_MEMBER_MBS:.0f} MB/s, median of "
          f"{args.repeat} "
          f"(wall time from the request to idle):\n")
    print("| job, 4 members | " + " | ".join(n for n, _ in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for job in columns[0][1]:
        cells = []
        for _, samples in columns:
            v = samples[job]
            if not v:
                cells.append("")
                continue
            med = statistics.median(v)
            cells.append(f"{med:.1f} ({med / JOB_MEMBER_MBS:.2f}x; "
                         f"{', '.join(f'{x:.0f}' for x in v)})")
        print(f"| {job} | " + " | ".join(cells) + " |")
    return columns


def jobs_column(args, plugin, tool, directory, lat):
    """Six nbdkit file exports on `directory`, each behind --filter=rate
    rate=800M (JOB_MEMBER_MBS each way, the nominal member rate) and, when
    `lat` is not 0, --filter=delay (`lat` ms per read and write); the array
    over the first four, served with a control socket. Times, in member
    bytes per second against the nominal rate: a rebuild onto the fifth
    (fail + remove + add, until idle), a check (--wait), the resync of a
    fresh array (uraid create's initial parity over members full of data)
    and a 4 -> 5 reshape onto the sixth (grow --wait). Returns the
    samples."""
    mib = args.job_member_size
    work = owned_tempdir("uraid-bench-jobs-", directory)
    servers = []
    degraded = "degraded seq read 1M qd8 (client MB/s / 3 survivors)"
    samples = {"rebuild": [], "check": [], "resync": [], "reshape 4->5": [],
               degraded: []}

    def exports():
        uris = []
        for i in range(6):
            img = os.path.join(work, f"j{i}.img")
            subprocess.run(["dd", "if=/dev/urandom", f"of={img}", "bs=1M",
                            f"count={mib}", "status=none"], check=True)
            delay = ([f"delay-read={lat}ms", f"delay-write={lat}ms"]
                     if lat else [])
            s = Server(args, f"j{i}",
                       ["--filter=rate"] +
                       (["--filter=delay"] if lat else []) +
                       ["file", img, "rate=800M",
                        # No 2 s burst (the default): the members are too
                        # small to hide it.
                        "burstiness=0.1"] + delay, work)
            servers.append(s)
            uris.append(s.uri)
        return uris

    def idle(ctl):
        while True:
            j = json.loads(subprocess.run(
                [tool, "detail", "--control", ctl, "--json"], check=True,
                capture_output=True, text=True).stdout)
            if (j["job"]["kind"] == "idle" and not j["degraded"] and
                    not j.get("resyncing")):
                return j
            time.sleep(0.02)

    try:
        for rep in range(args.repeat):
            for s in servers:
                s.stop()
            servers.clear()
            uris = exports()
            # Resync: create's initial parity pass over members of data.
            t0 = time.time()
            subprocess.run([tool, "create", "--force", "--bitmap", "none",
                            "--chunk", "512K", *uris[:4]], check=True,
                           capture_output=True)
            t = time.time() - t0
            det = json.loads(subprocess.run(
                [tool, "detail", "--json", *uris[:4]], check=True,
                capture_output=True, text=True).stdout)
            member = det["member_bytes"] if "member_bytes" in det else \
                det["array_bytes"] // 3
            samples["resync"].append(member / t / 1e6)
            # Degraded read (issue 16 point 4): the array without its
            # second member, read-only (nothing changes for the jobs
            # below); what the client gets per surviving member, against
            # the member rate: 1.0x is every survivor byte delivered once.
            srv = Server(args, "jobs-degraded",
                         [plugin] + [f"member={u}" for i, u in
                                     enumerate(uris[:4]) if i != 1] +
                         ["run=true", "readonly=true"], work)
            try:
                res = summarize(fio(srv.uri, [dict(rw="read", bs="1m",
                                                   iodepth=8)],
                                    args.runtime, det["array_bytes"]), [0])
            finally:
                srv.stop()
            samples[degraded].append(res["mbs"] / 3)
            ctl = os.path.join(work, "ctl.sock")
            srv = Server(args, "jobs-uraid",
                         [plugin] + [f"member={u}" for u in uris[:4]] +
                         [f"control={ctl}"], work)
            try:
                # Rebuild onto the fifth export.
                run_tool(tool, "fail", "--control", ctl, uris[1])
                run_tool(tool, "remove", "--control", ctl, uris[1])
                t0 = time.time()
                run_tool(tool, "add", "--control", ctl, uris[4])
                idle(ctl)
                samples["rebuild"].append(member / (time.time() - t0) / 1e6)
                t0 = time.time()
                run_tool(tool, "check", "--control", ctl, "--wait")
                samples["check"].append(member / (time.time() - t0) / 1e6)
                # Reshape 4 -> 5 with the member the rebuild freed.
                t0 = time.time()
                run_tool(tool, "grow", "--control", ctl, "--raid-devices",
                         "5", "--add", uris[5], "--wait")
                samples["reshape 4->5"].append(
                    member / (time.time() - t0) / 1e6)
            finally:
                srv.stop()
            log(f"bench: jobs on {directory} + {lat} ms, run {rep + 1}: " +
                ", ".join(f"{k} {v[-1]:.0f} MB/s" for k, v in
                          samples.items()))
    finally:
        for s in servers:
            s.stop()
        shutil.rmtree(work, ignore_errors=True)
    return samples


if __name__ == "__main__":
    main()
