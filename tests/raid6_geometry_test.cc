// SPDX-License-Identifier: MIT
// Tests for uraid/geometry.h at level 6: md's RAID6 layouts, P, Q, the data
// placement and the Q slot order.
//
// Sources of truth, none sharing a formula with geometry.cc:
//  1. rows typed in by hand from the reference's table and md's own
//     comments ("Q D D D P", "D D P Q D"; shared/reference/
//     md-raid6-and-journal.md §1), including the reference's slot example;
//  2. a model that places each stripe the way one would fill md's table by
//     hand (put P, put Q beside it, then lay the data down left to right or
//     starting after a given disk and wrapping) and computes Q slots by
//     walking the disks as md's set_syndrome_sources does;
//  3. properties: Map/Unmap inverse, every stripe a permutation, the slots
//     a bijection onto 0..SyndromeSlots()-1 (md) or the data disks' own
//     numbers (DDF).
// The kernel itself judges the same functions in tests/kernel (raid6 cases).

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "uraid/geometry.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * KiB;

constexpr Layout kRaid6Layouts[] = {
    Layout::kLeftAsymmetric,   Layout::kRightAsymmetric,
    Layout::kLeftSymmetric,    Layout::kRightSymmetric,
    Layout::kParityFirst,      Layout::kParityLast,
    Layout::kDdfZeroRestart,   Layout::kDdfNRestart,
    Layout::kDdfNContinue,     Layout::kLeftAsymmetric6,
    Layout::kRightAsymmetric6, Layout::kLeftSymmetric6,
    Layout::kRightSymmetric6,  Layout::kParityFirst6,
};

Geometry Make6(Layout layout, int disks, uint64_t chunk = 4 * KiB,
               uint64_t stripes = 64) {
  absl::StatusOr<Geometry> g =
      Geometry::Make(6, layout, chunk, disks, stripes * chunk);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) std::abort();
  return *g;
}

// One stripe as md's tables print it: "P", "Q" or "D<k>" (k the data index)
// per disk.
using Row = std::vector<std::string>;

Row RenderRow(const Geometry& g, uint64_t stripe) {
  Row r(g.raid_disks());
  for (int d = 0; d < g.raid_disks(); ++d) {
    const int k = g.DataIndex(stripe, d);
    r[d] = d == g.ParityDisk(stripe) ? "P"
           : d == g.QDisk(stripe)    ? "Q"
           : k < 0                   ? "?"
                                     : "D" + std::to_string(k);
  }
  return r;
}

// ---------------------------------------------------------------------------
// 1. Rows typed in by hand.

struct TypedRows {
  Layout layout;
  int disks;
  std::vector<Row> rows;  // stripes 0, 1, ...
};

