// SPDX-License-Identifier: MIT
// Per-member error counts and latency (SlotInfo's read_errors ...
// latency_ns, what `uraid metrics` and detail --json show): counted on the
// member that erred and no other, a read error corrected from parity, a
// write error recorded as a bad block, the data I/O timed; the counts go
// with the member (a new one in the slot starts from zero); and they
// survive the detail JSON.

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "control/info_json.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/member.h"

namespace uraid {
namespace {

using testutil::Pattern;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 64 * kChunk;
constexpr int kDisks = 4;
constexpr uint64_t kBlock = 4096;

struct Rig {
  std::vector<std::shared_ptr<Member>> base;
  std::vector<std::shared_ptr<FaultyMember>> faulty;
  std::unique_ptr<Array> a;
  std::vector<uint8_t> data;
};

// Four FaultyMembers over memory, the array filled with a pattern.
void MakeRig(Rig* r) {
  r->base = testutil::MakeMembers(kDisks, kOffset + kMemberBytes);
  std::vector<std::shared_ptr<Member>> members;
  for (auto& b : r->base) {
    r->faulty.push_back(std::make_shared<FaultyMember>(b));
    members.push_back(r->faulty.back());
  }
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.member_bytes = kMemberBytes;
  o.cache.bytes = 0;
  r->a = testutil::MustCreate(members, o);
  ASSERT_NE(r->a, nullptr);
  r->data = Pattern(r->a->size(), 9);
  ASSERT_TRUE(r->a->Write(r->data.data(), r->data.size(), 0).ok());
  ASSERT_TRUE(r->a->Flush().ok());
}

// Every `op` of member bytes [at, at + len) fails with a medium error.
void FailRange(FaultyMember& m, FaultOp op, uint64_t at, uint64_t len) {
  FaultPlan plan;
  FaultRule rule;
  rule.op = op;
  rule.offset = at;
  rule.len = len;
  plan.rules.push_back(rule);
  plan.error_code = absl::StatusCode::kDataLoss;
  m.SetPlan(plan);
}

// Data I/O is counted and timed on every member; errors are zero.
TEST(MemberStats, IoIsTimedPerMember) {
  Rig r;
  MakeRig(&r);
  std::vector<uint8_t> got(r.data.size());
  ASSERT_TRUE(r.a->Read(got.data(), got.size(), 0).ok());
  const ArrayInfo info = r.a->Info();
  for (const SlotInfo& s : info.slots) {
    SCOPED_TRACE(s.slot);
    EXPECT_GT(s.ios, 0u);
    EXPECT_GT(s.io_ns, 0u);
    EXPECT_GT(s.latency_ns, 0u);
    EXPECT_LE(s.latency_ns, s.io_ns);
    EXPECT_EQ(s.read_errors + s.write_errors + s.corrected_read_errors +
                  s.bad_block_records,
              0u);
  }
}

// A read error that parity corrects counts on that member only: one failed
// read (the retry failed too) and one corrected read error.
TEST(MemberStats, ReadErrorCountsOnTheMemberThatErred) {
  Rig r;
  MakeRig(&r);
  // Stripe 4: slot 2 holds data there (left-symmetric, 4 disks).
  FaultPlan plan;
  FaultRule rule;
  rule.op = FaultOp::kRead;
  rule.offset = kOffset + 4 * kChunk;
  rule.len = kChunk;
  rule.times = 2;  // the read and the executor's retry
  plan.rules.push_back(rule);
  r.faulty[2]->SetPlan(plan);
  std::vector<uint8_t> got(r.data.size());
  ASSERT_TRUE(r.a->Read(got.data(), got.size(), 0).ok());
  EXPECT_TRUE(got == r.data);
  const ArrayInfo info = r.a->Info();
  for (const SlotInfo& s : info.slots) {
    SCOPED_TRACE(s.slot);
    EXPECT_EQ(s.read_errors, s.slot == 2 ? 1u : 0u);
    EXPECT_EQ(s.corrected_read_errors, s.slot == 2 ? 1u : 0u);
    EXPECT_EQ(s.write_errors, 0u);
  }
}

// A write error on a member that still answers is recorded as a bad block
// there: counted as write errors and a bad-block record on that member.
// When another member takes the slot, its counts start from zero.
TEST(MemberStats, WriteErrorAndBadBlockGoWithTheMember) {
  Rig r;
  MakeRig(&r);
  const uint64_t at = kOffset + 8 * kChunk;  // in stripe 8, data or parity
  FailRange(*r.faulty[1], FaultOp::kWrite, at, kBlock);
  // Rewrite the whole array: every member chunk is written, so the bad
  // block's write fails whatever the slot holds there.
  const auto data2 = Pattern(r.a->size(), 10);
  ASSERT_TRUE(r.a->Write(data2.data(), data2.size(), 0).ok());
  ArrayInfo info = r.a->Info();
  EXPECT_GE(info.slots[1].write_errors, 1u);
  EXPECT_EQ(info.slots[1].bad_block_records, 1u);
  EXPECT_EQ(info.slots[1].bad_blocks, 1u);
  for (int i : {0, 2, 3}) {
    EXPECT_EQ(info.slots[i].write_errors, 0u) << i;
    EXPECT_EQ(info.slots[i].bad_block_records, 0u) << i;
  }
  // Slot 1 gets a new member: its counters start again.
  ASSERT_TRUE(r.a->FailMember(r.faulty[1]->Name()).ok());
  EXPECT_GE(r.a->Info().slots[1].write_errors, 1u);  // kept while faulty
  ASSERT_TRUE(r.a->RemoveMember(r.faulty[1]->Name()).ok());
  std::shared_ptr<Member> spare(NewMemoryMember("s0", kOffset + kMemberBytes));
  ASSERT_TRUE(r.a->AddMember(ShareMember(spare)).ok());
  ASSERT_TRUE(r.a->WaitForJob().ok());
  info = r.a->Info();
  EXPECT_EQ(info.slots[1].name, "s0");
  EXPECT_EQ(info.slots[1].write_errors, 0u);
  EXPECT_EQ(info.slots[1].bad_block_records, 0u);
  std::vector<uint8_t> got(data2.size());
  ASSERT_TRUE(r.a->Read(got.data(), got.size(), 0).ok());
  EXPECT_TRUE(got == data2);
}

// The counts travel in the detail JSON (uraid detail --json, metrics).
TEST(MemberStats, SurviveTheDetailJson) {
  ArrayInfo info{.geometry = *Geometry::Make(5, Layout::kLeftSymmetric, kChunk,
                                             3, kMemberBytes)};
  SlotInfo s;
  s.slot = 0;
  s.state = SlotState::kActive;
  s.name = "m0";
  s.read_errors = 1;
  s.write_errors = 2;
  s.corrected_read_errors = 3;
  s.bad_block_records = 4;
  s.ios = 5;
  s.io_ns = 6;
  s.latency_ns = 7;
  info.slots = {s, s, s};
  absl::StatusOr<ArrayInfo> back =
      InfoFromJson(nlohmann::ordered_json::parse(InfoToJson(info).dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  const SlotInfo& b = back->slots[0];
  EXPECT_EQ(b.read_errors, 1u);
  EXPECT_EQ(b.write_errors, 2u);
  EXPECT_EQ(b.corrected_read_errors, 3u);
  EXPECT_EQ(b.bad_block_records, 4u);
  EXPECT_EQ(b.ios, 5u);
  EXPECT_EQ(b.io_ns, 6u);
  EXPECT_EQ(b.latency_ns, 7u);
}

}  // namespace
}  // namespace uraid
