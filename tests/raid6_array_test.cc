// SPDX-License-Identifier: MIT
// RAID6 through the whole array (uraid::Array over memory members): create
// (with the initial resync computing P and Q), random writes of every size
// checked against a reference, check finding P and Q consistent, then one
// and two members failed under the same workload, a third refused, and
// reassembly with two members left out. Every md RAID6 layout family.
// The level-5 counterparts of the RAID6 replace cases (a member failing
// mid-replace) sit beside them (Raid5Recovery).

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/sync.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

constexpr uint64_t kChunk = 16 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 64 * kChunk;

using Shared = std::shared_ptr<Member>;
using testutil::WaitUntil;

CreateOptions Opts6(Layout layout, bool assume_clean) {
  CreateOptions o;
  o.level = 6;
  o.layout = layout;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.member_bytes = kMemberBytes;
  o.assume_clean = assume_clean;
  return o;
}

// Random writes (sub-block to multi-stripe) applied to the array and to
// `ref`, each followed by a read of a random range compared with `ref`.
void Churn(Array& a, std::vector<uint8_t>& ref, std::mt19937_64& rng,
           int rounds) {
  const uint64_t size = ref.size();
  for (int r = 0; r < rounds; ++r) {
    const uint64_t max_len = (rng() % 4 == 0) ? 6 * kChunk : 8192;
    const uint64_t len = 512 * (1 + rng() % (max_len / 512));
    const uint64_t off = (rng() % ((size - len) / 512)) * 512;
    std::vector<uint8_t> data =
        testutil::Pattern(len, static_cast<uint32_t>(rng()));
    ASSERT_TRUE(a.Write(data.data(), len, off).ok()) << "write " << off;
    std::memcpy(ref.data() + off, data.data(), len);
    const uint64_t rlen = 512 * (1 + rng() % (4 * kChunk / 512));
    const uint64_t roff = (rng() % ((size - rlen) / 512)) * 512;
    std::vector<uint8_t> got(rlen);
    ASSERT_TRUE(a.Read(got.data(), rlen, roff).ok()) << "read " << roff;
    ASSERT_EQ(0, std::memcmp(got.data(), ref.data() + roff, rlen))
        << "read [" << roff << ", +" << rlen << ") differs";
  }
}

class Raid6Array : public testing::TestWithParam<Layout> {};

