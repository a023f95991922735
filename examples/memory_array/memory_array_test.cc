// SPDX-License-Identifier: MIT
// Example (a): libraid inside another project's unit test.
//
// A test that needs md's exact RAID5 behaviour builds an array over
// in-memory members (uraid::NewMemoryMember), writes through the array, and
// checks where md put every byte with uraid::Geometry, the pure layout math
// (no I/O). ShareMember keeps a handle on each member so the test can look
// at the raw member bytes and assemble the same members again.

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "uraid/array.h"
#include "uraid/geometry.h"
#include "uraid/member.h"

namespace {

constexpr int kDisks = 5;
constexpr uint64_t kChunk = 16 * 1024;
constexpr uint64_t kMemberBytes = 4 << 20;

// The 8-byte word stored at logical offset `offset` (a multiple of 8).
uint64_t Word(uint64_t offset) { return offset * 0x9E3779B97F4A7C15ull + 1; }

struct Params {
  int level;
  uraid::Layout layout;
};

std::string ParamName(const testing::TestParamInfo<Params>& info) {
  std::string name(uraid::LayoutName(info.param.layout));
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return "raid" + std::to_string(info.param.level) + "_" + name;
}

class MemoryArrayTest : public testing::TestWithParam<Params> {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<uraid::Member>> members;
    for (int i = 0; i < kDisks; ++i) {
      raw_.push_back(
          uraid::NewMemoryMember("mem" + std::to_string(i), kMemberBytes));
      members.push_back(uraid::ShareMember(raw_.back()));
    }
    uraid::CreateOptions options;
    options.level = GetParam().level;
    options.layout = GetParam().layout;
    options.chunk_bytes = kChunk;
    options.assume_clean = true;  // zero-filled members: parity holds
    auto array = uraid::Array::Create(std::move(members), options);
    ASSERT_TRUE(array.ok()) << array.status();
    array_ = *std::move(array);
    data_offset_ = array_->Info().data_offset_bytes;

    // Fill the whole array with a pattern that names each offset.
    pattern_.resize(array_->size() / 8);
    for (uint64_t i = 0; i < pattern_.size(); ++i) pattern_[i] = Word(i * 8);
    ASSERT_TRUE(array_->Write(pattern_.data(), array_->size(), 0).ok());
  }

  // 8 bytes of member `disk`, at `member_offset` from its data offset.
  uint64_t RawWord(int disk, uint64_t member_offset) {
    uint64_t w = 0;
    EXPECT_TRUE(raw_[disk]->Read(&w, 8, data_offset_ + member_offset).ok());
    return w;
  }

  std::vector<std::shared_ptr<uraid::Member>> raw_;
  std::unique_ptr<uraid::Array> array_;
  uint64_t data_offset_ = 0;
  std::vector<uint64_t> pattern_;
};

// Every 512-byte sector of the array is where Geometry says md puts it, and
// the inverse map leads back.
TEST_P(MemoryArrayTest, BytesLandWhereMdPutsThem) {
  const uraid::Geometry& geo = array_->geometry();
  EXPECT_EQ(geo.raid_disks(), kDisks);
  EXPECT_EQ(geo.layout(), GetParam().layout);
  for (uint64_t offset = 0; offset < geo.array_bytes(); offset += 512) {
    uraid::Location loc = geo.Map(offset);
    ASSERT_NE(loc.disk, loc.parity_disk);
    ASSERT_EQ(RawWord(loc.disk, loc.member_offset), Word(offset))
        << "offset " << offset;
    ASSERT_EQ(geo.Unmap(loc.disk, loc.member_offset), offset);
  }
}

