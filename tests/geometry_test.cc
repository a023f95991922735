// SPDX-License-Identifier: MIT
// Tests for uraid/geometry.h.
//
// Three independent sources of truth:
//  1. md's published tables (shared/reference/md-raid5.md §1.4), typed in
//     verbatim;
//  2. a layout model written here from the reference's prose (§1.1 "How to
//     read the table"): parity rotates left or right one slot per stripe,
//     asymmetric layouts fill slots left to right skipping parity, symmetric
//     layouts start after parity and wrap. It simulates placement by walking
//     chunks and shares no formula with geometry.cc;
//  3. algebraic properties: Unmap inverts Map, and the map is a bijection.

#include "uraid/geometry.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;
constexpr uint64_t kSector = 512;

constexpr Layout kAllLayouts[] = {
    Layout::kLeftAsymmetric, Layout::kRightAsymmetric, Layout::kLeftSymmetric,
    Layout::kRightSymmetric, Layout::kParityFirst,     Layout::kParityLast,
};

Geometry MakeOrDie(int level, Layout layout, uint64_t chunk, int disks,
                   uint64_t member_bytes) {
  absl::StatusOr<Geometry> g =
      Geometry::Make(level, layout, chunk, disks, member_bytes);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) std::abort();
  return *g;
}

// ---------------------------------------------------------------------------
// 1. md's published tables.

using Table = std::vector<std::vector<std::string>>;

// Renders `stripes` rows of g as md's tables do: "P" or "D<chunk number>"
// per slot, using only Unmap.
Table RenderWithUnmap(const Geometry& g, int stripes) {
  Table t(stripes);
  for (int s = 0; s < stripes; ++s) {
    for (int dev = 0; dev < g.raid_disks(); ++dev) {
      std::optional<uint64_t> l = g.Unmap(dev, s * g.chunk_bytes());
      t[s].push_back(l ? "D" + std::to_string(*l / g.chunk_bytes()) : "P");
    }
  }
  return t;
}

// The same table, built from Map (forward) and ParityDisk.
Table RenderWithMap(const Geometry& g, int stripes) {
  Table t(stripes, std::vector<std::string>(g.raid_disks(), "?"));
  for (int s = 0; s < stripes; ++s) t[s][g.ParityDisk(s)] = "P";
  const uint64_t chunks = uint64_t(stripes) * g.data_disks();
  for (uint64_t c = 0; c < chunks; ++c) {
    // An arbitrary byte inside the chunk: the chunk offset must carry over.
    Location loc = g.Map(c * g.chunk_bytes() + 777);
    EXPECT_EQ(loc.chunk_offset, 777u);
    EXPECT_EQ(loc.member_offset, loc.stripe * g.chunk_bytes() + 777);
    EXPECT_EQ(loc.parity_disk, g.ParityDisk(loc.stripe));
    EXPECT_NE(loc.disk, loc.parity_disk);
    t[loc.stripe][loc.disk] = "D" + std::to_string(c);
  }
  return t;
}

struct PublishedTable {
  Layout layout;
  int disks;
  Table rows;
};

