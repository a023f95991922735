// SPDX-License-Identifier: MIT
// libFuzzer target for uraid::Geometry: validation, the forward and inverse
// maps, and agreement with an independent model of md's layout tables.
//
// Input: level, layout, chunk, disk count and member size (any values, so
// invalid shapes are exercised too), then up to 16 probe values.
//
// Properties:
//  * Make accepts exactly the shapes its contract describes (level 4, 5 or
//    6, layout 0..5 with level 4 only parity-last and level 6 also 8..10 and
//    16..20, chunk a power of two in [4 KiB, 16 MiB], 3..64 disks (level 6:
//    4..64), member size a non-zero chunk multiple whose array size fits in
//    64 bits); a refusal is InvalidArgument with a message.
//  * For a valid shape: Map(x) lands where md's tables put x (model below,
//    levels 4 and 5; level 6 is modelled in tests/raid6_geometry_test.cc);
//    Unmap(Map(x)) == x; Unmap of a parity byte is nullopt; DataDisk and
//    DataIndex are inverse, each stripe's slots are a permutation of the
//    disks (with Q at level 6, whose Q slots are distinct and in range);
//    every member byte unmaps to a logical byte that maps back to it.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fuzz_check.h"
#include "fuzzer/FuzzedDataProvider.h"
#include "uraid/geometry.h"

namespace {

using uraid::Geometry;
using uraid::Layout;

bool IsPow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// What the header promises Make accepts, written out independently.
bool ShapeValid(int level, int layout, uint64_t chunk, int disks,
                uint64_t member_bytes) {
  if (level != 4 && level != 5 && level != 6) return false;
  const bool raid6_layout =
      (layout >= 8 && layout <= 10) || (layout >= 16 && layout <= 20);
  if ((layout < 0 || layout > 5) && !(level == 6 && raid6_layout)) {
    return false;
  }
  if (level == 4 && layout != 5) return false;
  if (level == 6 && disks < 4) return false;
  if (!IsPow2(chunk) || chunk < uraid::kMinChunkBytes ||
      chunk > uraid::kMaxChunkBytes) {
    return false;
  }
  if (disks < uraid::kMinDisks || disks > uraid::kMaxDisks) return false;
  if (member_bytes == 0 || member_bytes % chunk != 0) return false;
  return member_bytes <= std::numeric_limits<uint64_t>::max() /
                             uint64_t(disks - (level == 6 ? 2 : 1));
}

// md's placement (raid5.c raid5_compute_sector, md reference §1.1), the
// same table tests/integration/harness.py md_place encodes.
struct Placement {
  int disk;
  int parity;
};
Placement ModelPlace(int layout, int n, uint64_t stripe, int k) {
  const int dd = n - 1;
  const int r = static_cast<int>(stripe % static_cast<uint64_t>(n));
  int pd;
  switch (layout) {
    case 0:
    case 2:
      pd = dd - r;
      break;
    case 1:
    case 3:
      pd = r;
      break;
    case 4:
      pd = 0;
      break;
    default:
      pd = dd;
  }
  int disk;
  switch (layout) {
    case 0:
    case 1:
      disk = k < pd ? k : k + 1;
      break;
    case 2:
    case 3:
      disk = (pd + 1 + k) % n;
      break;
    case 4:
      disk = k + 1;
      break;
    default:
      disk = k;
  }
  return {disk, pd};
}

void CheckStripe(const Geometry& g, uint64_t stripe) {
  const int n = g.raid_disks();
  const int p = g.ParityDisk(stripe);
  FUZZ_CHECK(p >= 0 && p < n);
  FUZZ_CHECK(g.DataIndex(stripe, p) == -1);
  std::vector<int> seen(n, 0);
  seen[p]++;
  const int q = g.QDisk(stripe);
  if (g.level() == 6) {
    FUZZ_CHECK(q >= 0 && q < n && q != p);
    FUZZ_CHECK(g.DataIndex(stripe, q) == -1);
    FUZZ_CHECK(g.QSlot(stripe, p) == -1 && g.QSlot(stripe, q) == -1);
    seen[q]++;
  } else {
    FUZZ_CHECK(q == -1);
  }
  std::vector<int> slots(std::max(g.SyndromeSlots(), 1), 0);
  for (int k = 0; k < g.data_disks(); ++k) {
    const int d = g.DataDisk(stripe, k);
    FUZZ_CHECK(d >= 0 && d < n);
    FUZZ_CHECK(d != p);
    FUZZ_CHECK(g.DataIndex(stripe, d) == k);
    seen[d]++;
    if (g.level() == 6) {
      const int slot = g.QSlot(stripe, d);
      FUZZ_CHECK(slot >= 0 && slot < g.SyndromeSlots());
      FUZZ_CHECK(++slots[slot] == 1);
      continue;
    }
    const Placement m = ModelPlace(static_cast<int>(g.layout()), n, stripe, k);
    FUZZ_CHECK(m.disk == d);
    FUZZ_CHECK(m.parity == p);
  }
  for (int c : seen) FUZZ_CHECK(c == 1);  // a permutation of the slots
}

void CheckOffset(const Geometry& g, uint64_t x) {
  const uint64_t chunk = g.chunk_bytes();
  const uraid::Location loc = g.Map(x);
  const uint64_t chunk_number = x / chunk;
  FUZZ_CHECK(loc.stripe == chunk_number / g.data_disks());
  FUZZ_CHECK(loc.data_index == static_cast<int>(chunk_number % g.data_disks()));
  FUZZ_CHECK(loc.chunk_offset == x % chunk);
  FUZZ_CHECK(loc.member_offset == loc.stripe * chunk + loc.chunk_offset);
  FUZZ_CHECK(loc.member_offset < g.member_bytes());
  FUZZ_CHECK(loc.disk == g.DataDisk(loc.stripe, loc.data_index));
  FUZZ_CHECK(loc.parity_disk == g.ParityDisk(loc.stripe));
  FUZZ_CHECK(loc.disk != loc.parity_disk);
  const std::optional<uint64_t> back = g.Unmap(loc.disk, loc.member_offset);
  FUZZ_CHECK(back.has_value() && *back == x);
  FUZZ_CHECK(!g.Unmap(loc.parity_disk, loc.member_offset).has_value());
  CheckStripe(g, loc.stripe);
}

void CheckMemberByte(const Geometry& g, int disk, uint64_t member_offset) {
  const std::optional<uint64_t> x = g.Unmap(disk, member_offset);
  const uint64_t stripe = member_offset / g.chunk_bytes();
  if (!x.has_value()) {
    FUZZ_CHECK(g.ParityDisk(stripe) == disk || g.QDisk(stripe) == disk);
    return;
  }
  FUZZ_CHECK(*x < g.array_bytes());
  const uraid::Location loc = g.Map(*x);
  FUZZ_CHECK(loc.disk == disk);
  FUZZ_CHECK(loc.member_offset == member_offset);
}

uint64_t PickChunk(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0:  // any power of two, valid or not
      return uint64_t{1} << in.ConsumeIntegralInRange<int>(0, 63);
    case 1:  // a valid one
      return uint64_t{1} << in.ConsumeIntegralInRange<int>(12, 24);
    case 2:  // a multiple of 4 KiB, often not a power of two
      return 4096 * in.ConsumeIntegralInRange<uint64_t>(0, 4096);
    default:
      return in.ConsumeIntegral<uint64_t>();
  }
}

