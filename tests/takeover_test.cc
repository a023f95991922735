// SPDX-License-Identifier: MIT
// md's RAID5 <-> RAID6 takeover (array/takeover.cc, format/takeover.h):
// the layouts that keep every block where it is, the conversion of a live
// array both ways with the data checked byte for byte, Q checked by losing
// two members after it was rebuilt, a restripe at level 6 before the way
// back, refusals that write nothing, and power cuts in the superblock
// update.

#include "format/takeover.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_format.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using testing::HasSubstr;
using testutil::ExpectContents;
using testutil::Handles;
using testutil::Mismatches;
using testutil::Pattern;
using Shared = std::shared_ptr<Member>;

constexpr uint64_t kChunk = 64 << 10;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 32 * kChunk;  // 2 MiB
constexpr uint64_t kSize = kOffset + kMemberBytes;

constexpr Layout kRaid5Layouts[] = {
    Layout::kLeftAsymmetric, Layout::kRightAsymmetric, Layout::kLeftSymmetric,
    Layout::kRightSymmetric, Layout::kParityFirst,     Layout::kParityLast,
};

// ------------------------------------------------------------ the layouts

// The RAID6 layout of the takeover puts data and P of every stripe on the
// slots RAID5 had them on, and Q on the new last slot; the way back is its
// inverse.
TEST(TakeoverLayout, KeepsDataAndParityInPlaceWithQLast) {
  for (int level : {4, 5}) {
    for (Layout l : kRaid5Layouts) {
      if (level == 4 && l != Layout::kParityLast) continue;
      for (int n = 3; n <= 9; ++n) {
        SCOPED_TRACE(absl::StrFormat("level %d %s, %d disks", level,
                                     std::string(LayoutName(l)), n));
        auto g5 = Geometry::Make(level, l, kChunk, n, kMemberBytes);
        ASSERT_TRUE(g5.ok()) << g5.status();
        const Layout l6 = Raid6TakeoverLayout(*g5);
        auto g6 = Geometry::Make(6, l6, kChunk, n + 1, kMemberBytes);
        ASSERT_TRUE(g6.ok()) << g6.status();
        EXPECT_EQ(g6->array_bytes(), g5->array_bytes());
        for (uint64_t s = 0; s < 3u * static_cast<uint64_t>(n); ++s) {
          ASSERT_EQ(g6->ParityDisk(s), g5->ParityDisk(s)) << "stripe " << s;
          ASSERT_EQ(g6->QDisk(s), n) << "stripe " << s;
          for (int k = 0; k < g5->data_disks(); ++k) {
            ASSERT_EQ(g6->DataDisk(s, k), g5->DataDisk(s, k))
                << "stripe " << s << " data " << k;
          }
        }
        absl::StatusOr<Layout> back = Raid5TakeoverLayout(*g6);
        ASSERT_TRUE(back.ok()) << back.status();
        EXPECT_EQ(*back, l);
      }
    }
  }
}

TEST(TakeoverLayout, RotatingQHasNoWayBackButNamesTheRestripe) {
  const struct {
    Layout from;
    const char* restripe_to;
  } cases[] = {
      {Layout::kLeftSymmetric, "left-symmetric-6"},
      {Layout::kRightAsymmetric, "right-asymmetric-6"},
      {Layout::kParityFirst, "parity-first-6"},
      {Layout::kDdfNContinue, "left-symmetric-6"},
  };
  for (const auto& c : cases) {
    auto g6 = Geometry::Make(6, c.from, kChunk, 6, kMemberBytes);
    ASSERT_TRUE(g6.ok());
    absl::StatusOr<Layout> back = Raid5TakeoverLayout(*g6);
    ASSERT_FALSE(back.ok());
    EXPECT_THAT(back.status().message(),
                HasSubstr(absl::StrFormat("grow --layout %s", c.restripe_to)));
  }
}

// ------------------------------------------------------------- the array

std::vector<Shared> MakeMembers(int n, const std::string& prefix = "m") {
  return testutil::MakeMembers(n, kSize, prefix);
}

std::unique_ptr<Array> MustCreate(const std::vector<Shared>& m, int level,
                                  Layout layout) {
  CreateOptions o;
  o.level = level;
  o.layout = layout;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.bitmap = BitmapMode::kInternal;
  o.bitmap_chunk_bytes = 256 << 10;
  o.cache.bytes = 4 << 20;
  return testutil::MustCreate(m, o);
}

GrowOptions ToLevel(int level, int disks, const std::vector<Shared>& add) {
  GrowOptions g;
  g.level = level;
  g.raid_devices = disks;
  g.add = Handles(add);
  return g;
}

// testutil::UnderWriters with this file's writers: up to 128 KiB, seeds
// 21 and 22.
template <typename F>
int UnderWriters(Array& a, std::vector<uint8_t>& ref, F run) {
  return testutil::UnderWriters(a, ref, run, /*max_blocks=*/32, /*seed=*/21);
}

