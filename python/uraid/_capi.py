# SPDX-License-Identifier: MIT
"""ctypes declarations of the C API (uraid/uraid.h) and the library handle.

Internal to the package: the public names are in uraid/__init__.py. The
structs here mirror uraid.h field for field; each carries struct_size, set
by _sized(), so this module keeps working against a newer liburaid.
"""

import ctypes
import os

from . import _paths

c_size_t = ctypes.c_size_t
c_int = ctypes.c_int
c_u64 = ctypes.c_uint64
c_u32 = ctypes.c_uint32
c_i32 = ctypes.c_int32
c_u16 = ctypes.c_uint16
c_u8 = ctypes.c_uint8
c_double = ctypes.c_double
c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
ERR = ctypes.c_char * 512

LOG_FN = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_char_p)


class CreateOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("level", c_int),
                ("layout", c_char_p), ("chunk_bytes", c_u64),
                ("name", c_char_p), ("member_bytes", c_u64),
                ("data_offset_bytes", c_u64), ("assume_clean", c_int),
                ("force", c_int), ("direct", c_int), ("bitmap", c_int),
                ("bitmap_file", c_char_p), ("bitmap_chunk_bytes", c_u64),
                ("cache_bytes", c_u64), ("log", LOG_FN),
                ("log_user", c_void_p), ("log_level", c_int)]


class AssembleOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("force", c_int),
                ("read_only", c_int), ("direct", c_int), ("no_lock", c_int),
                ("run", c_int), ("bitmap_file", c_char_p),
                ("cache_bytes", c_u64), ("log", LOG_FN),
                ("log_user", c_void_p), ("log_level", c_int)]


MAX_DISKS = 64
MAX_LISTED = 16  # URAID_MAX_LISTED


class Info(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("level", c_int),
                ("layout", c_int), ("layout_name", ctypes.c_char * 24),
                ("chunk_bytes", c_u64), ("raid_disks", c_int),
                ("member_bytes", c_u64), ("array_bytes", c_u64),
                ("data_offset_bytes", c_u64), ("uuid", c_u8 * 16),
                ("uuid_string", ctypes.c_char * 36),
                ("name", ctypes.c_char * 33), ("events", c_u64),
                ("clean", c_int), ("degraded", c_int), ("failed", c_int),
                ("read_only", c_int), ("resyncing", c_int),
                ("resync_bytes", c_u64), ("slot_state", c_int * MAX_DISKS),
                ("member_reads", c_u64), ("member_writes", c_u64),
                ("reconstructions", c_u64), ("spares", c_int),
                ("bitmap", c_int), ("bitmap_chunk_bytes", c_u64),
                ("bitmap_dirty_chunks", c_u64), ("reshaping", c_int),
                ("reshape_position_bytes", c_u64), ("job", c_int)]


class MemberInfo(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("slot", c_int),
                ("state", c_int), ("recovery_bytes", c_u64),
                ("name", ctypes.c_char * 1024)]


class Progress(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("kind", c_int),
                ("kind_name", ctypes.c_char * 16), ("done_bytes", c_u64),
                ("total_bytes", c_u64), ("percent", c_double),
                ("bytes_per_s", c_double), ("eta_seconds", c_double),
                ("slot", c_int), ("mismatches", c_u64),
                ("last_kind", c_int), ("last_result", ctypes.c_char * 256),
                ("last_mismatches", c_u64),
                # Level 6, appended (uraid.h).
                ("second_slot", c_int), ("last_n_located", c_int),
                ("located_mismatches", c_u64),
                ("last_located_mismatches", c_u64),
                ("last_located_stripes", c_u64 * MAX_LISTED),
                ("last_located_slots", c_int * MAX_LISTED),
                ("last_slot", c_int), ("last_second_slot", c_int)]


class GrowOptions(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("raid_devices", c_int),
                ("layout", c_char_p), ("chunk_bytes", c_u64),
                ("level", c_int), ("add", ctypes.POINTER(c_void_p)),
                ("n_add", c_size_t), ("manual", c_int)]


class Event(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("name", c_char_p),
                ("time", c_double), ("member", c_char_p), ("slot", c_int),
                ("json", c_char_p)]


EVENT_FN = ctypes.CFUNCTYPE(None, c_void_p, ctypes.POINTER(Event))


class Geometry(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("level", c_int),
                ("layout", c_int), ("chunk_bytes", c_u64),
                ("raid_disks", c_int), ("member_bytes", c_u64)]


