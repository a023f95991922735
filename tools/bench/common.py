# SPDX-License-Identifier: MIT
"""What every part of the bench shares: servers (nbdkit with the file
plugin or uraid), fio runs and their summaries, the control socket, arrays
made and filled in a work directory, and the peers' measurements (one
member's read, a rebuild's member I/O alone)."""

import json
import os
import resource
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


# nbdkit's -t for the servers the bench measures, both sides alike
# (--threads): "auto" (the default) is the -t `uraid serve` chooses
# (tools/serve_threads.h): the CPUs, at least 2, for a server whose every
# file is in memory, nbdkit's default otherwise; "default" is nbdkit's own
# for every server (every run before 2026-12-07); N is -t N for every
# server. Set once by the command line.
NBDKIT_THREADS = "auto"
# The filesystems whose files `uraid serve` counts as memory.
MEMORY_FILESYSTEMS = ("tmpfs", "ramfs")


def auto_threads():
    """The -t `uraid serve` gives nbdkit for members in memory."""
    return max(2, len(os.sched_getaffinity(0)))


def served_files(plugin_args):
    """What a server's plugin arguments name as its files: uraid's
    member=PATH keys (an NBD URI among them, which in_memory rejects), the
    file plugin's file=PATH or the word after "file"."""
    files = [a.partition("=")[2] for a in plugin_args
             if a.startswith(("member=", "file="))]
    if plugin_args[:1] == ["file"]:
        files += plugin_args[1:2]
    return files


def in_memory(path):
    """Whether `path` is on tmpfs or ramfs, as `uraid serve` asks statfs;
    False when it cannot be examined."""
    out = subprocess.run(["stat", "-f", "-c", "%T", path],
                         capture_output=True, text=True)
    return out.returncode == 0 and out.stdout.strip() in MEMORY_FILESYSTEMS


def threads_args(plugin_args):
    if NBDKIT_THREADS == "default":
        return []
    if NBDKIT_THREADS != "auto":
        return ["-t", str(NBDKIT_THREADS)]
    files = served_files(plugin_args)
    if files and all(in_memory(f) for f in files):
        return ["-t", str(auto_threads())]
    return []


def threads_header():
    """What the report's header says of nbdkit's -t."""
    if NBDKIT_THREADS == "default":
        return "nbdkit's default threads (16)"
    if NBDKIT_THREADS != "auto":
        return f"nbdkit -t {NBDKIT_THREADS}"
    return (f"nbdkit -t {auto_threads()} where every file a server serves "
            f"is in memory, as `uraid serve` chooses, its default (16) "
            f"elsewhere")


class Server:
    # `member`: a server that stands in for a member (a disk behind nbdkit's
    # filters), not one under test: it keeps nbdkit's default -t, as a
    # disk keeps its queue depth whatever --threads the servers measured
    # run with.
    def __init__(self, args, name, plugin_args, workdir, member=False):
        self.sock = os.path.join(workdir, f"{name}.sock")
        self.pidfile = os.path.join(workdir, f"{name}.pid")
        for f in (self.sock, self.pidfile):
            if os.path.exists(f):
                os.unlink(f)
        cmd = (["nbdkit", "-U", self.sock, "-P", self.pidfile, "-f",
                "--exit-with-parent"] +
               ([] if member else threads_args(plugin_args)) +
               plugin_args)
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

    def io_calls(self):
        """The server's read and write system calls so far (/proc's syscr
        + syscw: read, pread, write, pwrite and their vector forms; a send
        or recv on the client socket is not counted, nor a futex)."""
        calls = 0
        with open(f"/proc/{self.proc.pid}/io") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key in ("syscr", "syscw"):
                    calls += int(val)
        return calls

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


class ClientAndMachine:
    """What the client and the machine did over one fio run: start() just
    before fio() and stop() just after it (before the server is stopped,
    whose own rusage a wait would add). `sleeps` is fio's voluntary
    context switches (getrusage of the children waited for: fio and its
    job processes), `idle` the machine's share of CPU time idle or waiting
    for I/O (/proc/stat).

    Why: on a small machine a client that finds no reply ready sleeps, and
    the server's next reply must wake it (an interrupt to its CPU, dear in
    a paravirtual guest, paid inside the server's send); the CPU it slept
    on idles. A server just fast enough keeps the client busy and never
    pays that; one slightly slower pays it per request, and its ratio to
    the faster peer comes out lower than their costs per request say
    (issue 35, random 4K writes, counted by perf's sched_switch: fio slept
    0.003 times per request against the file plugin, 0.44 against uraid;
    this count, which also covers fio's start, read 0.008 and 0.647)."""

    @staticmethod
    def _idle_ticks():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return v[3] + v[4], sum(v)

    def start(self):
        self._ru = resource.getrusage(resource.RUSAGE_CHILDREN).ru_nvcsw
        self._ticks = self._idle_ticks()

    def stop(self):
        self.sleeps = (resource.getrusage(resource.RUSAGE_CHILDREN).ru_nvcsw -
                       self._ru)
        idle, total = self._idle_ticks()
        self.idle = (idle - self._ticks[0]) / max(total - self._ticks[1], 1)