const PublishedTable kPublished[] = {
    {Layout::kLeftAsymmetric,
     4,
     {{"D0", "D1", "D2", "P"},
      {"D3", "D4", "P", "D5"},
      {"D6", "P", "D7", "D8"},
      {"P", "D9", "D10", "D11"}}},
    {Layout::kRightAsymmetric,
     4,
     {{"P", "D0", "D1", "D2"},
      {"D3", "P", "D4", "D5"},
      {"D6", "D7", "P", "D8"},
      {"D9", "D10", "D11", "P"}}},
    {Layout::kLeftSymmetric,
     4,
     {{"D0", "D1", "D2", "P"},
      {"D4", "D5", "P", "D3"},
      {"D8", "P", "D6", "D7"},
      {"P", "D9", "D10", "D11"}}},
    {Layout::kRightSymmetric,
     4,
     {{"P", "D0", "D1", "D2"},
      {"D5", "P", "D3", "D4"},
      {"D7", "D8", "P", "D6"},
      {"D9", "D10", "D11", "P"}}},
    // §1.4 prose: parity always on dev0, D0..D2 / D3..D5 / ... on dev1..dev3.
    {Layout::kParityFirst,
     4,
     {{"P", "D0", "D1", "D2"},
      {"P", "D3", "D4", "D5"},
      {"P", "D6", "D7", "D8"},
      {"P", "D9", "D10", "D11"}}},
    // §1.4 prose: parity always on dev3, data on dev0..dev2.
    {Layout::kParityLast,
     4,
     {{"D0", "D1", "D2", "P"},
      {"D3", "D4", "D5", "P"},
      {"D6", "D7", "D8", "P"},
      {"D9", "D10", "D11", "P"}}},
    {Layout::kLeftSymmetric,
     5,
     {{"D0", "D1", "D2", "D3", "P"},
      {"D5", "D6", "D7", "P", "D4"},
      {"D10", "D11", "P", "D8", "D9"},
      {"D15", "P", "D12", "D13", "D14"},
      {"P", "D16", "D17", "D18", "D19"}}},
};

TEST(GeometryPublishedTest, MatchesMdTables) {
  for (const PublishedTable& p : kPublished) {
    SCOPED_TRACE(std::string(LayoutName(p.layout)) + " on " +
                 std::to_string(p.disks) + " disks");
    // Chunk 64 KiB as in the reference; a member larger than the table so
    // the table is not the whole array.
    Geometry g = MakeOrDie(5, p.layout, 64 * KiB, p.disks, 64 * 64 * KiB);
    const int rows = static_cast<int>(p.rows.size());
    EXPECT_EQ(RenderWithUnmap(g, rows), p.rows);
    EXPECT_EQ(RenderWithMap(g, rows), p.rows);
    // The pattern repeats every raid_disks stripes.
    Table next(rows);
    for (int s = 0; s < rows; ++s) {
      for (int dev = 0; dev < p.disks; ++dev) {
        int k = g.DataIndex(s + p.disks, dev);
        next[s].push_back(k < 0 ? "P"
                                : "D" + std::to_string(s * g.data_disks() + k));
      }
    }
    EXPECT_EQ(next, p.rows);
  }
}

TEST(GeometryPublishedTest, Raid4IsParityLast) {
  Geometry g = MakeOrDie(4, Layout::kParityLast, 64 * KiB, 4, 64 * 64 * KiB);
  EXPECT_EQ(g.level(), 4);
  EXPECT_EQ(RenderWithUnmap(g, 4), kPublished[5].rows);
  EXPECT_EQ(RenderWithMap(g, 4), kPublished[5].rows);
}

// §1.4 "Sector-level examples (4 disks, C = 128)".
TEST(GeometryPublishedTest, SectorExamples) {
  struct Row {
    uint64_t array_sector;
    uint64_t chunk, stripe;
    int k;
    int ls_disk, ls_pd;
    int la_disk, la_pd;
    uint64_t member_sector;
  };
  const Row kRows[] = {
      {0, 0, 0, 0, 0, 3, 0, 3, 0},
      {300, 2, 0, 2, 2, 3, 2, 3, 44},
      {1000, 7, 2, 1, 3, 1, 2, 1, 360},
      {5000, 39, 13, 0, 3, 2, 0, 2, 1672},
  };
  const uint64_t chunk = 128 * kSector;
  Geometry ls = MakeOrDie(5, Layout::kLeftSymmetric, chunk, 4, 64 * chunk);
  Geometry la = MakeOrDie(5, Layout::kLeftAsymmetric, chunk, 4, 64 * chunk);
  for (const Row& r : kRows) {
    SCOPED_TRACE("array sector " + std::to_string(r.array_sector));
    const uint64_t off = r.array_sector * kSector;
    for (const Geometry* g : {&ls, &la}) {
      Location loc = g->Map(off);
      EXPECT_EQ(off / chunk, r.chunk);
      EXPECT_EQ(loc.stripe, r.stripe);
      EXPECT_EQ(loc.data_index, r.k);
      EXPECT_EQ(loc.member_offset, r.member_sector * kSector);
      EXPECT_EQ(loc.chunk_offset, (r.array_sector % 128) * kSector);
      EXPECT_EQ(g->Unmap(loc.disk, loc.member_offset), off);
    }
    EXPECT_EQ(ls.Map(off).disk, r.ls_disk);
    EXPECT_EQ(ls.Map(off).parity_disk, r.ls_pd);
    EXPECT_EQ(la.Map(off).disk, r.la_disk);
    EXPECT_EQ(la.Map(off).parity_disk, r.la_pd);
  }
}

