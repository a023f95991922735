// SPDX-License-Identifier: MIT
// md's bad-block lists in the engine: the in-memory list (BadBlockList), and
// an array that meets an unreadable sector (FaultyMember rules) loses that
// block, never the array; listed ranges are never read, are recorded
// durably in md's log, survive reassembly, are made good by a write that
// covers them, and rows a rebuild cannot rebuild are recorded on its target.
// A write error is recorded too (the member stays and wants replacement),
// and a write whose row cannot hold the bytes is never acknowledged.
#include <cstring>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "meta/bad_block_list.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/bad_blocks.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using Shared = std::shared_ptr<Member>;
using testutil::Handles;
using testutil::Pattern;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;  // data offset
constexpr uint64_t kMemberBytes = 32 * kChunk;
constexpr uint64_t kBlock = 4096;

// ------------------------------------------------------------ the list

TEST(BadBlockList, AddMergesClearSplits) {
  BadBlockList l;
  EXPECT_TRUE(l.empty());
  EXPECT_FALSE(l.Overlaps(0, 1000));
  EXPECT_TRUE(l.Add(100, 8));
  EXPECT_TRUE(l.Add(108, 8));   // touching: merged
  EXPECT_FALSE(l.Add(104, 4));  // covered: nothing changes
  EXPECT_EQ(l.Snapshot(), (std::vector<BadBlock>{{100, 16}}));
  EXPECT_TRUE(l.Add(200, 8));
  EXPECT_EQ(l.size(), 2u);
  EXPECT_EQ(l.sectors(), 24u);
  EXPECT_TRUE(l.Overlaps(115, 1));
  EXPECT_FALSE(l.Overlaps(116, 84));
  EXPECT_EQ(l.Find(0, 1000).size(), 2u);
  EXPECT_TRUE(l.Clear(104, 4));  // splits the first range
  EXPECT_EQ(l.Snapshot(),
            (std::vector<BadBlock>{{100, 4}, {108, 8}, {200, 8}}));
  EXPECT_FALSE(l.Clear(300, 8));
  EXPECT_TRUE(l.Clear(0, 1000));
  EXPECT_TRUE(l.empty());
}

// ------------------------------------------------------- the array

struct Rig {
  std::vector<Shared> base;
  std::vector<std::shared_ptr<FaultyMember>> faulty;
  std::vector<Shared> members;  // the faulty wrappers
  std::vector<uint8_t> data;    // what the array holds
};

CreateOptions Opts() {
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.member_bytes = kMemberBytes;
  o.cache.bytes = 0;
  return o;
}

// A 4-member array of FaultyMembers over memory, filled with a pattern and
// flushed.
std::unique_ptr<Array> MakeFilled(Rig* r, CreateOptions o = Opts()) {
  r->base = testutil::MakeMembers(4, kOffset + kMemberBytes);
  for (auto& b : r->base) {
    r->faulty.push_back(std::make_shared<FaultyMember>(b));
    r->members.push_back(r->faulty.back());
  }
  auto a = testutil::MustCreate(r->members, o);
  if (a == nullptr) return nullptr;
  r->data = Pattern(a->size(), 31);
  EXPECT_TRUE(a->Write(r->data.data(), r->data.size(), 0).ok());
  EXPECT_TRUE(a->Flush().ok());
  return a;
}

// The 4 KiB block of member bytes [at, at + 4096) fails every `op` (read
// or write) with a medium error (DataLoss).
void MakeFaulty(FaultyMember& m, FaultOp op, uint64_t at) {
  FaultPlan plan;
  FaultRule rule;
  rule.op = op;
  rule.offset = at;
  rule.len = kBlock;
  plan.rules.push_back(rule);
  plan.error_code = absl::StatusCode::kDataLoss;  // a medium error
  m.SetPlan(plan);
}

// The 4 KiB block of member bytes [at, at + 4096) fails every read.
void MakeUnreadable(FaultyMember& m, uint64_t at) {
  MakeFaulty(m, FaultOp::kRead, at);
}

// Reads the whole array 4 KiB at a time: the blocks that fail, and how
// many of the rest differ from `want`.
struct Scan {
  std::vector<uint64_t> unreadable;
  int wrong = 0;
};
Scan ScanAll(Array& a, const std::vector<uint8_t>& want) {
  Scan s;
  std::vector<uint8_t> got(kBlock);
  for (uint64_t at = 0; at < a.size(); at += kBlock) {
    if (!a.Read(got.data(), kBlock, at).ok()) {
      s.unreadable.push_back(at / kBlock);
      continue;
    }
    s.wrong += std::memcmp(got.data(), want.data() + at, kBlock) != 0;
  }
  return s;
}

