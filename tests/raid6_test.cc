// SPDX-License-Identifier: MIT
// Tests for parity/raid6.h: md's P and Q with ISA-L and the portable loops,
// read-modify-write, and recovery of every one or two lost blocks.
//
// The reference is written here, byte by byte and slowly: Q = XOR of
// g^slot * D over gf256_reference.h's field (shift-and-add with polynomial
// 0x11d, no tables, nothing taken from md), g^slot by repeated
// multiplication by {02}. Every stripe test runs twice: through ISA-L where
// the buffers allow it, and with the portable loops forced.

#include "parity/raid6.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/aligned_buffer.h"
#include "gf256_reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "uraid/geometry.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

// P and Q of `slots` (nullptr: zeros), byte by byte.
void SlowPQ(const std::vector<const uint8_t*>& slots, size_t len,
            std::vector<uint8_t>* p, std::vector<uint8_t>* q) {
  p->assign(len, 0);
  q->assign(len, 0);
  for (size_t j = 0; j < slots.size(); ++j) {
    if (slots[j] == nullptr) continue;
    const uint8_t c = gf256::Pow2(static_cast<int>(j));
    for (size_t i = 0; i < len; ++i) {
      (*p)[i] ^= slots[j][i];
      (*q)[i] ^= gf256::Mul(c, slots[j][i]);
    }
  }
}

// A buffer whose data starts `misalign` bytes past a 4 KiB boundary.
class Buf {
 public:
  Buf(size_t len, size_t misalign)
      : mem_(len + misalign + 64), off_(misalign) {}
  uint8_t* data() { return mem_.data() + off_; }

 private:
  AlignedBuffer mem_;
  size_t off_;
};

void Fill(std::mt19937_64& rng, uint8_t* p, size_t len) {
  for (size_t i = 0; i < len; ++i) p[i] = static_cast<uint8_t>(rng());
}

// Runs each test with ISA-L allowed (param false) and with the portable
// loops forced (true).
class Raid6Test : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override { SetRaid6PortableForTesting(GetParam()); }
  void TearDown() override { SetRaid6PortableForTesting(false); }
};

// Known answers, worked by hand from the field's definition: g^7 = 0x80,
// g^8 = 0x80 * 2 = 0x100 ^ 0x11d = 0x1d, g^254 = 1/g = 0x8e (2 * 0x8e =
// 0x11c, ^ 0x11d = 1), g^255 = 1.
TEST(Raid6KnownAnswerTest, Coefficients) {
  EXPECT_EQ(QCoefficient(0), 1);
  EXPECT_EQ(QCoefficient(1), 2);
  EXPECT_EQ(QCoefficient(7), 0x80);
  EXPECT_EQ(QCoefficient(8), 0x1d);
  EXPECT_EQ(QCoefficient(254), 0x8e);
  EXPECT_EQ(QCoefficient(255), 1);
  for (int e = 0; e < 300; ++e) EXPECT_EQ(QCoefficient(e), gf256::Pow2(e)) << e;
  EXPECT_EQ(gf256::Mul(0x80, 2), 0x1d);
  EXPECT_EQ(gf256::Mul(0x8e, 2), 1);
}

// Three slots of constant bytes, in 64-byte blocks: P and Q worked by hand.
TEST_P(Raid6Test, KnownAnswerStripe) {
  constexpr size_t kLen = 64;
  Buf d0(kLen, 0), d1(kLen, 0), d2(kLen, 0), p(kLen, 0), q(kLen, 0);
  std::memset(d0.data(), 0x01, kLen);
  std::memset(d1.data(), 0x80, kLen);
  std::memset(d2.data(), 0xff, kLen);
  const void* slots[] = {d0.data(), d1.data(), d2.data()};
  ComputePQ(slots, p.data(), q.data(), kLen);
  // P = 01 ^ 80 ^ ff = 7e. Q = 1*01 ^ 2*80 ^ 4*ff: 2*80 = 1d; 2*ff = fe ^ 1d
  // = e3, 2*e3 = c6 ^ 1d = db; so 01 ^ 1d ^ db = c7.
  for (size_t i = 0; i < kLen; ++i) {
    ASSERT_EQ(p.data()[i], 0x7e) << i;
    ASSERT_EQ(q.data()[i], 0xc7) << i;
  }
  // DDF-style zero slots shift the coefficients: the same data at slots
  // 1, 3, 4 of five gives Q = 2*01 ^ 8*80 ^ 16*ff.
  const void* ddf[] = {nullptr, d0.data(), nullptr, d1.data(), d2.data()};
  ComputePQ(ddf, p.data(), q.data(), kLen);
  const uint8_t want =
      gf256::Mul(2, 0x01) ^ gf256::Mul(8, 0x80) ^ gf256::Mul(16, 0xff);
  // 2*01 = 02; 8*80 = 2*3a = 74; 16*ff = 2*(2*db) = 2*ab = 4b.
  EXPECT_EQ(want, 0x02 ^ 0x74 ^ 0x4b);
  for (size_t i = 0; i < kLen; ++i) {
    ASSERT_EQ(p.data()[i], 0x7e);
    ASSERT_EQ(q.data()[i], want);
  }
}

