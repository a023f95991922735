// SPDX-License-Identifier: MIT
// Reshape: the pure arithmetic (data offset choice and the window bound
// that keeps uncopied data safe), then grows, layout, chunk and level
// changes on in-memory arrays, with clients writing during the copy, a
// member failing mid-reshape, and power cuts at random points of the copy
// followed by reassembly, resumption and full verification.

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "format/reshape_math.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

// ------------------------------------------------------------ pure math

Geometry G(int disks, uint64_t chunk, Layout layout = Layout::kLeftSymmetric,
           uint64_t member = 64ull << 20, int level = 5) {
  return *Geometry::Make(level, layout, chunk, disks, member);
}

TEST(ReshapeMath, DataOffsetFollowsMdAndTheHeadroom) {
  // 3 -> 4 disks, 512K chunks: lcm(1M, 1.5M) / 2 = 1.5M of movement.
  auto off = ChooseReshapeDataOffset(G(3, 512 << 10), 128 << 20,
                                     G(4, 512 << 10), 12288);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(*off, (128u << 20) - (1536u << 10));
  // Little headroom: as much as fits, in whole chunks.
  off =
      ChooseReshapeDataOffset(G(3, 512 << 10), 2 << 20, G(4, 512 << 10), 12288);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, 512u << 10);
  // Less than a chunk of headroom: refused, naming it.
  off = ChooseReshapeDataOffset(G(3, 512 << 10), 512 << 10, G(4, 512 << 10),
                                12288);
  EXPECT_EQ(off.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(off.status().message(), HasSubstr("headroom"));
  // Shrinks are not supported.
  off = ChooseReshapeDataOffset(G(4, 64 << 10), 8 << 20, G(3, 64 << 10), 8192);
  EXPECT_EQ(off.status().code(), absl::StatusCode::kInvalidArgument);
}

// For many shapes and offsets: walking the windows from 0 reaches the end,
// and no window's new rows reach an old row that still holds bytes not yet
// copied (rows from the one holding the window's start).
TEST(ReshapeMath, WindowsNeverOverwriteUncopiedData) {
  std::mt19937 rng(7);
  const Layout layouts[] = {Layout::kLeftAsymmetric, Layout::kRightSymmetric,
                            Layout::kLeftSymmetric, Layout::kParityLast};
  for (int iter = 0; iter < 300; ++iter) {
    const int d0 = 3 + static_cast<int>(rng() % 5);
    const int d1 = d0 + static_cast<int>(rng() % 3);
    const uint64_t c0 = 4096u << (rng() % 5), c1 = 4096u << (rng() % 5);
    const uint64_t member = std::max(c0, c1) * (8 + rng() % 64);
    const Geometry from = G(d0, c0, layouts[rng() % 4], member);
    const Geometry to = G(d1, c1, layouts[rng() % 4], member);
    if (from == to) continue;
    const uint64_t from_off = std::max(c0, c1) * (1 + rng() % 8) + 65536;
    auto to_off = ChooseReshapeDataOffset(from, from_off, to, 8192);
    ASSERT_TRUE(to_off.ok()) << to_off.status();
    ASSERT_LT(*to_off, from_off);
    ASSERT_GE(*to_off, 8192u);
    const uint64_t max_window = to.stripe_data_bytes() * (1 + rng() % 8);
    uint64_t front = 0;
    int windows = 0;
    while (front < to.array_bytes()) {
      const uint64_t end =
          ReshapeWindowEnd(from, from_off, to, *to_off, front, max_window);
      ASSERT_GT(end, front) << "stuck at " << front;
      ASSERT_EQ(end % to.stripe_data_bytes(), 0u);
      ASSERT_LE(end - front, max_window);
      // Highest raw byte the window writes vs lowest raw byte still needed.
      const uint64_t write_end =
          *to_off + end / to.stripe_data_bytes() * to.chunk_bytes();
      const uint64_t need_from =
          from_off +
          std::min(front / from.stripe_data_bytes() * from.chunk_bytes(),
                   from.member_bytes());
      if (front < from.array_bytes()) {
        ASSERT_LE(write_end, need_from)
            << "window [" << front << ", " << end << ") " << d0 << "->" << d1;
      }
      absl::Status v =
          ValidateReshapeResume(from, from_off, to, *to_off, front, 8192);
      EXPECT_TRUE(v.ok()) << v;
      front = end;
      ++windows;
    }
    EXPECT_GT(windows, 0);
  }
}