// ---------------------------------------------------------------------------
// 2. Independent model from the prose.

// Placement of one stripe: which slot holds parity, and the slot of each
// data index in the order chunks are laid down.
struct StripePlacement {
  int parity = 0;
  std::vector<int> slot_of_k;
};

// Walks stripes one after another, the way a person would fill in md's
// tables by hand: place parity, then lay down the stripe's chunks in order,
// then rotate parity for the next stripe.
class LayoutWalker {
 public:
  LayoutWalker(int level, Layout layout, int disks)
      : layout_(level == 4 ? Layout::kParityLast : layout), n_(disks) {
    switch (layout_) {
      case Layout::kLeftAsymmetric:
      case Layout::kLeftSymmetric:
      case Layout::kParityLast:
        parity_ = n_ - 1;  // "Left": starts on the last disk.
        break;
      default:
        parity_ = 0;  // "Right" and parity-first start on disk 0.
    }
  }

  StripePlacement Next() {
    StripePlacement p;
    p.parity = parity_;
    const bool symmetric =
        layout_ == Layout::kLeftSymmetric || layout_ == Layout::kRightSymmetric;
    if (symmetric) {
      // Start on the disk just after parity and wrap around.
      int slot = parity_;
      for (int placed = 0; placed < n_ - 1; ++placed) {
        slot = slot + 1 == n_ ? 0 : slot + 1;
        p.slot_of_k.push_back(slot);
      }
    } else {
      // Fill left to right, skipping parity.
      for (int slot = 0; slot < n_; ++slot) {
        if (slot != parity_) p.slot_of_k.push_back(slot);
      }
    }
    // Rotate: left moves one disk left, right one disk right, wrapping.
    switch (layout_) {
      case Layout::kLeftAsymmetric:
      case Layout::kLeftSymmetric:
        parity_ = parity_ == 0 ? n_ - 1 : parity_ - 1;
        break;
      case Layout::kRightAsymmetric:
      case Layout::kRightSymmetric:
        parity_ = parity_ == n_ - 1 ? 0 : parity_ + 1;
        break;
      default:
        break;  // Fixed parity.
    }
    return p;
  }

 private:
  Layout layout_;
  int n_;
  int parity_;
};

// The model used for huge random offsets: one full rotation walked out, then
// indexed by stripe mod period (the exhaustive test below checks the walk
// really is periodic).
class LayoutModel {
 public:
  LayoutModel(int level, Layout layout, uint64_t chunk, int disks)
      : chunk_(chunk), n_(disks) {
    LayoutWalker walker(level, layout, disks);
    for (int s = 0; s < disks; ++s) period_.push_back(walker.Next());
  }

