# SPDX-License-Identifier: MIT
"""The uraid Python package over every kind of member: files, NBD URIs and
memory; the request path, member management, jobs, reshape, events,
control, the superblock codec and errors."""

import errno
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest

import uraid

CHUNK = 64 << 10
MEMBER_DATA = 32 * CHUNK
OFFSET = 1 << 20
RAW = OFFSET + MEMBER_DATA


def pattern(n, seed):
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


def test_version():
    assert uraid.version().count(".") == 2


# ---------------------------------------------------------------- files

def test_files_create_assemble_io(tmp_path):
    paths = []
    for i in range(4):
        p = tmp_path / ("m%d.img" % i)
        with open(p, "wb") as f:
            f.truncate(RAW)
        paths.append(str(p))
    data = pattern(3 * CHUNK + 100, 1)
    with uraid.create(paths, chunk=CHUNK, assume_clean=True,
                      data_offset=OFFSET, name="pyfiles") as a:
        assert a.size == 3 * MEMBER_DATA
        a.write(data, 5000)
        a.flush()
        assert a.read(len(data), 5000) == data
        a.zero(4096, 8192, fua=True)
        assert a.read(4096, 8192) == bytes(4096)
        a.trim(3 * CHUNK, 0)  # advisory: whole stripes only
        info = a.info()
        assert info["name"] == "pyfiles"
        assert info["raid_disks"] == 4
        assert info["slots"] == ["active"] * 4
    # Any order; read-only opens the files O_RDONLY.
    with uraid.assemble(list(reversed(paths)), read_only=True) as a:
        assert a.info()["read_only"]
        got = a.read(len(data), 5000)
        # Stripe 0 (3 chunks) was trimmed; the rest is the data.
        cut = 3 * CHUNK - 5000
        assert got[cut:] == data[cut:]
        with pytest.raises(uraid.UraidError) as e:
            a.write(b"x", 0)
        assert e.value.errno == errno.EPERM


def test_locked_member_is_ebusy(tmp_path):
    p = tmp_path / "locked.img"
    with open(p, "wb") as f:
        f.truncate(RAW)
    held = uraid.Member.open(str(p))
    with pytest.raises(uraid.UraidError) as e:
        uraid.Member.open(str(p))
    assert e.value.errno == errno.EBUSY
    assert "locked" in e.value.strerror
    held.close()
    uraid.Member.open(str(p)).close()  # free again


def test_errors_carry_errno_and_message(md_array):
    a = md_array(disks=3)
    with pytest.raises(uraid.UraidError) as e:
        a.read(10, a.size)
    assert e.value.errno == errno.EINVAL
    assert isinstance(e.value, OSError)
    assert "uraid_read" in str(e.value)
    with pytest.raises(uraid.UraidError) as e:
        a.fail("no-such-member")
    assert e.value.errno == errno.ENOENT
    with pytest.raises(uraid.UraidError) as e:
        uraid.create([uraid.Member.memory(RAW)] * 2, chunk=CHUNK)
    assert e.value.errno == errno.EINVAL


# ----------------------------------------------------------------- NBD

@pytest.fixture
def nbd_servers(tmp_path):
    """Three nbdkit memory exports on unix sockets; their URIs."""
    if shutil.which("nbdkit") is None:
        pytest.fail("nbdkit is not installed (scripts/setup.sh installs it)")
    procs, uris = [], []
    try:
        for i in range(3):
            sock = str(tmp_path / ("n%d.sock" % i))
            procs.append(subprocess.Popen(
                ["nbdkit", "-f", "-U", sock, "memory", str(RAW)]))
            uris.append("nbd+unix:///?socket=" + sock)
        for u in uris:
            sock = u.split("=", 1)[1]
            for _ in range(200):
                if os.path.exists(sock):
                    break
                time.sleep(0.02)
        yield uris
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)