TEST(ReshapeMath, ResumeRefusesImpossiblePositions) {
  const Geometry from = G(3, 64 << 10), to = G(4, 64 << 10);
  const uint64_t sd = to.stripe_data_bytes();
  EXPECT_THAT(ValidateReshapeResume(from, 1 << 20, to, (1 << 20) - 65536,
                                    sd + 512, 8192)
                  .message(),
              HasSubstr("stripe boundary"));
  EXPECT_THAT(ValidateReshapeResume(from, 1 << 20, to, (1 << 20) - 65536,
                                    to.array_bytes() + sd, 8192)
                  .message(),
              HasSubstr("past the end"));
  EXPECT_THAT(ValidateReshapeResume(from, 1 << 20, to, 4096, 0, 8192).message(),
              HasSubstr("overlaps the metadata"));
  EXPECT_EQ(ValidateReshapeResume(from, 1 << 20, to, 2 << 20, 0, 8192).code(),
            absl::StatusCode::kUnimplemented);
}

// ------------------------------------------------------ arrays in memory

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 48 * kChunk;  // 3 MiB
constexpr uint64_t kSize = kOffset + kMemberBytes;

using Shared = std::shared_ptr<Member>;
using testutil::CutHandles;
using testutil::ExpectContents;
using testutil::Handles;
using testutil::Mismatches;
using testutil::Pattern;

std::vector<Shared> MakeMembers(int n, const std::string& prefix = "m") {
  return testutil::MakeMembers(n, kSize, prefix);
}

std::unique_ptr<Array> MustCreate(const std::vector<Shared>& m, int level = 5,
                                  Layout layout = Layout::kLeftSymmetric,
                                  BitmapMode bitmap = BitmapMode::kInternal) {
  CreateOptions o;
  o.level = level;
  o.layout = layout;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.bitmap = bitmap;
  o.bitmap_chunk_bytes = bitmap == BitmapMode::kNone ? 0 : 256 << 10;
  o.cache.bytes = 4 << 20;
  return testutil::MustCreate(m, o);
}

GrowOptions AddDevices(int to, const std::vector<Shared>& extra) {
  GrowOptions g;
  g.raid_devices = to;
  g.add = Handles(extra);
  return g;
}

// A filled array of `disks` members (pattern `seed`), serving, growing by
// one member at `kib_s` (slow enough for the test to act mid-copy).
struct SlowGrow {
  std::vector<Shared> members, extra;
  std::unique_ptr<Array> array;
  std::vector<uint8_t> data;
};
SlowGrow StartSlowGrow(int disks, uint64_t kib_s, uint32_t seed) {
  SlowGrow g;
  g.members = MakeMembers(disks);
  g.array = MustCreate(g.members);
  if (g.array == nullptr) return g;
  Array& a = *g.array;
  a.StartBackground();
  SpeedLimits slow;
  slow.min_kib_s = slow.max_kib_s = kib_s;
  a.SetSpeedLimits(slow);
  g.data = Pattern(a.Info().geometry.array_bytes(), seed);
  EXPECT_TRUE(a.Write(g.data.data(), g.data.size(), 0).ok());
  g.extra = MakeMembers(1, "x");
  absl::Status st = a.Grow(AddDevices(disks + 1, g.extra));
  EXPECT_TRUE(st.ok()) << st;
  if (!st.ok()) g.array.reset();
  return g;
}