// Random stripes of 1..24 slots (some zero), many lengths and alignments,
// against the slow reference.
TEST_P(Raid6Test, MatchesSlowReference) {
  std::mt19937_64 rng(6);
  const size_t kLens[] = {1,   7,    31,        32,    64,        96,
                          100, 4096, 4096 + 32, 20000, 65536 + 64};
  // 32 is aligned for ISA-L but not to 64 (its AVX-512 build must cope).
  const size_t kMisalign[] = {0, 32, 16, 8, 1, 3};
  for (size_t len : kLens) {
    for (size_t mis : kMisalign) {
      for (int n : {1, 2, 3, 5, 14, 24}) {
        SCOPED_TRACE("len " + std::to_string(len) + " misalign " +
                     std::to_string(mis) + " slots " + std::to_string(n));
        std::vector<Buf> data;
        std::vector<const uint8_t*> ref;
        std::vector<const void*> slots;
        for (int j = 0; j < n; ++j) {
          data.emplace_back(len, mis);
          Fill(rng, data.back().data(), len);
          const bool zero = n > 2 && rng() % 4 == 0;
          ref.push_back(zero ? nullptr : data.back().data());
          slots.push_back(ref.back());
        }
        Buf p(len, mis), q(len, mis);
        ComputePQ(slots, p.data(), q.data(), len);
        std::vector<uint8_t> wp, wq;
        SlowPQ(ref, len, &wp, &wq);
        ASSERT_EQ(std::memcmp(p.data(), wp.data(), len), 0);
        ASSERT_EQ(std::memcmp(q.data(), wq.data(), len), 0);
        // Only one output.
        Buf q2(len, mis);
        ComputePQ(slots, nullptr, q2.data(), len);
        ASSERT_EQ(std::memcmp(q2.data(), wq.data(), len), 0);
        Buf p2(len, mis);
        ComputePQ(slots, p2.data(), nullptr, len);
        ASSERT_EQ(std::memcmp(p2.data(), wp.data(), len), 0);
      }
    }
  }
}

TEST_P(Raid6Test, GfMulAndMulXorMatchReference) {
  std::mt19937_64 rng(7);
  for (size_t len : {1, 33, 64, 4096, 4100}) {
    for (size_t mis : {0, 32, 5}) {
      for (int c : {0, 1, 2, 0x1d, 0x8e, 0xff}) {
        Buf src(len, mis), dst(len, mis);
        Fill(rng, src.data(), len);
        Fill(rng, dst.data(), len);
        std::vector<uint8_t> orig(dst.data(), dst.data() + len);
        GfMulXor(static_cast<uint8_t>(c), src.data(), dst.data(), len);
        for (size_t i = 0; i < len; ++i) {
          ASSERT_EQ(dst.data()[i], orig[i] ^ gf256::Mul(static_cast<uint8_t>(c),
                                                        src.data()[i]))
              << "c " << c << " len " << len << " at " << i;
        }
        GfMul(static_cast<uint8_t>(c), src.data(), dst.data(), len);
        for (size_t i = 0; i < len; ++i) {
          ASSERT_EQ(dst.data()[i],
                    gf256::Mul(static_cast<uint8_t>(c), src.data()[i]));
        }
        // In place.
        std::vector<uint8_t> before(src.data(), src.data() + len);
        GfMul(static_cast<uint8_t>(c), src.data(), src.data(), len);
        for (size_t i = 0; i < len; ++i) {
          ASSERT_EQ(src.data()[i],
                    gf256::Mul(static_cast<uint8_t>(c), before[i]));
        }
      }
    }
  }
}

// Read-modify-write: P ^= delta, Q ^= g^slot * delta equals recomputing.
TEST_P(Raid6Test, UpdateMatchesRecompute) {
  std::mt19937_64 rng(8);
  for (size_t mis : {0, 16}) {
    const size_t len = 4096;
    const int n = 9;
    std::vector<Buf> data;
    std::vector<const void*> slots;
    for (int j = 0; j < n; ++j) {
      data.emplace_back(len, mis);
      Fill(rng, data.back().data(), len);
      slots.push_back(data.back().data());
    }
    slots[4] = nullptr;  // a DDF zero slot stays zero
    Buf p(len, mis), q(len, mis), p2(len, mis), q2(len, mis), delta(len, mis);
    ComputePQ(slots, p.data(), q.data(), len);
    for (int slot : {0, 3, 8}) {
      Fill(rng, delta.data(), len);
      for (size_t i = 0; i < len; ++i) data[slot].data()[i] ^= delta.data()[i];
      UpdatePQ(slot, delta.data(), p.data(), q.data(), len);
      ComputePQ(slots, p2.data(), q2.data(), len);
      ASSERT_EQ(std::memcmp(p.data(), p2.data(), len), 0) << slot;
      ASSERT_EQ(std::memcmp(q.data(), q2.data(), len), 0) << slot;
    }
  }
}

