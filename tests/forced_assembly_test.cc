// SPDX-License-Identifier: MIT
// md's forced assembly after a double failure: the second failure is
// recorded in the survivors' superblocks (a plain restart refuses, naming
// force), force takes back the member that failed last (never one the
// array ran on without), and what it serves is what was acknowledged.
#include "array/forced_assembly.h"

#include <cstring>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using Shared = std::shared_ptr<Member>;
using testing::HasSubstr;
using testutil::Handles;
using testutil::Pattern;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 32 * kChunk;

struct Rig {
  std::vector<Shared> base;
  std::vector<std::shared_ptr<FaultyMember>> faulty;
  std::vector<Shared> members;
  std::vector<uint8_t> data;
};

std::unique_ptr<Array> MakeFilled(Rig* r) {
  r->base = testutil::MakeMembers(4, kOffset + kMemberBytes);
  for (auto& b : r->base) {
    r->faulty.push_back(std::make_shared<FaultyMember>(b));
    r->members.push_back(r->faulty.back());
  }
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.member_bytes = kMemberBytes;
  o.cache.bytes = 0;
  auto a = testutil::MustCreate(r->members, o);
  if (a == nullptr) return nullptr;
  r->data = Pattern(a->size(), 41);
  EXPECT_TRUE(a->Write(r->data.data(), r->data.size(), 0).ok());
  EXPECT_TRUE(a->Flush().ok());
  return a;
}

// Overwrites the first `len` bytes of the array and of the reference.
void Rewrite(Array& a, Rig* r, size_t len, uint32_t seed) {
  auto fresh = Pattern(len, seed);
  ASSERT_TRUE(a.Write(fresh.data(), len, 0).ok());
  ASSERT_TRUE(a.Flush().ok());
  std::memcpy(r->data.data(), fresh.data(), len);
}

void Dead(FaultyMember& m) {
  FaultPlan p;
  p.rules.push_back(FaultRule{});
  m.SetPlan(p);
}

AssembleOptions Force() {
  AssembleOptions o;
  o.force = true;
  return o;
}

std::vector<Shared> Pick(const Rig& r, std::vector<int> which) {
  std::vector<Shared> v;
  for (int i : which) v.push_back(r.members[i]);
  return v;
}

TEST(ForcedAssembly, SecondFailureIsRecordedAndForceTakesBackTheLastToFail) {
  Rig r;
  {
    auto a = MakeFilled(&r);
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(a->FailSlot(1).ok());
    // Written without slot 1: slot 2 holds it.
    Rewrite(*a, &r, 3 * kChunk, 42);
    ASSERT_TRUE(a->FailSlot(2).ok());
    EXPECT_TRUE(a->Info().failed);
  }
  // The survivors' superblocks list both slots faulty.
  const Superblock top = testutil::SuperOf(*r.base[0]);
  EXPECT_EQ(top.dev_roles[testutil::SuperOf(*r.base[1]).dev_number],
            kRoleFaulty);
  EXPECT_EQ(top.dev_roles[testutil::SuperOf(*r.base[2]).dev_number],
            kRoleFaulty);
  for (auto& f : r.faulty) f->SetPlan(FaultPlan{});  // the cable is back

  auto plain = Array::Assemble(Handles(r.members), AssembleOptions{});
  ASSERT_FALSE(plain.ok());
  EXPECT_THAT(plain.status().message(), HasSubstr("--force"));
  EXPECT_THAT(plain.status().message(), HasSubstr("m2 (slot 2"));

  std::vector<std::string> log;
  auto forced =
      Array::Assemble(Handles(r.members), Force(),
                      [&](const std::string& line) { log.push_back(line); });
  ASSERT_TRUE(forced.ok()) << forced.status();
  Array& a = **forced;
  const ArrayInfo info = a.Info();
  EXPECT_FALSE(info.failed);
  EXPECT_TRUE(info.degraded);
  EXPECT_EQ(info.slots[2].name, "m2");
  EXPECT_EQ(info.slots[2].state, SlotState::kActive);
  EXPECT_NE(info.slots[1].state, SlotState::kActive);  // m1 left out
  EXPECT_THAT(testing::PrintToString(log), HasSubstr("m2 (slot 2"));
  EXPECT_THAT(testing::PrintToString(log), HasSubstr("failed last"));
  EXPECT_THAT(testing::PrintToString(log), HasSubstr("leaves out m1"));
  testutil::ExpectContents(a, r.data);
}

