// SPDX-License-Identifier: MIT
// The RAID6 planner: every md RAID6 layout, 4..12 disks, random ranges,
// zero, one or two lost slots (data, P, Q in every pairing), each plan run
// against an in-memory stripe whose P and Q this test computes with its own
// GF(2^8) arithmetic (not parity/raid6.h), and the result checked byte for
// byte; plus md's block counts for a few known requests.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "base/aligned_buffer.h"
#include "gf256_reference.h"
#include "plan/stripe_plan.h"

namespace uraid {
namespace {

constexpr uint64_t K = 1024;

const Layout kLayouts6[] = {
    Layout::kLeftAsymmetric,   Layout::kRightAsymmetric,
    Layout::kLeftSymmetric,    Layout::kRightSymmetric,
    Layout::kParityFirst,      Layout::kParityLast,
    Layout::kDdfZeroRestart,   Layout::kDdfNRestart,
    Layout::kDdfNContinue,     Layout::kLeftAsymmetric6,
    Layout::kRightAsymmetric6, Layout::kLeftSymmetric6,
    Layout::kRightSymmetric6,  Layout::kParityFirst6,
};

Geometry Geo6(int disks, uint64_t chunk = 64 * K,
              Layout layout = Layout::kLeftSymmetric) {
  return *Geometry::Make(6, layout, chunk, disks, chunk * 64);
}

struct Stripe {
  std::vector<std::vector<uint8_t>> chunk;  // by slot
};

// P and Q of `data` (by data index) into p and q, by md's slot order.
void Syndrome(const Geometry& geo, uint64_t stripe,
              const std::vector<std::vector<uint8_t>>& data,
              std::vector<uint8_t>& p, std::vector<uint8_t>& q) {
  const uint64_t C = geo.chunk_bytes();
  p.assign(C, 0);
  q.assign(C, 0);
  for (int k = 0; k < geo.data_disks(); ++k) {
    const uint8_t g = gf256::Pow2(geo.QSlot(stripe, geo.DataDisk(stripe, k)));
    for (uint64_t i = 0; i < C; ++i) {
      p[i] ^= data[k][i];
      q[i] ^= gf256::TabledMul(g, data[k][i]);
    }
  }
}

Stripe MakeStripe(const Geometry& geo, uint64_t stripe, std::mt19937_64& rng,
                  bool parity_good) {
  const uint64_t C = geo.chunk_bytes();
  Stripe s;
  s.chunk.assign(geo.raid_disks(), std::vector<uint8_t>(C));
  for (auto& c : s.chunk) {
    for (auto& b : c) b = static_cast<uint8_t>(rng());
  }
  if (parity_good) {
    std::vector<std::vector<uint8_t>> data;
    for (int k = 0; k < geo.data_disks(); ++k) {
      data.push_back(s.chunk[geo.DataDisk(stripe, k)]);
    }
    Syndrome(geo, stripe, data, s.chunk[geo.ParityDisk(stripe)],
             s.chunk[geo.QDisk(stripe)]);
  }
  return s;
}

// Runs a plan's I/O against `s`: each member byte read or written at most
// once, inside its chunk, never on a lost slot.
void RunIos(const std::vector<PlannedIo>& ios, bool write, Stripe& s, int m1,
            int m2, uint8_t* scratch, uint8_t* client) {
  const uint64_t C = s.chunk[0].size();
  std::vector<std::vector<bool>> seen(s.chunk.size(),
                                      std::vector<bool>(C, false));
  for (const PlannedIo& io : ios) {
    ASSERT_NE(io.slot, m1);
    ASSERT_NE(io.slot, m2);
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
    }
  }
}

// Two lost slots (or fewer: -1) drawn so that every pairing comes up.
std::pair<int, int> PickLost(int disks, std::mt19937_64& rng) {
  const int n = static_cast<int>(rng() % 3);
  int a = n >= 1 ? static_cast<int>(rng() % disks) : -1;
  int b = n >= 2 ? static_cast<int>(rng() % disks) : -1;
  if (b == a) b = -1;
  return {a, b};
}

struct WriteRow {
  const char* what;
  int disks;
  uint64_t a, b;
  WriteMode mode;
  uint64_t read_bytes;
  size_t writes;
};

// Chunk 64 KiB, left-symmetric, stripe 0, healthy and trusted.
const WriteRow kWriteTable[] = {
    {"full stripe: P and Q from the data, nothing read", 6, 0, 256 * K,
     WriteMode::kFull, 0, 6},
    {"one 4K block of 8 disks: RMW reads it, P and Q (md: 6 I/Os)", 8, 0, 4 * K,
     WriteMode::kRmw, 12 * K, 3},
    {"one 4K block of 4 disks: RCW reads the other data block (2 < 3)", 4, 0,
     4 * K, WriteMode::kRcw, 4 * K, 3},
    {"one 4K block of 6 disks: a tie (3 vs 3 blocks) goes to RMW", 6, 0, 4 * K,
     WriteMode::kRmw, 12 * K, 3},
    {"three of four chunks: RCW reads the fourth", 6, 0, 192 * K,
     WriteMode::kRcw, 64 * K, 5},
};

TEST(PlanWrite6Table, MatchesMdsChoiceAndCounts) {
  for (const WriteRow& r : kWriteTable) {
    SCOPED_TRACE(r.what);
    const Geometry geo = Geo6(r.disks);
    const WritePlan plan = PlanWrite(geo, 0, r.a, r.b, StripeHealth{});
    EXPECT_EQ(plan.mode, r.mode);
    EXPECT_EQ(ReadBytes(plan.reads), r.read_bytes);
    EXPECT_EQ(plan.writes.size(), r.writes);
    EXPECT_EQ(plan.q_slot, geo.QDisk(0));
  }
}

TEST(PlanWrite6, EveryLayoutAndWidthWritesTheRightBytes) {
  std::mt19937_64 rng(61);
  for (const Layout layout : kLayouts6) {
    for (int disks = 4; disks <= 12; ++disks) {
      const Geometry geo = Geo6(disks, 8 * K, layout);
      const uint64_t C = geo.chunk_bytes(), S = geo.stripe_data_bytes();
      const int D = geo.data_disks();
      for (int round = 0; round < 30; ++round) {
        const uint64_t stripe = rng() % geo.stripe_count();
        uint64_t a = (rng() % (S / 512)) * 512;
        uint64_t b = a + (1 + rng() % ((S - a) / 512)) * 512;
        if (round % 8 == 0) a = 0, b = S;
        const auto [m1, m2] = PickLost(disks, rng);
        StripeHealth h;
        h.missing_slot = m1;
        h.second_missing_slot = m2;
        h.parity_trusted = m1 >= 0 || rng() % 3 != 0;
        SCOPED_TRACE(testing::Message()
                     << "layout " << static_cast<int>(layout) << " disks "
                     << disks << " stripe " << stripe << " [" << a << "," << b
                     << ") lost " << m1 << "," << m2 << " trusted "
                     << h.parity_trusted);
        Stripe s = MakeStripe(geo, stripe, rng, h.parity_trusted);
        std::vector<std::vector<uint8_t>> want(D);
        for (int k = 0; k < D; ++k) want[k] = s.chunk[geo.DataDisk(stripe, k)];
        for (const int m : {m1, m2}) {
          if (m >= 0) std::fill(s.chunk[m].begin(), s.chunk[m].end(), 0xEE);
        }
        std::vector<uint8_t> src(b - a);
        for (auto& x : src) x = static_cast<uint8_t>(rng());
        for (uint64_t i = a; i < b; ++i) want[i / C][i % C] = src[i - a];

        const WritePlan plan = PlanWrite(geo, stripe, a, b, h);
        AlignedBuffer scratch(plan.scratch_bytes);
        RunIos(plan.reads, false, s, m1, m2, scratch.data(), src.data());
        ComputeWrite(plan, scratch.data(), src.data());
        RunIos(plan.writes, true, s, m1, m2, scratch.data(), src.data());
        if (HasFatalFailure()) return;

        for (int k = 0; k < D; ++k) {
          const int slot = geo.DataDisk(stripe, k);
          if (slot != m1 && slot != m2) {
            ASSERT_EQ(s.chunk[slot], want[k]);
          }
        }
        std::vector<uint8_t> p, q;
        Syndrome(geo, stripe, want, p, q);
        const int pd = geo.ParityDisk(stripe), qd = geo.QDisk(stripe);
        const bool full = a == 0 && b == S;
        const uint64_t lo = full ? 0 : plan.lo, hi = full ? C : plan.hi;
        for (const auto& [slot, ref] : {std::pair{pd, &p}, std::pair{qd, &q}}) {
          if (slot == m1 || slot == m2) continue;
          // Rows outside the write keep their old parity; when it was
          // trusted that is the data's there too.
          for (uint64_t i = lo; i < hi; ++i) {
            ASSERT_EQ(s.chunk[slot][i], (*ref)[i])
                << (slot == pd ? "P" : "Q") << " byte " << i;
          }
          if (h.parity_trusted) {
            ASSERT_EQ(s.chunk[slot], *ref);
          }
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

TEST(PlanDegradedRead6, EveryLayoutRebuildsTheRightBytes) {
  std::mt19937_64 rng(62);
  for (const Layout layout : kLayouts6) {
    for (int disks = 4; disks <= 12; ++disks) {
      const Geometry geo = Geo6(disks, 8 * K, layout);
      const uint64_t C = geo.chunk_bytes(), S = geo.stripe_data_bytes();
      for (int round = 0; round < 30; ++round) {
        const uint64_t stripe = rng() % geo.stripe_count();
        uint64_t a = (rng() % (S / 512)) * 512;
        uint64_t b = a + (1 + rng() % ((S - a) / 512)) * 512;
        if (round % 6 == 0) a = 0, b = S;
        const auto [m1, m2] = PickLost(disks, rng);
        SCOPED_TRACE(testing::Message()
                     << "layout " << static_cast<int>(layout) << " disks "
                     << disks << " [" << a << "," << b << ") lost " << m1 << ","
                     << m2);
        Stripe s = MakeStripe(geo, stripe, rng, true);
        std::vector<uint8_t> want(b - a);
        for (uint64_t i = a; i < b; ++i) {
          want[i - a] = s.chunk[geo.DataDisk(stripe, i / C)][i % C];
        }
        for (const int m : {m1, m2}) {
          if (m >= 0) std::fill(s.chunk[m].begin(), s.chunk[m].end(), 0xEE);
        }
        const auto pieces = Pieces(geo, a, b);
        const ReadPlan plan = PlanDegradedRead(geo, stripe, pieces, m1, m2);
        AlignedBuffer scratch(plan.scratch_bytes);
        std::vector<uint8_t> client(b - a, 0x55);
        RunIos(plan.reads, false, s, m1, m2, scratch.data(), client.data());
        if (HasFatalFailure()) return;
        ComputeRead(plan, scratch.data(), client.data());
        ASSERT_EQ(client, want);
        // Each survivor read once: at most one chunk per surviving slot.
        EXPECT_LE(ReadBytes(plan.reads), C * (disks - (m1 >= 0) - (m2 >= 0)));
      }
    }
  }
}

TEST(PlanDegradedRead6, OneDataChunkLostReadsNoQ) {
  // With P there, the lost chunk is P ^ the other data, as RAID5: md's
  // fetch of Q would cost a chunk per stripe for nothing.
  const Geometry geo = Geo6(6);
  const auto pieces = Pieces(geo, 0, geo.stripe_data_bytes());
  const int lost = geo.DataDisk(0, 1);
  for (const int second : {-1, geo.QDisk(0)}) {
    const ReadPlan plan = PlanDegradedRead(geo, 0, pieces, lost, second);
    EXPECT_FALSE(plan.pq.has_value());
    for (const PlannedIo& io : plan.reads) EXPECT_NE(io.slot, geo.QDisk(0));
    EXPECT_EQ(ReadBytes(plan.reads), geo.stripe_data_bytes());
  }
  // Lost with P: Q rebuilds it.
  const ReadPlan pq = PlanDegradedRead(geo, 0, pieces, lost, geo.ParityDisk(0));
  ASSERT_TRUE(pq.pq.has_value());
  EXPECT_EQ(ReadBytes(pq.reads), geo.stripe_data_bytes());
}

TEST(PlanReconstruct6, RebuildsAnySlotBesideAnyOtherLoss) {
  std::mt19937_64 rng(63);
  for (const Layout layout : kLayouts6) {
    for (int disks = 4; disks <= 9; ++disks) {
      const Geometry geo = Geo6(disks, 16 * K, layout);
      for (int slot = 0; slot < disks; ++slot) {
        for (int also = -1; also < disks; ++also) {
          if (also == slot) continue;
          SCOPED_TRACE(testing::Message()
                       << "layout " << static_cast<int>(layout) << " disks "
                       << disks << " slot " << slot << " also " << also);
          Stripe s = MakeStripe(geo, 3, rng, true);
          const uint64_t x = 4 * K, len = 8 * K;
          std::vector<uint8_t> want(s.chunk[slot].begin() + x,
                                    s.chunk[slot].begin() + x + len);
          std::fill(s.chunk[slot].begin(), s.chunk[slot].end(), 0);
          if (also >= 0) {
            std::fill(s.chunk[also].begin(), s.chunk[also].end(), 0xEE);
          }
          const ReadPlan plan = PlanReconstruct(geo, 3, slot, x, len, also);
          AlignedBuffer scratch(plan.scratch_bytes);
          std::vector<uint8_t> out(len);
          RunIos(plan.reads, false, s, slot, also, scratch.data(), out.data());
          if (HasFatalFailure()) return;
          ComputeRead(plan, scratch.data(), out.data());
          ASSERT_EQ(out, want);
          // Never more than the data disks' worth: P or Q is read only
          // where it is needed.
          EXPECT_LE(ReadBytes(plan.reads), len * geo.data_disks());
        }
      }
    }
  }
}

}  // namespace
}  // namespace uraid