const TypedRows kTyped[] = {
    // Left-asymmetric: P walks left from the last disk, Q just after it (on
    // disk 0 when P is last: "Q D D D P"), data left to right.
    {Layout::kLeftAsymmetric,
     5,
     {{"Q", "D0", "D1", "D2", "P"},
      {"D0", "D1", "D2", "P", "Q"},
      {"D0", "D1", "P", "Q", "D2"},
      {"D0", "P", "Q", "D1", "D2"},
      {"P", "Q", "D0", "D1", "D2"},
      {"Q", "D0", "D1", "D2", "P"}}},
    {Layout::kRightAsymmetric,
     4,
     {{"P", "Q", "D0", "D1"},
      {"D0", "P", "Q", "D1"},
      {"D0", "D1", "P", "Q"},
      {"Q", "D0", "D1", "P"}}},
    // Symmetric: data starts after Q and wraps.
    {Layout::kLeftSymmetric,
     5,
     {{"Q", "D0", "D1", "D2", "P"},
      {"D0", "D1", "D2", "P", "Q"},
      {"D1", "D2", "P", "Q", "D0"},
      {"D2", "P", "Q", "D0", "D1"},
      {"P", "Q", "D0", "D1", "D2"}}},
    {Layout::kRightSymmetric,
     4,
     {{"P", "Q", "D0", "D1"},
      {"D1", "P", "Q", "D0"},
      {"D0", "D1", "P", "Q"},
      {"Q", "D0", "D1", "P"}}},
    {Layout::kParityFirst, 4, {{"P", "Q", "D0", "D1"}, {"P", "Q", "D0", "D1"}}},
    {Layout::kParityLast, 4, {{"D0", "D1", "P", "Q"}, {"D0", "D1", "P", "Q"}}},
    // ddf-zero-restart places like right-asymmetric.
    {Layout::kDdfZeroRestart,
     4,
     {{"P", "Q", "D0", "D1"},
      {"D0", "P", "Q", "D1"},
      {"D0", "D1", "P", "Q"},
      {"Q", "D0", "D1", "P"}}},
    // ddf-N-restart: left-asymmetric a stripe on ("D D D P Q" first).
    {Layout::kDdfNRestart,
     5,
     {{"D0", "D1", "D2", "P", "Q"},
      {"D0", "D1", "P", "Q", "D2"},
      {"D0", "P", "Q", "D1", "D2"},
      {"P", "Q", "D0", "D1", "D2"},
      {"Q", "D0", "D1", "D2", "P"}}},
    // ddf-N-continue: left-symmetric with Q before P, data after P.
    {Layout::kDdfNContinue,
     5,
     {{"D0", "D1", "D2", "Q", "P"},
      {"D1", "D2", "Q", "P", "D0"},
      {"D2", "Q", "P", "D0", "D1"},
      {"Q", "P", "D0", "D1", "D2"},
      {"P", "D0", "D1", "D2", "Q"}}},
    // The -6 layouts: RAID5's layout over disks 0..3, Q on disk 4.
    {Layout::kLeftAsymmetric6,
     5,
     {{"D0", "D1", "D2", "P", "Q"},
      {"D0", "D1", "P", "D2", "Q"},
      {"D0", "P", "D1", "D2", "Q"},
      {"P", "D0", "D1", "D2", "Q"},
      {"D0", "D1", "D2", "P", "Q"}}},
    {Layout::kRightAsymmetric6,
     5,
     {{"P", "D0", "D1", "D2", "Q"},
      {"D0", "P", "D1", "D2", "Q"},
      {"D0", "D1", "P", "D2", "Q"},
      {"D0", "D1", "D2", "P", "Q"}}},
    {Layout::kLeftSymmetric6,
     5,
     {{"D0", "D1", "D2", "P", "Q"},
      {"D1", "D2", "P", "D0", "Q"},
      {"D2", "P", "D0", "D1", "Q"},
      {"P", "D0", "D1", "D2", "Q"}}},
    {Layout::kRightSymmetric6,
     5,
     {{"P", "D0", "D1", "D2", "Q"},
      {"D2", "P", "D0", "D1", "Q"},
      {"D1", "D2", "P", "D0", "Q"},
      {"D0", "D1", "D2", "P", "Q"}}},
    {Layout::kParityFirst6,
     4,
     {{"P", "D0", "D1", "Q"}, {"P", "D0", "D1", "Q"}}},
};

TEST(Raid6GeometryTypedTest, MatchesHandTypedRows) {
  for (const TypedRows& t : kTyped) {
    SCOPED_TRACE(std::string(LayoutName(t.layout)) + " on " +
                 std::to_string(t.disks) + " disks");
    Geometry g = Make6(t.layout, t.disks);
    for (size_t s = 0; s < t.rows.size(); ++s) {
      EXPECT_EQ(RenderRow(g, s), t.rows[s]) << "stripe " << s;
    }
  }
}

