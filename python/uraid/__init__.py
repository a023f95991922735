# SPDX-License-Identifier: MIT
"""uraid: md-compatible RAID4/RAID5/RAID6 arrays in a Python process.

A thin layer over liburaid's C API (uraid/uraid.h) with ctypes: no compile
step, and the same ABI C, Rust and Go programs use. Arrays over member
files, NBD URIs or memory; reads and writes straight between the caller's
buffers and the members (no copy on the Python side); member management,
jobs, reshape; md's layout arithmetic and superblock codec with no array
at all. Errors raise UraidError (an OSError: .errno, and the library's
message naming the member and offset at fault).

Thread-safety: as the C API: every Array method may be called from any
number of threads at once (the GIL is released during I/O), except close().
Callbacks (log=, add_event_listener) run on the library's threads: keep
them quick, never call back into the array from them.

    import uraid
    members = [uraid.Member.memory(64 << 20) for _ in range(4)]
    with uraid.create(members, chunk=64 << 10, assume_clean=True) as a:
        a.write(b"x" * 4096, 0)
        assert a.read(4096, 0) == b"x" * 4096
"""

import ctypes
import errno as _errno
import json
import os
import threading
from collections import namedtuple

from . import _capi as _c

__all__ = [
    "UraidError", "Member", "FaultyMember", "Array", "Control", "create",
    "assemble", "map", "unmap", "Location", "decode_superblock",
    "encode_superblock", "parse_layout", "version", "LAYOUTS", "LAYOUTS6",
    "JOBS",
]

FUA = 1
LAYOUTS = ("left-asymmetric", "right-asymmetric", "left-symmetric",
           "right-symmetric", "parity-first", "parity-last")
# md's RAID6-only layouts by number (algorithm_valid_raid6 takes LAYOUTS'
# 0..5 too): the DDF ones and the RAID5 -> RAID6 conversion ones.
LAYOUTS6 = {8: "ddf-zero-restart", 9: "ddf-N-restart", 10: "ddf-N-continue",
            16: "left-asymmetric-6", 17: "right-asymmetric-6",
            18: "left-symmetric-6", 19: "right-symmetric-6",
            20: "parity-first-6"}
JOBS = ("idle", "resync", "recover", "replace", "check", "repair", "reshape")
_SLOT_STATES = ("active", "faulty", "missing", "rebuilding", "spare")
_LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical")
_CACHE_OFF = 2**64 - 1


class UraidError(OSError):
    """A failed call: .errno (positive), .strerror (the library's message:
    which member, which offset), .call (the C function)."""

    def __init__(self, err, message, call):
        super().__init__(err, message)
        self.call = call

    def __str__(self):
        return "%s: %s [%s]" % (self.call, self.strerror,
                                _errno.errorcode.get(self.errno, self.errno))


def _check(rc, err, call):
    if rc < 0:
        msg = err.value.decode("utf-8", "replace") if err is not None else ""
        raise UraidError(-rc, msg or os.strerror(-rc), call)
    return rc


def _call(fn, *args):
    """Calls a C function taking (..., err, err_len) and raises on error."""
    err = _c.ERR()
    rc = fn(*args, err, ctypes.sizeof(err))
    return _check(rc, err, fn.__name__)


def _b(s):
    return None if s is None else os.fsencode(s)


def version():
    """The linked liburaid's version, "MAJOR.MINOR.PATCH"."""
    return _c.uraid_version().decode()


def parse_layout(layout, level=5):
    """md's layout name, alias or number -> number, as mdadm parses
    --layout at `level`: 0..5 at levels 4 and 5; at level 6 also the
    LAYOUTS6 names and numbers (8-10, 16-20). ValueError if unknown."""
    if isinstance(layout, int):
        if 0 <= layout <= 5 or (level == 6 and layout in LAYOUTS6):
            return layout
        raise ValueError("layout %d is not md's %s" % (
            layout, "0-5, 8-10 or 16-20" if level == 6 else "0..5"))
    n = _c.uraid_parse_layout_level(_b(layout), level)
    if n < 0:
        raise ValueError("unknown layout %r at level %d" % (layout, level))
    return n