TEST(ForcedAssembly, RefusesTheMemberTheArrayRanWithout) {
  Rig r;
  {
    auto a = MakeFilled(&r);
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(a->FailSlot(2).ok());
    Rewrite(*a, &r, 3 * kChunk, 43);  // slot 2 misses this
    ASSERT_TRUE(a->FailSlot(1).ok());
  }
  // The member that failed last (m1) is not given: m2 is all there is.
  auto without = Array::Assemble(Handles(Pick(r, {0, 2, 3})), Force());
  ASSERT_FALSE(without.ok());
  EXPECT_THAT(without.status().message(), HasSubstr("will not force m2"));
  // Given, m1 is taken back and m2 left out.
  auto with = Array::Assemble(Handles(r.members), Force());
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ((*with)->Info().slots[1].name, "m1");
  EXPECT_NE((*with)->Info().slots[2].state, SlotState::kActive);
  testutil::ExpectContents(**with, r.data);
}

TEST(ForcedAssembly, TwoThatLeftTogetherComeBackTogetherAndResync) {
  Rig r;
  {
    auto a = MakeFilled(&r);
    ASSERT_NE(a, nullptr);
    // A controller drops two members at once: one write meets both.
    Dead(*r.faulty[1]);
    Dead(*r.faulty[2]);
    auto fresh = Pattern(a->geometry().stripe_data_bytes(), 44);
    EXPECT_FALSE(a->Write(fresh.data(), fresh.size(), 0).ok());
    EXPECT_TRUE(a->Info().failed);
  }
  for (auto& f : r.faulty) f->SetPlan(FaultPlan{});
  EXPECT_EQ(testutil::SuperOf(*r.base[1]).events,
            testutil::SuperOf(*r.base[2]).events);
  auto forced = Array::Assemble(Handles(r.members), Force());
  ASSERT_TRUE(forced.ok()) << forced.status();
  Array& a = **forced;
  EXPECT_FALSE(a.Info().degraded);
  EXPECT_TRUE(a.Info().resyncing);  // the write left it dirty
  ASSERT_TRUE(a.Resync().ok());
  // The unacknowledged write may or may not have landed; everything past
  // its stripe reads as acknowledged, and parity agrees with the data.
  const uint64_t sd = a.geometry().stripe_data_bytes();
  std::vector<uint8_t> rest(a.size() - sd);
  ASSERT_TRUE(a.Read(rest.data(), rest.size(), sd).ok());
  EXPECT_TRUE(std::equal(rest.begin(), rest.end(), r.data.begin() + sd));
  EXPECT_EQ(testutil::Mismatches(a), 0u);
}

TEST(ForcedAssembly, ChoosesByTheSuperblocks) {
  // Pure rule: slot 1 left first (events 10 in its own superblock, all
  // active), slot 2 last (events 12, its superblock lists slot 1 gone).
  auto sb = [](uint32_t dev, uint64_t events, std::vector<uint16_t> roles) {
    Superblock s;
    s.dev_number = dev;
    s.events = events;
    s.dev_roles = std::move(roles);
    return s;
  };
  const Superblock first = sb(1, 10, {0, 1, 2, 3});
  const Superblock last = sb(2, 12, {0, kRoleFaulty, 2, 3});
  const ForceCandidate c1{1, "m1", 1, &first};
  const ForceCandidate c2{2, "m2", 2, &last};
  auto both = ChooseForcedMembers(4, 14, {c1, c2}, {1, 2});
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->members, std::vector<size_t>{2});
  auto only_first = ChooseForcedMembers(4, 14, {c1}, {1, 2});
  EXPECT_FALSE(only_first.ok());
  EXPECT_EQ(OwnSlot(last, 4), 2);
  Superblock rebuilding = last;
  rebuilding.feature_map |= kFeatureRecoveryOffset;
  EXPECT_EQ(OwnSlot(rebuilding, 4), -1);
}

}  // namespace
}  // namespace uraid