def whole_run_scale(jobs, runtime):
    """What fio reports (total_ios, io_bytes, MB/s over `runtime`) leaves
    its ramp out; the server's counters and CPU time cover the ramp too.
    The factor from the first to the second, the ramp taken at the rate
    measured after it."""
    ramp = float(jobs[0].get("ramp_time", 1)) if jobs else 1.0
    return (runtime + ramp) / runtime


def cpu_s_per_gib(cpu_s, mbs, whole, runtime):
    """CPU seconds per GiB moved, from a server's CPU time over a whole
    fio run and fio's MB/s over `runtime` (`whole`: whole_run_scale)."""
    return cpu_s / max(mbs * runtime * whole * 1e6 / (1 << 30), 1e-9)


def seq_read_mbs(args, name, plugin_args, work, size):
    """MB/s of fio seq read 1M qd8 for --runtime s on a fresh nbdkit with
    `plugin_args` (a degraded array served read-only, say)."""
    srv = Server(args, name, plugin_args, work)
    try:
        return summarize(fio(srv.uri, [dict(rw="read", bs="1m", iodepth=8)],
                             args.runtime, size), [0])["mbs"]
    finally:
        srv.stop()


def summarize(result, measured):
    """MB/s, IOPS and p99 (µs) over the jobs in `measured` (indices), and
    their client requests (reads, writes and flushes; fio's ramp left
    out)."""
    bw = iops = 0.0
    p99 = []
    requests = 0
    for i in measured:
        job = result["jobs"][i]
        for d in ("read", "write"):
            bw += job[d]["bw_bytes"] / 1e6
            iops += job[d]["iops"]
            requests += job[d]["total_ios"]
            pct = job[d]["clat_ns"].get("percentile", {})
            if job[d]["total_ios"] and "99.000000" in pct:
                p99.append(pct["99.000000"] / 1000)
        sync = job.get("sync", {})
        if sync.get("total_ios"):
            requests += sync["total_ios"]
            pct = sync["lat_ns"].get("percentile", {})
            if "99.000000" in pct:
                p99.append(pct["99.000000"] / 1000)
    return {"mbs": bw, "iops": iops, "p99_us": max(p99) if p99 else 0.0,
            "requests": requests}


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
                 "--exit-with-parent"] + threads_args(plugin_args) +
                plugin_args +
                [f"control={self.ctl}"],
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


def member_files(directory, n, mib):
    """`n` sparse files of `mib` MiB, m0.img .. in `directory`; their
    paths."""
    paths = []
    for i in range(n):
        p = os.path.join(directory, f"m{i}.img")
        with open(p, "wb") as f:
            f.truncate(mib * MIB)
        paths.append(p)
    return paths


def make_array(tool, directory, args, size_mib, bitmap=True, policy=None):
    """Creates args.members sparse member files of size_mib MiB in
    `directory` and an array on them (with --consistency-policy POLICY when
    given); returns (members, offline detail)."""
    os.makedirs(directory, exist_ok=True)
    members = member_files(directory, args.members, size_mib)
    run_tool(tool, "create", "--force", "--chunk", args.chunk,
             *([] if bitmap or policy else ["--bitmap", "none"]),
             *(["--consistency-policy", policy] if policy else []), *members)
    info = json.loads(run_tool(tool, "detail", "--json", *members))
    return members, info


# Why the bench writes every job's target file whole before timing the job
# (touched_file); the report prints it under the rows it concerns.
FIRST_TOUCH_NOTE = (
    "Every file a timed job or its fio peer writes (a rebuild's new member, "
    "a grow's new member, the peer's scratch file) is written whole with "
    "zeros first, so that its memory exists: on tmpfs in a VM that reports "
    "free pages to its host, the first write to a page costs several times "
    "the copy itself, and by how much varies run to run (issue 35). The "
    "jobs' data is non-zero, so no job skips more or less for it.")