# ------------------------------------------------------------- members

class Member:
    """A member handle: a file, block device, NBD URI or memory buffer.
    Arrays hold their own reference, so a Member stays usable (raw I/O,
    fault injection, assembling the same memory members again) while in
    an array and after it closes."""

    def __init__(self, handle):
        self._h = ctypes.c_void_p(handle)

    @classmethod
    def open(cls, spec, read_only=False, direct=False, lock=True):
        """Opens a path or an NBD URI ("nbd+unix:///?socket=...")."""
        flags = ((1 if read_only else 0) | (2 if direct else 0) |
                 (0 if lock else 4))
        h = ctypes.c_void_p()
        _call(_c.uraid_member_open, _b(spec), flags, ctypes.byref(h))
        return cls(h.value)

    @classmethod
    def memory(cls, size, name=None):
        """A zero-filled member of `size` bytes in memory."""
        h = ctypes.c_void_p()
        _call(_c.uraid_member_new_memory, _b(name), size, ctypes.byref(h))
        return cls(h.value)

    @property
    def name(self):
        return os.fsdecode(_c.uraid_member_name(self._h))

    @property
    def size(self):
        return _c.uraid_member_size(self._h)

    def read(self, length, offset):
        """Raw member bytes (offset 4096 is the superblock)."""
        out = bytearray(length)
        self.readinto(out, offset)
        return out

    def readinto(self, buf, offset):
        with _c.Buffer(buf, True) as (addr, n):
            _call(_c.uraid_member_read, self._h, addr, n, offset)
        return n

    def write(self, data, offset):
        """Raw member write, bypassing any array (to corrupt a chunk)."""
        with _c.Buffer(data, False) as (addr, n):
            _call(_c.uraid_member_write, self._h, addr, n, offset)

    def close(self):
        if self._h:
            _c.uraid_member_free(self._h)
            self._h = ctypes.c_void_p()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return "<uraid.%s %s, %d bytes>" % (type(self).__name__, self.name,
                                            self.size)


class FaultyMember(Member):
    """A fault injector around another member (same name, same bytes)."""

    def __init__(self, handle, target):
        super().__init__(handle)
        self.target = target

    @classmethod
    def wrap(cls, target):
        h = ctypes.c_void_p()
        _call(_c.uraid_member_new_faulty, target._h, ctypes.byref(h))
        return cls(h.value, target)

    def fail(self, failed=True):
        """Every later call fails with EIO (failed=False heals)."""
        _check(_c.uraid_member_set_failed(self._h, 1 if failed else 0), None,
               "uraid_member_set_failed")

    def heal(self):
        self.fail(False)

    def fail_after(self, ios):
        """The next `ios` data I/Os succeed, then the member fails."""
        _check(_c.uraid_member_fail_after(self._h, ios), None,
               "uraid_member_fail_after")

    def fail_range(self, offset, length, op="any", times=None):
        """I/O of kind op ("read", "write", "any") overlapping the raw
        range fails with EIO, `times` times (None: always)."""
        code = {"read": 0, "write": 1, "any": 2}[op]
        _check(_c.uraid_member_fail_range(
            self._h, code, offset, length,
            2**64 - 1 if times is None else times), None,
            "uraid_member_fail_range")


def _member(m, opened):
    if m is None or isinstance(m, Member):
        return m
    handle = Member.open(m)
    opened.append(handle)
    return handle


def _handles(members):
    arr = (ctypes.c_void_p * max(1, len(members)))()
    for i, m in enumerate(members):
        arr[i] = None if m is None else m._h.value
    return arr


# --------------------------------------------------------------- arrays

def _log_fn(log):
    if log is None:
        return _c.LOG_FN()

    def cb(_user, level, message):
        try:
            log(_LOG_LEVELS[level] if 0 <= level < 6 else str(level),
                message.decode("utf-8", "replace"))
        except Exception:  # never let an exception unwind into C
            pass
    return _c.LOG_FN(cb)


def _cache(cache):
    if cache is None:
        return 0
    return _CACHE_OFF if cache == 0 else cache