// One stripe of a level-6 geometry: each disk's block, P and Q placed by
// the geometry and computed through QSlot.
struct Stripe {
  Geometry g;
  uint64_t stripe;
  size_t len;
  std::vector<Buf> disks;
  std::vector<std::vector<uint8_t>> truth;
};

// slots[i] = the disk buffer at Q slot i (nullptr for DDF's P/Q slots).
std::vector<void*> SlotsOf(Stripe& s) {
  std::vector<void*> slots(s.g.SyndromeSlots(), nullptr);
  for (int d = 0; d < s.g.raid_disks(); ++d) {
    const int slot = s.g.QSlot(s.stripe, d);
    if (slot >= 0) slots[slot] = s.disks[d].data();
  }
  return slots;
}

// Every one and two lost disks of random stripes, 4..16 disks, every
// layout: rebuilt exactly, the survivors untouched.
TEST_P(Raid6Test, RecoversEveryOneAndTwoLostDisks) {
  const Layout kLayouts[] = {
      Layout::kLeftAsymmetric,   Layout::kRightAsymmetric,
      Layout::kLeftSymmetric,    Layout::kRightSymmetric,
      Layout::kParityFirst,      Layout::kParityLast,
      Layout::kDdfZeroRestart,   Layout::kDdfNRestart,
      Layout::kDdfNContinue,     Layout::kLeftAsymmetric6,
      Layout::kRightAsymmetric6, Layout::kLeftSymmetric6,
      Layout::kRightSymmetric6,  Layout::kParityFirst6,
  };
  std::mt19937_64 rng(9);
  for (Layout layout : kLayouts) {
    for (int n = 4; n <= 16; ++n) {
      // Aligned blocks, and misaligned ones of an odd length.
      const bool odd = n % 2 == 1;
      const size_t len = odd ? 200 : 256;
      const size_t mis = odd ? 3 : 0;
      absl::StatusOr<Geometry> g =
          Geometry::Make(6, layout, 4096, n, 4096 * 64);
      ASSERT_TRUE(g.ok());
      Stripe s{*g, rng() % 64, len, {}, {}};
      for (int d = 0; d < n; ++d) s.disks.emplace_back(len, mis);
      const int pd = g->ParityDisk(s.stripe), qd = g->QDisk(s.stripe);
      for (int d = 0; d < n; ++d) {
        if (d != pd && d != qd) Fill(rng, s.disks[d].data(), len);
      }
      std::vector<void*> slots = SlotsOf(s);
      ComputePQ(std::vector<const void*>(slots.begin(), slots.end()),
                s.disks[pd].data(), s.disks[qd].data(), len);
      // Q against the slow reference, from the geometry's slot order.
      std::vector<const uint8_t*> ref;
      for (void* v : slots) ref.push_back(static_cast<const uint8_t*>(v));
      std::vector<uint8_t> wp, wq;
      SlowPQ(ref, len, &wp, &wq);
      ASSERT_EQ(std::memcmp(s.disks[qd].data(), wq.data(), len), 0);
      for (int d = 0; d < n; ++d) {
        s.truth.emplace_back(s.disks[d].data(), s.disks[d].data() + len);
      }
      // The name RecoverPQ uses for disk d.
      auto name = [&](int d) {
        return d == pd ? kLostP : d == qd ? kLostQ : g->QSlot(s.stripe, d);
      };
      for (int a = 0; a < n; ++a) {
        for (int b = a; b < n; ++b) {
          SCOPED_TRACE(std::string(LayoutName(layout)) + " n " +
                       std::to_string(n) + " lost " + std::to_string(a) + "," +
                       std::to_string(b));
          std::vector<int> lost = {name(a)};
          if (b != a) lost.push_back(name(b));
          std::memset(s.disks[a].data(), 0xa5, len);
          std::memset(s.disks[b].data(), 0x5a, len);
          ASSERT_TRUE(RecoverPQ(slots, s.disks[pd].data(), s.disks[qd].data(),
                                len, lost)
                          .ok());
          for (int d = 0; d < n; ++d) {
            ASSERT_EQ(std::memcmp(s.disks[d].data(), s.truth[d].data(), len), 0)
                << "disk " << d << " (P " << pd << ", Q " << qd << ")";
          }
        }
      }
    }
  }
}