def touched_file(path, size):
    """Creates `path` of `size` bytes and writes zeros through it whole,
    so that its memory exists before a timed job writes it. On /dev/shm in
    this VM, the first write to a page the guest freed (and reported free to
    the host) faults it in on the host, at several times the cost of the
    copy itself; a job writing a sparse file pays that for pages from the
    free pool but not for pages of a member just unlinked (reused at once),
    so a grow's new member and a rebuild's fresh one would be charged
    unequally, and by however much of the pool the host still backs."""
    piece = 8 * MIB
    zeros = bytes(piece)
    with open(path, "wb") as f:
        for _ in range(size // piece):
            f.write(zeros)
        f.write(bytes(size % piece))


def member_args(plugin, members, args, extra=()):
    return ([plugin] + [f"member={m}" for m in members] +
            list(args.uraid_arg) + list(extra))


def fill_array(args, plugin, members, work, size):
    fill_export(args, member_args(plugin, members, args), work, size)


def fill_arrays_together(args, plugin, arrays, work):
    """fill_array of every (members, size) of `arrays` at the same time
    (fill_exports_together): arrays whose rows are read against each other
    (RAID6 against RAID5, one policy against another)."""
    fill_exports_together(args, [member_args(plugin, m, args)
                                 for m, _ in arrays], work,
                          [size for _, size in arrays])


def fill_export(args, plugin_args, work, size):
    """Writes `size` bytes of fio's data (1M pieces, qd 8) through a fresh
    nbdkit with `plugin_args` (an array, or the file plugin over its
    peer), so that reads read data, not holes. An export read against
    another is filled with it by fill_exports_together."""
    fill_exports_together(args, [plugin_args], work, size)


def fill_exports_together(args, exports, work, size):
    """fill_export of every plugin argument list in `exports` (an array and
    the file plugin over its peer) at the same time, each through its own
    nbdkit; `size` is one size for all, or a list of one per export.
    Filled one after the other, the file filled last read 25-35% faster
    here, whichever side it was: the healthy table filled the peer first
    and read uraid's degraded 1M qd8 at 1.06 of the file plugin, the
    degraded sweep filled the array first and read the same shape at
    0.72. The cause is the VM's memory, not the servers: plain files on
    /dev/shm read 6.6-17.6 GB/s, up to 40% apart for minutes, the newest
    fastest for a while (session 37's note). Filled together the sides are
    treated alike; memory_balance shows what remains."""
    servers, joins = [], []
    try:
        for i, plugin_args in enumerate(exports):
            servers.append(Server(args, f"fill{i}", plugin_args, work))
        sizes = size if isinstance(size, list) else [size] * len(exports)
        for s, n in zip(servers, sizes):
            joins.append(fio_in_background(
                s.uri, [dict(rw="write", bs="1m", iodepth=8, time_based=0)],
                600, n))
    finally:
        errors = [e for e in (join() for join in joins)
                  if isinstance(e, BaseException)]
        for s in servers:
            s.stop()
    if errors:
        raise errors[0]


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


# How far apart the two sides' memory may read before a row says so.
MEMORY_SKEW = 0.10


def memory_balance(members, peer, what):
    """How fast the memory under each side reads, as files: the median of
    the members' sequential read MB/s (member_read_mbs, 0.5 s each), the
    peer file's (median of 3 such reads), and members / peer. On this VM
    files of the same size on /dev/shm read at 6.6 to 17.6 GB/s, apart
    by up to 40% for minutes and then not (session 37's note); a row run
    while they were apart may carry it, which memory_note marks. Logs the
    reading as `what`'s."""
    m = statistics.median(member_read_mbs(p, "500ms", 1) for p in members)
    f = member_read_mbs(peer, "500ms", 3)
    balance = {"members_mbs": m, "peer_mbs": f, "ratio": m / f if f else 0.0}
    log(f"bench: {what}: memory read as files: members {m:.0f} MB/s, peer "
        f"{f:.0f} MB/s ({balance['ratio']:.2f})")
    return balance


def memory_note(balance):
    """A mark for a row whose sides' memory read apart (memory_balance)."""
    return "" if abs(balance["ratio"] - 1.0) <= MEMORY_SKEW else " ‡"


def memory_footnote():
    return (f"‡ read as files just after the fill, the members' memory and "
            f"the peer file's were more than {MEMORY_SKEW:.0%} apart; on "
            f"this VM such a spread comes and goes within minutes, so the "
            f"ratios measured after it may carry some of it (either way)")


def rebuild_io_ceiling_mbs(sources, scratch, repeat):
    """What a rebuild's member I/O alone runs at on these members: fio
    reading each source member once, sequentially (psync, 512K pieces like
    the rebuild's), while writing a file of the same size whose memory
    exists (touched_file, as the rebuild's target), one job per file, all
    at once; median over `repeat` runs of member size /
    time of the slowest job. That is the most a rebuild that copies through
    read()/write() can reach here: on memory members a CPU (copy) bound,
    not a device one."""
    size = os.path.getsize(sources[0])
    vals = []
    for _ in range(repeat):
        touched_file(scratch, size)  # as the rebuild's target is
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


# Below this share of one CPU for a busy loop, before or after a row, the
# machine was too loaded to trust that row's absolute figures.
LOADED_SHARE = 0.75


def machine_share(seconds=0.3):
    """The share of one CPU a busy loop of this process gets over `seconds`
    (process CPU time / wall time): about 1.0 on an idle machine, 0.5 when
    another runnable task shares the core. Measured before and after a
    row, it says whether the machine was loaded while the row ran."""
    w0, c0 = time.perf_counter(), time.process_time()
    x = 0
    while time.perf_counter() - w0 < seconds:
        for i in range(10000):
            x += i
    return (time.process_time() - c0) / (time.perf_counter() - w0)


def ab_runs(repeat, shares, sides=("file", "uraid")):
    """(repetition, side) for `repeat` repetitions of both `sides`, which
    goes first flipping every repetition (A/B alternation against a
    neighbour's drift); appends a machine_share sample to `shares` before
    each repetition and after the last."""
    for rep in range(repeat):
        shares.append(machine_share())
        for side in (sides if rep % 2 == 0 else sides[::-1]):
            yield rep, side
    shares.append(machine_share())


def loaded_mark(shares):
    """The mark a table row gets when the machine was too loaded to trust
    its figures (" (LOADED x)", x the lowest machine_share sample around
    it); "" otherwise."""
    low = min(shares) if shares else 1.0
    return f" (LOADED {low:.2f})" if low < LOADED_SHARE else ""


def loaded_footnote(what):
    """What LOADED means, printed under a table with a LOADED `what`."""
    return (f"LOADED x: a busy loop got only x of a CPU (below "
            f"{LOADED_SHARE}) around that {what}: the machine was busy with "
            f"other work; its ratio to a peer measured beside it is worth "
            f"more than its MB/s.")


class RowLoad:
    """machine_share samples around each row of a part whose rows run one
    after another: start() before the first, ran(ROW) after each, so every
    row gets the samples on both sides of it; mark(ROW) is its
    loaded_mark."""

    def __init__(self):
        self.shares = {}
        self._last = None

    def start(self):
        self._last = machine_share()

    def ran(self, row):
        now = machine_share()
        self.shares.setdefault(row, []).extend(
            [s for s in (self._last, now) if s is not None])
        self._last = now

    def mark(self, row):
        return loaded_mark(self.shares.get(row, []))


def load_note(shares):
    """The row's note on the machine's load from machine_share samples."""
    low = min(shares)
    if low < LOADED_SHARE:
        return (f"LOADED: a busy loop got {low:.2f} of a CPU around the "
                f"runs; trust the paired ratio, not the MB/s")
    return f"busy loop {low:.2f} of a CPU around the runs"


def filled_array_and_peer(args, plugin, tool, d, members, chunk, mib, part,
                          create_args=()):
    """A RAID5 array of `members` files of `mib` MiB in `d` (chunk `chunk`,
    --assume-clean, `create_args`), filled, and a filled peer file of the
    array's size for the file plugin. Returns (member paths, peer, array
    bytes)."""
    paths = member_files(d, members, mib)
    run_tool(tool, "create", "--force", "--chunk", chunk, *create_args,
             "--assume-clean", *paths)
    size = json.loads(run_tool(tool, "detail", "--json",
                               *paths))["array_bytes"]
    peer = os.path.join(d, "file.img")
    with open(peer, "wb") as f:
        f.truncate(size)
    log(f"bench: {part}: filling {members} x {chunk} ({size // MIB} MiB) "
        f"and its peer")
    fill_exports_together(args, [member_args(plugin, paths, args),
                                 ["file", peer]], d, size)
    return paths, peer, size


def ab_with_counters(args, name, peer, uraid_args, stats, work, job, runtime,
                     size):
    """--repeat runs of fio `job` (one job) against the file plugin over
    `peer` and against uraid served with `uraid_args`, which write the
    array's counters to `stats` at exit, the sides alternating (ab_runs).
    Returns ({"file": [MB/s], "uraid": [MB/s]}, [(fio result, counters)
    of each uraid run], machine shares)."""
    mbs = {"file": [], "uraid": []}
    runs = []
    shares = []
    for _, side in ab_runs(args.repeat, shares):
        s = Server(args, f"{name}-{side}",
                   ["file", peer] if side == "file" else uraid_args, work)
        try:
            r = fio(s.uri, job, runtime, size)
        finally:
            s.stop()
        mbs[side].append(summarize(r, [0])["mbs"])
        if side == "uraid":
            with open(stats) as f:
                runs.append((r, json.load(f)))
            os.unlink(stats)
    return mbs, runs, shares