uint64_t PickMemberBytes(FuzzedDataProvider& in, uint64_t chunk) {
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0:  // chunk multiples, up to huge ones that overflow the array size
      return chunk * in.ConsumeIntegral<uint64_t>();
    case 1:
      return chunk * in.ConsumeIntegralInRange<uint64_t>(1, 1 << 20);
    default:
      return in.ConsumeIntegral<uint64_t>();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int level = in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(3, 6)
                                     : in.ConsumeIntegral<int>();
  const int layout = in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(0, 21)
                                      : in.ConsumeIntegral<int>();
  const uint64_t chunk = PickChunk(in);
  const int disks = in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(0, 70)
                                     : in.ConsumeIntegral<int>();
  const uint64_t member_bytes = PickMemberBytes(in, chunk);

  const absl::StatusOr<Geometry> made = Geometry::Make(
      level, static_cast<Layout>(layout), chunk, disks, member_bytes);
  const bool valid = ShapeValid(level, layout, chunk, disks, member_bytes);
  if (!made.ok()) {
    FUZZ_CHECK(!valid);
    FUZZ_CHECK(made.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!made.status().message().empty());
    return 0;
  }
  FUZZ_CHECK(valid);
  const Geometry& g = *made;
  FUZZ_CHECK(g.level() == level);
  FUZZ_CHECK(static_cast<int>(g.layout()) == layout);
  FUZZ_CHECK(g.chunk_bytes() == chunk);
  FUZZ_CHECK(g.raid_disks() == disks);
  const int data_disks = disks - (level == 6 ? 2 : 1);
  FUZZ_CHECK(g.data_disks() == data_disks);
  FUZZ_CHECK(g.member_bytes() == member_bytes);
  FUZZ_CHECK(g.stripe_count() == member_bytes / chunk);
  FUZZ_CHECK(g.stripe_data_bytes() == chunk * data_disks);
  FUZZ_CHECK(g.array_bytes() == member_bytes * data_disks);
  const uint64_t pref = g.PreferredIoBytes();
  FUZZ_CHECK(IsPow2(pref) && pref >= chunk);
  FUZZ_CHECK(g.stripe_data_bytes() % pref == 0);

  // The ends of the array, then fuzzer-chosen probes.
  CheckOffset(g, 0);
  CheckOffset(g, g.array_bytes() - 1);
  CheckMemberByte(g, disks - 1, member_bytes - 1);
  for (int i = 0; i < 16 && in.remaining_bytes() > 0; ++i) {
    const uint64_t v = in.ConsumeIntegral<uint64_t>();
    switch (in.ConsumeIntegralInRange<int>(0, 2)) {
      case 0:
        CheckOffset(g, v % g.array_bytes());
        break;
      case 1:
        CheckMemberByte(g, in.ConsumeIntegralInRange<int>(0, disks - 1),
                        v % member_bytes);
        break;
      default:
        CheckStripe(g, v);  // any stripe number, beyond the end too
    }
  }
  return 0;
}