// The reference's own example of the slot trap (n=5, stripe 2,
// left-asymmetric: disk 4 holds data index 2 but is Q slot 0), and the
// slots of whole stripes typed in by hand.
TEST(Raid6GeometryTypedTest, QSlotsTypedByHand) {
  Geometry la = Make6(Layout::kLeftAsymmetric, 5);
  EXPECT_EQ(la.DataIndex(2, 4), 2);
  EXPECT_EQ(la.QSlot(2, 4), 0);
  EXPECT_EQ(la.QSlot(2, 0), 1);
  EXPECT_EQ(la.QSlot(2, 1), 2);
  EXPECT_EQ(la.QSlot(2, 2), -1);  // P
  EXPECT_EQ(la.QSlot(2, 3), -1);  // Q
  EXPECT_EQ(la.SyndromeSlots(), 3);

  // left-symmetric: after Q is data index 0, so slot == data index.
  Geometry ls = Make6(Layout::kLeftSymmetric, 5);
  for (int d : {0, 1, 4}) EXPECT_EQ(ls.QSlot(2, d), ls.DataIndex(2, d));

  // left-symmetric-6, stripe 1 (D1 D2 P D0 Q): Q is last, so the slots run
  // from disk 0 -- the data index wraps, the slot does not.
  Geometry ls6 = Make6(Layout::kLeftSymmetric6, 5);
  EXPECT_EQ(ls6.QSlot(1, 0), 0);
  EXPECT_EQ(ls6.QSlot(1, 1), 1);
  EXPECT_EQ(ls6.QSlot(1, 3), 2);
  EXPECT_EQ(ls6.DataIndex(1, 3), 0);

  // DDF: the slot is the disk number; P and Q are zero slots.
  Geometry ddf = Make6(Layout::kDdfNContinue, 5);
  EXPECT_EQ(ddf.SyndromeSlots(), 5);
  // Stripe 1: D1 D2 Q P D0.
  EXPECT_EQ(ddf.QSlot(1, 0), 0);
  EXPECT_EQ(ddf.QSlot(1, 1), 1);
  EXPECT_EQ(ddf.QSlot(1, 4), 4);
  EXPECT_EQ(ddf.QSlot(1, 2), -1);
  EXPECT_EQ(ddf.QSlot(1, 3), -1);
}

// ---------------------------------------------------------------------------
// 2. The fill-by-hand model.

enum class Rotation { kLeft, kRight, kFixed };
enum class QRule { kAfterP, kBeforeP, kFixed };
enum class Fill { kLeftToRight, kAfterQ, kAfterP };

struct Recipe {
  Rotation rotation;
  int p_start;  // P's disk in stripe 0 (n-relative values resolved below)
  QRule q;
  int q_fixed;
  Fill fill;
  int width;  // disks P rotates over and data wraps in: n or n-1
  bool ddf;
};

// A negative p_start / q_fixed counts from n (-1: the last disk).
Recipe RecipeOf(Layout l) {
  switch (l) {
    case Layout::kLeftAsymmetric:
      return {Rotation::kLeft,    -1, QRule::kAfterP, 0,
              Fill::kLeftToRight, 0,  false};
    case Layout::kRightAsymmetric:
      return {Rotation::kRight,   0, QRule::kAfterP, 0,
              Fill::kLeftToRight, 0, false};
    case Layout::kLeftSymmetric:
      return {Rotation::kLeft, -1, QRule::kAfterP, 0, Fill::kAfterQ, 0, false};
    case Layout::kRightSymmetric:
      return {Rotation::kRight, 0, QRule::kAfterP, 0, Fill::kAfterQ, 0, false};
    case Layout::kParityFirst:
      return {Rotation::kFixed,   0, QRule::kFixed, 1,
              Fill::kLeftToRight, 0, false};
    case Layout::kParityLast:
      return {Rotation::kFixed,   -2, QRule::kFixed, -1,
              Fill::kLeftToRight, 0,  false};
    case Layout::kDdfZeroRestart:
      return {
          Rotation::kRight, 0, QRule::kAfterP, 0, Fill::kLeftToRight, 0, true};
    case Layout::kDdfNRestart:
      return {
          Rotation::kLeft, -2, QRule::kAfterP, 0, Fill::kLeftToRight, 0, true};
    case Layout::kDdfNContinue:
      return {Rotation::kLeft, -1, QRule::kBeforeP, 0, Fill::kAfterP, 0, true};
    case Layout::kLeftAsymmetric6:
      return {Rotation::kLeft,    -2, QRule::kFixed, -1,
              Fill::kLeftToRight, -1, false};
    case Layout::kRightAsymmetric6:
      return {Rotation::kRight,   0,  QRule::kFixed, -1,
              Fill::kLeftToRight, -1, false};
    case Layout::kLeftSymmetric6:
      return {Rotation::kLeft, -2, QRule::kFixed, -1, Fill::kAfterP, -1, false};
    case Layout::kRightSymmetric6:
      return {Rotation::kRight, 0, QRule::kFixed, -1, Fill::kAfterP, -1, false};
    case Layout::kParityFirst6:
      return {Rotation::kFixed,   0,  QRule::kFixed, -1,
              Fill::kLeftToRight, -1, false};
  }
  std::abort();
}