  Location Map(uint64_t offset) const {
    // Walk whole stripes, then whole chunks, then bytes.
    const uint64_t stripe_data = chunk_ * (n_ - 1);
    Location loc;
    loc.stripe = offset / stripe_data;
    const uint64_t in_stripe = offset - loc.stripe * stripe_data;
    loc.data_index = static_cast<int>(in_stripe / chunk_);
    loc.chunk_offset = in_stripe - loc.data_index * chunk_;
    const StripePlacement& p = period_[loc.stripe % n_];
    loc.parity_disk = p.parity;
    loc.disk = p.slot_of_k[loc.data_index];
    loc.member_offset = loc.stripe * chunk_ + loc.chunk_offset;
    return loc;
  }

 private:
  uint64_t chunk_;
  int n_;
  std::vector<StripePlacement> period_;
};

void ExpectSameLocation(const Location& got, const Location& want,
                        uint64_t offset) {
  EXPECT_EQ(got.stripe, want.stripe) << "offset " << offset;
  EXPECT_EQ(got.data_index, want.data_index) << "offset " << offset;
  EXPECT_EQ(got.disk, want.disk) << "offset " << offset;
  EXPECT_EQ(got.parity_disk, want.parity_disk) << "offset " << offset;
  EXPECT_EQ(got.member_offset, want.member_offset) << "offset " << offset;
  EXPECT_EQ(got.chunk_offset, want.chunk_offset) << "offset " << offset;
}

// The model reproduces the published tables, so comparing against it is
// meaningful.
TEST(GeometryModelTest, ModelMatchesPublishedTables) {
  for (const PublishedTable& p : kPublished) {
    SCOPED_TRACE(LayoutName(p.layout));
    LayoutWalker walker(5, p.layout, p.disks);
    int chunk = 0;
    for (const auto& row : p.rows) {
      StripePlacement s = walker.Next();
      std::vector<std::string> got(p.disks);
      got[s.parity] = "P";
      for (int slot : s.slot_of_k) got[slot] = "D" + std::to_string(chunk++);
      EXPECT_EQ(got, row);
    }
  }
}

// Exhaustive at chunk granularity on small arrays, walking every stripe
// (no periodicity assumed): every chunk's forward map, every slot's inverse
// map, and the per-stripe accessors.
TEST(GeometryModelTest, ExhaustiveWalkSmallArrays) {
  for (int level : {4, 5}) {
    for (Layout layout : kAllLayouts) {
      if (level == 4 && layout != Layout::kParityLast) continue;
      for (int n = 3; n <= 9; ++n) {
        SCOPED_TRACE(std::string(LayoutName(layout)) + " n=" +
                     std::to_string(n) + " level " + std::to_string(level));
        const uint64_t chunk = 4 * KiB;
        const uint64_t stripes = 3 * n + 2;  // Not a whole number of periods.
        Geometry g = MakeOrDie(level, layout, chunk, n, stripes * chunk);
        LayoutWalker walker(level, layout, n);
        uint64_t chunk_number = 0;
        for (uint64_t s = 0; s < stripes; ++s) {
          StripePlacement p = walker.Next();
          ASSERT_EQ(g.ParityDisk(s), p.parity) << "stripe " << s;
          ASSERT_EQ(g.DataIndex(s, p.parity), -1);
          ASSERT_EQ(g.Unmap(p.parity, s * chunk + 5), std::nullopt);
          for (int k = 0; k < n - 1; ++k, ++chunk_number) {
            const int slot = p.slot_of_k[k];
            ASSERT_EQ(g.DataDisk(s, k), slot) << "stripe " << s << " k " << k;
            ASSERT_EQ(g.DataIndex(s, slot), k);
            const uint64_t off = chunk_number * chunk + 4095;
            Location loc = g.Map(off);
            ASSERT_EQ(loc.stripe, s);
            ASSERT_EQ(loc.disk, slot);
            ASSERT_EQ(loc.data_index, k);
            ASSERT_EQ(loc.member_offset, s * chunk + 4095);
            ASSERT_EQ(g.Unmap(slot, s * chunk + 4095), off);
          }
        }
        EXPECT_EQ(chunk_number * chunk, g.array_bytes());
      }
    }
  }
}

struct Shape {
  uint64_t chunk;
  int disks;
};

