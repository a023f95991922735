# SPDX-License-Identifier: MIT
"""Shared helpers for the integration tests: temporary member files, the
uraid tool, an nbdkit server with the plugin on a unix socket, and an
independent md layout model written from the md reference notes."""

import argparse
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import unittest

ARGS = None


def parse_args():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--tool", required=True)
    p.add_argument("--plugin", required=True)
    ARGS, rest = p.parse_known_args()
    return rest


def run_tool(*args, check=True):
    r = subprocess.run([ARGS.tool, *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError(f"uraid {' '.join(args)} failed "
                             f"({r.returncode}): {r.stderr}")
    return r



def control_call(ctl, request, timeout=30, must=True):
    """One JSON request on the control socket, without the tool, retried
    while the socket is not up yet (nbdkit opens it after forking). Returns
    the reply, which must be ok unless `must` is false."""
    deadline = time.time() + timeout
    while True:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(timeout)
                s.connect(ctl)
                s.sendall(json.dumps(request).encode() + b"\n")
                buf = b""
                while b"\n" not in buf:
                    chunk = s.recv(65536)
                    if not chunk:
                        raise ConnectionResetError("control socket closed")
                    buf += chunk
            break
        except (FileNotFoundError, ConnectionRefusedError,
                ConnectionResetError):
            if time.time() > deadline:
                raise
            time.sleep(0.01)
    reply = json.loads(buf.split(b"\n", 1)[0])
    if must:
        assert reply["ok"], (request, reply)
    return reply


def install_units(tmp):
    """cmake --install of the systemd component into tmp/prefix, with
    prefix/bin/uraid linking to the tool under test (the units' ExecStart
    names it). Returns (prefix, unit directory)."""
    build = os.path.dirname(os.path.dirname(ARGS.tool))
    prefix = os.path.join(tmp, "prefix")
    r = subprocess.run(["cmake", "--install", build, "--prefix", prefix,
                        "--component", "systemd"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    os.makedirs(os.path.join(prefix, "bin"))
    os.symlink(os.path.abspath(ARGS.tool), os.path.join(prefix, "bin/uraid"))
    return prefix, os.path.join(prefix, "lib/systemd/system")


def make_members(tmp, n, size):
    paths = []
    for i in range(n):
        p = os.path.join(tmp, f"m{i}.img")
        with open(p, "wb") as f:
            f.truncate(size)
        paths.append(p)
    return paths


class Server:
    """nbdkit -U SOCK -P PID -f --exit-with-parent PLUGIN member=..."""

    def __init__(self, tmp, members, extra=(), readonly=False):
        self.sock = os.path.join(tmp, "uraid.sock")
        self.pidfile = os.path.join(tmp, "uraid.pid")
        self.log = os.path.join(tmp, "nbdkit.log")
        for f in (self.sock, self.pidfile):
            if os.path.exists(f):
                os.unlink(f)  # nbdkit never deletes them itself
        cmd = ["nbdkit", "-U", self.sock, "-P", self.pidfile, "-f",
               "--exit-with-parent"]
        if readonly:
            cmd.append("-r")
        cmd += [ARGS.plugin] + [f"member={m}" for m in members] + list(extra)
        self.logf = open(self.log, "w")
        self.proc = subprocess.Popen(cmd, stdout=self.logf,
                                     stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not os.path.exists(self.pidfile):
            if self.proc.poll() is not None:
                raise RuntimeError(f"nbdkit exited (status "
                                   f"{self.proc.returncode}): " +
                                   self.output())
            if time.time() > deadline:
                self.proc.kill()
                raise RuntimeError("nbdkit did not start: " + self.output())
            time.sleep(0.02)
        self.uri = f"nbd+unix:///?socket={self.sock}"

    def output(self):
        if not self.logf.closed:
            self.logf.flush()
        with open(self.log) as f:
            return f.read()

    def connect(self):
        import nbd
        h = nbd.NBD()
        h.connect_unix(self.sock)
        return h

    def stop(self, sig=signal.SIGTERM):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=60)
        self.logf.close()
        return self.proc.returncode


def start_fails(tmp, members, extra=()):
    """Runs nbdkit expecting it to refuse to start; returns its output."""
    sock = os.path.join(tmp, "bad.sock")
    cmd = ["nbdkit", "-U", sock, "-f", "--exit-with-parent", ARGS.plugin]
    cmd += [f"member={m}" for m in members] + list(extra)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0, "nbdkit started but should have refused"
    return r.stdout + r.stderr


# --- independent md layout model (md reference §1.1 table) -------------

def md_place(chunk_number, n, layout):
    """(disk, parity disk, stripe) for data chunk number `chunk_number`."""
    dd = n - 1
    stripe, k = divmod(chunk_number, dd)
    r = stripe % n
    if layout in (0, 2):          # left: parity starts on the last disk
        pd = dd - r
    elif layout in (1, 3):        # right: parity starts on disk 0
        pd = r
    elif layout == 4:
        pd = 0
    else:
        pd = dd
    if layout in (0, 1):          # asymmetric: fill left to right, skip P
        disk = k if k < pd else k + 1
    elif layout in (2, 3):        # symmetric: start after P and wrap
        disk = (pd + 1 + k) % n
    elif layout == 4:
        disk = k + 1
    else:
        disk = k
    return disk, pd, stripe


def xor_bytes(chunks):
    out = bytearray(len(chunks[0]))
    acc = int.from_bytes(chunks[0], "little")
    for c in chunks[1:]:
        acc ^= int.from_bytes(c, "little")
    return acc.to_bytes(len(out), "little")


def main():
    rest = parse_args()
    unittest.main(argv=[os.path.basename(__file__)] + rest, verbosity=2)