def create(members, level=5, layout=None, chunk=0, name=None,
           member_bytes=0, data_offset=0, assume_clean=False, force=False,
           bitmap="internal", bitmap_chunk=0, cache=None, log=None,
           log_level="info"):
    """Writes new md v1.2 superblocks to `members` (Member, path or URI;
    None = a missing slot) and opens the array. level 4, 5 or 6; layout
    md's name or number as mdadm takes it at that level (parse_layout;
    None = left-symmetric, parity-last at level 4). chunk 0 = 512 KiB; bitmap
    "internal", "none" or a file path; cache bytes (0 = off, None =
    64 MiB); log(level_name, message) receives the array's log lines."""
    opened = []
    ms = [_member(m, opened) for m in members]
    o = _c.sized(_c.CreateOptions)
    o.level = level
    o.layout = None if layout is None else _b(str(layout))
    o.chunk_bytes = chunk
    o.name = _b(name)
    o.member_bytes = member_bytes
    o.data_offset_bytes = data_offset
    o.assume_clean = int(assume_clean)
    o.force = int(force)
    if bitmap in (None, "none"):
        o.bitmap = 2
    elif bitmap == "internal":
        o.bitmap = 1
    else:
        o.bitmap = 3
        o.bitmap_file = _b(bitmap)
    o.bitmap_chunk_bytes = bitmap_chunk
    o.cache_bytes = _cache(cache)
    logfn = _log_fn(log)
    o.log = logfn
    o.log_level = _LOG_LEVELS.index(log_level)
    h = ctypes.c_void_p()
    _call(_c.uraid_create_from, _handles(ms), len(ms), ctypes.byref(o),
          ctypes.byref(h))
    return Array(h.value, ms, logfn, opened)


def assemble(members, force=False, read_only=False, run=False,
             bitmap_file=None, cache=None, log=None, log_level="info"):
    """Forms the array recorded in the members' superblocks (any order;
    leave a missing member out). Paths and URIs are opened read-only when
    read_only."""
    opened = []
    ms = []
    for m in members:
        if isinstance(m, Member):
            ms.append(m)
        else:
            h = Member.open(m, read_only=read_only)
            opened.append(h)
            ms.append(h)
    o = _c.sized(_c.AssembleOptions)
    o.force = int(force)
    o.read_only = int(read_only)
    o.run = int(run)
    o.bitmap_file = _b(bitmap_file)
    o.cache_bytes = _cache(cache)
    logfn = _log_fn(log)
    o.log = logfn
    o.log_level = _LOG_LEVELS.index(log_level)
    h = ctypes.c_void_p()
    _call(_c.uraid_assemble_from, _handles(ms), len(ms), ctypes.byref(o),
          ctypes.byref(h))
    return Array(h.value, ms, logfn, opened)