// Each stripe's parity chunk is the XOR of its data chunks.
TEST_P(MemoryArrayTest, ParityChunkIsXorOfData) {
  const uraid::Geometry& geo = array_->geometry();
  for (uint64_t stripe = 0; stripe < geo.stripe_count(); stripe += 7) {
    const uint64_t base = stripe * kChunk;
    for (uint64_t off = 0; off < kChunk; off += 8) {
      uint64_t x = 0;
      for (int d = 0; d < kDisks; ++d) {
        if (d != geo.ParityDisk(stripe)) x ^= RawWord(d, base + off);
      }
      ASSERT_EQ(RawWord(geo.ParityDisk(stripe), base + off), x)
          << "stripe " << stripe;
      ASSERT_FALSE(geo.Unmap(geo.ParityDisk(stripe), base + off).has_value());
    }
  }
  std::vector<uint64_t> bad;
  auto mismatches = array_->CheckParity(&bad);
  ASSERT_TRUE(mismatches.ok()) << mismatches.status();
  EXPECT_EQ(*mismatches, 0u);
}

// With one member failed, every read is rebuilt from parity.
TEST_P(MemoryArrayTest, DegradedReadsRebuildTheMissingMember) {
  ASSERT_TRUE(array_->FailSlot(2).ok());
  EXPECT_TRUE(array_->Info().degraded);
  std::vector<uint64_t> back(pattern_.size());
  ASSERT_TRUE(array_->Read(back.data(), array_->size(), 0).ok());
  EXPECT_TRUE(back == pattern_);
  EXPECT_GT(array_->Info().counters.reconstructions, 0u);
}

// The same members assemble again in any order, with the same contents.
TEST_P(MemoryArrayTest, ReassemblesInAnyOrder) {
  array_.reset();  // flushes and marks clean
  std::vector<std::unique_ptr<uraid::Member>> members;
  for (int i = kDisks - 1; i >= 0; --i) {
    members.push_back(uraid::ShareMember(raw_[i]));
  }
  auto array = uraid::Array::Assemble(std::move(members), {});
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_TRUE((*array)->Info().clean);
  std::vector<uint64_t> back(pattern_.size());
  ASSERT_TRUE((*array)->Read(back.data(), (*array)->size(), 0).ok());
  EXPECT_TRUE(back == pattern_);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, MemoryArrayTest,
    testing::Values(Params{5, uraid::Layout::kLeftAsymmetric},
                    Params{5, uraid::Layout::kRightAsymmetric},
                    Params{5, uraid::Layout::kLeftSymmetric},
                    Params{5, uraid::Layout::kRightSymmetric},
                    Params{5, uraid::Layout::kParityFirst},
                    Params{5, uraid::Layout::kParityLast},
                    Params{4, uraid::Layout::kParityLast}),
    ParamName);

// Geometry alone answers "where does md put byte X" for a test that only
// needs the placement: here md's left-symmetric table for 4 disks, 64 KiB
// chunks (parity walks left from the last disk; data starts right of it).
TEST(GeometryOnly, LeftSymmetricMatchesMdTable) {
  auto geo = uraid::Geometry::Make(5, uraid::Layout::kLeftSymmetric, 64 * 1024,
                                   4, 1 << 20);
  ASSERT_TRUE(geo.ok()) << geo.status();
  // stripe: parity disk, then the disks of data chunks 0, 1, 2.
  const int table[4][4] = {
      {3, 0, 1, 2}, {2, 3, 0, 1}, {1, 2, 3, 0}, {0, 1, 2, 3}};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(geo->ParityDisk(s), table[s][0]) << "stripe " << s;
    for (int k = 0; k < 3; ++k) {
      uraid::Location loc = geo->Map((s * 3 + k) * 64 * 1024 + 100);
      EXPECT_EQ(loc.disk, table[s][1 + k]) << "stripe " << s << " chunk " << k;
      EXPECT_EQ(loc.member_offset, s * 64 * 1024 + 100u);
    }
  }
  EXPECT_EQ(geo->array_bytes(), 3u << 20);
}

TEST(GeometryOnly, RejectsWhatMdRejects) {
  // RAID4 only has parity-last; chunks are powers of two.
  EXPECT_FALSE(uraid::Geometry::Make(4, uraid::Layout::kLeftSymmetric,
                                     64 * 1024, 4, 1 << 20)
                   .ok());
  EXPECT_FALSE(uraid::Geometry::Make(5, uraid::Layout::kLeftSymmetric,
                                     48 * 1024, 4, 48 * 1024 * 4)
                   .ok());
}

}  // namespace
