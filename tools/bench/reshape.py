# SPDX-License-Identifier: MIT
"""Online reshape: a grow by one member, unthrottled, and a client beside
one."""

import os
import shutil
import statistics
import time

from bench.common import (EXTRA_PARTS, MIB, UNTHROTTLED_KIB_S, CtlServer,
                          ctl_request, fio, load_note, log, machine_share,
                          make_array, member_args, member_read_mbs, run_tool,
                          summarize, touched_file, wait_job, wanted)

# A grow by one member moves each member byte through a read and a write
# of every member (4 reads and 5 writes per member byte for 4 -> 5),
# against a rebuild's n-1 reads and one write: about 4/9 of a rebuild's
# rate where the copies bound both (memory members). Issue 35's target.
RESHAPE_VS_REBUILD = 0.45


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
    # Inside this run's own directory: a fixed name under --dir was shared
    # with (and removed under) any other bench running on the same --dir.
    d = os.path.join(work, "reshape")
    out = {"rows": [], "member_mib": args.rebuild_member_size}
    read_mbs = None

    def filled_server():
        """A fresh array filled with data (no holes to read fast), served
        with a control socket, and a file of zeros to grow onto, its memory
        touched (touched_file): (members, that file, the server, the
        array's bytes)."""
        shutil.rmtree(d, ignore_errors=True)
        members, _ = make_array(tool, d, args, args.rebuild_member_size)
        extra = os.path.join(d, "new.img")
        touched_file(extra, args.rebuild_member_size * MIB)
        srv = CtlServer(member_args(plugin, members, args), work, "reshape")
        try:
            size = srv.detail()["member_bytes"] * (args.members - 1)
            fio(srv.uri, [dict(rw="write", bs="1m", iodepth=8,
                               time_based=0)], 600, size)
        except BaseException:
            srv.stop()
            raise
        return members, extra, srv, size

    def rebuild_last(srv, members, d, mib):
        """Fails and removes the array's last member, rebuilds onto a
        file of zeros in its place, its memory touched like the grow's
        (touched_file, before the old member's pages are freed); returns
        the rate in member bytes per second (the add request to the job's
        end, like the grow)."""
        old = members[-1]
        run_tool(tool, "fail", "--control", srv.ctl, old)
        run_tool(tool, "remove", "--control", srv.ctl, old)
        new = os.path.join(d, "rebuilt.img")
        touched_file(new, mib * MIB)
        os.unlink(old)
        before = srv.detail()["last_job"]
        t0 = time.time()
        # On the control socket, as the grow is asked: no process start
        # in either's time.
        ctl_request(srv.ctl, {"cmd": "add", "member": new})
        t1, det = wait_job(srv, "recover", before)
        lj = det["last_job"]
        if lj["result"] != "completed":
            raise RuntimeError(f"rebuild before the grow: {lj}")
        members[-1] = new
        return lj["total_bytes"] / (t1 - t0) / 1e6

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
            vals, engine, rebuilds, paired, shares = [], [], [], [], []
            for _ in range(args.repeat):
                members, extra, srv, size = filled_server()
                try:
                    if read_mbs is None:
                        read_mbs = member_read_mbs(members[0], 3, args.repeat)
                    shares.append(machine_share())
                    # Both limits lifted (speed-min too: a client idle check
                    # never applies).
                    run_tool(tool, "set", "--control", srv.ctl,
                             "--speed-min", str(UNTHROTTLED_KIB_S),
                             "--speed-max", str(UNTHROTTLED_KIB_S))
                    # The peer: a rebuild of the same filled array just
                    # before its grow, so that both see the same machine.
                    rb = rebuild_last(srv, members, d,
                                      args.rebuild_member_size)
                    secs, lj = grow(srv, extra)
                    vals.append(lj["total_bytes"] / secs / 1e6)
                    engine.append(lj["bytes_per_s"] / 1e6)
                    rebuilds.append(rb)
                    paired.append(vals[-1] / rb)
                    shares.append(machine_share())
                    log(f"bench: reshape {args.members}->{args.members + 1}: "
                        f"{lj['total_bytes'] // MIB} MiB/member in "
                        f"{secs:.2f}s = {vals[-1]:.0f} MB/s per member; "
                        f"rebuild just before {rb:.0f} MB/s: "
                        f"{paired[-1]:.2f}x")
                finally:
                    srv.stop()
            mbs = statistics.median(vals)
            vs_rebuild = statistics.median(paired)
            out["rows"].append({
                "part": "reshape: grow unthrottled", "mbs": mbs,
                "engine_mbs": statistics.median(engine),
                "vs_read": mbs / read_mbs,
                "rebuild_mbs": statistics.median(rebuilds),
                "vs_rebuild": vs_rebuild, "paired": paired,
                "target": f"≥ {RESHAPE_VS_REBUILD:.2f}× rebuild",
                "pass": vs_rebuild >= RESHAPE_VS_REBUILD,
                "samples": vals, "machine_share": min(shares),
                "how": f"median of {args.repeat} whole grows "
                       f"{args.members}->{args.members + 1}, request to "
                       f"job end, idle array; each against a rebuild of "
                       f"the same array just before it (median of the "
                       f"paired ratios); {load_note(shares)}"})
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