def test_nbd_members(nbd_servers):
    data = pattern(2 * CHUNK, 9)
    with uraid.create(nbd_servers, chunk=CHUNK, assume_clean=True,
                      data_offset=OFFSET) as a:
        a.write(data, CHUNK)
    with uraid.assemble(nbd_servers) as a:
        assert a.read(len(data), CHUNK) == data
        assert [m["name"] for m in a.member_list()] == nbd_servers


# -------------------------------------------------- memory and faults

def test_degraded_read(md_array):
    a = md_array(disks=4, faulty=True)
    data = pattern(a.size, 3)
    a.write(data, 0)
    a.faulty[1].fail()
    assert a.read(a.size, 0) == data
    info = a.info()
    assert info["degraded"]
    assert info["slots"][1] == "faulty"
    assert info["counters"]["reconstructions"] > 0


def test_fail_add_rebuild_replace(md_array):
    events = []
    a = md_array(disks=4, spares=1)
    a.add_event_listener(events.append)
    data = pattern(a.size, 4)
    a.write(data, 0)
    assert a.member_list()[4]["state"] == "spare"
    a.fail("m1")
    a.wait()
    p = a.progress()
    assert p["last_job"] == "recover"
    assert p["last_result"] == "completed"
    assert a.member_list()[1]["name"] == "s0"
    # The rebuilt slot's failed member was let go with the rebuild.
    assert "m1" not in [m["name"] for m in a.member_list()]
    assert a.read(a.size, 0) == data
    new = uraid.Member.memory(RAW, name="r0")
    a.replace("m0", new)
    a.wait()
    assert a.progress()["last_job"] == "replace"
    assert a.member_list()[0]["name"] == "r0"
    assert a.read(a.size, 0) == data
    names = [e["event"] for e in events]
    assert "Fail" in names and "RebuildFinished" in names
    # Fail by slot too.
    a.fail(2)
    assert a.info()["slots"][2] == "faulty"


def test_remove_then_add(md_array):
    a = md_array(disks=3)
    data = pattern(a.size, 8)
    a.write(data, 0)
    seen = []
    ident = a.add_event_listener(seen.append)
    with pytest.raises(uraid.UraidError) as e:
        a.remove("m0")
    assert e.value.errno == errno.EPERM  # active: fail it first
    a.fail("m0")
    a.remove("m0")
    assert a.member_list()[0]["state"] == "missing"
    assert a.read(a.size, 0) == data  # degraded read
    a.remove_event_listener(ident)
    count = len(seen)
    assert count > 0
    a.add(uraid.Member.memory(RAW, name="n0"))
    a.wait()
    assert len(seen) == count  # removed listener hears nothing more
    assert a.member_list()[0]["name"] == "n0"
    assert not a.info()["degraded"]
    assert a.read(a.size, 0) == data


def test_check_and_repair(md_array):
    a = md_array(disks=3)
    a.write(pattern(a.size, 5), 0)
    a.check()
    a.wait()
    assert a.progress()["last_mismatches"] == 0
    # Corrupt one data chunk under the array, then scrub.
    base = a.info()["data_offset"]
    a.memory[0].write(b"\xff" * 4096, base)
    a.check()
    a.wait()
    assert a.progress()["last_mismatches"] == 1
    a.repair()
    a.wait()
    a.check()
    a.wait()
    assert a.progress()["last_mismatches"] == 0
    a.set_speed(1000, 100000)
    a.set_cache(0)
    a.stop()  # nothing running: fine


