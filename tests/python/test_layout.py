# SPDX-License-Identifier: MIT
"""md's left-symmetric RAID5 layout over 5 disks, checked against md's
table two ways: the pure map (uraid.map / uraid.unmap), and the bytes the
engine actually puts on the members (md_array's memory members)."""

import functools

import uraid

CHUNK = 4096
DISKS = 5
# md's left-symmetric placement, 5 disks: per stripe, what each disk holds
# (data chunk number, or "P" for parity). Parity walks from the last disk
# down; data starts right after parity and wraps.
LEFT_SYMMETRIC_5 = [
    [0, 1, 2, 3, "P"],
    [5, 6, 7, "P", 4],
    [10, 11, "P", 8, 9],
    [15, "P", 12, 13, 14],
    ["P", 16, 17, 18, 19],
]


def test_map_matches_md_table():
    for stripe, row in enumerate(LEFT_SYMMETRIC_5):
        for disk, cell in enumerate(row):
            member_offset = stripe * CHUNK + 123
            back = uraid.unmap(disk, member_offset, disks=DISKS,
                               layout="left-symmetric", chunk=CHUNK)
            if cell == "P":
                assert back is None
                continue
            offset = cell * CHUNK + 123
            assert back == offset
            loc = uraid.map(offset, disks=DISKS, layout="left-symmetric",
                            chunk=CHUNK)
            assert loc.disk == disk
            assert loc.stripe == stripe
            assert loc.parity_disk == row.index("P")
            assert loc.member_offset == member_offset


def test_members_hold_md_placement(md_array):
    a = md_array(layout="left-symmetric", disks=DISKS, chunk=CHUNK)
    assert a.info()["layout"] == "left-symmetric"
    chunks = 4 * len(LEFT_SYMMETRIC_5)
    data = b"".join(bytes([k + 1]) * CHUNK for k in range(chunks))
    a.write(data, 0)
    base = a.info()["data_offset"]
    for stripe, row in enumerate(LEFT_SYMMETRIC_5):
        cells = [a.memory[d].read(CHUNK, base + stripe * CHUNK)
                 for d in range(DISKS)]
        for disk, cell in enumerate(row):
            if cell == "P":
                want = functools.reduce(
                    lambda x, y: x ^ y,
                    [c + 1 for c in row if c != "P"])
                assert cells[disk] == bytes([want]) * CHUNK
            else:
                assert cells[disk] == bytes([cell + 1]) * CHUNK, (stripe, disk)


def test_every_layout_round_trips():
    for layout in uraid.LAYOUTS[:4]:
        for disks in (3, 4, 7):
            for off in range(0, 40 * CHUNK, 3 * CHUNK + 5):
                loc = uraid.map(off, disks=disks, layout=layout, chunk=CHUNK)
                assert loc.disk != loc.parity_disk
                assert uraid.unmap(loc.disk, loc.member_offset, disks=disks,
                                   layout=layout, chunk=CHUNK) == off


def test_parse_layout():
    assert uraid.parse_layout("ls") == 2
    assert uraid.parse_layout("parity-last") == 5
    assert uraid.parse_layout(3) == 3
    try:
        uraid.parse_layout("zigzag")
    except ValueError:
        pass
    else:
        raise AssertionError("zigzag accepted")


# md's RAID6 placement, 5 disks, per stripe (data chunk number, "P" or "Q"),
# from md's rules: left-asymmetric puts P on disk n-1-s%n, Q after it
# (disk 0 when P is last) and the data in disk order around them;
# ddf-N-continue (a DDF layout) puts Q just before P and the data from the
# disk after P on.
RAID6_5 = {
    "left-asymmetric": [
        ["Q", 0, 1, 2, "P"],
        [3, 4, 5, "P", "Q"],
        [6, 7, "P", "Q", 8],
        [9, "P", "Q", 10, 11],
        ["P", "Q", 12, 13, 14],
    ],
    "ddf-N-continue": [
        [0, 1, 2, "Q", "P"],
        [4, 5, "Q", "P", 3],
        [8, "Q", "P", 6, 7],
        ["Q", "P", 9, 10, 11],
        ["P", 12, 13, 14, "Q"],
    ],
}


def test_raid6_map_matches_md_table():
    for layout, table in RAID6_5.items():
        for stripe, row in enumerate(table):
            for disk, cell in enumerate(row):
                member_offset = stripe * CHUNK + 9
                back = uraid.unmap(disk, member_offset, disks=DISKS,
                                   layout=layout, chunk=CHUNK, level=6)
                if cell in ("P", "Q"):
                    assert back is None, (layout, stripe, disk)
                    continue
                assert back == cell * CHUNK + 9, (layout, stripe, disk)
                loc = uraid.map(cell * CHUNK + 9, disks=DISKS, layout=layout,
                                chunk=CHUNK, level=6)
                assert (loc.stripe, loc.disk, loc.member_offset) == (
                    stripe, disk, member_offset)
                assert loc.parity_disk == row.index("P")


def test_raid6_every_layout_round_trips():
    names = list(uraid.LAYOUTS) + list(uraid.LAYOUTS6.values())
    numbers = list(range(6)) + list(uraid.LAYOUTS6)
    for layout in names + numbers:
        for disks in (4, 7):
            for off in range(0, 40 * CHUNK, 3 * CHUNK + 5):
                loc = uraid.map(off, disks=disks, layout=layout, chunk=CHUNK,
                                level=6)
                assert loc.disk != loc.parity_disk
                assert uraid.unmap(loc.disk, loc.member_offset, disks=disks,
                                   layout=layout, chunk=CHUNK,
                                   level=6) == off


def test_raid6_layout_names_by_level():
    assert uraid.parse_layout("ddf-zero-restart", level=6) == 8
    assert uraid.parse_layout("ddf-N-continue", level=6) == 10
    assert uraid.parse_layout("parity-first-6", level=6) == 20
    assert uraid.parse_layout(17, level=6) == 17
    assert uraid.parse_layout("ls", level=6) == 2
    for bad, level in (("parity-first-6", 5), (8, 5), (7, 6), ("zz", 6)):
        try:
            uraid.parse_layout(bad, level=level)
        except ValueError:
            pass
        else:
            raise AssertionError("%r accepted at level %d" % (bad, level))
    for n, name in uraid.LAYOUTS6.items():
        assert uraid.parse_layout(name, level=6) == n


def test_raid6_members_hold_md_placement(md_array):
    for layout, table in RAID6_5.items():
        a = md_array(layout=layout, disks=DISKS, chunk=CHUNK, level=6)
        info = a.info()
        assert (info["level"], info["layout"]) == (6, layout)
        chunks = 3 * len(table)
        data = b"".join(bytes([k + 1]) * CHUNK for k in range(chunks))
        a.write(data, 0)
        base = info["data_offset"]
        for stripe, row in enumerate(table):
            cells = [a.memory[d].read(CHUNK, base + stripe * CHUNK)
                     for d in range(DISKS)]
            p = functools.reduce(lambda x, y: x ^ y,
                                 [c + 1 for c in row if c not in ("P", "Q")])
            assert cells[row.index("P")] == bytes([p]) * CHUNK
            for disk, cell in enumerate(row):
                if cell not in ("P", "Q"):
                    assert cells[disk] == bytes([cell + 1]) * CHUNK, (
                        layout, stripe, disk)
        # Two members lost: every byte still reads.
        a.fail(0)
        a.fail(3)
        assert a.info()["degraded"]
        assert a.read(len(data), 0) == data