TEST(Reshape, GrowFourToFiveKeepsEveryByteAndGrowsTheArray) {
  auto m = MakeMembers(4);
  auto a = MustCreate(m);
  ASSERT_NE(a, nullptr);
  const uint64_t old_bytes = a->Info().geometry.array_bytes();
  auto data = Pattern(old_bytes, 1);
  ASSERT_TRUE(a->Write(data.data(), data.size(), 0).ok());
  auto extra = MakeMembers(1, "x");
  ASSERT_TRUE(a->Grow(AddDevices(5, extra)).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  ArrayInfo info = a->Info();
  EXPECT_FALSE(info.reshape.active);
  EXPECT_EQ(info.geometry.raid_disks(), 5);
  EXPECT_EQ(info.geometry.array_bytes(), 4 * kMemberBytes);
  EXPECT_EQ(info.last_job.kind, JobKind::kReshape);
  EXPECT_EQ(info.last_job.result, "completed");
  EXPECT_LT(info.data_offset_bytes, kOffset);
  ExpectContents(*a, data);
  // The grown part reads as zeros and takes writes.
  std::vector<uint8_t> tail(kMemberBytes);
  ASSERT_TRUE(a->Read(tail.data(), tail.size(), old_bytes).ok());
  EXPECT_TRUE(
      std::all_of(tail.begin(), tail.end(), [](uint8_t b) { return b == 0; }));
  auto more = Pattern(kMemberBytes, 2);
  ASSERT_TRUE(a->Write(more.data(), more.size(), old_bytes).ok());
  EXPECT_EQ(Mismatches(*a), 0u);
  a.reset();

  std::vector<Shared> all = {extra[0], m[2], m[0], m[3], m[1]};
  auto b = Array::Assemble(Handles(all), {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->Info().geometry.raid_disks(), 5);
  EXPECT_TRUE((*b)->Info().clean);
  data.insert(data.end(), more.begin(), more.end());
  ExpectContents(**b, data);
  std::vector<uint8_t> raw(kSbBlockBytes);
  ASSERT_TRUE(extra[0]->Read(raw.data(), raw.size(), kSb12OffsetBytes).ok());
  auto sb = DecodeSuperblock(raw);
  ASSERT_TRUE(sb.ok());
  EXPECT_EQ(sb->raid_disks, 5u);
  EXPECT_EQ(sb->feature_map & kFeatureReshapeActive, 0u);
  EXPECT_EQ(sb->data_offset * 512, (*b)->Info().data_offset_bytes);
}

// A member that counts its discards, and reads discards back as zeros
// only when told so (else the array must not rely on them).
class DiscardCounting : public testutil::ForwardingMember {
 public:
  DiscardCounting(Shared t, bool zeroes, std::shared_ptr<std::atomic<int>> n)
      : ForwardingMember(std::move(t)), zeroes_(zeroes), n_(std::move(n)) {}
  absl::Status Discard(size_t len, uint64_t offset) override {
    n_->fetch_add(1);
    return ForwardingMember::Discard(len, offset);
  }
  bool DiscardZeroes() const override { return zeroes_; }

 private:
  const bool zeroes_;
  std::shared_ptr<std::atomic<int>> n_;
};

// The grown part of a 4 -> 5 grow (new stripes past the old array's end)
// is zeros: discarded on every member, parity included, where every member
// reads discards back as zeros (no member write, no XOR); written as zeros
// where one does not. Either way it reads as zeros and the parity holds.
TEST(Reshape, GrowDiscardsTheGrownPartWhereDiscardsReadZeros) {
  for (const bool zeroes : {true, false}) {
    SCOPED_TRACE(zeroes ? "discards read zeros" : "discards do not");
    auto discards = std::make_shared<std::atomic<int>>(0);
    const auto wrap = [&](std::vector<Shared> v) {
      for (Shared& m : v) {
        m = std::make_shared<DiscardCounting>(m, zeroes, discards);
      }
      return v;
    };
    auto m = wrap(MakeMembers(4));
    auto a = MustCreate(m);
    ASSERT_NE(a, nullptr);
    const uint64_t old_bytes = a->Info().geometry.array_bytes();
    auto data = Pattern(old_bytes, 3);
    ASSERT_TRUE(a->Write(data.data(), data.size(), 0).ok());
    auto extra = wrap(MakeMembers(1, "x"));
    discards->store(0);
    ASSERT_TRUE(a->Grow(AddDevices(5, extra)).ok());
    ASSERT_TRUE(a->WaitForJob().ok());
    ASSERT_EQ(a->Info().geometry.array_bytes(), 4 * kMemberBytes);
    // Whole new stripes past the old end, one discard per member each.
    const uint64_t sd = 4 * kChunk;
    const uint64_t grown =
        (4 * kMemberBytes - (old_bytes + sd - 1) / sd * sd) / sd;
    ASSERT_GT(grown, 0u);
    EXPECT_EQ(discards->load(), zeroes ? static_cast<int>(5 * grown) : 0);
    ExpectContents(*a, data);
    std::vector<uint8_t> tail(4 * kMemberBytes - old_bytes);
    ASSERT_TRUE(a->Read(tail.data(), tail.size(), old_bytes).ok());
    EXPECT_TRUE(std::all_of(tail.begin(), tail.end(),
                            [](uint8_t b) { return b == 0; }));
    EXPECT_EQ(Mismatches(*a), 0u);
  }
}

// The same-size reshapes: layout, chunk (both ways), RAID4 <-> RAID5.
struct ShapeCase {
  const char* name;
  int level;
  Layout layout;
  GrowOptions (*make)();
  int want_level;
  Layout want_layout;
  uint64_t want_chunk;
};

TEST(Reshape, LayoutChunkAndLevelChanges) {
  const ShapeCase cases[] = {
      {"layout ls->ra", 5, Layout::kLeftSymmetric,
       [] {
         GrowOptions g;
         g.layout = Layout::kRightAsymmetric;
         return g;
       },
       5, Layout::kRightAsymmetric, kChunk},
      {"chunk 64K->32K", 5, Layout::kLeftSymmetric,
       [] {
         GrowOptions g;
         g.chunk_bytes = 32 << 10;
         return g;
       },
       5, Layout::kLeftSymmetric, 32 << 10},
      {"chunk 64K->128K", 5, Layout::kLeftAsymmetric,
       [] {
         GrowOptions g;
         g.chunk_bytes = 128 << 10;
         return g;
       },
       5, Layout::kLeftAsymmetric, 128 << 10},
      {"raid4->raid5 ls", 4, Layout::kParityLast,
       [] {
         GrowOptions g;
         g.level = 5;
         g.layout = Layout::kLeftSymmetric;
         return g;
       },
       5, Layout::kLeftSymmetric, kChunk},
      {"raid5->raid4", 5, Layout::kRightSymmetric,
       [] {
         GrowOptions g;
         g.level = 4;
         return g;
       },
       4, Layout::kParityLast, kChunk},
      {"raid4->raid5 parity-last (instant)", 4, Layout::kParityLast,
       [] {
         GrowOptions g;
         g.level = 5;
         return g;
       },
       5, Layout::kParityLast, kChunk},
      // RAID6: the copier writes P and Q of each new stripe.
      {"raid6 layout ls->ra", 6, Layout::kLeftSymmetric,
       [] {
         GrowOptions g;
         g.layout = Layout::kRightAsymmetric;
         return g;
       },
       6, Layout::kRightAsymmetric, kChunk},
      {"raid6 layout ddf-N-continue->ls-6", 6, Layout::kDdfNContinue,
       [] {
         GrowOptions g;
         g.layout = Layout::kLeftSymmetric6;
         return g;
       },
       6, Layout::kLeftSymmetric6, kChunk},
      {"raid6 chunk 64K->32K", 6, Layout::kLeftAsymmetric,
       [] {
         GrowOptions g;
         g.chunk_bytes = 32 << 10;
         return g;
       },
       6, Layout::kLeftAsymmetric, 32 << 10},
  };
  uint32_t seed = 10;
  for (const ShapeCase& c : cases) {
    SCOPED_TRACE(c.name);
    auto m = MakeMembers(4);
    auto a = MustCreate(m, c.level, c.layout);
    ASSERT_NE(a, nullptr);
    auto data = Pattern(a->Info().geometry.array_bytes(), ++seed);
    ASSERT_TRUE(a->Write(data.data(), data.size(), 0).ok());
    absl::Status st = a->Grow(c.make());
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_TRUE(a->WaitForJob().ok());
    Geometry g = a->Info().geometry;
    EXPECT_EQ(g.level(), c.want_level);
    EXPECT_EQ(g.layout(), c.want_layout);
    EXPECT_EQ(g.chunk_bytes(), c.want_chunk);
    ExpectContents(*a, data);
    EXPECT_EQ(Mismatches(*a), 0u);
    a.reset();
    auto b = Array::Assemble(Handles(m), {});
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ((*b)->Info().geometry, g);
    ExpectContents(**b, data);
  }
}

TEST(Reshape, RefusesWhatItCannotDo) {
  auto m = MakeMembers(4);
  auto a = MustCreate(m);
  ASSERT_NE(a, nullptr);
  auto extra = MakeMembers(2, "x");
  // Wrong number of new members.
  EXPECT_THAT(a->Grow(AddDevices(6, {extra[0]})).message(),
              HasSubstr("needs 2 new member"));
  // Shrink.
  GrowOptions shrink;
  shrink.raid_devices = 3;
  EXPECT_THAT(a->Grow(std::move(shrink)).message(), HasSubstr("shrinking"));
  // Nothing to change.
  EXPECT_THAT(a->Grow(GrowOptions{}).message(), HasSubstr("nothing to change"));
  // RAID4 with a rotating layout.
  GrowOptions bad;
  bad.level = 4;
  bad.layout = Layout::kLeftSymmetric;
  EXPECT_THAT(a->Grow(std::move(bad)).message(), HasSubstr("parity-last"));
  // An existing member as the new one.
  EXPECT_THAT(a->Grow(AddDevices(5, {m[1]})).message(),
              HasSubstr("already a member"));
  // Degraded.
  ASSERT_TRUE(a->FailSlot(1).ok());
  EXPECT_THAT(a->Grow(AddDevices(5, {extra[0]})).message(),
              HasSubstr("degraded"));
  // None of it wrote a superblock to the would-be members.
  std::vector<uint8_t> raw(kSbBlockBytes);
  ASSERT_TRUE(extra[0]->Read(raw.data(), raw.size(), kSb12OffsetBytes).ok());
  EXPECT_FALSE(DecodeSuperblock(raw).ok());
  // No headroom: a data offset with less than a chunk free.
  auto n = MakeMembers(4, "n");
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = 64 << 10;
  o.bitmap = BitmapMode::kNone;
  auto c = Array::Create(Handles(n), o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT((*c)->Grow(AddDevices(5, {extra[1]})).message(),
              HasSubstr("headroom"));
}

// Clients read and write everywhere while the reshape runs; afterwards
// every byte is the last one written.
TEST(Reshape, ClientsWriteAndReadDuringAGrow) {
  for (BitmapMode bm : {BitmapMode::kInternal, BitmapMode::kNone}) {
    auto m = MakeMembers(3);
    auto a = MustCreate(m, 5, Layout::kLeftSymmetric, bm);
    ASSERT_NE(a, nullptr);
    a->StartBackground();
    SpeedLimits slow;
    slow.min_kib_s = 2000;
    slow.max_kib_s = 4000;  // ~1 s for the 3 MiB members
    a->SetSpeedLimits(slow);
    const uint64_t bytes = a->Info().geometry.array_bytes();
    auto ref = Pattern(bytes, 3);
    ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
    auto extra = MakeMembers(2, "x");
    ASSERT_TRUE(a->Grow(AddDevices(5, extra)).ok());
    const int errors = testutil::UnderWriters(
        *a, ref, [&] { ASSERT_TRUE(a->WaitForJob().ok()); },
        /*max_blocks=*/48, /*seed=*/11);
    EXPECT_EQ(errors, 0);
    EXPECT_EQ(a->Info().geometry.raid_disks(), 5);
    ExpectContents(*a, ref);
    EXPECT_EQ(Mismatches(*a), 0u);
  }
}

// StopJob pauses a reshape (the array keeps serving in both shapes); a
// grow with no changes resumes it.
TEST(Reshape, StopPausesAndEmptyGrowResumes) {
  SlowGrow g = StartSlowGrow(3, 2000, 6);
  ASSERT_NE(g.array, nullptr);
  Array* a = g.array.get();
  const std::vector<uint8_t>& data = g.data;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(a->StopJob().ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  ArrayInfo info = a->Info();
  ASSERT_TRUE(info.reshape.active);
  EXPECT_EQ(info.last_job.kind, JobKind::kReshape);
  EXPECT_EQ(info.last_job.result, "interrupted");
  ExpectContents(*a, data);
  // A different change is refused while one is in progress.
  GrowOptions other;
  other.layout = Layout::kRightSymmetric;
  EXPECT_THAT(a->Grow(std::move(other)).message(),
              HasSubstr("already in progress"));
  a->SetSpeedLimits(SpeedLimits{});
  ASSERT_TRUE(a->Grow(GrowOptions{}).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  EXPECT_FALSE(a->Info().reshape.active);
  EXPECT_EQ(a->Info().geometry.raid_disks(), 4);
  ExpectContents(*a, data);
}

// A member fails in the middle of the copy: the reshape goes on degraded
// and every byte survives.
TEST(Reshape, MemberFailsMidReshape) {
  SlowGrow g = StartSlowGrow(4, 3000, 4);
  ASSERT_NE(g.array, nullptr);
  Array* a = g.array.get();
  const std::vector<uint8_t>& data = g.data;
  while (a->Info().reshape.position_bytes <
         a->Info().geometry.array_bytes() / 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(a->FailMember("m1").ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  ArrayInfo info = a->Info();
  EXPECT_EQ(info.geometry.raid_disks(), 5);
  EXPECT_TRUE(info.degraded);
  ExpectContents(*a, data);
}

// The model: random reads, writes, zeroes and flushes against a flat
// reference buffer, with the test copying the reshape window by window
// between them (StepReshape), restarting the array mid-reshape (clean stop,
// reassembly in a shuffled order, which resumes the reshape) and failing a
// member once in some configurations. Every read is checked as it happens;
// at the end every byte, and the parity of every stripe.
struct ModelCase {
  const char* name;
  int disks;
  GrowOptions (*make)(const std::vector<Shared>& extra);
  int extra;
  bool fail_one;
  int level = 5;
  Layout layout = Layout::kLeftSymmetric;
};

TEST(Reshape, ModelStepsTheReshapeUnderRandomIo) {
  const ModelCase cases[] = {
      {"grow 3->4", 3,
       [](const std::vector<Shared>& x) { return AddDevices(4, x); }, 1, false},
      {"grow 4->6 with a failure", 4,
       [](const std::vector<Shared>& x) { return AddDevices(6, x); }, 2, true},
      {"layout ls->rs", 4,
       [](const std::vector<Shared>&) {
         GrowOptions g;
         g.layout = Layout::kRightSymmetric;
         return g;
       },
       0, false},
      {"chunk 64K->16K, grow 4->5", 4,
       [](const std::vector<Shared>& x) {
         GrowOptions g = AddDevices(5, x);
         g.chunk_bytes = 16 << 10;
         return g;
       },
       1, true},
      {"raid6 grow 4->6 with a failure", 4,
       [](const std::vector<Shared>& x) { return AddDevices(6, x); }, 2, true,
       6, Layout::kLeftSymmetric},
      {"raid6 layout ra->la-6, chunk 64K->16K", 5,
       [](const std::vector<Shared>&) {
         GrowOptions g;
         g.layout = Layout::kLeftAsymmetric6;
         g.chunk_bytes = 16 << 10;
         return g;
       },
       0, true, 6, Layout::kRightAsymmetric},
  };
  // URAID_RESHAPE_SEEDS=N runs seeds 1..N (a long run); CI runs two (one
  // in the sanitizer passes: testutil::RandomSteps).
  const char* env = std::getenv("URAID_RESHAPE_SEEDS");
  const uint32_t seeds = env ? static_cast<uint32_t>(std::atoi(env))
                             : static_cast<uint32_t>(testutil::RandomSteps(2));
  for (uint32_t seed = 1; seed <= seeds; ++seed) {
    for (const ModelCase& c : cases) {
      SCOPED_TRACE(absl::StrFormat("%s seed %d", c.name, seed));
      std::mt19937_64 rng(seed);
      auto m = MakeMembers(c.disks);
      auto extra = MakeMembers(c.extra, "x");
      auto a = MustCreate(m, c.level, c.layout);
      ASSERT_NE(a, nullptr);
      const uint64_t old_bytes = a->Info().geometry.array_bytes();
      std::vector<uint8_t> ref = Pattern(old_bytes, seed);
      ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
      GrowOptions g = c.make(extra);
      g.start_job = false;
      ASSERT_TRUE(a->Grow(std::move(g)).ok());
      std::vector<Shared> all = m;
      all.insert(all.end(), extra.begin(), extra.end());
      std::vector<uint8_t> buf(256 << 10);
      bool failed = false;
      int steps = 0, restarts = 0;
      for (bool done = false; !done; ++steps) {
        for (int op = 0; op < 12; ++op) {
          const uint64_t len = 512 * (1 + rng() % 300);
          const uint64_t off = (rng() % ((old_bytes - len) / 512)) * 512;
          switch (rng() % 5) {
            case 0:
            case 1: {
              for (uint64_t i = 0; i < len; ++i) {
                buf[i] = static_cast<uint8_t>(rng());
              }
              ASSERT_TRUE(a->Write(buf.data(), len, off, rng() % 8 == 0).ok());
              std::memcpy(ref.data() + off, buf.data(), len);
              break;
            }
            case 2:
              ASSERT_TRUE(a->Zero(len, off).ok());
              std::memset(ref.data() + off, 0, len);
              break;
            case 3:
              ASSERT_TRUE(a->Flush().ok());
              break;
            default: {
              ASSERT_TRUE(a->Read(buf.data(), len, off).ok());
              ASSERT_EQ(std::memcmp(buf.data(), ref.data() + off, len), 0)
                  << "read at " << off << " len " << len << " step " << steps;
            }
          }
        }
        if (c.fail_one && !failed && steps == 3) {
          ASSERT_TRUE(a->FailSlot(1).ok());
          failed = true;
        }
        if (rng() % 6 == 0 && !a->Info().reshape.active) break;
        if (rng() % 5 == 0) {
          // Restart mid-reshape: clean stop, reassembly resumes it.
          a.reset();
          std::vector<Shared> present;
          for (const auto& x : all) {
            if (!(failed && x == m[1])) present.push_back(x);
          }
          std::shuffle(present.begin(), present.end(), rng);
          auto b = Array::Assemble(Handles(present), {});
          ASSERT_TRUE(b.ok()) << b.status();
          a = std::move(*b);
          ++restarts;
          if (!a->Info().reshape.active) break;
        }
        absl::StatusOr<bool> st = a->StepReshape();
        ASSERT_TRUE(st.ok()) << st.status();
        done = *st;
      }
      ASSERT_FALSE(a->Info().reshape.active);
      const uint64_t new_bytes = a->Info().geometry.array_bytes();
      ref.resize(new_bytes, 0);
      ExpectContents(*a, ref);
      if (!a->Info().degraded) {
        EXPECT_EQ(Mismatches(*a), 0u);
      }
      EXPECT_GT(steps, 2);
    }
  }
}

// ----------------------------------------------------------- power cuts

// Power cuts at random points of grows 3->4, 4->5 and a layout change at
// RAID5, and of a grow 4->5 and a layout change at RAID6; after each, the
// members reassemble, the reshape resumes (resyncing what the cut may have
// torn), and every byte and every stripe's parity (P and Q) is right. A
// cut before the reshape's first superblock leaves the old array.
TEST(Reshape, PowerCutsAnywhereResumeAndVerify) {
  std::mt19937 rng(99);
  int resumed = 0, rounds = 0;
  const int kRounds = testutil::RandomSteps(10);  // of each kind
  // Kinds 3 and 4 are RAID6's: a grow 4->5 and a layout change.
  for (int kind = 0; kind < 5; ++kind) {
    for (int round = 0; round < kRounds; ++round, ++rounds) {
      SCOPED_TRACE(absl::StrFormat("kind %d round %d", kind, round));
      const bool raid6 = kind >= 3;
      const bool relayout = kind == 2 || kind == 4;
      const int disks = kind == 0 ? 3 : 4;
      auto m = MakeMembers(disks);
      auto extra = MakeMembers(relayout ? 0 : 1, "x");
      std::vector<uint8_t> data;
      {
        auto a =
            MustCreate(m, raid6 ? 6 : 5, Layout::kLeftSymmetric,
                       round % 2 ? BitmapMode::kNone : BitmapMode::kInternal);
        ASSERT_NE(a, nullptr);
        data = Pattern(a->Info().geometry.array_bytes(), 100 + round);
        ASSERT_TRUE(a->Write(data.data(), data.size(), 0).ok());
      }
      auto budget = std::make_shared<std::atomic<int64_t>>(INT64_MAX);
      {
        std::vector<Shared> all = m;
        all.insert(all.end(), extra.begin(), extra.end());
        auto a = Array::Assemble(CutHandles(m, budget), {});
        ASSERT_TRUE(a.ok()) << a.status();
        GrowOptions g;
        if (relayout) {
          g.layout = Layout::kRightSymmetric;
        } else {
          g.raid_devices = disks + 1;
          g.add = CutHandles(extra, budget);
        }
        // Somewhere in the copy: a full reshape of these arrays takes a few
        // hundred member writes.
        budget->store(1 + rng() % 400);
        (void)(*a)->Grow(std::move(g));
        (void)(*a)->WaitForJob();
        budget->store(0);  // nothing more reaches the members
      }
      std::vector<Shared> all = m;
      // A new member without a superblock (cut before its first write) is
      // left out, as an admin would.
      for (const auto& x : extra) {
        std::vector<uint8_t> raw(kSbBlockBytes);
        ASSERT_TRUE(x->Read(raw.data(), raw.size(), kSb12OffsetBytes).ok());
        if (DecodeSuperblock(raw).ok()) all.push_back(x);
      }
      auto b = Array::Assemble(Handles(all), {});
      ASSERT_TRUE(b.ok()) << b.status();
      if ((*b)->Info().reshape.active) ++resumed;
      (*b)->StartBackground();
      ASSERT_TRUE((*b)->WaitForJob().ok());
      ASSERT_FALSE((*b)->Info().reshape.active);
      ExpectContents(**b, data);
      if (!(*b)->Info().degraded) {
        EXPECT_EQ(Mismatches(**b), 0u);
      }
    }
  }
  // Most cuts land inside the copy (the rest before or after it).
  EXPECT_GE(resumed, rounds / 3);
}

}  // namespace
}  // namespace uraid
