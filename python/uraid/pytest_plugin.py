# SPDX-License-Identifier: MIT
"""pytest fixtures for tests that need md's exact layout behaviour.

Enable with `pytest -p uraid.pytest_plugin` or, in a conftest.py,
`pytest_plugins = ["uraid.pytest_plugin"]`.

    def test_parity_of_stripe_0(md_array):
        a = md_array(layout="left-symmetric", disks=5, chunk=4096)
        a.write(bytes(range(256)) * 64, 0)
        ...                      # a.members[i].read(...) sees md's placement

    def test_degraded(md_array):
        a = md_array(disks=4, faulty=True)
        a.faulty[2].fail()       # the member's I/O fails from now on

Every array and member a fixture made is closed at the test's end.
"""

import pytest

import uraid

DEFAULT_CHUNK = 64 << 10
DEFAULT_MEMBER_DATA = 32 * DEFAULT_CHUNK
# md's data offset for small members is 1 MiB-aligned; a fixed 1 MiB also
# leaves reshape headroom (grow writes the new shape below the old).
DEFAULT_DATA_OFFSET = 1 << 20


class _Arrays:
    def __init__(self):
        self.arrays = []
        self.members = []

    def close(self):
        for a in reversed(self.arrays):
            a.close()
        for m in reversed(self.members):
            m.close()


@pytest.fixture
def faulty_member():
    """faulty_member(size=..., name=None, target=None) -> FaultyMember:
    a fault injector over `target` or over a new zero-filled memory member
    of `size` bytes. .fail(), .heal(), .fail_after(n),
    .fail_range(offset, length, op=, times=)."""
    made = _Arrays()

    def make(size=DEFAULT_DATA_OFFSET + DEFAULT_MEMBER_DATA, name=None,
             target=None):
        if target is None:
            target = uraid.Member.memory(size, name=name)
            made.members.append(target)
        f = uraid.FaultyMember.wrap(target)
        made.members.append(f)
        return f

    yield make
    made.close()


@pytest.fixture
def md_array():
    """md_array(layout="left-symmetric", disks=4, chunk=64 KiB, level=5,
    member_data=2 MiB, data_offset=1 MiB, faulty=False, missing=None,
    spares=0, **create_options) -> uraid.Array over in-memory members
    named m0.. (spares s0..), created assume-clean (all zeros), no bitmap
    or cache, so member bytes are exactly md's placement of what was
    written. With faulty=True each member is a FaultyMember (array.faulty
    lists them by slot); missing=SLOT leaves that slot out (degraded).
    array.memory lists the underlying memory members by slot."""
    made = _Arrays()

    def make(layout="left-symmetric", disks=4, chunk=DEFAULT_CHUNK, level=5,
             member_data=None, data_offset=DEFAULT_DATA_OFFSET, faulty=False,
             missing=None, spares=0, **create_options):
        if member_data is None:
            member_data = max(DEFAULT_MEMBER_DATA, 16 * chunk)
        raw = data_offset + member_data
        memory = [uraid.Member.memory(raw, name="m%d" % i)
                  for i in range(disks)]
        made.members.extend(memory)
        members = memory
        faulty_members = []
        if faulty:
            faulty_members = [uraid.FaultyMember.wrap(m) for m in memory]
            made.members.extend(faulty_members)
            members = faulty_members
        slots = [None if i == missing else m for i, m in enumerate(members)]
        opts = dict(level=level, layout=layout, chunk=chunk,
                    member_bytes=member_data, data_offset=data_offset,
                    assume_clean=True, bitmap="none", cache=0)
        opts.update(create_options)
        a = uraid.create(slots, **opts)
        made.arrays.append(a)
        a.memory = memory
        a.faulty = faulty_members
        a.spare_members = []
        for s in range(spares):
            sp = uraid.Member.memory(raw, name="s%d" % s)
            made.members.append(sp)
            a.add(sp)
            a.spare_members.append(sp)
        return a

    yield make
    made.close()