class Control:
    """A control server (`uraid detail|fail|add ... --control SOCKET`)."""

    def __init__(self, handle, path):
        self._h = ctypes.c_void_p(handle)
        self.path = path

    def stop(self):
        if self._h:
            _c.uraid_control_stop(self._h)
            self._h = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Array:
    """An open array. Use as a context manager or call close()."""

    def __init__(self, handle, members, logfn, owned=()):
        self._h = ctypes.c_void_p(handle)
        self.members = list(members)  # the handles it was opened with
        # Handles the package opened from paths/URIs: released at close()
        # so the files (and their locks) are free again.
        self._owned = list(owned)
        self._logfn = logfn  # the C callback must outlive the array
        self._listeners = {}
        self._controls = []
        self._lock = threading.Lock()

    # --- lifetime
    def close(self):
        """Flushes, marks clean and frees the array (stops any control
        server first). Raises if the final flush failed."""
        if not self._h:
            return
        for c in self._controls:
            c.stop()
        h, self._h = self._h, ctypes.c_void_p()
        try:
            _call(_c.uraid_close, h)
        finally:
            for m in self._owned:
                m.close()
            self._owned = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _open(self, spec):
        m = Member.open(spec)
        self._owned.append(m)
        return m

    def _live(self):
        if not self._h:
            raise ValueError("the array is closed")
        return self._h

    # --- I/O
    @property
    def size(self):
        return _c.uraid_size(self._live())

    def read(self, length, offset):
        """`length` bytes at `offset` as a new bytearray: the only copy is
        the library's, from the members into it."""
        out = bytearray(length)
        self.readinto(out, offset)
        return out

    def readinto(self, buf, offset):
        """Reads len(buf) bytes at `offset` into any writable contiguous
        buffer (bytearray, memoryview, mmap, numpy) with no copy."""
        with _c.Buffer(buf, True) as (addr, n):
            _call(_c.uraid_read, self._live(), addr, n, offset)
        return n

    def write(self, data, offset, fua=False):
        """Writes any contiguous buffer (bytes too) at `offset`, no copy."""
        with _c.Buffer(data, False) as (addr, n):
            _call(_c.uraid_write, self._live(), addr, n, offset,
                  FUA if fua else 0)
        return n

    def flush(self):
        _call(_c.uraid_flush, self._live())

    def trim(self, length, offset, fua=False):
        _call(_c.uraid_trim, self._live(), length, offset, FUA if fua else 0)

    def zero(self, length, offset, fua=False):
        _call(_c.uraid_zero, self._live(), length, offset, FUA if fua else 0)

    # --- state
    def info(self):
        """A snapshot of shape and state as a dict."""
        i = _c.sized(_c.Info)
        _check(_c.uraid_get_info(self._live(), ctypes.byref(i)), None,
               "uraid_get_info")
        return {
            "level": i.level, "layout": i.layout_name.decode(),
            "layout_number": i.layout, "chunk": i.chunk_bytes,
            "raid_disks": i.raid_disks, "member_bytes": i.member_bytes,
            "size": i.array_bytes, "data_offset": i.data_offset_bytes,
            "uuid": i.uuid_string.decode(), "name": i.name.decode(),
            "events": i.events, "clean": bool(i.clean),
            "degraded": bool(i.degraded), "failed": bool(i.failed),
            "read_only": bool(i.read_only), "resyncing": bool(i.resyncing),
            "slots": [_SLOT_STATES[i.slot_state[s]]
                      for s in range(i.raid_disks)],
            "spares": i.spares, "bitmap": bool(i.bitmap),
            "bitmap_chunk": i.bitmap_chunk_bytes,
            "bitmap_dirty_chunks": i.bitmap_dirty_chunks,
            "reshaping": bool(i.reshaping),
            "reshape_position": i.reshape_position_bytes,
            "job": JOBS[i.job],
            "counters": {"member_reads": i.member_reads,
                         "member_writes": i.member_writes,
                         "reconstructions": i.reconstructions},
        }

    def member_list(self):
        """Slots in order, then spares: dicts of slot, state, name."""
        out = []
        idx = 0
        while True:
            mi = _c.sized(_c.MemberInfo)
            rc = _c.uraid_get_member(self._live(), idx, ctypes.byref(mi))
            if rc == -_errno.ENOENT:
                return out
            _check(rc, None, "uraid_get_member")
            out.append({"slot": mi.slot, "state": _SLOT_STATES[mi.state],
                        "name": os.fsdecode(mi.name),
                        "recovery_bytes": mi.recovery_bytes})
            idx += 1

    # --- member management
    def fail(self, member):
        """md's --fail: by name (str), by slot (int), or a Member."""
        if isinstance(member, int):
            _call(_c.uraid_fail_slot, self._live(), member)
        else:
            name = member.name if isinstance(member, Member) else member
            _call(_c.uraid_fail, self._live(), _b(name))

    def remove(self, member):
        name = member.name if isinstance(member, Member) else member
        _call(_c.uraid_remove, self._live(), _b(name))

    def add(self, member):
        """Adds a spare (Member, path or URI); a degraded array rebuilds
        onto it in the background (wait())."""
        m = member if isinstance(member, Member) else self._open(member)
        _call(_c.uraid_add, self._live(), m._h)
        self.members.append(m)
        return m

    def replace(self, old, new):
        name = old.name if isinstance(old, Member) else old
        m = new if isinstance(new, Member) else self._open(new)
        _call(_c.uraid_replace, self._live(), _b(name), m._h)
        self.members.append(m)
        return m

    # --- jobs
    def check(self, repair=False):
        """Starts a scrub (wait() for it; progress() for the count)."""
        _call(_c.uraid_check, self._live(), 1 if repair else 0)

    def repair(self):
        self.check(repair=True)

    def stop(self):
        """Stops the running job (md's "idle"); returns (GIL released) once
        it has ended. A resync goes on and is not waited for."""
        _call(_c.uraid_stop_job, self._live())

    def wait(self):
        """Blocks (GIL released) until no job runs; raises if the last job
        failed."""
        _call(_c.uraid_wait_job, self._live())

    def progress(self):
        """The running job and the last one's outcome. At level 6:
        second_slot (a second slot rebuilt in the same pass, else -1),
        located / last_located (of the mismatches, stripes whose one bad
        chunk P and Q located) and last_located_list, [(stripe, slot)] of
        the first of those (repair rewrote that slot's chunk); last_slot
        and last_second_slot, the slots the last recovery rebuilt."""
        p = _c.sized(_c.Progress)
        _check(_c.uraid_get_progress(self._live(), ctypes.byref(p)), None,
               "uraid_get_progress")
        return {"job": JOBS[p.kind], "done": p.done_bytes,
                "total": p.total_bytes, "percent": p.percent,
                "speed": p.bytes_per_s,
                "eta": None if p.eta_seconds < 0 else p.eta_seconds,
                "slot": p.slot, "mismatches": p.mismatches,
                "second_slot": p.second_slot,
                "located": p.located_mismatches,
                "last_job": JOBS[p.last_kind],
                "last_result": p.last_result.decode("utf-8", "replace"),
                "last_mismatches": p.last_mismatches,
                "last_slot": p.last_slot,
                "last_second_slot": p.last_second_slot,
                "last_located": p.last_located_mismatches,
                "last_located_list": [
                    (p.last_located_stripes[i], p.last_located_slots[i])
                    for i in range(p.last_n_located)]}

    def set_speed(self, min_kib_s=0, max_kib_s=0):
        _call(_c.uraid_set_speed, self._live(), min_kib_s, max_kib_s)

    def set_cache(self, nbytes):
        _c.uraid_set_cache_bytes(self._live(), nbytes)

    def grow(self, raid_devices=0, add=(), layout=None, chunk=0, level=0,
             manual=False):
        """md's --grow: restripes in the background (wait()), or with
        manual=True one reshape_step() at a time."""
        ms = [m if isinstance(m, Member) else self._open(m) for m in add]
        g = _c.sized(_c.GrowOptions)
        g.raid_devices = raid_devices
        g.layout = None if layout is None else _b(str(layout))
        g.chunk_bytes = chunk
        g.level = level
        arr = _handles(ms)
        g.add = ctypes.cast(arr, ctypes.POINTER(ctypes.c_void_p))
        g.n_add = len(ms)
        g.manual = int(manual)
        _call(_c.uraid_grow, self._live(), ctypes.byref(g))
        self.members.extend(ms)

    def reshape_step(self):
        """Copies one window of a manual reshape; True once finished."""
        done = ctypes.c_int()
        _call(_c.uraid_reshape_step, self._live(), ctypes.byref(done))
        return bool(done.value)

    # --- events and control
    def add_event_listener(self, fn):
        """fn(event_dict) for every event (mdadm --monitor's names in
        "event"), called on the library's threads. Returns an id."""
        def cb(_user, ev):
            try:
                fn(json.loads(ev.contents.json.decode("utf-8", "replace")))
            except Exception:
                pass
        cfn = _c.EVENT_FN(cb)
        ident = ctypes.c_uint64()
        _check(_c.uraid_add_event_listener(self._live(), cfn, None,
                                           ctypes.byref(ident)), None,
               "uraid_add_event_listener")
        with self._lock:
            self._listeners[ident.value] = cfn
        return ident.value

    def remove_event_listener(self, ident):
        _c.uraid_remove_event_listener(self._live(), ident)
        with self._lock:
            self._listeners.pop(ident, None)

    def serve_control(self, socket_path):
        """Starts the control server on a unix socket; returns a Control
        (stop() it, or it stops at close())."""
        h = ctypes.c_void_p()
        _call(_c.uraid_control_start, self._live(), _b(socket_path),
              ctypes.byref(h))
        c = Control(h.value, socket_path)
        self._controls.append(c)
        return c