def test_raid6_check_names_the_slot_and_grow_takes_raid6_layouts(md_array):
    a = md_array(disks=6, level=6, layout="left-symmetric", chunk=CHUNK)
    data = pattern(a.size, 11)
    a.write(data, 0)
    base = a.info()["data_offset"]
    # Array byte 2 chunks + 3 stripes in, corrupted on its member.
    loc = uraid.map((3 * 4 + 2) * CHUNK, 6, layout="left-symmetric",
                    chunk=CHUNK, level=6)
    a.memory[loc.disk].write(b"\x5a" * 4096, base + loc.member_offset)
    a.check()
    a.wait()
    p = a.progress()
    assert p["last_mismatches"] == 1
    assert p["last_located"] == 1
    assert p["last_located_list"] == [(loc.stripe, loc.disk)]
    assert p["second_slot"] == -1 and p["last_slot"] == -1
    a.repair()
    a.wait()
    assert a.read(a.size, 0) == data
    # The array is level 6: md's RAID6 names restripe it.
    a.grow(layout="left-symmetric-6", manual=True)
    while not a.reshape_step():
        pass
    assert a.info()["layout"] == "left-symmetric-6"
    # To level 5: a RAID6 name is refused there.
    with pytest.raises(uraid.UraidError) as e:
        a.grow(level=5, layout="left-symmetric-6")
    assert e.value.errno == errno.EINVAL
    a.grow(level=5, layout="left-symmetric")
    assert a.info()["level"] == 5
    assert a.read(a.size, 0) == data


def test_raid6_two_failures_rebuild_in_one_pass(md_array):
    a = md_array(disks=6, level=6, layout="right-symmetric", chunk=CHUNK,
                 spares=2)
    data = pattern(a.size, 12)
    a.write(data, 0)
    a.set_speed(64, 64)  # the first rebuild is still running at the second
    a.fail("m1")
    deadline = time.time() + 10
    while a.progress()["done"] == 0 and time.time() < deadline:
        time.sleep(0.02)
    assert a.progress()["job"] == "recover" and a.progress()["slot"] == 1
    a.fail("m4")  # joins the running rebuild: one pass over both
    deadline = time.time() + 10
    while a.progress()["second_slot"] != 4 and time.time() < deadline:
        time.sleep(0.02)
    assert a.progress()["second_slot"] == 4
    a.set_speed(100000, 1000000)
    a.wait()
    p = a.progress()
    assert p["last_job"] == "recover" and p["last_result"] == "completed"
    assert (p["last_slot"], p["last_second_slot"]) == (1, 4)
    assert not a.info()["degraded"]
    assert a.read(a.size, 0) == data


def test_grow_reshape(md_array):
    a = md_array(disks=4)
    data = pattern(a.size, 6)
    a.write(data, 0)
    before = a.size
    a.grow(raid_devices=5, add=[uraid.Member.memory(RAW, name="m4")])
    a.wait()
    assert a.info()["raid_disks"] == 5
    assert a.size > before
    assert a.read(before, 0) == data


def test_manual_layout_reshape(md_array):
    a = md_array(disks=4, layout="left-symmetric")
    data = pattern(a.size, 7)
    a.write(data, 0)
    a.grow(layout="right-symmetric", manual=True)
    assert a.info()["reshaping"]
    steps = 0
    while not a.reshape_step():
        steps += 1
        assert steps < 10000
    assert a.info()["layout"] == "right-symmetric"
    assert a.read(a.size, 0) == data


def test_log_callback(faulty_member):
    lines = []
    members = [faulty_member(RAW, name="f%d" % i) for i in range(3)]
    with uraid.create(members, chunk=CHUNK, assume_clean=True,
                      data_offset=OFFSET,
                      log=lambda lvl, msg: lines.append((lvl, msg))) as a:
        members[2].fail()
        a.read(a.size, 0)
        assert a.info()["degraded"]
    assert any(lvl in ("warning", "error", "critical") for lvl, _ in lines)


def test_faulty_member_rules(faulty_member):
    f = faulty_member(RAW)
    f.write(b"abc", 0)
    f.fail_range(0, 10, op="read", times=1)
    with pytest.raises(uraid.UraidError) as e:
        f.read(3, 0)
    assert e.value.errno == errno.EIO
    assert f.read(3, 0) == b"abc"  # healed after one
    f.fail_after(1)
    f.read(3, 0)
    with pytest.raises(uraid.UraidError):
        f.read(3, 0)
    f.heal()
    assert f.read(3, 0) == b"abc"


