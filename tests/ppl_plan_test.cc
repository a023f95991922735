// SPDX-License-Identifier: MIT
// Tests for plan/ppl_plan.h: the rectangles and md entries of a stripe
// write, hand-checked; the entry decoder's refusals; and a model test that
// runs random plans against an in-memory stripe, tears the writes at a
// crash and replays the log: partial parity must be the XOR of the data
// the write left alone, and after the replay parity must be consistent
// with whatever data reached the members, so any one lost member
// reconstructs exactly.

#include "plan/ppl_plan.h"

#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_format.h"
#include "format/ppl_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plan/stripe_plan.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;
constexpr uint64_t K = 1024;

Geometry Geo(int disks, uint64_t chunk, Layout layout = Layout::kLeftSymmetric,
             uint64_t stripes = 8) {
  absl::StatusOr<Geometry> g =
      Geometry::Make(5, layout, chunk, disks, chunk * stripes);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(PplRects, OneChunk) {
  const Geometry g = Geo(4, 64 * K);
  EXPECT_THAT(PplRects(g, 1, 64 * K + 4 * K, 64 * K + 12 * K),
              ::testing::ElementsAre(PplRect{1, 1, 1, 4 * K, 12 * K, false}));
}

TEST(PplRects, AcrossChunksMakesThreeBands) {
  const Geometry g = Geo(5, 64 * K);
  // Data index 0 from row 16K, index 1 whole, index 2 up to row 8K.
  EXPECT_THAT(PplRects(g, 0, 16 * K, 2 * 64 * K + 8 * K),
              ::testing::ElementsAre(PplRect{0, 1, 2, 0, 8 * K, false},
                                     PplRect{0, 1, 1, 8 * K, 16 * K, false},
                                     PplRect{0, 0, 1, 16 * K, 64 * K, false}));
  // Whole chunks 1..2 of 4: one band.
  EXPECT_THAT(PplRects(g, 3, 64 * K, 3 * 64 * K),
              ::testing::ElementsAre(PplRect{3, 1, 2, 0, 64 * K, false}));
}

TEST(PplRects, FullStripe) {
  const Geometry g = Geo(4, 64 * K);
  EXPECT_THAT(PplRects(g, 2, 0, 3 * 64 * K),
              ::testing::ElementsAre(PplRect{2, 0, 2, 0, 64 * K, true}));
}

// md's fields for a hand-placed write: 4 disks, left-symmetric, 64 KiB
// chunks; 8 KiB at array byte 192K + 64K + 4K (stripe 1, data index 1,
// row 4K), whose parity sits on slot 3 - 1 % 4 = 2.
TEST(PplEntryFor, MdFields) {
  const Geometry g = Geo(4, 64 * K);
  const std::vector<PplRect> r =
      PplRects(g, 1, 64 * K + 4 * K, 64 * K + 12 * K);
  ASSERT_EQ(r.size(), 1u);
  const PplEntry e = PplEntryFor(g, r[0]);
  EXPECT_EQ(e.data_sector, (192 * K + 64 * K + 4 * K) / 512);
  EXPECT_EQ(e.pp_size, 8 * K);
  EXPECT_EQ(e.data_size, 8 * K);
  EXPECT_EQ(e.parity_disk, 2u);
  const PplEntry full = PplEntryFor(g, PplRects(g, 1, 0, 192 * K)[0]);
  EXPECT_EQ(full.data_sector, 192 * K / 512);
  EXPECT_EQ(full.pp_size, 0u);
  EXPECT_EQ(full.data_size, 192 * K);
}

TEST(PplRectOf, InvertsPplEntryForOnEveryLayout) {
  std::mt19937_64 rng(11);
  for (int layout = 0; layout <= 5; ++layout) {
    for (int disks = 3; disks <= 9; ++disks) {
      const Geometry g = Geo(disks, 16 * K, static_cast<Layout>(layout));
      for (int i = 0; i < 50; ++i) {
        const uint64_t sd = g.stripe_data_bytes();
        const uint64_t a = rng() % (sd / 512) * 512;
        const uint64_t b = a + 512 + rng() % ((sd - a) / 512) * 512;
        const uint64_t stripe = rng() % g.stripe_count();
        for (const PplRect& r : PplRects(g, stripe, a, b)) {
          absl::StatusOr<PplRect> back = PplRectOf(g, PplEntryFor(g, r));
          ASSERT_TRUE(back.ok()) << back.status();
          ASSERT_EQ(*back, r);
        }
      }
    }
  }
}

TEST(PplRectOf, RefusesEntriesThatDoNotFitNamingTheField) {
  const Geometry g = Geo(4, 64 * K);
  const PplEntry good = PplEntryFor(g, PplRects(g, 1, 4 * K, 12 * K)[0]);
  ASSERT_TRUE(PplRectOf(g, good).ok());
  struct Case {
    PplEntry e;
    const char* text;
  };
  std::vector<Case> cases;
  PplEntry e = good;
  e.data_sector = g.array_bytes() / 512;
  cases.push_back({e, "data_sector"});
  e = good;
  e.pp_size = 1000;
  cases.push_back({e, "pp_size 1000"});
  e = good;
  e.data_size = 0;
  cases.push_back({e, "data_size 0"});
  e = good;
  e.data_size = 3 * 4096;
  e.pp_size = 8192;
  cases.push_back({e, "not a multiple of pp_size"});
  e = good;
  e.pp_size = 64 * K;  // rows 4K..68K of a 64K chunk
  e.data_size = 64 * K;
  cases.push_back({e, "pass the 65536-byte chunk"});
  e = good;
  e.data_size = 4 * 8192;  // 4 chunks from index 0 of 3
  cases.push_back({e, "pass the stripe's 3"});
  e = good;
  e.parity_disk = 0;
  cases.push_back({e, "parity_disk 0"});
  e = good;
  e.pp_size = 0;  // full-stripe entry not at the stripe's start
  cases.push_back({e, "without partial parity"});
  for (const Case& c : cases) {
    absl::StatusOr<PplRect> r = PplRectOf(g, c.e);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(r.status().message(), HasSubstr(c.text));
  }
}

TEST(BuildPplStripeLog, RefusesWritesNotInWholeSectors) {
  const Geometry g = Geo(4, 64 * K);
  const WritePlan plan = PlanWrite(g, 0, 100, 4196, StripeHealth{});
  std::vector<uint8_t> scratch(plan.scratch_bytes), client(4096);
  absl::StatusOr<PplStripeLog> log =
      BuildPplStripeLog(g, 0, 100, 4196, plan, scratch.data(), client.data());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(log.status().message(), HasSubstr("whole 512-byte sectors"));
}

// --- Model: plans against memory, a torn crash, the replay ------------------

// One stripe of every member: chunk bytes per slot.
using Stripe = std::vector<std::vector<uint8_t>>;

void XorRows(std::vector<uint8_t>& dst, const std::vector<uint8_t>& src,
             uint64_t lo, uint64_t hi) {
  for (uint64_t i = lo; i < hi; ++i) dst[i] ^= src[i];
}

// Parity slot == XOR of the data slots, over every row.
bool Consistent(const Geometry& g, uint64_t stripe, const Stripe& s) {
  const uint64_t C = g.chunk_bytes();
  std::vector<uint8_t> x(C, 0);
  for (int k = 0; k < g.data_disks(); ++k) {
    XorRows(x, s[g.DataDisk(stripe, k)], 0, C);
  }
  return x == s[g.ParityDisk(stripe)];
}

TEST(PplModel, PartialParityAndReplayOverRandomPlans) {
  std::mt19937_64 rng(20261201);
  int torn_inconsistent = 0, replayed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const int disks = 3 + static_cast<int>(rng() % 6);
    const uint64_t C = uint64_t{4096} << (rng() % 3);
    const Geometry g = Geo(disks, C, static_cast<Layout>(rng() % 6));
    const uint64_t stripe = rng() % g.stripe_count();
    const uint64_t sd = g.stripe_data_bytes();
    const int P = g.ParityDisk(stripe);
    SCOPED_TRACE(absl::StrFormat("iter %d disks %d chunk %u stripe %u", iter,
                                 disks, C, stripe));
    // The stripe before the write: random data, consistent parity.
    Stripe old(disks, std::vector<uint8_t>(C));
    for (int k = 0; k < g.data_disks(); ++k) {
      for (auto& x : old[g.DataDisk(stripe, k)])
        x = static_cast<uint8_t>(rng());
    }
    old[P].assign(C, 0);
    for (int k = 0; k < g.data_disks(); ++k) {
      XorRows(old[P], old[g.DataDisk(stripe, k)], 0, C);
    }
    // A random 512-aligned write, sometimes the whole stripe.
    uint64_t a = rng() % (sd / 512) * 512;
    uint64_t b = a + 512 + rng() % ((sd - a) / 512) * 512;
    if (rng() % 10 == 0) a = 0, b = sd;
    std::vector<uint8_t> client(b - a);
    for (auto& x : client) x = static_cast<uint8_t>(rng());
    StripeHealth health;
    if (rng() % 4 == 0) health.missing_slot = static_cast<int>(rng() % disks);
    health.parity_trusted = rng() % 3 != 0;
    const WritePlan plan = PlanWrite(g, stripe, a, b, health);
    if (plan.mode == WriteMode::kParityGone) continue;  // nothing to log

    // Run the plan against `old` (the missing slot is never read).
    std::vector<uint8_t> scratch(plan.scratch_bytes);
    for (const PlannedIo& io : plan.reads) {
      ASSERT_NE(io.slot, health.missing_slot);
      uint8_t* dst = io.ref.buffer == PlanRef::kScratch
                         ? scratch.data() + io.ref.offset
                         : client.data() + io.ref.offset;
      std::memcpy(dst, old[io.slot].data() + io.chunk_offset, io.len);
    }
    ComputeWrite(plan, scratch.data(), client.data());
    absl::StatusOr<PplStripeLog> log =
        BuildPplStripeLog(g, stripe, a, b, plan, scratch.data(), client.data());
    ASSERT_TRUE(log.ok()) << log.status();

    // Partial parity = XOR of the old data outside each rectangle.
    uint64_t pp_at = 0;
    for (const PplEntry& e : log->entries) {
      absl::StatusOr<PplRect> r = PplRectOf(g, e);
      ASSERT_TRUE(r.ok()) << r.status();
      if (r->full_stripe) continue;
      std::vector<uint8_t> want(C, 0);
      for (int k = 0; k < g.data_disks(); ++k) {
        if (k >= r->first && k <= r->last) continue;
        XorRows(want, old[g.DataDisk(stripe, k)], 0, C);
      }
      const uint64_t rows = r->row_hi - r->row_lo;
      ASSERT_EQ(0, std::memcmp(log->partial_parity.data() + pp_at,
                               want.data() + r->row_lo, rows));
      EXPECT_EQ(e.checksum, Crc32c(std::span<const uint8_t>(
                                log->partial_parity.data() + pp_at, rows)));
      pp_at += rows;
    }
    ASSERT_EQ(pp_at, log->partial_parity.size());

    // The log as it lands on disk, read back.
    PplHeader h;
    h.signature = 77;
    h.generation = static_cast<uint64_t>(iter);
    h.entries = log->entries;
    absl::StatusOr<PplHeader> read = DecodePplHeader(EncodePplHeader(h), 77);
    ASSERT_TRUE(read.ok()) << read.status();

    // The crash: every 512-byte piece of every member write landed or not.
    // The replay reads every member (a data member of a rectangle that is
    // gone would make md skip the entry; not modelled here).
    if (health.missing_slot >= 0) continue;
    Stripe torn = old;
    for (const PlannedIo& io : plan.writes) {
      const uint8_t* src = io.ref.buffer == PlanRef::kScratch
                               ? scratch.data() + io.ref.offset
                               : client.data() + io.ref.offset;
      for (uint64_t off = 0; off < io.len; off += 512) {
        if (rng() % 2) {
          std::memcpy(torn[io.slot].data() + io.chunk_offset + off, src + off,
                      std::min<uint64_t>(512, io.len - off));
        }
      }
    }
    torn_inconsistent += !Consistent(g, stripe, torn);
    pp_at = 0;
    for (const PplEntry& e : read->entries) {
      absl::StatusOr<PplRect> r = PplRectOf(g, e);
      ASSERT_TRUE(r.ok()) << r.status();
      std::vector<uint8_t> parity(C, 0);
      const int lo_k = r->full_stripe ? 0 : r->first;
      const int hi_k = r->full_stripe ? g.data_disks() - 1 : r->last;
      for (int k = lo_k; k <= hi_k; ++k) {
        XorRows(parity, torn[g.DataDisk(stripe, k)], r->row_lo, r->row_hi);
      }
      const uint64_t rows = r->row_hi - r->row_lo;
      if (!r->full_stripe) {
        for (uint64_t i = 0; i < rows; ++i) {
          parity[r->row_lo + i] ^= log->partial_parity[pp_at + i];
        }
        pp_at += rows;
      }
      std::memcpy(torn[P].data() + r->row_lo, parity.data() + r->row_lo, rows);
    }
    ++replayed;
    ASSERT_TRUE(Consistent(g, stripe, torn));
    // Untouched data chunks are as they were (the replay writes parity only).
    for (int k = 0; k < g.data_disks(); ++k) {
      const int s = g.DataDisk(stripe, k);
      bool written = false;
      for (const PlannedIo& io : plan.writes) written |= io.slot == s;
      if (!written) {
        ASSERT_EQ(torn[s], old[s]);
      }
    }
  }
  // The model would prove nothing if crashes never tore a stripe.
  EXPECT_GT(torn_inconsistent, 500);
  EXPECT_GT(replayed, 1500);
}

}  // namespace
}  // namespace uraid
