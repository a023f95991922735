// SPDX-License-Identifier: MIT
// RAID6 through the whole array (uraid::Array over memory members): create
// (with the initial resync computing P and Q), random writes of every size
// checked against a reference, check finding P and Q consistent, then one
// and two members failed under the same workload, a third refused, and
// reassembly with two members left out. Every md RAID6 layout family.

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "test_util.h"
#include "uraid/array.h"

namespace uraid {
namespace {

constexpr uint64_t kChunk = 16 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 64 * kChunk;

using Shared = std::shared_ptr<Member>;

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
