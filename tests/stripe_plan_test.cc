// SPDX-License-Identifier: MIT
// The planner against md's rules: a table of known requests with the mode
// and member bytes md's block count gives, then every layout, 3..16 disks,
// random ranges, degraded and untrusted parity, each plan run against an
// in-memory stripe and the result checked byte for byte.

#include "plan/stripe_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "base/aligned_buffer.h"

namespace uraid {
namespace {

constexpr uint64_t K = 1024;

Geometry Geo(int disks, uint64_t chunk = 64 * K,
             Layout layout = Layout::kLeftSymmetric, int level = 5) {
  return *Geometry::Make(level, layout, chunk, disks, chunk * 64);
}

struct WriteRow {
  const char* what;
  int disks;
  uint64_t a, b;           // in the stripe's data bytes
  int missing_data_index;  // -1: healthy; -2: the parity slot
  bool trusted;
  WriteMode mode;
  uint64_t read_bytes;
  size_t writes;
};

// Chunk 64 KiB, left-symmetric, stripe 0.
const WriteRow kWriteTable[] = {
    {"full stripe", 4, 0, 192 * K, -1, true, WriteMode::kFull, 0, 4},
    {"one 4K block of 4 disks: a tie (2 vs 2 blocks) goes to RMW", 4, 0, 4 * K,
     -1, true, WriteMode::kRmw, 8 * K, 2},
    {"one 4K block of 8 disks: RMW reads it and parity", 8, 0, 4 * K, -1, true,
     WriteMode::kRmw, 8 * K, 2},
    {"two of three chunks: RCW reads the third", 4, 0, 128 * K, -1, true,
     WriteMode::kRcw, 64 * K, 3},
    {"one whole chunk: a tie (16+16 vs 32 blocks) goes to RMW", 4, 0, 64 * K,
     -1, true, WriteMode::kRmw, 128 * K, 2},
    {"one whole chunk of 8 disks: RMW", 8, 0, 64 * K, -1, true, WriteMode::kRmw,
     128 * K, 2},
    {"[4K, 72K) over a chunk boundary: one window [0, 64K), RCW 31 < 33", 4,
     4 * K, 72 * K, -1, true, WriteMode::kRcw, 124 * K, 3},
    {"untrusted parity: RCW even for 4K", 4, 0, 4 * K, -1, false,
     WriteMode::kRcw, 8 * K, 2},
    {"untrusted parity, 16 disks", 16, 8 * K, 12 * K, -1, false,
     WriteMode::kRcw, 14 * 4 * K, 2},
    {"parity missing: data only", 4, 0, 4 * K, -2, true, WriteMode::kParityGone,
     0, 1},
    {"an unwritten chunk missing: RMW", 4, 0, 4 * K, 2, true, WriteMode::kRmw,
     8 * K, 2},
    {"the written chunk missing: rebuild its rows from the rest", 4, 0, 4 * K,
     0, true, WriteMode::kDegradedRcw, 12 * K, 1},
    {"full stripe, a chunk missing: written without it", 4, 0, 192 * K, 1, true,
     WriteMode::kFull, 0, 3},
};

TEST(PlanWriteTable, MatchesMdsChoiceAndCounts) {
  for (const WriteRow& r : kWriteTable) {
    SCOPED_TRACE(r.what);
    const Geometry geo = Geo(r.disks);
    StripeHealth h;
    h.parity_trusted = r.trusted;
    if (r.missing_data_index == -2) h.missing_slot = geo.ParityDisk(0);
    if (r.missing_data_index >= 0) {
      h.missing_slot = geo.DataDisk(0, r.missing_data_index);
    }
    const WritePlan plan = PlanWrite(geo, 0, r.a, r.b, h);
    EXPECT_EQ(plan.mode, r.mode);
    EXPECT_EQ(ReadBytes(plan.reads), r.read_bytes);
    EXPECT_EQ(plan.writes.size(), r.writes);
    EXPECT_EQ(plan.degraded, h.missing_slot >= 0);
  }
}

// An in-memory stripe: one chunk per slot.
struct Stripe {
  std::vector<std::vector<uint8_t>> chunk;
  std::vector<uint64_t> reads_per_slot;
};

Stripe MakeStripe(const Geometry& geo, uint64_t stripe, std::mt19937_64& rng,
                  bool parity_good) {
  const uint64_t C = geo.chunk_bytes();
  Stripe s;
  s.chunk.assign(geo.raid_disks(), std::vector<uint8_t>(C));
  s.reads_per_slot.assign(geo.raid_disks(), 0);
  for (auto& c : s.chunk) {
    for (auto& b : c) b = static_cast<uint8_t>(rng());
  }
  if (parity_good) {
    auto& p = s.chunk[geo.ParityDisk(stripe)];
    std::fill(p.begin(), p.end(), 0);
    for (int k = 0; k < geo.data_disks(); ++k) {
      const auto& d = s.chunk[geo.DataDisk(stripe, k)];
      for (uint64_t i = 0; i < C; ++i) p[i] ^= d[i];
    }
  }
  return s;
}

// Runs a plan's I/O against `s`, checking each member range is read or
// written at most once, inside its chunk, never on the missing slot.
void RunIos(const std::vector<PlannedIo>& ios, bool write, Stripe& s,
            int missing, uint8_t* scratch, uint8_t* client) {
  const uint64_t C = s.chunk[0].size();
  std::vector<std::vector<bool>> seen(s.chunk.size(),
                                      std::vector<bool>(C, false));
  for (const PlannedIo& io : ios) {
    ASSERT_NE(io.slot, missing);
    ASSERT_LE(io.chunk_offset + io.len, C);
    ASSERT_GT(io.len, 0u);
    for (uint64_t i = io.chunk_offset; i < io.chunk_offset + io.len; ++i) {
      ASSERT_FALSE(seen[io.slot][i])
          << "slot " << io.slot << " byte " << i << " twice";
      seen[io.slot][i] = true;
    }
    uint8_t* buf =
        (io.ref.buffer == PlanRef::kScratch ? scratch : client) + io.ref.offset;
    uint8_t* mem = s.chunk[io.slot].data() + io.chunk_offset;
    if (write) {
      std::memcpy(mem, buf, io.len);
    } else {
      std::memcpy(buf, mem, io.len);
      s.reads_per_slot[io.slot] += io.len;
    }
  }
}

struct LayoutCase {
  int level;
  Layout layout;
};
const LayoutCase kLayouts[] = {
    {5, Layout::kLeftAsymmetric}, {5, Layout::kRightAsymmetric},
    {5, Layout::kLeftSymmetric},  {5, Layout::kRightSymmetric},
    {5, Layout::kParityFirst},    {5, Layout::kParityLast},
    {4, Layout::kParityLast},
};

// The RMW and RCW read costs in 4 KiB blocks over the write's rows, written
// out independently of the planner: the planner must pick the cheaper,
// ties to RMW (see CheaperMode).
void ExpectCheaperChoice(const Geometry& geo, uint64_t a, uint64_t b,
                         const WritePlan& plan) {
  const uint64_t C = geo.chunk_bytes();
  uint64_t lo = C, hi = 0;
  std::vector<std::pair<uint64_t, uint64_t>> w(geo.data_disks(), {0, 0});
  for (int k = 0; k < geo.data_disks(); ++k) {
    const uint64_t cs = k * C, ce = cs + C;
    if (b <= cs || a >= ce) continue;
    w[k] = {std::max(a, cs) - cs, std::min(b, ce) - cs};
    lo = std::min(lo, w[k].first);
    hi = std::max(hi, w[k].second);
  }
  auto blocks = [](uint64_t x, uint64_t y) -> uint64_t {
    uint64_t n = 0;
    for (uint64_t blk = x / 4096; blk * 4096 < y; ++blk) ++n;
    return y > x ? n : 0;
  };
  uint64_t rmw = blocks(lo, hi), rcw = 0;
  for (auto [x, y] : w) {
    if (x == y) {
      rcw += blocks(lo, hi);
    } else {
      rmw += blocks(x, y);
      rcw += blocks(lo, x) + blocks(y, hi);
    }
  }
  EXPECT_EQ(plan.mode, rmw <= rcw ? WriteMode::kRmw : WriteMode::kRcw)
      << "rmw " << rmw << " rcw " << rcw;
}

TEST(PlanWrite, EveryLayoutAndWidthWritesTheRightBytes) {
  std::mt19937_64 rng(16);
  for (const LayoutCase& lc : kLayouts) {
    for (int disks = 3; disks <= 16; ++disks) {
      const Geometry geo = Geo(disks, 16 * K, lc.layout, lc.level);
      const uint64_t C = geo.chunk_bytes(), S = geo.stripe_data_bytes();
      for (int round = 0; round < 20; ++round) {
        const uint64_t stripe = rng() % geo.stripe_count();
        uint64_t a = (rng() % (S / 512)) * 512;
        uint64_t b = a + (1 + rng() % ((S - a) / 512)) * 512;
        if (round % 8 == 0) a = 0, b = S;
        // Splits of a chunk boundary shorter than a chunk go to the
        // engine as two plans; the planner is asked only for the rest.
        const int pick = static_cast<int>(rng() % (disks + 3));
        StripeHealth h;
        h.missing_slot = pick < disks ? pick : -1;
        h.parity_trusted = h.missing_slot >= 0 || rng() % 3 != 0;
        SCOPED_TRACE(testing::Message()
                     << "layout " << static_cast<int>(lc.layout) << " level "
                     << lc.level << " disks " << disks << " stripe " << stripe
                     << " [" << a << "," << b << ") missing " << h.missing_slot
                     << " trusted " << h.parity_trusted);
        Stripe s = MakeStripe(geo, stripe, rng, h.parity_trusted);
        // What the stripe's data must read as afterwards.
        std::vector<std::vector<uint8_t>> want(disks - 1);
        for (int k = 0; k < disks - 1; ++k) {
          want[k] = s.chunk[geo.DataDisk(stripe, k)];
        }
        // Before the write the missing chunk still "holds" its data (as
        // parity says); lose it now.
        if (h.missing_slot >= 0) {
          std::fill(s.chunk[h.missing_slot].begin(),
                    s.chunk[h.missing_slot].end(), 0xEE);
        }
        std::vector<uint8_t> src(b - a);
        for (auto& x : src) x = static_cast<uint8_t>(rng());
        for (uint64_t i = a; i < b; ++i) want[i / C][i % C] = src[i - a];

        const WritePlan plan = PlanWrite(geo, stripe, a, b, h);
        AlignedBuffer scratch(plan.scratch_bytes);
        RunIos(plan.reads, false, s, h.missing_slot, scratch.data(),
               src.data());
        ComputeWrite(plan, scratch.data(), src.data());
        RunIos(plan.writes, true, s, h.missing_slot, scratch.data(),
               src.data());
        if (HasFatalFailure()) return;

        std::vector<uint8_t> parity(C, 0);
        for (int k = 0; k < disks - 1; ++k) {
          const int slot = geo.DataDisk(stripe, k);
          if (slot != h.missing_slot) {
            ASSERT_EQ(s.chunk[slot], want[k]);
          }
          for (uint64_t i = 0; i < C; ++i) parity[i] ^= want[k][i];
        }
        const int pd = geo.ParityDisk(stripe);
        if (pd != h.missing_slot) {
          // Rows outside the write keep their old parity; when it was
          // trusted that is XOR of the data there too.
          for (uint64_t i = plan.lo; i < plan.hi; ++i) {
            ASSERT_EQ(s.chunk[pd][i], parity[i]) << "parity byte " << i;
          }
          if (h.parity_trusted) {
            ASSERT_EQ(s.chunk[pd], parity);
          }
        }
        if (h.missing_slot < 0 && h.parity_trusted && !(a == 0 && b == S)) {
          ExpectCheaperChoice(geo, a, b, plan);
        }
      }
    }
  }
}

// Splits [a, b) of a stripe's data into per-chunk pieces, as the engine
// does, with client offsets from 0.
std::vector<ReadPiece> Pieces(const Geometry& geo, uint64_t a, uint64_t b) {
  const uint64_t C = geo.chunk_bytes();
  std::vector<ReadPiece> out;
  for (uint64_t at = a; at < b;) {
    const uint64_t k = at / C, end = std::min(b, (k + 1) * C);
    out.push_back(
        ReadPiece{static_cast<int>(k), at % C, at % C + (end - at), at - a});
    at = end;
  }
  return out;
}

TEST(PlanDegradedRead, AWholeStripeReadsEachSurvivorOnce) {
  // md reads the client's chunks, then every surviving chunk again to
  // rebuild the lost one: 1.5 member bytes per byte on 4 disks. The plan
  // reads each survivor once: one member byte per byte delivered.
  for (int disks = 3; disks <= 16; ++disks) {
    const Geometry geo = Geo(disks);
    for (int missing = 0; missing < disks; ++missing) {
      const auto pieces = Pieces(geo, 0, geo.stripe_data_bytes());
      const ReadPlan plan = PlanDegradedRead(geo, 5, pieces, missing);
      EXPECT_EQ(ReadBytes(plan.reads), geo.stripe_data_bytes());
      EXPECT_EQ(plan.rebuild, missing != geo.ParityDisk(5));
      EXPECT_TRUE(plan.copies.empty());
      EXPECT_EQ(plan.scratch_bytes, 0u);  // everything lands in the client
    }
  }
}

TEST(PlanDegradedRead, PartialPiecesShareTheirBytesWithTheRebuild) {
  const Geometry geo = Geo(4);  // chunk 64K; stripe 0: data slots 0,1,2
  // Client reads data index 0 at [32K, 64K) and index 1 at [0, 16K); slot
  // of index 1 is missing: its rows [0, 16K) come from index 0, index 2 and
  // parity. Index 0 is not read there by the client: all of it is read.
  const auto pieces = Pieces(geo, 32 * K, 80 * K);
  const int missing = geo.DataDisk(0, 1);
  const ReadPlan plan = PlanDegradedRead(geo, 0, pieces, missing);
  EXPECT_TRUE(plan.rebuild);
  EXPECT_EQ(plan.len, 16 * K);
  EXPECT_EQ(ReadBytes(plan.reads), 32 * K + 3 * 16 * K);
}

// 20 random reads of one stripe with one slot missing for each layout and
// member count from 3 to `max_disks` (8 KiB chunks): fn(geo, stripe, a, b,
// missing) reads [a, b) of the stripe's data, under a trace naming them.
template <typename Fn>
void ForRandomDegradedReads(std::mt19937_64& rng, int max_disks, Fn fn) {
  for (const LayoutCase& lc : kLayouts) {
    for (int disks = 3; disks <= max_disks; ++disks) {
      const Geometry geo = Geo(disks, 8 * K, lc.layout, lc.level);
      const uint64_t S = geo.stripe_data_bytes();
      for (int round = 0; round < 20; ++round) {
        const uint64_t stripe = rng() % geo.stripe_count();
        const uint64_t a = (rng() % (S / 512)) * 512;
        const uint64_t b = a + (1 + rng() % ((S - a) / 512)) * 512;
        const int missing = static_cast<int>(rng() % disks);
        SCOPED_TRACE(testing::Message()
                     << "layout " << static_cast<int>(lc.layout) << " disks "
                     << disks << " [" << a << "," << b << ") missing "
                     << missing);
        fn(geo, stripe, a, b, missing);
        if (testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// A random stripe whose slot `missing` is lost (overwritten); returns the
// data bytes [a, b) it held.
std::vector<uint8_t> LoseSlot(const Geometry& geo, uint64_t stripe, uint64_t a,
                              uint64_t b, int missing, std::mt19937_64& rng,
                              Stripe* s) {
  const uint64_t C = geo.chunk_bytes();
  *s = MakeStripe(geo, stripe, rng, true);
  std::vector<uint8_t> want(b - a);
  for (uint64_t i = a; i < b; ++i) {
    want[i - a] = s->chunk[geo.DataDisk(stripe, i / C)][i % C];
  }
  std::fill(s->chunk[missing].begin(), s->chunk[missing].end(), 0xEE);
  return want;
}

// Survivor rows the rebuild finds elsewhere (read into buffers of their
// own, or lent by the survivor cache) are XORed from there: scratch is
// written only where a row holds part of a source (one gathered from the
// client's piece and a read), never where a row holds whole sources.
TEST(PlanDegradedRead, RebuildTakesItsSourcesFromRowsElsewhere) {
  std::mt19937_64 rng(5);
  bool written = false;
  const auto run = [&](const Geometry& geo, uint64_t stripe, uint64_t a,
                       uint64_t b, int missing) {
    Stripe s;
    const std::vector<uint8_t> want =
        LoseSlot(geo, stripe, a, b, missing, rng, &s);
    const ReadPlan plan =
        PlanDegradedRead(geo, stripe, Pieces(geo, a, b), missing);
    AlignedBuffer scratch(plan.scratch_bytes);
    std::vector<uint8_t> client(b - a, 0x55);
    RunIos(plan.reads, false, s, missing, scratch.data(), client.data());
    // Every read into scratch moves to a row of its own.
    std::vector<std::vector<uint8_t>> rows;
    rows.reserve(plan.reads.size());
    std::vector<ScratchRow> elsewhere;
    for (const PlannedIo& io : plan.reads) {
      if (io.ref.buffer != PlanRef::kScratch) continue;
      const uint8_t* at = scratch.data() + io.ref.offset;
      rows.emplace_back(at, at + io.len);
      elsewhere.push_back(
          ScratchRow{io.ref.offset, io.len, rows.back().data()});
    }
    // A plan with no scratch has a null one (memset of null is undefined,
    // even for 0 bytes: UBSan).
    if (plan.scratch_bytes > 0) {
      std::memset(scratch.data(), 0xEE, plan.scratch_bytes);
    }
    ComputeRead(plan, scratch.data(), client.data(), elsewhere);
    EXPECT_EQ(client, want);
    written = false;
    for (const ScratchRow& e : elsewhere) {
      for (uint64_t i = 0; i < e.len; ++i) {
        written |= scratch.data()[e.offset + i] != 0xEE;
      }
    }
  };
  ForRandomDegradedReads(rng, 8, run);
  // The lost chunk alone (a 1 MiB request on 1 MiB chunks): each source is
  // one other chunk's row, XORed where it lies.
  const Geometry geo = Geo(8, 8 * K);
  const uint64_t C = geo.chunk_bytes();
  for (uint64_t stripe = 0; stripe < 8; ++stripe) {
    SCOPED_TRACE(testing::Message() << "stripe " << stripe);
    run(geo, stripe, 2 * C, 3 * C, geo.DataDisk(stripe, 2));
    EXPECT_FALSE(written);
  }
}

TEST(PlanDegradedRead, EveryLayoutRebuildsTheRightBytes) {
  std::mt19937_64 rng(4);
  ForRandomDegradedReads(
      rng, 16,
      [&](const Geometry& geo, uint64_t stripe, uint64_t a, uint64_t b,
          int missing) {
        Stripe s;
        const std::vector<uint8_t> want =
            LoseSlot(geo, stripe, a, b, missing, rng, &s);
        const auto pieces = Pieces(geo, a, b);
        const ReadPlan plan = PlanDegradedRead(geo, stripe, pieces, missing);
        AlignedBuffer scratch(plan.scratch_bytes);
        std::vector<uint8_t> client(b - a, 0x55);
        RunIos(plan.reads, false, s, missing, scratch.data(), client.data());
        if (HasFatalFailure()) return;
        ComputeRead(plan, scratch.data(), client.data());
        ASSERT_EQ(client, want);
        // Never more than the client's bytes plus the lost piece's rows
        // from each of the other slots.
        uint64_t lost = 0;
        for (const ReadPiece& p : pieces) {
          if (geo.DataDisk(stripe, p.data_index) == missing) lost = p.y - p.x;
        }
        EXPECT_LE(ReadBytes(plan.reads),
                  (b - a) - lost + lost * (geo.raid_disks() - 1));
      });
}

TEST(PlanReconstruct, RebuildsAnySlotFromTheOthers) {
  std::mt19937_64 rng(7);
  for (int disks = 3; disks <= 16; ++disks) {
    const Geometry geo = Geo(disks, 16 * K);
    for (int slot = 0; slot < disks; ++slot) {
      Stripe s = MakeStripe(geo, 3, rng, true);
      const uint64_t x = 4 * K, len = 8 * K;
      std::vector<uint8_t> want(s.chunk[slot].begin() + x,
                                s.chunk[slot].begin() + x + len);
      std::fill(s.chunk[slot].begin(), s.chunk[slot].end(), 0);
      const ReadPlan plan = PlanReconstruct(geo, 3, slot, x, len);
      AlignedBuffer scratch(plan.scratch_bytes);
      std::vector<uint8_t> out(len);
      RunIos(plan.reads, false, s, slot, scratch.data(), out.data());
      if (HasFatalFailure()) return;
      ComputeRead(plan, scratch.data(), out.data());
      ASSERT_EQ(out, want) << "disks " << disks << " slot " << slot;
      EXPECT_EQ(ReadBytes(plan.reads), len * (disks - 1));
    }
  }
}

// Level 5's pair: one slot read (a replace's old member), the other
// rebuilt from every slot but itself, each slot read once, into either
// order of the caller's two buffers.
TEST(PlanReadAndRebuild, ReadsEachSlotOnceForBoth) {
  std::mt19937_64 rng(8);
  for (int disks = 3; disks <= 16; ++disks) {
    const Geometry geo = Geo(disks, 16 * K);
    for (int round = 0; round < 8; ++round) {
      const int read = static_cast<int>(rng() % disks);
      const int lost =
          (read + 1 + static_cast<int>(rng() % (disks - 1))) % disks;
      const bool swapped = round % 2 == 1;
      SCOPED_TRACE(testing::Message() << "disks " << disks << " read " << read
                                      << " lost " << lost);
      Stripe s = MakeStripe(geo, 5, rng, true);
      const uint64_t x = 4 * K, len = 8 * K;
      std::vector<uint8_t> want_read(s.chunk[read].begin() + x,
                                     s.chunk[read].begin() + x + len);
      std::vector<uint8_t> want_lost(s.chunk[lost].begin() + x,
                                     s.chunk[lost].begin() + x + len);
      std::fill(s.chunk[lost].begin(), s.chunk[lost].end(), 0);
      const uint64_t at_read = swapped ? len : 0, at_lost = swapped ? 0 : len;
      const ReadPlan plan =
          PlanReadAndRebuild(geo, 5, read, at_read, lost, at_lost, x, len);
      AlignedBuffer scratch(plan.scratch_bytes);
      std::vector<uint8_t> out(2 * len, 0x55);
      RunIos(plan.reads, false, s, lost, scratch.data(), out.data());
      if (HasFatalFailure()) return;
      ComputeRead(plan, scratch.data(), out.data());
      EXPECT_TRUE(std::equal(want_read.begin(), want_read.end(),
                             out.begin() + at_read));
      EXPECT_TRUE(std::equal(want_lost.begin(), want_lost.end(),
                             out.begin() + at_lost));
      EXPECT_EQ(ReadBytes(plan.reads), len * (disks - 1));
      std::vector<int> reads_of(disks, 0);
      for (const PlannedIo& io : plan.reads) ++reads_of[io.slot];
      for (int i = 0; i < disks; ++i) {
        EXPECT_EQ(reads_of[i], i == lost ? 0 : 1) << "slot " << i;
      }
    }
  }
}

}  // namespace
}  // namespace uraid