// Walks stripes one after another: label[d] is -1 (P), -2 (Q) or the data
// index; slot[d] the Q slot (-1 for P and Q).
class Raid6Walker {
 public:
  Raid6Walker(Layout layout, int n) : r_(RecipeOf(layout)), n_(n) {
    width_ = n + r_.width;
    p_ = r_.p_start < 0 ? n + r_.p_start : r_.p_start;
  }

  struct Stripe {
    std::vector<int> label;
    std::vector<int> slot;
    int p, q;
  };

  Stripe Next() {
    Stripe s;
    s.label.assign(n_, -3);
    s.slot.assign(n_, -1);
    s.p = p_;
    switch (r_.q) {
      case QRule::kAfterP:
        s.q = p_ + 1 == n_ ? 0 : p_ + 1;
        break;
      case QRule::kBeforeP:
        s.q = p_ == 0 ? n_ - 1 : p_ - 1;
        break;
      case QRule::kFixed:
        s.q = r_.q_fixed < 0 ? n_ + r_.q_fixed : r_.q_fixed;
        break;
    }
    s.label[s.p] = -1;
    s.label[s.q] = -2;
    // Lay the data down.
    int disk = 0;
    if (r_.fill == Fill::kAfterQ) disk = s.q;
    if (r_.fill == Fill::kAfterP) disk = s.p;
    if (r_.fill != Fill::kLeftToRight) disk = (disk + 1) % width_;
    for (int k = 0; k < n_ - 2; ++k) {
      while (s.label[disk] != -3) disk = (disk + 1) % width_;
      s.label[disk] = k;
    }
    // md's syndrome walk: from the disk after Q (DDF: disk 0), round all
    // disks; DDF counts every disk, md's layouts only data disks.
    const int d0 = r_.ddf ? 0 : (s.q + 1) % n_;
    int count = 0;
    for (int i = 0; i < n_; ++i) {
      const int d = (d0 + i) % n_;
      if (r_.ddf) {
        if (s.label[d] >= 0) s.slot[d] = count;
        ++count;
      } else if (s.label[d] >= 0) {
        s.slot[d] = count++;
      }
    }
    // Rotate P for the next stripe.
    if (r_.rotation == Rotation::kLeft) p_ = p_ == 0 ? width_ - 1 : p_ - 1;
    if (r_.rotation == Rotation::kRight) p_ = p_ + 1 == width_ ? 0 : p_ + 1;
    return s;
  }

 private:
  Recipe r_;
  int n_;
  int width_;
  int p_;
};

TEST(Raid6GeometryModelTest, ModelMatchesHandTypedRows) {
  for (const TypedRows& t : kTyped) {
    SCOPED_TRACE(LayoutName(t.layout));
    Raid6Walker w(t.layout, t.disks);
    for (const Row& row : t.rows) {
      Raid6Walker::Stripe s = w.Next();
      Row got;
      for (int l : s.label) {
        got.push_back(l == -1 ? "P" : l == -2 ? "Q" : "D" + std::to_string(l));
      }
      EXPECT_EQ(got, row);
    }
  }
}