# ---------------------------------------------------- md's arithmetic

Location = namedtuple("Location", "stripe data_index disk parity_disk "
                      "member_offset")


def _geometry(disks, layout, chunk, level, member_bytes):
    g = _c.sized(_c.Geometry)
    g.level = level
    g.layout = parse_layout(layout, level)
    g.chunk_bytes = chunk
    g.raid_disks = disks
    g.member_bytes = member_bytes
    return g


def map(offset, disks, layout="left-symmetric", chunk=512 << 10, level=5,
        member_bytes=0):
    """Where md puts array byte `offset`: a Location (member_offset counts
    from the data offset; at level 6 parity_disk is P's disk). level 4, 5
    or 6, layout as parse_layout takes it at that level. member_bytes 0 =
    unbounded."""
    g = _geometry(disks, layout, chunk, level, member_bytes)
    loc = _c.Location()
    _call(_c.uraid_map, ctypes.byref(g), offset, ctypes.byref(loc))
    return Location(loc.stripe, loc.data_index, loc.disk, loc.parity_disk,
                    loc.member_offset)


def unmap(disk, member_offset, disks, layout="left-symmetric",
          chunk=512 << 10, level=5, member_bytes=0):
    """The inverse of map: the array offset of byte `member_offset` (from
    the data offset) of `disk`, or None when it holds parity."""
    g = _geometry(disks, layout, chunk, level, member_bytes)
    out = ctypes.c_uint64()
    err = _c.ERR()
    rc = _c.uraid_unmap(ctypes.byref(g), disk, member_offset,
                        ctypes.byref(out), err, ctypes.sizeof(err))
    if rc == -_errno.ENOENT:
        return None
    _check(rc, err, "uraid_unmap")
    return out.value