std::vector<BadBlock> LogOf(Member& m) {
  const Superblock sb = testutil::SuperOf(m);
  if (!(sb.feature_map & kFeatureBadBlocks)) return {};
  const std::optional<BadBlockLogArea> area = BadBlockLogAreaOf(sb);
  if (!area.has_value()) return {};
  std::vector<uint8_t> bytes(area->size_bytes);
  EXPECT_TRUE(m.Read(bytes.data(), bytes.size(), area->offset_bytes).ok());
  absl::StatusOr<std::vector<BadBlock>> bad =
      DecodeBadBlockLog(bytes, area->shift);
  EXPECT_TRUE(bad.ok()) << bad.status();
  return bad.ok() ? *bad : std::vector<BadBlock>{};
}

// Member bytes 4 chunks and 2 blocks into slot 2's data (stripe 4, whose
// parity is on slot 3; slot 1 holds data there too): the sector that
// goes bad, and its sector number.
constexpr uint64_t kBadAt = kOffset + 4 * kChunk + 2 * kBlock;
constexpr uint64_t kBadSector = kBadAt / 512;

TEST(BadBlocks, DegradedReadErrorLosesOneRowNotTheArray) {
  Rig r;
  auto a = MakeFilled(&r);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->FailSlot(1).ok());
  MakeUnreadable(*r.faulty[2], kBadAt);
  const Scan s = ScanAll(*a, r.data);
  EXPECT_EQ(s.wrong, 0);
  // The bad block itself, and slot 1's block of that row (slot 1 holds
  // data there): nothing else.
  EXPECT_EQ(s.unreadable.size(), 2u);
  const ArrayInfo info = a->Info();
  EXPECT_FALSE(info.failed);
  EXPECT_EQ(info.slots[2].state, SlotState::kActive);
  EXPECT_EQ(info.slots[2].bad_blocks, 1u);
  EXPECT_EQ(info.slots[2].bad_sectors, 8u);
  // Durable in md's format before the read failed.
  EXPECT_EQ(LogOf(*r.base[2]), (std::vector<BadBlock>{{kBadSector, 8}}));
}

TEST(BadBlocks, WithoutALogTheMemberFailsAsInMd) {
  Rig r;
  CreateOptions o = Opts();
  o.bad_block_log = false;
  auto a = MakeFilled(&r, o);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->FailSlot(1).ok());
  MakeUnreadable(*r.faulty[2], kBadAt);
  (void)ScanAll(*a, r.data);
  EXPECT_TRUE(a->Info().failed);
}

TEST(BadBlocks, ListSurvivesReassemblyAndAWriteMakesTheBlockGood) {
  Rig r;
  {
    auto a = MakeFilled(&r);
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(a->FailSlot(1).ok());
    MakeUnreadable(*r.faulty[2], kBadAt);
    (void)ScanAll(*a, r.data);
    ASSERT_EQ(a->Info().slots[2].bad_blocks, 1u);
  }
  // The drive now reads the sector again, but its bytes are garbage: only
  // the list keeps them from being served.
  r.faulty[2]->SetPlan(FaultPlan{});
  std::vector<uint8_t> junk(kBlock, 0xA5);
  ASSERT_TRUE(r.base[2]->Write(junk.data(), junk.size(), kBadAt).ok());
  auto b = Array::Assemble(Handles({r.members[0], r.members[2], r.members[3]}),
                           AssembleOptions{});
  ASSERT_TRUE(b.ok()) << b.status();
  Array& a = **b;
  EXPECT_EQ(a.Info().slots[2].bad_blocks, 1u);
  Scan s = ScanAll(a, r.data);
  EXPECT_EQ(s.wrong, 0);
  ASSERT_GE(s.unreadable.size(), 1u);
  EXPECT_LE(s.unreadable.size(), 2u);
  // The array block on slot 2's bad sector.
  const std::optional<uint64_t> block = a.geometry().Unmap(2, kBadAt - kOffset);
  ASSERT_TRUE(block.has_value());
  auto fresh = Pattern(kBlock, 77);
  ASSERT_TRUE(a.Write(fresh.data(), kBlock, *block).ok());
  std::memcpy(r.data.data() + *block, fresh.data(), kBlock);
  EXPECT_EQ(a.Info().slots[2].bad_blocks, 0u);
  EXPECT_TRUE(LogOf(*r.base[2]).empty());
  s = ScanAll(a, r.data);
  EXPECT_EQ(s.wrong, 0);
  // Only slot 1's block of that row may stay lost (its parity could not
  // be kept); the written block reads back.
  EXPECT_LE(s.unreadable.size(), 1u);
  for (uint64_t u : s.unreadable) EXPECT_NE(u, *block / kBlock);
}

