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