// mdadm's raid6check through LocatePQFault: one bad block (a data slot,
// P or Q; a few bytes of it or all of them) is named exactly, for stripes
// with and without zero slots (DDF); two bad data blocks, or bad bytes in P
// and in Q at different places, name nothing.
TEST_P(Raid6Test, LocatesOneBadBlockAndNoneOfTwo) {
  std::mt19937_64 rng(33);
  const size_t len = 4096;
  for (const int n : {2, 3, 6, 14}) {
    for (const bool zeros : {false, true}) {
      // With `zeros`, the last two slots are DDF's P and Q positions.
      const int real = zeros ? n : n + 2;
      std::vector<Buf> d;
      for (int i = 0; i < real + 4; ++i) d.emplace_back(len, 0);
      std::vector<const void*> slots;
      for (int i = 0; i < real; ++i) {
        Fill(rng, d[i].data(), len);
        slots.push_back(d[i].data());
      }
      if (zeros) {
        slots.push_back(nullptr);
        slots.push_back(nullptr);
      }
      uint8_t* p = d[real].data();
      uint8_t* q = d[real + 1].data();
      uint8_t* sp = d[real + 2].data();
      uint8_t* sq = d[real + 3].data();
      ComputePQ(slots, p, q, len);
      auto locate = [&] { return LocatePQFault(slots, p, q, sp, sq, len); };
      SCOPED_TRACE(testing::Message() << n << " slots, zeros " << zeros);
      EXPECT_EQ(locate().kind, PQFault::kNone);
      // Corrupts [off, off + count) of `b` (each byte changed), runs `check`
      // and puts the bytes back.
      auto corrupt = [&](uint8_t* b, size_t off, size_t count, auto check) {
        std::vector<uint8_t> keep(b + off, b + off + count);
        for (size_t i = 0; i < count; ++i) {
          b[off + i] ^= static_cast<uint8_t>(1 + rng() % 255);
        }
        check();
        std::memcpy(b + off, keep.data(), count);
      };
      for (const size_t count : {size_t{1}, size_t{37}, len}) {
        const size_t off = count == len ? 0 : rng() % (len - count);
        for (int z = 0; z < real; ++z) {
          corrupt(d[z].data(), off, count, [&] {
            const PQFault f = locate();
            EXPECT_EQ(f.kind, PQFault::kData) << "slot " << z;
            EXPECT_EQ(f.slot, z);
          });
        }
        corrupt(p, off, count, [&] { EXPECT_EQ(locate().kind, PQFault::kP); });
        corrupt(q, off, count, [&] { EXPECT_EQ(locate().kind, PQFault::kQ); });
      }
      EXPECT_EQ(locate().kind, PQFault::kNone);
      // Two bad blocks: never a slot named.
      for (int z = 0; z < real; ++z) {
        const int y = (z + 1) % real;
        if (y == z) continue;
        corrupt(d[z].data(), 0, len, [&] {
          corrupt(d[y].data(), 0, len, [&] {
            EXPECT_EQ(locate().kind, PQFault::kUnknown) << z << "+" << y;
          });
          corrupt(p, 100, 8, [&] {
            EXPECT_EQ(locate().kind, PQFault::kUnknown) << z << "+P";
          });
        });
      }
      corrupt(p, 0, 16, [&] {
        corrupt(q, 64, 16,
                [&] { EXPECT_EQ(locate().kind, PQFault::kUnknown); });
      });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(IsalAndPortable, Raid6Test, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Portable" : "Isal";
                         });

TEST(Raid6RecoverTest, RefusesBadRequests) {
  Buf a(64, 0), b(64, 0), p(64, 0), q(64, 0);
  std::vector<void*> slots = {a.data(), nullptr, b.data()};
  struct Case {
    std::vector<int> lost;
    const char* message;
  };
  const Case kCases[] = {
      {{}, "0 blocks lost"},           {{0, 2, kLostP}, "3 blocks lost"},
      {{2, 2}, "block 2 named twice"}, {{3}, "slot 3 out of range 0..2"},
      {{-3}, "slot -3 out of range"},  {{1}, "slot 1 is a zero block"},
  };
  for (const Case& c : kCases) {
    absl::Status s = RecoverPQ(slots, p.data(), q.data(), 64, c.lost);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
  EXPECT_FALSE(RecoverPQ(slots, p.data(), nullptr, 64, {{kLostQ}}).ok());
  EXPECT_FALSE(RecoverPQ(slots, nullptr, q.data(), 64, {{0}}).ok());
}

}  // namespace
}  // namespace uraid