TEST(BadBlocks, ListedRangeIsNeverReadFromItsMember) {
  Rig r;
  {
    auto a = MakeFilled(&r);
    ASSERT_NE(a, nullptr);
  }
  // As md leaves a member: an entry in its log, BAD_BLOCKS set, and bytes
  // there that must not be served.
  Superblock sb = testutil::SuperOf(*r.base[2]);
  const std::optional<BadBlockLogArea> area = BadBlockLogAreaOf(sb);
  ASSERT_TRUE(area.has_value()) << "create reserves md's log";
  const std::vector<BadBlock> entry{{kBadSector, 8}};
  auto log = EncodeBadBlockLog(entry, area->shift, area->size_bytes);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE(
      r.base[2]->Write(log->data(), log->size(), area->offset_bytes).ok());
  sb.feature_map |= kFeatureBadBlocks;
  const std::vector<uint8_t> sbb = EncodeSuperblock(sb);
  ASSERT_TRUE(r.base[2]->Write(sbb.data(), sbb.size(), kSb12OffsetBytes).ok());
  std::vector<uint8_t> junk(kBlock, 0x5A);
  ASSERT_TRUE(r.base[2]->Write(junk.data(), junk.size(), kBadAt).ok());

  auto b = Array::Assemble(Handles(r.members), AssembleOptions{});
  ASSERT_TRUE(b.ok()) << b.status();
  Array& a = **b;
  const Scan s = ScanAll(a, r.data);
  EXPECT_EQ(s.wrong, 0);  // rebuilt from parity, not the junk
  EXPECT_TRUE(s.unreadable.empty());
  // A whole-array read (the bypass path) is refused the listed range too.
  std::vector<uint8_t> all(a.size());
  ASSERT_TRUE(a.Read(all.data(), all.size(), 0).ok());
  EXPECT_TRUE(all == r.data);
  // A scrub does not count (or carry into parity) the junk, and says which
  // rows it left unchecked.
  EXPECT_EQ(testutil::Mismatches(a), 0u);
  ASSERT_TRUE(a.StartScrub(/*repair=*/true).ok());
  ASSERT_TRUE(a.WaitForJob().ok());
  const JobInfo job = a.Info().last_job;
  EXPECT_EQ(job.result, "completed");
  EXPECT_EQ(job.mismatches, 0u);
  EXPECT_GE(job.unchecked_bytes, kBlock);
  EXPECT_EQ(job.first_unchecked, std::vector<uint64_t>{4});
}

TEST(BadBlocks, RebuildOverAnUnreadableSourceFinishesAndRecordsTheRow) {
  Rig r;
  auto a = MakeFilled(&r);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->FailSlot(1).ok());
  ASSERT_TRUE(a->RemoveMember(r.members[1]->Name()).ok());
  MakeUnreadable(*r.faulty[2], kBadAt);
  Shared spare = NewMemoryMember("spare", kOffset + kMemberBytes);
  auto handles = Handles({spare});
  ASSERT_TRUE(a->AddMember(std::move(handles[0])).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  const ArrayInfo info = a->Info();
  EXPECT_FALSE(info.failed);
  EXPECT_FALSE(info.degraded);
  EXPECT_EQ(info.last_job.result, "completed");
  EXPECT_GE(info.last_job.unrecovered_bytes, kBlock);
  EXPECT_EQ(info.slots[1].bad_blocks, 1u);  // the row, on the new member
  EXPECT_EQ(LogOf(*spare), (std::vector<BadBlock>{{kBadSector, 8}}));
  const Scan s = ScanAll(*a, r.data);
  EXPECT_EQ(s.wrong, 0);
  EXPECT_EQ(s.unreadable.size(), 2u);  // the row's two blocks
}

// The 4 KiB block of member bytes [at, at + 4096) fails every write (reads
// still work and return the old bytes).
void MakeUnwritable(FaultyMember& m, uint64_t at) {
  MakeFaulty(m, FaultOp::kWrite, at);
}

// The array block held by slot 2's kBadAt.
uint64_t BlockAtBadSector(const Array& a) {
  const std::optional<uint64_t> block = a.geometry().Unmap(2, kBadAt - kOffset);
  EXPECT_TRUE(block.has_value());
  return block.value_or(0);
}