// RAID5 -> RAID6 under writers: the new member is rebuilt as Q, and then
// any two members may go.
TEST(Takeover, Raid5ToRaid6RebuildsQUnderWritersAndSurvivesTwoFailures) {
  for (Layout l : kRaid5Layouts) {
    SCOPED_TRACE(std::string(LayoutName(l)));
    auto m = MakeMembers(4);
    auto a = MustCreate(m, 5, l);
    ASSERT_NE(a, nullptr);
    a->StartBackground();
    SpeedLimits slow;
    slow.min_kib_s = slow.max_kib_s = 8000;  // ~0.25 s for Q
    a->SetSpeedLimits(slow);
    std::vector<uint8_t> ref = Pattern(a->Info().geometry.array_bytes(), 7);
    ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
    auto q = MakeMembers(1, "q");
    const int errors = UnderWriters(*a, ref, [&] {
      absl::Status st = a->Grow(ToLevel(6, 5, q));
      ASSERT_TRUE(st.ok()) << st;
      const Geometry g = a->Info().geometry;
      EXPECT_EQ(g.level(), 6);
      EXPECT_EQ(g.layout(), Raid6TakeoverLayout(*Geometry::Make(5, l, kChunk, 4,
                                                                kMemberBytes)));
      EXPECT_EQ(g.raid_disks(), 5);
      ASSERT_TRUE(a->WaitForJob().ok());
    });
    EXPECT_EQ(errors, 0);
    ArrayInfo info = a->Info();
    EXPECT_FALSE(info.degraded);
    EXPECT_EQ(info.last_job.kind, JobKind::kRecover);
    EXPECT_EQ(info.last_job.result, "completed");
    ExpectContents(*a, ref);
    EXPECT_EQ(Mismatches(*a), 0u);  // P and Q both
    // Q is right: lose a data member and P's member (or two data members)
    // and every byte still reads back.
    ASSERT_TRUE(a->FailSlot(0).ok());
    ASSERT_TRUE(a->FailSlot(2).ok());
    ExpectContents(*a, ref);
    a.reset();
    // md's superblock says so too.
    const Superblock sb = testutil::SuperOf(*q[0]);
    EXPECT_EQ(sb.level, 6);
    EXPECT_EQ(sb.raid_disks, 5u);
    EXPECT_EQ(sb.dev_roles[sb.dev_number], 4);
  }
}