// Every stripe of small arrays, walked (no periodicity assumed): P, Q, the
// data placement both ways, Q slots, Map and Unmap.
TEST(Raid6GeometryModelTest, ExhaustiveWalk) {
  for (Layout layout : kRaid6Layouts) {
    for (int n = 4; n <= 16; ++n) {
      SCOPED_TRACE(std::string(LayoutName(layout)) + " n=" + std::to_string(n));
      const uint64_t chunk = 4 * KiB;
      const uint64_t stripes = 3 * n + 2;
      Geometry g = Make6(layout, n, chunk, stripes);
      EXPECT_EQ(g.data_disks(), n - 2);
      EXPECT_EQ(g.array_bytes(), stripes * chunk * (n - 2));
      Raid6Walker w(layout, n);
      uint64_t chunk_number = 0;
      for (uint64_t s = 0; s < stripes; ++s) {
        Raid6Walker::Stripe m = w.Next();
        ASSERT_EQ(g.ParityDisk(s), m.p) << "stripe " << s;
        ASSERT_EQ(g.QDisk(s), m.q) << "stripe " << s;
        for (int d = 0; d < n; ++d) {
          const int k = m.label[d] < 0 ? -1 : m.label[d];
          ASSERT_EQ(g.DataIndex(s, d), k) << "stripe " << s << " disk " << d;
          ASSERT_EQ(g.QSlot(s, d), m.slot[d])
              << "stripe " << s << " disk " << d;
          if (k >= 0) {
            ASSERT_EQ(g.DataDisk(s, k), d);
          }
        }
        for (int k = 0; k < n - 2; ++k, ++chunk_number) {
          const uint64_t off = chunk_number * chunk + 4095;
          Location loc = g.Map(off);
          ASSERT_EQ(loc.stripe, s);
          ASSERT_EQ(loc.data_index, k);
          ASSERT_EQ(m.label[loc.disk], k);
          ASSERT_EQ(loc.parity_disk, m.p);
          ASSERT_EQ(loc.member_offset, s * chunk + 4095);
          ASSERT_EQ(g.Unmap(loc.disk, loc.member_offset), off);
        }
        ASSERT_EQ(g.Unmap(m.p, s * chunk), std::nullopt);
        ASSERT_EQ(g.Unmap(m.q, s * chunk), std::nullopt);
      }
      EXPECT_EQ(chunk_number * chunk, g.array_bytes());
    }
  }
}

// ---------------------------------------------------------------------------
// 3. Properties on large arrays and stripe numbers.

TEST(Raid6GeometryPropertyTest, RandomOffsetsRoundTrip) {
  std::mt19937_64 rng(0x6a1d);
  for (Layout layout : kRaid6Layouts) {
    for (int n : {4, 5, 6, 7, 8, 11, 16, 17, 32, 64}) {
      for (uint64_t chunk : {4 * KiB, 512 * KiB, 16 * MiB}) {
        const uint64_t stripes = (uint64_t{1} << 20) + 3 * n + 1;
        Geometry g = Make6(layout, n, chunk, stripes);
        std::uniform_int_distribution<uint64_t> any(0, g.array_bytes() - 1);
        for (int i = 0; i < 50; ++i) {
          const uint64_t x = i == 0 ? g.array_bytes() - 1 : any(rng);
          Location loc = g.Map(x);
          ASSERT_EQ(g.Unmap(loc.disk, loc.member_offset), x)
              << LayoutName(layout) << " n " << n;
          ASSERT_NE(loc.disk, g.QDisk(loc.stripe));
          ASSERT_NE(loc.disk, loc.parity_disk);
          ASSERT_EQ(loc.parity_disk, g.ParityDisk(loc.stripe));
          ASSERT_LT(loc.member_offset, g.member_bytes());
        }
      }
    }
  }
}