class Location(ctypes.Structure):
    _fields_ = [("stripe", c_u64), ("data_index", c_int), ("disk", c_int),
                ("parity_disk", c_int), ("member_offset", c_u64)]


SB_BYTES = 4096
SB_MAX_DEV = 1920


class Superblock(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("feature_map", c_u32),
                ("set_uuid", c_u8 * 16), ("set_name", ctypes.c_char * 33),
                ("ctime", c_u64), ("level", c_i32), ("layout", c_u32),
                ("size", c_u64), ("chunksize", c_u32),
                ("raid_disks", c_u32), ("bitmap_offset", c_i32),
                ("new_level", c_u32), ("reshape_position", c_u64),
                ("delta_disks", c_i32), ("new_layout", c_u32),
                ("new_chunk", c_u32), ("new_offset", c_i32),
                ("data_offset", c_u64), ("data_size", c_u64),
                ("super_offset", c_u64), ("recovery_offset", c_u64),
                ("dev_number", c_u32), ("cnt_corrected_read", c_u32),
                ("device_uuid", c_u8 * 16), ("devflags", c_u8),
                ("bblog_shift", c_u8), ("bblog_size", ctypes.c_uint16),
                ("bblog_offset", ctypes.c_int32),
                ("utime", c_u64), ("events", c_u64),
                ("resync_offset", c_u64), ("sb_csum", c_u32),
                ("max_dev", c_u32), ("n_roles", c_u32),
                ("dev_roles", c_u16 * SB_MAX_DEV)]


def sized(cls):
    """A zeroed struct of `cls` with struct_size set (URAID_INIT)."""
    s = cls()
    s.struct_size = ctypes.sizeof(cls)
    return s


def _load():
    path = os.environ.get("URAID_LIBRARY")
    if not path:
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.normpath(os.path.join(here, _paths.LIBDIR_FROM_PACKAGE,
                                             _paths.SONAME))
    return ctypes.CDLL(path)


lib = _load()

_P = c_void_p  # opaque handles
_PP = ctypes.POINTER(c_void_p)
_E = (ctypes.c_char_p, c_size_t)  # err, err_len


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


uraid_version = _fn("uraid_version", c_char_p)
uraid_member_open = _fn("uraid_member_open", c_int, c_char_p, ctypes.c_uint,
                        _PP, *_E)
uraid_member_new_memory = _fn("uraid_member_new_memory", c_int, c_char_p,
                              c_u64, _PP, *_E)
uraid_member_new_faulty = _fn("uraid_member_new_faulty", c_int, _P, _PP, *_E)
uraid_member_set_failed = _fn("uraid_member_set_failed", c_int, _P, c_int)
uraid_member_fail_after = _fn("uraid_member_fail_after", c_int, _P, c_u64)
uraid_member_fail_range = _fn("uraid_member_fail_range", c_int, _P, c_int,
                              c_u64, c_u64, c_u64)
uraid_member_read = _fn("uraid_member_read", c_int, _P, c_void_p, c_size_t,
                        c_u64, *_E)
uraid_member_write = _fn("uraid_member_write", c_int, _P, c_void_p, c_size_t,
                         c_u64, *_E)
uraid_member_size = _fn("uraid_member_size", c_u64, _P)
uraid_member_name = _fn("uraid_member_name", c_char_p, _P)
uraid_member_free = _fn("uraid_member_free", None, _P)
uraid_create_from = _fn("uraid_create_from", c_int, _PP, c_size_t,
                        ctypes.POINTER(CreateOptions), _PP, *_E)
uraid_assemble_from = _fn("uraid_assemble_from", c_int, _PP, c_size_t,
                          ctypes.POINTER(AssembleOptions), _PP, *_E)
uraid_close = _fn("uraid_close", c_int, _P, *_E)
uraid_read = _fn("uraid_read", c_int, _P, c_void_p, c_size_t, c_u64, *_E)
uraid_write = _fn("uraid_write", c_int, _P, c_void_p, c_size_t, c_u64,
                  ctypes.c_uint, *_E)