def test_control_server(md_array, tmp_path):
    a = md_array(disks=3)
    sock = str(tmp_path / "ctl.sock")
    c = a.serve_control(sock)
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    s.sendall(b'{"cmd":"detail"}\n')
    reply = b""
    while not reply.endswith(b"\n"):
        reply += s.recv(65536)
    s.close()
    assert b'"ok":true' in reply
    c.stop()
    assert not os.path.exists(sock)


def test_threads_share_an_array(md_array):
    a = md_array(disks=4)
    errors = []

    def worker(k):
        try:
            d = bytes([k]) * CHUNK
            for i in range(8):
                off = (k * 8 + i) * CHUNK
                a.write(d, off)
                assert a.read(CHUNK, off) == d
        except Exception as e:  # pragma: no cover
            errors.append(e)
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


# ---------------------------------------------------- superblock codec

def test_superblock_decode_encode(md_array):
    a = md_array(disks=4, chunk=CHUNK, name="sbpy")
    raw = bytes(a.memory[2].read(4096, 4096))
    sb = uraid.decode_superblock(raw)
    assert sb["level"] == 5
    assert sb["layout"] == 2
    assert sb["raid_disks"] == 4
    assert sb["chunksize"] == CHUNK // 512
    assert sb["set_name"] == "sbpy"
    assert sb["dev_roles"][sb["dev_number"]] == 2
    assert uraid.encode_superblock(sb) == raw
    sb["events"] += 1
    changed = uraid.encode_superblock(sb)
    assert uraid.decode_superblock(changed)["events"] == sb["events"]
    bad = bytearray(raw)
    bad[200] ^= 1
    with pytest.raises(uraid.UraidError) as e:
        uraid.decode_superblock(bad)
    assert "checksum" in e.value.strerror


# ------------------------------------------------- bitmap and cache options

def test_bitmap_file_and_cache_options(tmp_path):
    bitmap = str(tmp_path / "bitmap")
    members = [uraid.Member.memory(RAW, name="b%d" % i) for i in range(3)]
    data = pattern(2 * CHUNK, 11)
    with uraid.create(members, chunk=CHUNK, assume_clean=True,
                      data_offset=OFFSET, bitmap=bitmap,
                      bitmap_chunk=4 * CHUNK, cache=1 << 20) as a:
        info = a.info()
        assert info["bitmap"] and info["bitmap_chunk"] == 4 * CHUNK
        a.write(data, 0)
    assert os.path.getsize(bitmap) > 0
    # The superblocks do not name an external bitmap: without the file the
    # array assembles with none, with it the bitmap is back.
    with uraid.assemble(members, cache=0) as a:
        assert not a.info()["bitmap"]
    with uraid.assemble(members, bitmap_file=bitmap) as a:
        assert a.info()["bitmap"]
        assert a.read(len(data), 0) == data
    with uraid.create(members, chunk=CHUNK, assume_clean=True, force=True,
                      data_offset=OFFSET, bitmap="internal") as a:
        assert a.info()["bitmap"]


def test_locked_bitmap_file_is_ebusy(tmp_path):
    bitmap = str(tmp_path / "bitmap")
    members = [uraid.Member.memory(RAW, name="k%d" % i) for i in range(3)]
    with uraid.create(members, chunk=CHUNK, assume_clean=True,
                      data_offset=OFFSET, bitmap=bitmap):
        # The same array's members again (memory handles share bytes), the
        # bitmap file still locked by the open array.
        with pytest.raises(uraid.UraidError) as e:
            uraid.assemble(members, bitmap_file=bitmap)
        assert e.value.errno == errno.EBUSY
        assert "locked" in e.value.strerror