// RAID6 -> RAID5 from a layout with Q last: the last member becomes a
// spare, nothing moves. From a rotating layout: refused, restriped to its
// "-6" twin (a level-6 reshape), then converted.
TEST(Takeover, Raid6ToRaid5AfterARestripeToQLast) {
  auto m = MakeMembers(5);
  auto a = MustCreate(m, 6, Layout::kRightAsymmetric);
  ASSERT_NE(a, nullptr);
  a->StartBackground();
  std::vector<uint8_t> ref = Pattern(a->Info().geometry.array_bytes(), 8);
  ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
  const auto to5 = [] {
    GrowOptions g;
    g.level = 5;
    return g;
  };
  EXPECT_THAT(a->Grow(to5()).message(),
              HasSubstr("grow --layout right-asymmetric-6"));
  GrowOptions restripe;
  restripe.layout = Layout::kRightAsymmetric6;
  const int errors = UnderWriters(*a, ref, [&] {
    ASSERT_TRUE(a->Grow(std::move(restripe)).ok());
    ASSERT_TRUE(a->WaitForJob().ok());
  });
  EXPECT_EQ(errors, 0);
  EXPECT_EQ(a->Info().last_job.result, "completed");
  EXPECT_EQ(a->Info().geometry.layout(), Layout::kRightAsymmetric6);
  EXPECT_EQ(a->Info().geometry.level(), 6);
  ExpectContents(*a, ref);
  EXPECT_EQ(Mismatches(*a), 0u);
  const int errors2 = UnderWriters(*a, ref, [&] {
    absl::Status st = a->Grow(to5());
    ASSERT_TRUE(st.ok()) << st;
  });
  EXPECT_EQ(errors2, 0);
  ArrayInfo info = a->Info();
  EXPECT_EQ(info.geometry.level(), 5);
  EXPECT_EQ(info.geometry.layout(), Layout::kRightAsymmetric);
  EXPECT_EQ(info.geometry.raid_disks(), 4);
  EXPECT_FALSE(info.degraded);
  ASSERT_EQ(info.spares.size(), 1u);
  EXPECT_EQ(info.spares[0].name, "m4");
  ExpectContents(*a, ref);
  EXPECT_EQ(Mismatches(*a), 0u);
  a.reset();
  // Reassembled from every member, the old Q member included: a RAID5 of
  // four with a spare.
  std::vector<Shared> all = {m[4], m[1], m[3], m[0], m[2]};
  auto b = Array::Assemble(Handles(all), {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->Info().geometry.level(), 5);
  EXPECT_EQ((*b)->Info().spares.size(), 1u);
  ExpectContents(**b, ref);
  // Without the spare, nothing is missing.
  b->reset();
  auto c = Array::Assemble(Handles({m[0], m[1], m[2], m[3]}), {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE((*c)->Info().degraded);
  ExpectContents(**c, ref);
}

TEST(Takeover, RefusalsWriteNothing) {
  auto m = MakeMembers(4);
  auto a = MustCreate(m, 5, Layout::kLeftSymmetric);
  ASSERT_NE(a, nullptr);
  auto x = MakeMembers(2, "x");
  EXPECT_THAT(a->Grow(ToLevel(6, 6, x)).message(),
              HasSubstr("from 4 to 5 raid devices (6 asked)"));
  EXPECT_THAT(a->Grow(ToLevel(6, 5, {})).message(),
              HasSubstr("needs one new member, for Q (0 given)"));
  GrowOptions layout = ToLevel(6, 5, {x[0]});
  layout.layout = Layout::kLeftSymmetric;
  EXPECT_THAT(a->Grow(std::move(layout)).message(),
              HasSubstr("takes layout left-symmetric-6"));
  GrowOptions chunk = ToLevel(6, 5, {x[0]});
  chunk.chunk_bytes = 128 << 10;
  EXPECT_THAT(a->Grow(std::move(chunk)).message(),
              HasSubstr("keeps the chunk size"));
  EXPECT_THAT(a->Grow(ToLevel(6, 5, {m[2]})).message(),
              HasSubstr("already a member"));
  ASSERT_TRUE(a->FailSlot(1).ok());
  EXPECT_THAT(a->Grow(ToLevel(6, 5, {x[0]})).message(), HasSubstr("degraded"));
  EXPECT_EQ(a->Info().geometry.level(), 5);
  std::vector<uint8_t> raw(kSbBlockBytes);
  for (const auto& n : x) {
    ASSERT_TRUE(n->Read(raw.data(), raw.size(), kSb12OffsetBytes).ok());
    EXPECT_FALSE(DecodeSuperblock(raw).ok()) << n->Name();
  }
  auto six = MakeMembers(5, "s");
  auto b = MustCreate(six, 6, Layout::kLeftSymmetric6);
  ASSERT_NE(b, nullptr);
  GrowOptions to4;
  to4.level = 4;
  EXPECT_THAT(b->Grow(std::move(to4)).message(),
              HasSubstr("converts to RAID5 only"));
  GrowOptions grow_too = ToLevel(5, 5, {});
  EXPECT_THAT(b->Grow(std::move(grow_too)).message(),
              HasSubstr("from 5 to 4 raid devices (5 asked)"));
  EXPECT_EQ(b->Info().geometry.level(), 6);
}

// A power cut anywhere in the takeover (its superblock update, the new
// member joining, Q's rebuild): the members assemble as the RAID5 or the
// RAID6, every byte is right, and a RAID6 finishes rebuilding Q.
TEST(Takeover, PowerCutsAnywhere) {
  std::mt19937 rng(5);
  int as6 = 0, as5 = 0;
  for (int round = 0; round < 16; ++round) {
    SCOPED_TRACE(absl::StrFormat("round %d", round));
    auto m = MakeMembers(4);
    auto q = MakeMembers(1, "q");
    std::vector<uint8_t> data;
    {
      auto a = MustCreate(m, 5, Layout::kLeftSymmetric);
      ASSERT_NE(a, nullptr);
      data = Pattern(a->Info().geometry.array_bytes(), 300 + round);
      ASSERT_TRUE(a->Write(data.data(), data.size(), 0).ok());
    }
    auto budget = std::make_shared<std::atomic<int64_t>>(INT64_MAX);
    {
      auto a = Array::Assemble(testutil::CutHandles(m, budget), {});
      ASSERT_TRUE(a.ok()) << a.status();
      (*a)->StartBackground();
      GrowOptions g;
      g.level = 6;
      g.raid_devices = 5;
      g.add = testutil::CutHandles(q, budget);
      // The takeover's superblock update is the 5th to 8th write here
      // (the bitmap headers come first, then the superblocks, highest slot
      // first): half the cuts land around it, half in the new member
      // joining and Q's rebuild.
      budget->store(round % 2 ? 1 + rng() % 10 : 10 + rng() % 300);
      (void)(*a)->Grow(std::move(g));
      (void)(*a)->WaitForJob();
      budget->store(0);
    }
    std::vector<Shared> all = m;
    std::vector<uint8_t> raw(kSbBlockBytes);
    ASSERT_TRUE(q[0]->Read(raw.data(), raw.size(), kSb12OffsetBytes).ok());
    if (DecodeSuperblock(raw).ok()) all.push_back(q[0]);
    auto b = Array::Assemble(Handles(all), {});
    ASSERT_TRUE(b.ok()) << b.status();
    const int level = (*b)->Info().geometry.level();
    (level == 6 ? as6 : as5)++;
    (*b)->StartBackground();
    ASSERT_TRUE((*b)->WaitForJob().ok());
    ExpectContents(**b, data);
    if (!(*b)->Info().degraded) {
      EXPECT_EQ(Mismatches(**b), 0u);
    }
  }
  // Cuts land on both sides of the change.
  EXPECT_GT(as6, 0);
  EXPECT_GT(as5, 0);
}

}  // namespace
}  // namespace uraid