uraid_flush = _fn("uraid_flush", c_int, _P, *_E)
uraid_trim = _fn("uraid_trim", c_int, _P, c_size_t, c_u64, ctypes.c_uint, *_E)
uraid_zero = _fn("uraid_zero", c_int, _P, c_size_t, c_u64, ctypes.c_uint, *_E)
uraid_size = _fn("uraid_size", c_u64, _P)
uraid_get_info = _fn("uraid_get_info", c_int, _P, ctypes.POINTER(Info))
uraid_get_member = _fn("uraid_get_member", c_int, _P, c_int,
                       ctypes.POINTER(MemberInfo))
uraid_fail_slot = _fn("uraid_fail_slot", c_int, _P, c_int, *_E)
uraid_fail = _fn("uraid_fail", c_int, _P, c_char_p, *_E)
uraid_remove = _fn("uraid_remove", c_int, _P, c_char_p, *_E)
uraid_add = _fn("uraid_add", c_int, _P, _P, *_E)
uraid_replace = _fn("uraid_replace", c_int, _P, c_char_p, _P, *_E)
uraid_get_progress = _fn("uraid_get_progress", c_int, _P,
                         ctypes.POINTER(Progress))
uraid_check = _fn("uraid_check", c_int, _P, c_int, *_E)
uraid_stop_job = _fn("uraid_stop_job", c_int, _P, *_E)
uraid_wait_job = _fn("uraid_wait_job", c_int, _P, *_E)
uraid_set_speed = _fn("uraid_set_speed", c_int, _P, c_u64, c_u64, *_E)
uraid_set_cache_bytes = _fn("uraid_set_cache_bytes", c_int, _P, c_u64)
uraid_grow = _fn("uraid_grow", c_int, _P, ctypes.POINTER(GrowOptions), *_E)
uraid_reshape_step = _fn("uraid_reshape_step", c_int, _P,
                         ctypes.POINTER(c_int), *_E)
uraid_add_event_listener = _fn("uraid_add_event_listener", c_int, _P,
                               EVENT_FN, c_void_p, ctypes.POINTER(c_u64))
uraid_remove_event_listener = _fn("uraid_remove_event_listener", None, _P,
                                  c_u64)
uraid_control_start = _fn("uraid_control_start", c_int, _P, c_char_p, _PP,
                          *_E)
uraid_control_stop = _fn("uraid_control_stop", None, _P)
uraid_parse_layout = _fn("uraid_parse_layout", c_int, c_char_p)
uraid_parse_layout_level = _fn("uraid_parse_layout_level", c_int, c_char_p,
                               c_int)
uraid_map = _fn("uraid_map", c_int, ctypes.POINTER(Geometry), c_u64,
                ctypes.POINTER(Location), *_E)
uraid_unmap = _fn("uraid_unmap", c_int, ctypes.POINTER(Geometry), c_int,
                  c_u64, ctypes.POINTER(c_u64), *_E)
uraid_superblock_decode = _fn("uraid_superblock_decode", c_int, c_void_p,
                              c_size_t, ctypes.POINTER(Superblock), *_E)
uraid_superblock_encode = _fn("uraid_superblock_encode", c_int,
                              ctypes.POINTER(Superblock), c_void_p, c_size_t,
                              *_E)


# --- buffers without copies -------------------------------------------
# PyObject_GetBuffer gives the address of any object with the buffer
# protocol (bytes, bytearray, memoryview, mmap, array, numpy), writable or
# not, without copying; ctypes' from_buffer would refuse read-only ones.

class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", c_void_p), ("obj", ctypes.py_object),
                ("len", ctypes.c_ssize_t), ("itemsize", ctypes.c_ssize_t),
                ("readonly", c_int), ("ndim", c_int), ("format", c_char_p),
                ("shape", c_void_p), ("strides", c_void_p),
                ("suboffsets", c_void_p), ("internal", c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), c_int]
_get_buffer.restype = c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None
_PYBUF_SIMPLE = 0
_PYBUF_WRITABLE = 1


class Buffer:
    """Context manager: (address, length) of `obj`'s contiguous bytes,
    held (the exporter cannot resize or free them) until exit."""

    def __init__(self, obj, writable):
        self._view = _PyBuffer()
        flags = _PYBUF_WRITABLE if writable else _PYBUF_SIMPLE
        # Raises BufferError/TypeError for a non-contiguous or read-only
        # buffer where a writable one is needed.
        _get_buffer(obj, ctypes.byref(self._view), flags)

    def __enter__(self):
        return self._view.buf or 0, self._view.len

    def __exit__(self, *exc):
        _release_buffer(ctypes.byref(self._view))
        return False