TEST_P(Raid6Array, SurvivesTwoFailuresWithEveryByteRight) {
  std::mt19937_64 rng(static_cast<int>(GetParam()) + 600);
  for (const int disks : {4, 5, 7}) {
    SCOPED_TRACE(testing::Message() << "disks " << disks);
    std::vector<Shared> m =
        testutil::MakeMembers(disks, kOffset + kMemberBytes);
    // Not assume-clean: the initial resync must leave P and Q consistent.
    auto a = testutil::MustCreate(m, Opts6(GetParam(), false));
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(a->Resync().ok());
    EXPECT_EQ(a->size(), (disks - 2) * kMemberBytes);
    std::vector<uint8_t> ref(a->size());
    ASSERT_TRUE(a->Read(ref.data(), ref.size(), 0).ok());
    Churn(*a, ref, rng, 150);
    if (HasFatalFailure()) return;
    EXPECT_EQ(testutil::Mismatches(*a), 0u);
    testutil::ExpectContents(*a, ref);

    // One member gone: still checkable; then a second.
    const int first = static_cast<int>(rng() % disks);
    ASSERT_TRUE(a->FailSlot(first).ok());
    testutil::ExpectContents(*a, ref);
    Churn(*a, ref, rng, 100);
    if (HasFatalFailure()) return;
    const int second =
        (first + 1 + static_cast<int>(rng() % (disks - 1))) % disks;
    ASSERT_TRUE(a->FailSlot(second).ok());
    testutil::ExpectContents(*a, ref);
    Churn(*a, ref, rng, 100);
    if (HasFatalFailure()) return;
    testutil::ExpectContents(*a, ref);
    // md's rule: a third would fail the array, so a request is refused.
    const int third = (second + 1) % disks == first ? (second + 2) % disks
                                                    : (second + 1) % disks;
    EXPECT_FALSE(a->FailMember(m[third]->Name()).ok());
    ASSERT_TRUE(a->Flush().ok());
    a.reset();
    // The two lost members' images, kept for the rebuild below.
    std::vector<Shared> gone = {m[first], m[second]};

    // Reassembled from the survivors alone, two left out: the same bytes.
    std::vector<Shared> rest;
    for (int i = 0; i < disks; ++i) {
      if (i != first && i != second) rest.push_back(m[i]);
    }
    AssembleOptions ao;
    ao.run = true;
    auto b = Array::Assemble(testutil::Handles(rest), ao);
    ASSERT_TRUE(b.ok()) << b.status();
    testutil::ExpectContents(**b, ref);

    // Two spares rebuilt (one after the other), then the array is whole:
    // P and Q agree, and losing two other members still reads right.
    for (int k = 0; k < 2; ++k) {
      std::unique_ptr<Member> spare(
          NewMemoryMember(absl::StrCat("spare", k), kOffset + kMemberBytes));
      const absl::Status added = (*b)->AddMember(std::move(spare));
      ASSERT_TRUE(added.ok()) << added;
      ASSERT_TRUE((*b)->WaitForJob().ok());
    }
    EXPECT_FALSE((*b)->Info().degraded);
    for (const SlotInfo& si : (*b)->Info().slots) {
      EXPECT_EQ(si.state, SlotState::kActive);
    }
    EXPECT_EQ(testutil::Mismatches(**b), 0u);
    ASSERT_TRUE((*b)->FailSlot(third).ok());
    ASSERT_TRUE((*b)->FailSlot((third + 1) % disks).ok());
    testutil::ExpectContents(**b, ref);
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryFamily, Raid6Array,
    testing::Values(Layout::kLeftSymmetric, Layout::kLeftAsymmetric,
                    Layout::kRightAsymmetric, Layout::kParityFirst,
                    Layout::kDdfNContinue, Layout::kDdfZeroRestart,
                    Layout::kLeftSymmetric6, Layout::kRightAsymmetric6));

// In-memory members behind FaultyMembers (counting every call): `m` for
// the array, `f` to look at or inject.
struct Counted {
  std::vector<std::shared_ptr<FaultyMember>> f;
  std::vector<Shared> m;
};
Counted CountedMembers(int n) {
  Counted c;
  for (const Shared& x : testutil::MakeMembers(n, kOffset + kMemberBytes)) {
    c.f.push_back(std::make_shared<FaultyMember>(x));
    c.m.push_back(c.f.back());
  }
  return c;
}

// Creates a RAID6 on m[0, disks) (clean), writes pattern `seed` over all of
// it into `ref`, and adds m[disks, m.size()) while whole: they join as
// spares. Closed again, flushed.
void CreateWithSpares(const std::vector<Shared>& m, int disks, Layout layout,
                      uint32_t seed, std::vector<uint8_t>* ref) {
  std::vector<Shared> first(m.begin(), m.begin() + disks);
  auto a = testutil::MustCreate(first, Opts6(layout, true));
  ASSERT_NE(a, nullptr);
  *ref = testutil::Pattern(a->size(), seed);
  ASSERT_TRUE(a->Write(ref->data(), ref->size(), 0).ok());
  for (size_t i = disks; i < m.size(); ++i) {
    ASSERT_TRUE(a->AddMember(ShareMember(m[i])).ok());
  }
  ASSERT_TRUE(a->Flush().ok());
}

// After two slots were rebuilt: P and Q agree, every byte reads right, and
// still does with slots `x` and `y` failed (the rebuilt pair carries the
// data with the others).
void ExpectWholeThroughTwoMoreFailures(Array& a,
                                       const std::vector<uint8_t>& ref, int x,
                                       int y) {
  EXPECT_EQ(testutil::Mismatches(a), 0u);
  testutil::ExpectContents(a, ref);
  ASSERT_TRUE(a.FailSlot(x).ok());
  ASSERT_TRUE(a.FailSlot(y).ok());
  testutil::ExpectContents(a, ref);
}

// The last job completed one pass over `slot` and `second`, which `onto`
// and `second_onto` now hold, and the array is whole.
void ExpectPairDone(const ArrayInfo& info, int slot, const Member& onto,
                    int second, const Member& second_onto) {
  EXPECT_EQ(info.last_job.result, "completed");
  EXPECT_EQ(info.last_job.slot, slot);
  EXPECT_EQ(info.last_job.second_slot, second);
  EXPECT_FALSE(info.degraded);
  EXPECT_EQ(info.slots[slot].name, onto.Name());
  EXPECT_EQ(info.slots[second].name, second_onto.Name());
}

// Each of `slots`' members was read at most `limit` times (the survivors of
// a pair pass).
void ExpectSurvivorReadsAtMost(
    const std::vector<std::shared_ptr<FaultyMember>>& f,
    std::initializer_list<int> slots, uint64_t limit) {
  for (const int i : slots) {
    EXPECT_LE(f[i]->counters().reads, limit) << "survivor slot " << i;
  }
}

// How many of the log `lines` (appended under `mu`) contain `text`.
int CountLines(Mutex& mu, const std::vector<std::string>& lines,
               std::string_view text) {
  MutexLock lock(&mu);
  int n = 0;
  for (const std::string& l : lines) n += l.find(text) != std::string::npos;
  return n;
}

// Two spares rebuild two lost slots of a RAID6 in one pass (md recovers
// both at once): every survivor is read at most once per stripe, both
// targets are written, and P and Q agree afterwards. Rebuilding them one
// after the other reads the survivors about twice and fails the count.
// A pair of one data slot and the slot after it covers data+data,
// data+P, data+Q and P+Q lost somewhere in the rotation.
TEST(Raid6Recovery, TwoSparesRebuildInOnePassReadingSurvivorsOnce) {
  constexpr int kDisks = 6;
  constexpr uint64_t kStripes = kMemberBytes / kChunk;
  for (const int lost : {0, 3}) {
    SCOPED_TRACE(testing::Message()
                 << "lost slots " << lost << ", " << (lost + 1) % kDisks);
    auto [f, m] = CountedMembers(kDisks + 2);
    std::vector<uint8_t> ref;
    CreateWithSpares(m, kDisks, Layout::kLeftSymmetric, 33 + lost, &ref);
    if (HasFatalFailure()) return;
    // Two slots left out (pulled), the spares given: both are rebuilt.
    const int b2 = (lost + 1) % kDisks;
    std::vector<Shared> given;
    for (int i = 0; i < kDisks + 2; ++i) {
      if (i != lost && i != b2) given.push_back(m[i]);
    }
    AssembleOptions ao;
    ao.run = true;
    auto b = Array::Assemble(testutil::Handles(given), ao);
    ASSERT_TRUE(b.ok()) << b.status();
    for (auto& x : f) x->ResetCounters();
    (*b)->StartBackground();
    ASSERT_TRUE((*b)->WaitForJob().ok());
    const JobInfo job = (*b)->Info().last_job;
    EXPECT_EQ(job.result, "completed");
    EXPECT_EQ(std::min(job.slot, job.second_slot), lost < b2 ? lost : b2);
    EXPECT_EQ(std::max(job.slot, job.second_slot), lost < b2 ? b2 : lost);
    for (int i = 0; i < kDisks; ++i) {
      if (i == lost || i == b2) continue;
      EXPECT_LE(f[i]->counters().reads, kStripes) << "survivor slot " << i;
      EXPECT_GT(f[i]->counters().reads, 0u) << "survivor slot " << i;
    }
    for (const int s : {kDisks, kDisks + 1}) {
      EXPECT_EQ(f[s]->counters().reads, 0u);
      EXPECT_GE(f[s]->counters().writes, kStripes) << "target " << s;
    }
    EXPECT_FALSE((*b)->Info().degraded);
    ExpectWholeThroughTwoMoreFailures(**b, ref, (b2 + 1) % kDisks,
                                      (b2 + 2) % kDisks);
  }
}

// Members again from their crash images (testutil::FromImage).
std::vector<Shared> FromImages(const std::vector<testutil::Image>& images) {
  std::vector<Shared> t;
  for (size_t i = 0; i < images.size(); ++i) {
    t.push_back(testutil::FromImage(images[i], static_cast<int>(i)));
  }
  return t;
}

// Assembles `given`, members imaged mid-way through a rebuild of slots 1
// and 3 whose targets claim `claimed` bytes (in either order): both slots
// rebuilding from their claims, every byte read right before the rebuild
// resumes, then one pass over both from the lower claim, and the array
// whole. *out keeps the array for more checks.
void ExpectPairResumes(const std::vector<Shared>& given,
                       const uint64_t (&claimed)[2],
                       const std::vector<uint8_t>& ref,
                       std::unique_ptr<Array>* out) {
  std::vector<std::string> lines;
  auto b = Array::Assemble(testutil::Handles(given), {},
                           [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(b.ok()) << b.status();
  ArrayInfo info = (*b)->Info();
  EXPECT_EQ(info.slots[1].state, SlotState::kRebuilding);
  EXPECT_EQ(info.slots[3].state, SlotState::kRebuilding);
  EXPECT_EQ(
      std::minmax(info.slots[1].recovery_bytes, info.slots[3].recovery_bytes),
      std::minmax(claimed[0], claimed[1]));
  testutil::ExpectContents(**b, ref);
  (*b)->StartBackground();
  ASSERT_TRUE((*b)->WaitForJob().ok());
  EXPECT_EQ((*b)->Info().last_job.result, "completed");
  EXPECT_GE((*b)->Info().last_job.second_slot, 0);
  bool one_pass = false;
  for (const std::string& l : lines) {
    one_pass |=
        l.find("in one pass from stripe " +
               std::to_string(std::min(claimed[0], claimed[1]) / kChunk)) !=
        std::string::npos;
  }
  EXPECT_TRUE(one_pass);
  EXPECT_FALSE((*b)->Info().degraded);
  EXPECT_EQ(testutil::Mismatches(**b), 0u);
  testutil::ExpectContents(**b, ref);
  *out = std::move(*b);
}

// A crash (the members' images taken mid-pass, as kill -9 leaves them) in
// a two-slot rebuild: each target's superblock claims its own checkpointed
// recovery_offset, assembly resumes both from there in one pass, and the
// result is whole.
TEST(Raid6Recovery, TwoSlotRebuildResumesFromEachCheckpointAfterACrash) {
  constexpr int kDisks = 5;
  std::vector<Shared> m =
      testutil::MakeMembers(kDisks + 2, kOffset + kMemberBytes);
  std::vector<uint8_t> ref;
  std::vector<testutil::Image> images;
  CreateWithSpares(m, kDisks, Layout::kLeftAsymmetric, 77, &ref);
  if (HasFatalFailure()) return;
  std::vector<Shared> given = {m[0], m[2], m[4], m[kDisks], m[kDisks + 1]};
  {
    AssembleOptions ao;
    ao.run = true;
    auto a = Array::Assemble(testutil::Handles(given), ao);
    ASSERT_TRUE(a.ok()) << a.status();
    // 64 KiB/s: a stripe (16 KiB) a quarter second; a checkpoint a second.
    (*a)->SetSpeedLimits({.min_kib_s = 64, .max_kib_s = 64});
    (*a)->StartBackground();
    const auto claimed = [&](int i) {
      return testutil::SuperOf(*m[i]).recovery_offset;
    };
    for (int t = 0; t < 400 && (claimed(kDisks) < 8 * kChunk / 512 ||
                                claimed(kDisks + 1) < 8 * kChunk / 512);
         ++t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    for (const Shared& x : m) images.push_back(testutil::Snapshot(*x));
  }  // the pass is abandoned: only the images count
  std::vector<Shared> t = FromImages(images);
  uint64_t claimed[2];
  for (int k = 0; k < 2; ++k) {
    const Superblock sb = testutil::SuperOf(*t[kDisks + k]);
    EXPECT_TRUE(sb.feature_map & kFeatureRecoveryOffset);
    claimed[k] = sb.recovery_offset * 512;
    EXPECT_GE(claimed[k], 8 * kChunk) << "target " << k;
    EXPECT_LT(claimed[k], kMemberBytes) << "target " << k;
  }
  std::unique_ptr<Array> b;
  ExpectPairResumes({t[0], t[2], t[4], t[kDisks], t[kDisks + 1]}, claimed, ref,
                    &b);
  if (HasFatalFailure()) return;
  EXPECT_LT(b->Info().counters.recovered_stripes, kMemberBytes / kChunk);
}

// A second member failing while one slot is rebuilt alone (a spare in the
// pool for it): the single pass stops at its front and goes on as one
// pass over both slots (md restarts its recovery with both devices), so
// the survivors are read once for the stripes ahead and once more only
// for the few the first slot had done, not twice over the whole array in
// two passes (about 2 x 53 reads each here, against the 64 + a few
// allowed).
TEST(Raid6Recovery, SecondFailureMidRebuildJoinsThePass) {
  constexpr int kDisks = 6;
  constexpr uint64_t kStripes = kMemberBytes / kChunk;
  auto [f, m] = CountedMembers(kDisks + 2);
  std::vector<Shared> first(m.begin(), m.begin() + kDisks);
  std::vector<std::string> lines;
  Mutex mu;
  auto a = testutil::MustCreate(first, Opts6(Layout::kLeftSymmetric, true),
                                [&](const std::string& l) {
                                  MutexLock lock(&mu);
                                  lines.push_back(l);
                                });
  ASSERT_NE(a, nullptr);
  std::vector<uint8_t> ref = testutil::Pattern(a->size(), 41);
  ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
  a->StartBackground();
  for (const int i : {kDisks, kDisks + 1}) {
    ASSERT_TRUE(a->AddMember(ShareMember(m[i])).ok());
  }
  // 64 KiB/s: four stripes a second.
  a->SetSpeedLimits({.min_kib_s = 64, .max_kib_s = 64});
  for (auto& x : f) x->ResetCounters();
  ASSERT_TRUE(a->FailSlot(1).ok());
  ASSERT_TRUE(WaitUntil(
      [&] { return a->Info().slots[1].recovery_bytes >= 2 * kChunk; }, 10));
  ASSERT_TRUE(a->FailSlot(4).ok());
  // The running job takes slot 4 on: one job, both slots.
  EXPECT_TRUE(WaitUntil([&] { return a->Info().job.second_slot == 4; }, 5));
  const uint64_t handed_at = a->Info().slots[1].recovery_bytes / kChunk;
  EXPECT_LT(handed_at, kStripes / 4);
  a->SetSpeedLimits({});
  ASSERT_TRUE(a->WaitForJob().ok());
  EXPECT_EQ(a->Info().last_job.kind, JobKind::kRecover);
  ExpectPairDone(a->Info(), 1, *m[kDisks], 4, *m[kDisks + 1]);
  ExpectSurvivorReadsAtMost(f, {0, 2, 3, 5}, kStripes + kStripes / 4);
  EXPECT_EQ(CountLines(mu, lines, "in one pass from stripe 0"), 1);
  ExpectWholeThroughTwoMoreFailures(*a, ref, 0, 5);
}

// A crash (the members' images taken as kill -9 leaves them) after such a
// hand-over, mid-way through the pair pass: the first target's superblock
// keeps the front it had reached alone, the second's its own lower one,
// and assembly resumes both in one pass from the lower one.
TEST(Raid6Recovery, HandedOverPairResumesFromEachCheckpointAfterACrash) {
  constexpr int kDisks = 5;
  testutil::MemberGate gate;
  std::vector<Shared> m;
  for (Shared& raw :
       testutil::MakeMembers(kDisks + 2, kOffset + kMemberBytes)) {
    m.push_back(gate.Wrap(raw));
  }
  std::vector<uint8_t> ref;
  std::vector<testutil::Image> images;
  const auto claimed = [&](int i) {
    const Superblock sb = testutil::SuperOf(*m[i]);
    return (sb.feature_map & kFeatureRecoveryOffset) != 0
               ? sb.recovery_offset * 512
               : 0;
  };
  {
    std::vector<Shared> first(m.begin(), m.begin() + kDisks);
    auto a = testutil::MustCreate(first, Opts6(Layout::kRightSymmetric, true));
    ASSERT_NE(a, nullptr);
    ref = testutil::Pattern(a->size(), 52);
    ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
    a->StartBackground();
    for (const int i : {kDisks, kDisks + 1}) {
      ASSERT_TRUE(a->AddMember(ShareMember(m[i])).ok());
    }
    a->SetSpeedLimits({.min_kib_s = 64, .max_kib_s = 64});
    ASSERT_TRUE(a->FailSlot(1).ok());
    // Slot 1's target alone until its superblock claims 12 stripes (3 s):
    // the second, from 0, is still below that at its first checkpoint.
    ASSERT_TRUE(WaitUntil([&] { return claimed(kDisks) >= 12 * kChunk; }, 10));
    ASSERT_TRUE(a->FailSlot(3).ok());
    // Then the pair pass, until the second target claims some of its own.
    EXPECT_TRUE(WaitUntil([&] { return claimed(kDisks + 1) >= kChunk; }, 5));
    images = gate.SnapshotAll();
  }  // the pass is abandoned: only the images count
  std::vector<Shared> t = FromImages(images);
  uint64_t at[2];
  for (int k = 0; k < 2; ++k) {
    const Superblock sb = testutil::SuperOf(*t[kDisks + k]);
    EXPECT_EQ(sb.dev_roles[sb.dev_number], k == 0 ? 1 : 3) << "target " << k;
    EXPECT_TRUE(sb.feature_map & kFeatureRecoveryOffset) << "target " << k;
    at[k] = sb.recovery_offset * 512;
    EXPECT_LT(at[k], kMemberBytes) << "target " << k;
  }
  EXPECT_GE(at[0], 12 * kChunk);
  EXPECT_GE(at[1], kChunk);
  EXPECT_LT(at[1], at[0]) << "the second target started from 0";
  std::unique_ptr<Array> b;
  ExpectPairResumes({t[0], t[2], t[4], t[kDisks], t[kDisks + 1]}, at, ref, &b);
}

// A source that cannot be read under a two-slot rebuild: those rows are
// recorded bad on both targets (and on the source), as a single rebuild
// records them on its target; the pass goes on and every other byte is
// right.
TEST(Raid6Recovery, SourceReadErrorRecordsBadBlocksOnBothTargets) {
  constexpr int kDisks = 6;
  constexpr uint64_t kStripeData = (kDisks - 2) * kChunk;
  auto [f, m] = CountedMembers(kDisks + 2);
  std::vector<uint8_t> ref;
  CreateWithSpares(m, kDisks, Layout::kLeftSymmetric, 5, &ref);
  if (HasFatalFailure()) return;
  // Slot 3's 4 KiB at 4 KiB into stripe 6 never reads.
  FaultPlan plan;
  plan.rules.push_back(FaultRule{.op = FaultOp::kRead,
                                 .offset = kOffset + 6 * kChunk + 4096,
                                 .len = 4096});
  plan.error_code = absl::StatusCode::kDataLoss;
  f[3]->SetPlan(plan);
  std::vector<Shared> given = {m[2], m[3],      m[4],
                               m[5], m[kDisks], m[kDisks + 1]};
  AssembleOptions ao;
  ao.run = true;
  auto b = Array::Assemble(testutil::Handles(given), ao);
  ASSERT_TRUE(b.ok()) << b.status();
  (*b)->StartBackground();
  ASSERT_TRUE((*b)->WaitForJob().ok());
  const ArrayInfo info = (*b)->Info();
  EXPECT_EQ(info.last_job.result, "completed");
  EXPECT_EQ(info.last_job.second_slot >= 0, true);
  EXPECT_EQ(info.last_job.unrecovered_bytes, 2 * 4096u);
  for (const int slot : {0, 1, 3}) {
    EXPECT_EQ(info.slots[slot].state, SlotState::kActive);
    EXPECT_EQ(info.slots[slot].bad_sectors, 8u) << "slot " << slot;
  }
  // Everything outside stripe 6 reads right; stripe 6 as a whole does not.
  std::vector<uint8_t> got(6 * kStripeData);
  ASSERT_TRUE((*b)->Read(got.data(), got.size(), 0).ok());
  EXPECT_EQ(0, std::memcmp(got.data(), ref.data(), got.size()));
  got.assign(ref.size() - 7 * kStripeData, 0);
  ASSERT_TRUE((*b)->Read(got.data(), got.size(), 7 * kStripeData).ok());
  EXPECT_EQ(0,
            std::memcmp(got.data(), ref.data() + 7 * kStripeData, got.size()));
  got.assign(kStripeData, 0);
  EXPECT_FALSE((*b)->Read(got.data(), got.size(), 6 * kStripeData).ok());
}

// A replace under way (stopped part-way) and a member failing with a hot
// spare in the pool: one pass rebuilds the failed slot onto the spare and
// finishes the replace, each survivor read at most once per stripe.
TEST(Raid6Recovery, SpareAndReplaceInOnePass) {
  constexpr int kDisks = 6;
  constexpr uint64_t kStripes = kMemberBytes / kChunk;
  auto [f, m] = CountedMembers(kDisks + 2);
  std::vector<Shared> first(m.begin(), m.begin() + kDisks);
  auto a = testutil::MustCreate(first, Opts6(Layout::kRightAsymmetric, true));
  ASSERT_NE(a, nullptr);
  std::vector<uint8_t> ref = testutil::Pattern(a->size(), 9);
  ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
  a->StartBackground();
  a->SetSpeedLimits({.min_kib_s = 64, .max_kib_s = 64});
  ASSERT_TRUE(a->ReplaceMember(m[2]->Name(), ShareMember(m[kDisks])).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  ASSERT_TRUE(a->StopJob().ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  EXPECT_EQ(a->Info().last_job.result, "interrupted");
  a->SetSpeedLimits({});
  ASSERT_TRUE(a->AddMember(ShareMember(m[kDisks + 1])).ok());  // a spare
  for (auto& x : f) x->ResetCounters();
  ASSERT_TRUE(a->FailSlot(4).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  ExpectPairDone(a->Info(), 4, *m[kDisks + 1], 2, *m[kDisks]);
  for (const int i : {0, 1, 3, 5}) {
    EXPECT_LE(f[i]->counters().reads, kStripes) << "survivor slot " << i;
  }
  ExpectWholeThroughTwoMoreFailures(*a, ref, 0, 1);
}

// A member failing (with a hot spare in the pool) while a replace is
// copying another: the running replace takes the gone slot on, as md's
// md_error restarts its recovery with both devices, and one pass finishes
// the replace and rebuilds the failed slot. The gone slot is rebuilt now,
// not after the copy (before, the replace ran to its end alone, reading
// the replaced member once per stripe, and a second job then rebuilt the
// gone slot reading every survivor, the replaced member again among them).
TEST(Raid6Recovery, FailureMidReplaceJoinsThePass) {
  constexpr int kDisks = 6;
  constexpr uint64_t kStripes = kMemberBytes / kChunk;
  auto [f, m] = CountedMembers(kDisks + 2);
  std::vector<Shared> first(m.begin(), m.begin() + kDisks);
  std::vector<std::string> lines;
  std::vector<Event> events;
  Mutex mu;
  auto a = testutil::MustCreate(first, Opts6(Layout::kLeftAsymmetric, true),
                                [&](const std::string& l) {
                                  MutexLock lock(&mu);
                                  lines.push_back(l);
                                });
  ASSERT_NE(a, nullptr);
  const uint64_t listener = a->AddEventListener([&](const Event& e) {
    MutexLock lock(&mu);
    events.push_back(e);
  });
  std::vector<uint8_t> ref = testutil::Pattern(a->size(), 63);
  ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
  a->StartBackground();
  ASSERT_TRUE(a->AddMember(ShareMember(m[kDisks + 1])).ok());  // a spare
  // 64 KiB/s: four stripes a second.
  a->SetSpeedLimits({.min_kib_s = 64, .max_kib_s = 64});
  for (auto& x : f) x->ResetCounters();
  ASSERT_TRUE(a->ReplaceMember(m[2]->Name(), ShareMember(m[kDisks])).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        const JobInfo j = a->Info().job;
        return j.kind == JobKind::kReplace && j.done_bytes >= 2 * kChunk;
      },
      10));
  ASSERT_TRUE(a->FailSlot(4).ok());
  // The running replace takes slot 4 on: one job, both slots.
  EXPECT_TRUE(WaitUntil([&] { return a->Info().job.second_slot == 4; }, 5));
  const JobInfo during = a->Info().job;
  EXPECT_EQ(during.kind, JobKind::kReplace);
  EXPECT_EQ(during.slot, 2);
  EXPECT_EQ(during.second_target, m[kDisks + 1]->Name());
  EXPECT_EQ(a->Info().slots[4].state, SlotState::kRebuilding);
  a->SetSpeedLimits({});
  ASSERT_TRUE(a->WaitForJob().ok());
  EXPECT_EQ(a->Info().last_job.kind, JobKind::kReplace);
  ExpectPairDone(a->Info(), 2, *m[kDisks], 4, *m[kDisks + 1]);
  // The replaced member was read for the few stripes copied alone, the
  // survivors once per stripe of the one pass (plus those few).
  EXPECT_LT(f[2]->counters().reads, kStripes / 4);
  ExpectSurvivorReadsAtMost(f, {0, 1, 3, 5}, kStripes + kStripes / 4);
  EXPECT_EQ(CountLines(mu, lines, "in one pass from stripe 0"), 1);
  {
    MutexLock lock(&mu);
    // Slot 4's rebuild is a recovery from its start event to its end.
    std::vector<std::string> slot4;
    for (const Event& e : events) {
      const Event::Value* kind = e.Find("kind");
      if (e.slot == 4 && kind != nullptr &&
          (e.name == "RebuildStarted" || e.name == "RebuildFinished")) {
        slot4.push_back(e.name + " " + std::get<std::string>(*kind));
      }
    }
    EXPECT_EQ(slot4, (std::vector<std::string>{"RebuildStarted recover",
                                               "RebuildFinished recover"}));
  }
  a->RemoveEventListener(listener);
  ExpectWholeThroughTwoMoreFailures(*a, ref, 0, 5);
}

// Level 5 (5 members on m[0, 5), written with pattern `seed` into *ref,
// m[6] a spare when `spare`), a replace of slot `replaced` onto m[5] at
// 64 KiB/s (four stripes a second), and slot `failed` failed two stripes
// into the copy; then clients write and read (`churn` rounds of Churn)
// while the array is degraded and the job goes on or hands over.
void Raid5ReplaceThenFail(const std::vector<Shared>& m, Layout layout,
                          uint32_t seed, bool spare, int replaced, int failed,
                          std::vector<uint8_t>* ref,
                          std::unique_ptr<Array>* out, int churn = 30) {
  constexpr int kDisks = 5;
  std::vector<Shared> first(m.begin(), m.begin() + kDisks);
  CreateOptions o = Opts6(layout, true);
  o.level = 5;
  *out = testutil::MustCreate(first, o);
  Array* a = out->get();
  ASSERT_NE(a, nullptr);
  *ref = testutil::Pattern(a->size(), seed);
  ASSERT_TRUE(a->Write(ref->data(), ref->size(), 0).ok());
  a->StartBackground();
  if (spare) {
    ASSERT_TRUE(a->AddMember(ShareMember(m[kDisks + 1])).ok());
  }
  a->SetSpeedLimits({.min_kib_s = 64, .max_kib_s = 64});
  ASSERT_TRUE(
      a->ReplaceMember(m[replaced]->Name(), ShareMember(m[kDisks])).ok());
  ASSERT_TRUE(WaitUntil(
      [&] {
        const JobInfo j = a->Info().job;
        return j.kind == JobKind::kReplace && j.done_bytes >= 2 * kChunk;
      },
      10));
  ASSERT_TRUE(a->FailSlot(failed).ok());
  std::mt19937_64 rng(seed);
  Churn(*a, *ref, rng, churn);
}

// Level 5 beside the RAID6 case above: a member failing (a hot spare in
// the pool) while a replace copies another. The array is degraded, but the
// copy's source still serves, so md's md_error stops the copy and its
// restarted recovery takes the replacement and the spare together, as at
// RAID6 (raid5_calc_degraded counts the replaced slot in sync while its
// old member is). The running replace takes the gone slot on: one pass
// finishes the copy (from its front) and rebuilds the failed slot (from 0,
// its rows from every other member, the replaced one's old member among
// them). Clients read and write all along, with no error and every byte
// right. Before, the copy ran to its end alone and only then did a second
// job rebuild the failed slot (second_slot stayed -1).
TEST(Raid5Recovery, FailureMidReplaceJoinsThePass) {
  auto [f, m] = CountedMembers(7);
  std::vector<uint8_t> ref;
  std::unique_ptr<Array> a;
  Raid5ReplaceThenFail(m, Layout::kLeftSymmetric, 71, /*spare=*/true,
                       /*replaced=*/2, /*failed=*/4, &ref, &a);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(WaitUntil([&] { return a->Info().job.second_slot == 4; }, 5));
  const JobInfo during = a->Info().job;
  EXPECT_EQ(during.kind, JobKind::kReplace);
  EXPECT_EQ(during.slot, 2);
  EXPECT_EQ(during.second_target, m[6]->Name());
  EXPECT_EQ(a->Info().slots[4].state, SlotState::kRebuilding);
  std::mt19937_64 rng(171);
  Churn(*a, ref, rng, 30);  // during the pass over both
  a->SetSpeedLimits({});
  ASSERT_TRUE(a->WaitForJob().ok());
  EXPECT_EQ(a->Info().last_job.kind, JobKind::kReplace);
  ExpectPairDone(a->Info(), 2, *m[5], 4, *m[6]);
  EXPECT_EQ(testutil::Mismatches(*a), 0u);
  testutil::ExpectContents(*a, ref);
  // Another member gone: the copied and the rebuilt slot carry its rows.
  ASSERT_TRUE(a->FailSlot(0).ok());
  testutil::ExpectContents(*a, ref);
}

// Level 5 with no spare: a member failing mid-replace leaves the array
// degraded and the copy goes on (its source still serves) to the swap,
// clients reading and writing throughout; a spare added afterwards
// rebuilds the failed slot from the copied member among the others.
TEST(Raid5Recovery, FailureMidReplaceWithoutSpareFinishesTheCopy) {
  auto [f, m] = CountedMembers(7);
  std::vector<uint8_t> ref;
  std::unique_ptr<Array> a;
  Raid5ReplaceThenFail(m, Layout::kLeftAsymmetric, 72, /*spare=*/false,
                       /*replaced=*/1, /*failed=*/3, &ref, &a);
  if (HasFatalFailure()) return;
  EXPECT_EQ(a->Info().job.kind, JobKind::kReplace);
  a->SetSpeedLimits({});
  ASSERT_TRUE(a->WaitForJob().ok());
  const ArrayInfo after = a->Info();
  EXPECT_EQ(after.last_job.kind, JobKind::kReplace);
  EXPECT_EQ(after.last_job.result, "completed");
  EXPECT_EQ(after.last_job.second_slot, -1);
  EXPECT_EQ(after.slots[1].name, m[5]->Name());
  EXPECT_TRUE(after.degraded);
  // Slot 3's rows come from parity and the copied member now.
  testutil::ExpectContents(*a, ref);
  ASSERT_TRUE(a->AddMember(ShareMember(m[6])).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  EXPECT_FALSE(a->Info().degraded);
  EXPECT_EQ(a->Info().slots[3].name, m[6]->Name());
  EXPECT_EQ(testutil::Mismatches(*a), 0u);
  testutil::ExpectContents(*a, ref);
}

// Level 5's one pass over a replace and a failed slot reads the replaced
// member once per stripe: its rows are the copy and a source of the failed
// slot's rebuild both (StripeReader::ReconstructPairLocked). Before, each
// stripe the two targets both needed read it twice, once for the copy and
// once among the rebuild's sources.
TEST(Raid5Recovery, JoinedPassReadsTheReplacedMemberOnce) {
  constexpr uint64_t kStripes = kMemberBytes / kChunk;
  auto [f, m] = CountedMembers(7);
  std::vector<uint8_t> ref;
  std::unique_ptr<Array> a;
  // The counts start before the array is made: its creation and the
  // pattern's full-stripe writes read no data.
  for (auto& x : f) x->ResetCounters();
  Raid5ReplaceThenFail(m, Layout::kLeftSymmetric, 74, /*spare=*/true,
                       /*replaced=*/2, /*failed=*/4, &ref, &a, /*churn=*/0);
  if (HasFatalFailure()) return;
  EXPECT_TRUE(WaitUntil([&] { return a->Info().job.second_slot == 4; }, 5));
  a->SetSpeedLimits({});
  ASSERT_TRUE(a->WaitForJob().ok());
  ExpectPairDone(a->Info(), 2, *m[5], 4, *m[6]);
  // Once per stripe, plus the few copied alone before the failure (twice
  // per stripe for most of the pass before).
  EXPECT_LE(f[2]->counters().reads, kStripes + kStripes / 4);
  ExpectSurvivorReadsAtMost(f, {0, 1, 3}, kStripes + kStripes / 4);
  EXPECT_EQ(testutil::Mismatches(*a), 0u);
  testutil::ExpectContents(*a, ref);
  ASSERT_TRUE(a->FailSlot(0).ok());  // the copied and rebuilt slots serve
  testutil::ExpectContents(*a, ref);
}

// Level 5, no spare when a member fails mid-replace: the copy goes on
// alone, degraded; a spare added while it runs joins it (the pass checks
// for a recoverable second slot at each window, as for a failure), and one
// pass finishes the copy and rebuilds the failed slot, clients reading and
// writing throughout, rather than a second job after the copy.
TEST(Raid5Recovery, SpareArrivingMidReplaceJoinsThePass) {
  auto [f, m] = CountedMembers(7);
  std::vector<uint8_t> ref;
  std::unique_ptr<Array> a;
  Raid5ReplaceThenFail(m, Layout::kLeftAsymmetric, 73, /*spare=*/false,
                       /*replaced=*/1, /*failed=*/3, &ref, &a);
  if (HasFatalFailure()) return;
  const JobInfo alone = a->Info().job;
  EXPECT_EQ(alone.kind, JobKind::kReplace);
  EXPECT_EQ(alone.second_slot, -1);
  EXPECT_TRUE(a->Info().degraded);
  ASSERT_TRUE(a->AddMember(ShareMember(m[6])).ok());
  EXPECT_TRUE(WaitUntil([&] { return a->Info().job.second_slot == 3; }, 5));
  EXPECT_EQ(a->Info().job.kind, JobKind::kReplace);
  EXPECT_EQ(a->Info().job.second_target, m[6]->Name());
  std::mt19937_64 rng(173);
  Churn(*a, ref, rng, 30);  // during the pass over both
  a->SetSpeedLimits({});
  ASSERT_TRUE(a->WaitForJob().ok());
  ExpectPairDone(a->Info(), 1, *m[5], 3, *m[6]);
  EXPECT_EQ(testutil::Mismatches(*a), 0u);
  testutil::ExpectContents(*a, ref);
  ASSERT_TRUE(a->FailSlot(0).ok());
  testutil::ExpectContents(*a, ref);
}

// One target of a two-slot rebuild fails mid-pass (a second failure): the
// pass ends there, the other target keeps its front, and the next pass
// rebuilds it on from there beside a third spare from stripe 0.
TEST(Raid6Recovery, TargetFailingMidPassLeavesTheOtherToGoOn) {
  constexpr int kDisks = 6;
  std::vector<Shared> m =
      testutil::MakeMembers(kDisks + 3, kOffset + kMemberBytes);
  auto bad = std::make_shared<FaultyMember>(m[kDisks]);
  auto other = std::make_shared<FaultyMember>(m[kDisks + 1]);
  m[kDisks] = bad;
  m[kDisks + 1] = other;
  std::vector<uint8_t> ref;
  CreateWithSpares(m, kDisks, Layout::kParityFirst, 11, &ref);
  if (HasFatalFailure()) return;
  // Its writes from stripe 40 on fail: the pass gets that far, whichever
  // order the workers finish in.
  FaultPlan plan;
  plan.rules.push_back(FaultRule{.op = FaultOp::kWrite,
                                 .offset = kOffset + 40 * kChunk,
                                 .len = kMemberBytes});
  bad->SetPlan(plan);
  std::vector<Shared> given = {m[0],      m[2],          m[3],         m[5],
                               m[kDisks], m[kDisks + 1], m[kDisks + 2]};
  std::vector<std::string> lines;
  Mutex mu;
  AssembleOptions ao;
  ao.run = true;
  auto b =
      Array::Assemble(testutil::Handles(given), ao, [&](const std::string& l) {
        MutexLock lock(&mu);
        lines.push_back(l);
      });
  ASSERT_TRUE(b.ok()) << b.status();
  // Windows of 10 stripes (100 ms at the limit): the one that meets the
  // failure starts at stripe 40, and the stripes in flight beside it
  // never run ahead of it (with a whole-array window a stripe below it
  // may still be in flight when the target fails, and the front, which
  // moves only over an unbroken run, stays below that one).
  (*b)->SetSpeedLimits({.min_kib_s = 1600, .max_kib_s = 1600});
  (*b)->StartBackground();
  ASSERT_TRUE((*b)->WaitForJob().ok());
  EXPECT_GT(bad->counters().errors, 0u);
  const ArrayInfo info = (*b)->Info();
  EXPECT_FALSE(info.degraded);
  EXPECT_EQ(info.last_job.result, "completed");
  EXPECT_GE(info.last_job.second_slot, 0);
  for (const SlotInfo& si : info.slots) {
    if (si.slot >= 0) {
      EXPECT_EQ(si.state, SlotState::kActive) << si.slot;
      EXPECT_NE(si.name, bad->Name()) << si.slot;
    }
  }
  // Two passes; the second took the first's surviving target on from its
  // front (the job's start event names it), not from stripe 0.
  int passes = 0;
  uint64_t resumed_at = 0;
  {
    MutexLock lock(&mu);
    const std::string start = "onto " + other->Name() + " from stripe ";
    for (const std::string& l : lines) {
      passes += l.find("in one pass from stripe") != std::string::npos;
      if (const size_t at = l.find(start); at != std::string::npos) {
        resumed_at = std::stoull(l.substr(at + start.size()));
      }
    }
  }
  EXPECT_EQ(passes, 2);
  EXPECT_EQ(resumed_at, 40u);
  EXPECT_EQ(testutil::Mismatches(**b), 0u);
  testutil::ExpectContents(**b, ref);
}

// Two members stop answering at once, neither failed yet, and a client
// read lands on one of them: md fails the member and serves the read from
// the others, as for any degraded read. The read's correction tries the
// dead member's row from parity first, which needs the other dead member
// too; once its own member is failed, the piece is rebuilt again, and the
// second dead source is failed in turn (RAID6 rebuilds two). The read
// failed with the first member's failure before (found by the RAID6 model
// test, whose dying members happened to meet one read so).
TEST(Raid6Read, TwoMembersDyingUnderOneReadAreServedFromTheOthers) {
  constexpr int kDisks = 6;
  std::vector<std::shared_ptr<FaultyMember>> f;
  std::vector<Shared> m;
  for (int i = 0; i < kDisks; ++i) {
    f.push_back(std::make_shared<FaultyMember>(
        Shared(NewMemoryMember(absl::StrCat("m", i), kOffset + kMemberBytes))));
    m.push_back(f.back());
  }
  auto a = testutil::MustCreate(m, Opts6(Layout::kLeftSymmetric, true));
  ASSERT_NE(a, nullptr);
  const std::vector<uint8_t> ref = testutil::Pattern(a->size(), 61);
  ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
  ASSERT_TRUE(a->Flush().ok());
  const Geometry& g = a->Info().geometry;
  const uint64_t stripe = 3, sd = g.stripe_data_bytes();
  const int read_slot = g.DataDisk(stripe, 0);
  const int other_slot = g.DataDisk(stripe, 1);
  f[read_slot]->SetFailed(true);
  f[other_slot]->SetFailed(true);
  std::vector<uint8_t> got(kChunk);
  const absl::Status st = a->Read(got.data(), kChunk, stripe * sd);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(std::equal(got.begin(), got.end(), ref.begin() + stripe * sd));
  const ArrayInfo info = a->Info();
  EXPECT_FALSE(info.failed);
  EXPECT_EQ(info.slots[read_slot].state, SlotState::kFaulty);
  EXPECT_EQ(info.slots[other_slot].state, SlotState::kFaulty);
  testutil::ExpectContents(*a, ref);
}

TEST(Raid6Create, RefusesThreeMissingAndPpl) {
  std::vector<Shared> m = testutil::MakeMembers(3, kOffset + kMemberBytes);
  std::vector<std::unique_ptr<Member>> h = testutil::Handles(m);
  h.push_back(nullptr);
  h.push_back(nullptr);
  h.push_back(nullptr);
  auto a = Array::Create(std::move(h), Opts6(Layout::kLeftSymmetric, true));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("survives only two"), std::string::npos)
      << a.status();
  CreateOptions o = Opts6(Layout::kLeftSymmetric, false);
  o.ppl = true;
  auto p = Array::Create(
      testutil::Handles(testutil::MakeMembers(5, kOffset + kMemberBytes)), o);
  EXPECT_FALSE(p.ok());
}

}  // namespace
}  // namespace uraid