// Each stripe: P, Q and the data disks are a permutation of the disks, and
// the Q slots of the data disks are 0..n-3 (md) or exactly the data disks'
// own numbers (DDF), each once.
TEST(Raid6GeometryPropertyTest, StripesArePermutationsAndSlotsBijective) {
  for (Layout layout : kRaid6Layouts) {
    for (int n = 4; n <= 16; ++n) {
      Geometry g = Make6(layout, n);
      const bool ddf = layout == Layout::kDdfZeroRestart ||
                       layout == Layout::kDdfNRestart ||
                       layout == Layout::kDdfNContinue;
      EXPECT_EQ(g.SyndromeSlots(), ddf ? n : n - 2);
      for (uint64_t s : {uint64_t{0}, uint64_t{1}, static_cast<uint64_t>(n) - 1,
                         uint64_t{1} << 40, ~uint64_t{0}}) {
        const int p = g.ParityDisk(s), q = g.QDisk(s);
        ASSERT_NE(p, q);
        std::set<int> disks = {p, q};
        std::set<int> slots;
        for (int k = 0; k < n - 2; ++k) {
          const int d = g.DataDisk(s, k);
          disks.insert(d);
          const int slot = g.QSlot(s, d);
          ASSERT_GE(slot, 0);
          ASSERT_LT(slot, g.SyndromeSlots());
          if (ddf) {
            ASSERT_EQ(slot, d);
          }
          slots.insert(slot);
        }
        ASSERT_EQ(disks.size(), static_cast<size_t>(n))
            << LayoutName(layout) << " n " << n << " stripe " << s;
        ASSERT_EQ(slots.size(), static_cast<size_t>(n - 2));
      }
    }
  }
}

TEST(Raid6GeometryPropertyTest, Raid5HasNoQ) {
  for (Layout layout : {Layout::kLeftSymmetric, Layout::kLeftAsymmetric}) {
    absl::StatusOr<Geometry> g = Geometry::Make(5, layout, 64 * KiB, 5, MiB);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->data_disks(), 4);
    EXPECT_EQ(g->SyndromeSlots(), 0);
    for (int s = 0; s < 5; ++s) {
      EXPECT_EQ(g->QDisk(s), -1);
      for (int d = 0; d < 5; ++d) EXPECT_EQ(g->QSlot(s, d), -1);
    }
  }
  absl::StatusOr<Geometry> r4 =
      Geometry::Make(4, Layout::kParityLast, 64 * KiB, 4, MiB);
  ASSERT_TRUE(r4.ok());
  EXPECT_EQ(r4->QDisk(0), -1);
}

// ---------------------------------------------------------------------------
// 4. Validation and parsing.

TEST(Raid6GeometryMakeTest, ValidatesLevelSixShapes) {
  for (Layout layout : kRaid6Layouts) {
    for (int n : {4, 64}) {
      EXPECT_TRUE(Geometry::Make(6, layout, 4 * KiB, n, 4 * KiB).ok())
          << LayoutName(layout) << " n " << n;
    }
    absl::StatusOr<Geometry> three =
        Geometry::Make(6, layout, 4 * KiB, 3, 4 * KiB);
    EXPECT_EQ(three.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(three.status().message()),
                HasSubstr("raid disks 3 out of range 4..64"));
  }
  for (int bad : {-1, 6, 7, 11, 15, 21, 99}) {
    absl::StatusOr<Geometry> g =
        Geometry::Make(6, static_cast<Layout>(bad), 4 * KiB, 5, 4 * KiB);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(g.status().message()),
                HasSubstr("layout " + std::to_string(bad) +
                          " not supported at level 6"));
  }
  // The RAID6-only layouts stay refused at levels 4 and 5.
  for (Layout layout : {Layout::kDdfZeroRestart, Layout::kLeftSymmetric6,
                        Layout::kParityFirst6}) {
    absl::StatusOr<Geometry> g = Geometry::Make(5, layout, 4 * KiB, 5, 4 * KiB);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(g.status().message()), HasSubstr("(0-5)"));
    EXPECT_FALSE(Geometry::Make(4, layout, 4 * KiB, 5, 4 * KiB).ok());
  }
  // Capacity overflow counts n-2 data disks at level 6.
  const uint64_t biggest = (~uint64_t{0} / 62) & ~(4 * KiB - 1);
  EXPECT_TRUE(
      Geometry::Make(6, Layout::kLeftSymmetric, 4 * KiB, 64, biggest).ok());
  EXPECT_FALSE(
      Geometry::Make(6, Layout::kLeftSymmetric, 4 * KiB, 64, biggest + 4 * KiB)
          .ok());
}

