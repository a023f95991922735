# SPDX-License-Identifier: MIT
"""Example: reproducing md's layout behaviour in a test, with the uraid
package's pytest fixtures (run with `pytest -p uraid.pytest_plugin`).

1. Where md puts a byte, without any array: uraid.map / uraid.unmap.
2. The same on real member bytes: md_array over memory members.
3. A member failure: md_array(faulty=True), fail one, read degraded,
   rebuild onto a spare.
"""

import uraid


def test_where_md_puts_a_byte():
    # 4 disks, left-symmetric, 64 KiB chunks: byte 200 KiB is in data
    # chunk 3, the first chunk of stripe 1, which md puts on disk 3 (parity
    # of stripe 1 is on disk 2).
    loc = uraid.map(200 << 10, disks=4, layout="left-symmetric",
                    chunk=64 << 10)
    assert (loc.stripe, loc.disk, loc.parity_disk) == (1, 3, 2)
    assert loc.member_offset == (64 + 8) << 10
    assert uraid.unmap(3, loc.member_offset, disks=4,
                       chunk=64 << 10) == 200 << 10


def test_member_bytes(md_array):
    a = md_array(layout="left-asymmetric", disks=3, chunk=4096)
    a.write(b"A" * 4096 + b"B" * 4096 + b"C" * 4096, 0)
    base = a.info()["data_offset"]
    # left-asymmetric, stripe 1: parity on disk 1, data C on disk 0.
    assert a.memory[0].read(4096, base + 4096) == b"C" * 4096
    parity = a.memory[2].read(4096, base)
    assert parity == bytes([ord("A") ^ ord("B")]) * 4096


def test_survive_a_failure(md_array):
    a = md_array(disks=4, faulty=True, spares=1)
    data = bytes(range(256)) * (a.size // 256)
    a.write(data, 0)
    a.faulty[2].fail()           # the disk dies under the array
    assert a.read(a.size, 0) == data
    a.wait()                     # the spare is rebuilt into slot 2
    assert a.info()["slots"] == ["active"] * 4
    assert a.read(a.size, 0) == data