std::vector<Shape> RandomTestShapes() {
  std::vector<Shape> shapes;
  for (uint64_t chunk :
       {4 * KiB, 8 * KiB, 64 * KiB, 512 * KiB, 1 * MiB, 16 * MiB}) {
    for (int n = 3; n <= 16; ++n) shapes.push_back({chunk, n});
    for (int n : {17, 24, 31, 32, 33, 48, 63, 64}) shapes.push_back({chunk, n});
  }
  return shapes;
}

TEST(GeometryModelTest, RandomOffsetsMatchModel) {
  std::mt19937_64 rng(0x5eed'2024);
  for (int level : {4, 5}) {
    for (Layout layout : kAllLayouts) {
      if (level == 4 && layout != Layout::kParityLast) continue;
      for (const Shape& shape : RandomTestShapes()) {
        SCOPED_TRACE(std::string(LayoutName(layout)) + " chunk " +
                     std::to_string(shape.chunk) + " disks " +
                     std::to_string(shape.disks));
        // An odd stripe count so the array does not end on a period.
        const uint64_t stripes = (uint64_t{1} << 20) + 3 * shape.disks + 1;
        Geometry g = MakeOrDie(level, layout, shape.chunk, shape.disks,
                               stripes * shape.chunk);
        LayoutModel model(level, layout, shape.chunk, shape.disks);
        std::uniform_int_distribution<uint64_t> any(0, g.array_bytes() - 1);
        std::vector<uint64_t> offsets = {0,
                                         1,
                                         shape.chunk - 1,
                                         shape.chunk,
                                         g.stripe_data_bytes() - 1,
                                         g.stripe_data_bytes(),
                                         g.array_bytes() - 1};
        for (int i = 0; i < 150; ++i) offsets.push_back(any(rng));
        for (uint64_t off : offsets) {
          Location got = g.Map(off);
          ExpectSameLocation(got, model.Map(off), off);
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// 3. Properties.

TEST(GeometryPropertyTest, UnmapInvertsMapAndParityUnmapsToNothing) {
  std::mt19937_64 rng(42);
  for (Layout layout : kAllLayouts) {
    for (const Shape& shape : RandomTestShapes()) {
      const uint64_t stripes = (uint64_t{1} << 18) + 11;
      Geometry g =
          MakeOrDie(5, layout, shape.chunk, shape.disks, stripes * shape.chunk);
      std::uniform_int_distribution<uint64_t> any(0, g.array_bytes() - 1);
      for (int i = 0; i < 100; ++i) {
        const uint64_t x = any(rng);
        Location loc = g.Map(x);
        ASSERT_EQ(g.Unmap(loc.disk, loc.member_offset), x)
            << LayoutName(layout) << " disks " << shape.disks;
        ASSERT_EQ(g.Unmap(loc.parity_disk, loc.member_offset), std::nullopt);
        ASSERT_EQ(g.DataIndex(loc.stripe, loc.disk), loc.data_index);
        ASSERT_EQ(g.DataDisk(loc.stripe, loc.data_index), loc.disk);
        ASSERT_EQ(loc.member_offset % g.chunk_bytes(), loc.chunk_offset);
        ASSERT_LT(loc.member_offset, g.member_bytes());
      }
    }
  }
}

// Every (disk, member offset) of the members, sampled per sector and at the
// last byte of each sector, maps to a distinct logical offset, and together
// they cover the array exactly: Map is a bijection between data bytes and
// array bytes, and each stripe holds exactly one parity slot.
TEST(GeometryPropertyTest, MemberBytesCoverArrayExactlyOnce) {
  for (Layout layout : kAllLayouts) {
    for (int n : {3, 4, 5, 7, 8}) {
      SCOPED_TRACE(std::string(LayoutName(layout)) + " n=" + std::to_string(n));
      const uint64_t chunk = 8 * KiB;
      const uint64_t stripes = 2 * n + 1;
      Geometry g = MakeOrDie(5, layout, chunk, n, stripes * chunk);
      std::vector<uint64_t> seen;
      for (uint64_t s = 0; s < stripes; ++s) {
        int parity_slots = 0;
        std::vector<uint64_t> stripe_offsets;
        for (int disk = 0; disk < n; ++disk) {
          for (uint64_t m = s * chunk; m < (s + 1) * chunk; m += kSector) {
            std::optional<uint64_t> first = g.Unmap(disk, m);
            std::optional<uint64_t> last = g.Unmap(disk, m + kSector - 1);
            ASSERT_EQ(first.has_value(), last.has_value());
            if (!first) {
              if (m == s * chunk) ++parity_slots;
              continue;
            }
            ASSERT_EQ(*last, *first + kSector - 1);
            stripe_offsets.push_back(*first);
          }
        }
        EXPECT_EQ(parity_slots, 1) << "stripe " << s;
        // A stripe's data is one contiguous run of the array.
        std::sort(stripe_offsets.begin(), stripe_offsets.end());
        ASSERT_FALSE(stripe_offsets.empty());
        EXPECT_EQ(stripe_offsets.front(), s * g.stripe_data_bytes());
        EXPECT_EQ(stripe_offsets.back(),
                  (s + 1) * g.stripe_data_bytes() - kSector);
        seen.insert(seen.end(), stripe_offsets.begin(), stripe_offsets.end());
      }
      std::sort(seen.begin(), seen.end());
      ASSERT_EQ(seen.size(), g.array_bytes() / kSector);
      for (size_t i = 0; i < seen.size(); ++i) {
        ASSERT_EQ(seen[i], i * kSector);
      }
    }
  }
}

TEST(GeometryPropertyTest, Accessors) {
  Geometry g = MakeOrDie(5, Layout::kLeftSymmetric, 512 * KiB, 6, 1000 * MiB);
  EXPECT_EQ(g.level(), 5);
  EXPECT_EQ(g.layout(), Layout::kLeftSymmetric);
  EXPECT_EQ(g.chunk_bytes(), 512 * KiB);
  EXPECT_EQ(g.raid_disks(), 6);
  EXPECT_EQ(g.data_disks(), 5);
  EXPECT_EQ(g.member_bytes(), 1000 * MiB);
  EXPECT_EQ(g.stripe_count(), 2000u);
  EXPECT_EQ(g.stripe_data_bytes(), 5 * 512 * KiB);
  EXPECT_EQ(g.array_bytes(), 5000 * MiB);

  Geometry same =
      MakeOrDie(5, Layout::kLeftSymmetric, 512 * KiB, 6, 1000 * MiB);
  Geometry other =
      MakeOrDie(5, Layout::kLeftAsymmetric, 512 * KiB, 6, 1000 * MiB);
  EXPECT_EQ(g, same);
  EXPECT_FALSE(g == other);
}

TEST(GeometryPropertyTest, PreferredIoBytes) {
  struct Case {
    uint64_t chunk;
    int disks;
    uint64_t want;
  };
  const Case kCases[] = {
      {64 * KiB, 3, 128 * KiB},   // dd 2
      {64 * KiB, 4, 64 * KiB},    // dd 3: odd, just the chunk
      {64 * KiB, 5, 256 * KiB},   // dd 4
      {64 * KiB, 7, 128 * KiB},   // dd 6 = 2 * 3
      {512 * KiB, 9, 4 * MiB},    // dd 8
      {4 * KiB, 13, 16 * KiB},    // dd 12 = 4 * 3
      {16 * MiB, 64, 16 * MiB},   // dd 63
      {16 * MiB, 33, 512 * MiB},  // dd 32
  };
  for (const Case& c : kCases) {
    Geometry g =
        MakeOrDie(5, Layout::kLeftSymmetric, c.chunk, c.disks, 16 * c.chunk);
    EXPECT_EQ(g.PreferredIoBytes(), c.want)
        << "chunk " << c.chunk << " disks " << c.disks;
    EXPECT_EQ(g.stripe_data_bytes() % g.PreferredIoBytes(), 0u);
    EXPECT_EQ(g.PreferredIoBytes() % g.chunk_bytes(), 0u);
  }
}

TEST(GeometryPropertyTest, RoundDownToChunk) {
  EXPECT_EQ(RoundDownToChunk(0, 64 * KiB), 0u);
  EXPECT_EQ(RoundDownToChunk(64 * KiB - 1, 64 * KiB), 0u);
  EXPECT_EQ(RoundDownToChunk(64 * KiB, 64 * KiB), 64 * KiB);
  EXPECT_EQ(RoundDownToChunk(1000 * MiB + 12345, 512 * KiB), 1000 * MiB);
}

// ---------------------------------------------------------------------------
// 4. Validation and parsing.

TEST(GeometryMakeTest, RejectsBadParametersWithNamedValue) {
  struct Case {
    int level;
    Layout layout;
    uint64_t chunk;
    int disks;
    uint64_t member;
    std::string message;
  };
  const uint64_t kMember = 64 * MiB;
  const Layout ls = Layout::kLeftSymmetric;
  const Case kCases[] = {
      // Level 6 is valid since RAID6 (tests/raid6_geometry_test.cc); the
      // next level up is not.
      {7, ls, 64 * KiB, 4, kMember,
       "level 7 not supported (levels 4, 5 and 6)"},
      {0, ls, 64 * KiB, 4, kMember,
       "level 0 not supported (levels 4, 5 and 6)"},
      {-1, ls, 64 * KiB, 4, kMember, "level -1 not supported"},
      {4, ls, 64 * KiB, 4, kMember, "level 4 requires layout parity-last"},
      {4, Layout::kParityFirst, 64 * KiB, 4, kMember,
       "level 4 requires layout parity-last"},
      {5, static_cast<Layout>(7), 64 * KiB, 4, kMember,
       "layout 7 not supported"},
      {5, ls, 12288, 4, kMember, "chunk size 12288 is not a power of two"},
      {5, ls, 0, 4, kMember, "chunk size 0 is not a power of two"},
      {5, ls, 32 * MiB, 4, kMember,
       "chunk size 32 MiB is out of range 4 KiB..16 MiB"},
      {5, ls, 2 * KiB, 4, kMember,
       "chunk size 2 KiB is out of range 4 KiB..16 MiB"},
      {5, ls, 512, 4, kMember, "chunk size 512 is out of range 4 KiB..16 MiB"},
      {5, ls, 64 * KiB, 2, kMember, "raid disks 2 out of range 3..64"},
      {5, ls, 64 * KiB, 65, kMember, "raid disks 65 out of range 3..64"},
      {5, ls, 64 * KiB, -3, kMember, "raid disks -3 out of range 3..64"},
      {5, ls, 4 * KiB, 4, 1000,
       "member size 1000 is not a multiple of the chunk"},
      {5, ls, 64 * KiB, 4, 64 * KiB + 4 * KiB,
       "member size 69632 is not a multiple of the chunk"},
      {5, ls, 64 * KiB, 4, 0, "member size 0"},
      {5, ls, 4 * KiB, 64,
       RoundDownToChunk(std::numeric_limits<uint64_t>::max() / 63, 4 * KiB) +
           4 * KiB,
       "too large"},
  };
  for (const Case& c : kCases) {
    absl::StatusOr<Geometry> g =
        Geometry::Make(c.level, c.layout, c.chunk, c.disks, c.member);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument)
        << c.message;
    EXPECT_THAT(std::string(g.status().message()), HasSubstr(c.message));
  }
}

TEST(GeometryMakeTest, AcceptsBoundaries) {
  for (uint64_t chunk : {kMinChunkBytes, kMaxChunkBytes}) {
    for (int disks : {kMinDisks, kMaxDisks}) {
      for (Layout layout : kAllLayouts) {
        EXPECT_TRUE(Geometry::Make(5, layout, chunk, disks, chunk).ok());
      }
      EXPECT_TRUE(
          Geometry::Make(4, Layout::kParityLast, chunk, disks, chunk).ok());
    }
  }
  // The largest member whose array size still fits in 64 bits.
  const uint64_t biggest =
      RoundDownToChunk(std::numeric_limits<uint64_t>::max() / 63, 4 * KiB);
  absl::StatusOr<Geometry> g =
      Geometry::Make(5, Layout::kLeftSymmetric, 4 * KiB, 64, biggest);
  ASSERT_TRUE(g.ok()) << g.status();
  Location last = g->Map(g->array_bytes() - 1);
  EXPECT_EQ(last.member_offset, biggest - 1);
  EXPECT_EQ(g->Unmap(last.disk, last.member_offset), g->array_bytes() - 1);
}

TEST(LayoutTest, ParsesCanonicalNamesAliasesAndNumbers) {
  struct Case {
    const char* text;
    Layout want;
  };
  const Case kCases[] = {
      {"left-asymmetric", Layout::kLeftAsymmetric},
      {"right-asymmetric", Layout::kRightAsymmetric},
      {"left-symmetric", Layout::kLeftSymmetric},
      {"right-symmetric", Layout::kRightSymmetric},
      {"parity-first", Layout::kParityFirst},
      {"parity-last", Layout::kParityLast},
      {"la", Layout::kLeftAsymmetric},
      {"ra", Layout::kRightAsymmetric},
      {"ls", Layout::kLeftSymmetric},
      {"rs", Layout::kRightSymmetric},
      {"default", Layout::kLeftSymmetric},
      {"ddf-N-restart", Layout::kLeftAsymmetric},
      {"ddf-zero-restart", Layout::kRightAsymmetric},
      {"ddf-N-continue", Layout::kLeftSymmetric},
      {"LS", Layout::kLeftSymmetric},
      {"Left-Symmetric", Layout::kLeftSymmetric},
      {"0", Layout::kLeftAsymmetric},
      {"1", Layout::kRightAsymmetric},
      {"2", Layout::kLeftSymmetric},
      {"3", Layout::kRightSymmetric},
      {"4", Layout::kParityFirst},
      {"5", Layout::kParityLast},
  };
  for (const Case& c : kCases) {
    absl::StatusOr<Layout> got = ParseLayout(c.text);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.text;
  }
}

TEST(LayoutTest, RejectsGarbage) {
  absl::StatusOr<Layout> foo = ParseLayout("foo");
  EXPECT_EQ(foo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(foo.status().message(),
            "unknown layout 'foo' (expected left-asymmetric, "
            "right-asymmetric, left-symmetric, right-symmetric, parity-first, "
            "parity-last or 0-5)");
  for (const char* bad :
       {"", "6", "-1", "00", "05", "+1", " ls", "ls ", "left symmetric",
        "left-symmetric\n", "l", "parity", "raid5", "left-symmetric-6"}) {
    absl::StatusOr<Layout> got = ParseLayout(bad);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << "'" << bad << "'";
    EXPECT_THAT(std::string(got.status().message()),
                HasSubstr("unknown layout '" + std::string(bad) + "'"));
  }
}

TEST(LayoutTest, NamesRoundTrip) {
  const char* kNames[] = {"left-asymmetric", "right-asymmetric",
                          "left-symmetric",  "right-symmetric",
                          "parity-first",    "parity-last"};
  for (int i = 0; i < 6; ++i) {
    Layout layout = static_cast<Layout>(i);
    EXPECT_EQ(LayoutName(layout), kNames[i]);
    absl::StatusOr<Layout> back = ParseLayout(LayoutName(layout));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, layout);
  }
}

}  // namespace
}  // namespace uraid