TEST(Raid6LayoutTest, ParsesMdadmRaid6NamesAndNumbers) {
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
      {"ddf-zero-restart", Layout::kDdfZeroRestart},
      {"ddf-N-restart", Layout::kDdfNRestart},
      {"ddf-n-restart", Layout::kDdfNRestart},
      {"ddf-N-continue", Layout::kDdfNContinue},
      {"left-asymmetric-6", Layout::kLeftAsymmetric6},
      {"right-asymmetric-6", Layout::kRightAsymmetric6},
      {"left-symmetric-6", Layout::kLeftSymmetric6},
      {"right-symmetric-6", Layout::kRightSymmetric6},
      {"parity-first-6", Layout::kParityFirst6},
      {"Left-Symmetric-6", Layout::kLeftSymmetric6},
      {"0", Layout::kLeftAsymmetric},
      {"5", Layout::kParityLast},
      {"8", Layout::kDdfZeroRestart},
      {"9", Layout::kDdfNRestart},
      {"10", Layout::kDdfNContinue},
      {"16", Layout::kLeftAsymmetric6},
      {"20", Layout::kParityFirst6},
  };
  for (const Case& c : kCases) {
    absl::StatusOr<Layout> got = ParseLayout(c.text, 6);
    ASSERT_TRUE(got.ok()) << c.text << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.text;
  }
  for (const char* bad : {"", "6", "7", "11", "15", "21", "08", "016", "-8",
                          "ddf", "left-symmetric-5", "parity-last-6", " 8"}) {
    absl::StatusOr<Layout> got = ParseLayout(bad, 6);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(got.status().message()),
                HasSubstr("unknown RAID6 layout '" + std::string(bad) + "'"));
  }
}

// mdadm parses --layout by level: the ddf names are RAID5 aliases at level
// 5 and their own layouts at level 6; the -6 names and numbers 8..20 exist
// only at level 6.
TEST(Raid6LayoutTest, LevelFiveParsingIsUnchanged) {
  for (int level : {4, 5}) {
    EXPECT_EQ(*ParseLayout("ddf-N-restart", level), Layout::kLeftAsymmetric);
    EXPECT_EQ(*ParseLayout("ddf-zero-restart", level),
              Layout::kRightAsymmetric);
    EXPECT_EQ(*ParseLayout("ddf-N-continue", level), Layout::kLeftSymmetric);
    for (const char* six :
         {"left-symmetric-6", "parity-first-6", "8", "10", "16", "20"}) {
      EXPECT_FALSE(ParseLayout(six, level).ok()) << six;
      EXPECT_FALSE(ParseLayout(six).ok()) << six;
    }
  }
  EXPECT_EQ(*ParseLayout("ddf-N-restart", 6), Layout::kDdfNRestart);
  for (int level : {0, 1, 3, 7}) {
    absl::StatusOr<Layout> got = ParseLayout("left-symmetric", level);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(got.status().message()),
                HasSubstr("level " + std::to_string(level)));
  }
}

TEST(Raid6LayoutTest, NamesRoundTripAtLevelSix) {
  for (Layout layout : kRaid6Layouts) {
    const std::string name(LayoutName(layout));
    EXPECT_NE(name, "unknown");
    absl::StatusOr<Layout> back = ParseLayout(name, 6);
    ASSERT_TRUE(back.ok()) << name;
    EXPECT_EQ(*back, layout);
    absl::StatusOr<Layout> number =
        ParseLayout(std::to_string(static_cast<int>(layout)), 6);
    ASSERT_TRUE(number.ok()) << name;
    EXPECT_EQ(*number, layout);
  }
  EXPECT_EQ(LayoutName(Layout::kDdfNRestart), "ddf-N-restart");
  EXPECT_EQ(LayoutName(Layout::kParityFirst6), "parity-first-6");
  EXPECT_EQ(LayoutName(static_cast<Layout>(7)), "unknown");
}

}  // namespace
}  // namespace uraid