TEST(BadBlocks, WriteErrorIsRecordedAndTheMemberStaysAndWantsReplacement) {
  Rig r;
  {
    auto a = MakeFilled(&r);
    ASSERT_NE(a, nullptr);
    MakeUnwritable(*r.faulty[2], kBadAt);
    // A small write (read-modify-write: data on slot 2 fails, parity
    // lands) and a full-stripe write over the same row.
    const uint64_t block = BlockAtBadSector(*a);
    auto fresh = Pattern(kBlock, 78);
    ASSERT_TRUE(a->Write(fresh.data(), kBlock, block).ok());
    std::memcpy(r.data.data() + block, fresh.data(), kBlock);
    const uint64_t sd = a->geometry().stripe_data_bytes();
    const uint64_t stripe = block / sd * sd;
    auto full = Pattern(sd, 79);
    ASSERT_TRUE(a->Write(full.data(), sd, stripe).ok());
    std::memcpy(r.data.data() + stripe, full.data(), sd);
    ASSERT_TRUE(a->Flush().ok());
    const ArrayInfo info = a->Info();
    EXPECT_FALSE(info.failed);
    EXPECT_FALSE(info.degraded);
    EXPECT_EQ(info.slots[2].state, SlotState::kActive);
    EXPECT_TRUE(info.slots[2].want_replacement);
    EXPECT_FALSE(info.slots[1].want_replacement);
    EXPECT_EQ(LogOf(*r.base[2]), (std::vector<BadBlock>{{kBadSector, 8}}));
    // The member still holds the old bytes there: only the list keeps them
    // from being served.
    const Scan s = ScanAll(*a, r.data);
    EXPECT_EQ(s.wrong, 0);
    EXPECT_TRUE(s.unreadable.empty());
  }
  auto b = Array::Assemble(Handles(r.members), AssembleOptions{});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->Info().slots[2].bad_blocks, 1u);
  const Scan s = ScanAll(**b, r.data);
  EXPECT_EQ(s.wrong, 0);
  EXPECT_TRUE(s.unreadable.empty());
}

TEST(BadBlocks, WriteErrorInARowThatLostAnotherBlockIsNotAcknowledged) {
  Rig r;
  auto a = MakeFilled(&r);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->FailSlot(1).ok());
  MakeUnwritable(*r.faulty[2], kBadAt);
  const uint64_t block = BlockAtBadSector(*a);
  auto fresh = Pattern(kBlock, 80);
  const absl::Status st = a->Write(fresh.data(), kBlock, block);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  const ArrayInfo info = a->Info();
  EXPECT_FALSE(info.failed);
  EXPECT_EQ(info.slots[2].state, SlotState::kActive);
  // Neither the old bytes nor the new are served for the block: EIO, and
  // for slot 1's block of that row too; nothing else.
  const Scan s = ScanAll(*a, r.data);
  EXPECT_EQ(s.wrong, 0);
  EXPECT_THAT(s.unreadable, testing::Contains(block / kBlock));
  EXPECT_EQ(s.unreadable.size(), 2u);
}

TEST(BadBlocks, AMemberThatWantsReplacementIsCopiedOntoASpare) {
  Rig r;
  auto a = MakeFilled(&r);
  ASSERT_NE(a, nullptr);
  Shared spare = NewMemoryMember("spare", kOffset + kMemberBytes);
  auto handles = Handles({spare});
  ASSERT_TRUE(a->AddMember(std::move(handles[0])).ok());
  ASSERT_EQ(a->Info().spares.size(), 1u);
  MakeUnwritable(*r.faulty[2], kBadAt);
  const uint64_t block = BlockAtBadSector(*a);
  auto fresh = Pattern(kBlock, 81);
  ASSERT_TRUE(a->Write(fresh.data(), kBlock, block).ok());
  std::memcpy(r.data.data() + block, fresh.data(), kBlock);
  ASSERT_TRUE(a->WaitForJob().ok());
  const ArrayInfo info = a->Info();
  EXPECT_EQ(info.last_job.kind, JobKind::kReplace);
  EXPECT_EQ(info.last_job.result, "completed");
  EXPECT_EQ(info.slots[2].name, spare->Name());
  EXPECT_EQ(info.slots[2].bad_blocks, 0u);  // rebuilt from parity
  EXPECT_FALSE(info.slots[2].want_replacement);
  EXPECT_TRUE(info.spares.empty());
  EXPECT_FALSE(info.degraded);
  const Scan s = ScanAll(*a, r.data);
  EXPECT_EQ(s.wrong, 0);
  EXPECT_TRUE(s.unreadable.empty());
}

TEST(BadBlocks, AMemberThatAnswersNothingIsFailedNotRecorded) {
  Rig r;
  auto a = MakeFilled(&r);
  ASSERT_NE(a, nullptr);
  FaultPlan dead;
  dead.rules.push_back(FaultRule{});  // every call, read or write
  r.faulty[2]->SetPlan(dead);
  const uint64_t block = BlockAtBadSector(*a);
  auto fresh = Pattern(kBlock, 82);
  ASSERT_TRUE(a->Write(fresh.data(), kBlock, block).ok());
  std::memcpy(r.data.data() + block, fresh.data(), kBlock);
  const ArrayInfo info = a->Info();
  EXPECT_TRUE(info.degraded);
  EXPECT_EQ(info.slots[2].state, SlotState::kFaulty);
  EXPECT_EQ(info.slots[2].bad_blocks, 0u);
  const Scan s = ScanAll(*a, r.data);
  EXPECT_EQ(s.wrong, 0);
  EXPECT_TRUE(s.unreadable.empty());
}

}  // namespace
}  // namespace uraid