_SB_BYTES_FIELDS = ("set_uuid", "device_uuid")


def decode_superblock(data):
    """md v1.2 superblock bytes (read at member byte 4096) -> dict of md's
    field names; dev_roles as a list. UraidError if corrupt."""
    sb = _c.sized(_c.Superblock)
    with _c.Buffer(data, False) as (addr, n):
        _call(_c.uraid_superblock_decode, addr, n, ctypes.byref(sb))
    out = {}
    for name, _ in _c.Superblock._fields_:
        if name in ("struct_size", "n_roles", "dev_roles"):
            continue
        v = getattr(sb, name)
        if name in _SB_BYTES_FIELDS:
            v = bytes(v)
        elif name == "set_name":
            v = v.decode("utf-8", "replace")
        out[name] = v
    out["dev_roles"] = list(sb.dev_roles[:sb.n_roles])
    return out


def encode_superblock(fields):
    """The inverse of decode_superblock: a dict (missing keys = 0) ->
    4096 bytes with a fresh checksum."""
    sb = _c.sized(_c.Superblock)
    for name, value in fields.items():
        if name == "dev_roles":
            if len(value) > _c.SB_MAX_DEV:
                raise ValueError("more than %d roles" % _c.SB_MAX_DEV)
            sb.n_roles = len(value)
            for i, r in enumerate(value):
                sb.dev_roles[i] = r
        elif name in _SB_BYTES_FIELDS:
            ctypes.memmove(getattr(sb, name), bytes(value), 16)
        elif name == "set_name":
            sb.set_name = value.encode() if isinstance(value, str) else value
        elif name != "sb_csum":
            setattr(sb, name, value)
    out = bytearray(_c.SB_BYTES)
    with _c.Buffer(out, True) as (addr, n):
        _call(_c.uraid_superblock_encode, ctypes.byref(sb), addr, n)
    return bytes(out)
