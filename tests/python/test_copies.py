# SPDX-License-Identifier: MIT
"""Reads and writes of 1 MiB copy at most once on the Python side:
read() allocates only its result, readinto() and write() nothing of the
payload's size (the library moves bytes between the caller's buffer and
the members directly)."""

import tracemalloc

MIB = 1 << 20


def peak_of(fn):
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return peak, result


def test_one_mib_without_extra_copies(md_array):
    a = md_array(disks=5, chunk=64 << 10, member_data=4 * MIB)
    data = bytes(range(256)) * (MIB // 256)
    peak, _ = peak_of(lambda: a.write(data, 0))
    assert peak < MIB // 8, "write(bytes) copied the payload: %d" % peak
    peak, _ = peak_of(lambda: a.write(memoryview(data)[1:], 1))
    assert peak < MIB // 8, "write(memoryview) copied: %d" % peak
    buf = bytearray(MIB)
    peak, _ = peak_of(lambda: a.readinto(buf, 0))
    assert peak < MIB // 8, "readinto copied: %d" % peak
    assert buf[1:] == data[1:]
    peak, got = peak_of(lambda: a.read(MIB, 0))
    assert got[1:] == data[1:]
    assert MIB <= peak < MIB + MIB // 2, "read copied more than once: %d" % peak
    view = memoryview(buf)[MIB // 2:]
    a.readinto(view, 0)  # any writable buffer, no copy
    assert bytes(view[1:16]) == data[1:16]
