// SPDX-License-Identifier: MIT
// Array::Extents over sparse file members: holes where no member holds
// data, through every layout; a chunk written (or only cached) is data;
// degraded stripes are holes only where every other member is; and, the
// property that matters, every byte of a reported hole reads as zero
// after random writes, zero-writes and trims. And the jobs that copy onto
// members (rebuild, replace, reshape) keep them sparse where the source is
// a hole.

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/member.h"

namespace uraid {
namespace {

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kMemberBytes = 8ull << 20;

class ExtentsTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uraid-extents-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    array_.reset();
    ASSERT_EQ(system(("rm -rf " + dir_).c_str()), 0);
  }

  // A new array of `n` sparse files, layout GetParam(); cache as given.
  void Make(int n, uint64_t cache_bytes) {
    std::vector<std::unique_ptr<Member>> members;
    for (int i = 0; i < n; ++i) {
      std::unique_ptr<Member> m = NewFile(absl::StrFormat("m%d.img", i));
      ASSERT_NE(m, nullptr);
      members.push_back(std::move(m));
    }
    CreateOptions o;
    o.chunk_bytes = kChunk;
    o.layout = static_cast<Layout>(GetParam());
    o.member_bytes = kMemberBytes;
    o.bitmap = BitmapMode::kNone;  // no metadata in the data area anyway
    o.cache.bytes = cache_bytes;
    auto a = Array::Create(std::move(members), o);
    ASSERT_TRUE(a.ok()) << a.status();
    array_ = std::move(*a);
    ref_.assign(array_->size(), 0);
  }

  std::vector<Extent> All() {
    std::vector<Extent> all;
    uint64_t pos = 0;
    while (pos < array_->size()) {
      auto e = array_->Extents(pos, array_->size() - pos);
      EXPECT_TRUE(e.ok()) << e.status();
      if (!e.ok() || e->empty()) break;
      EXPECT_EQ(e->front().offset, pos) << "extents start where asked";
      for (const Extent& x : *e) {
        EXPECT_EQ(x.offset, pos) << "contiguous";
        pos = x.offset + x.length;
        all.push_back(x);
      }
    }
    return all;
  }

  // Every hole reads as zero and the reference agrees; returns the bytes
  // reported as holes.
  uint64_t CheckHolesAreZero() {
    std::vector<uint8_t> got(array_->size());
    EXPECT_TRUE(array_->Read(got.data(), got.size(), 0).ok());
    EXPECT_TRUE(got == ref_) << "array differs from the reference";
    uint64_t holes = 0;
    for (const Extent& x : All()) {
      if (!x.zero) continue;
      holes += x.length;
      for (uint64_t i = x.offset; i < x.offset + x.length; ++i) {
        if (got[i] != 0) {
          ADD_FAILURE() << "byte " << i << " of hole [" << x.offset << ", +"
                        << x.length << ") reads " << int(got[i]);
          return holes;
        }
      }
    }
    return holes;
  }

  void Write(uint64_t off, size_t len, uint32_t seed) {
    std::vector<uint8_t> d = testutil::Pattern(len, seed);
    ASSERT_TRUE(array_->Write(d.data(), len, off).ok());
    std::copy(d.begin(), d.end(), ref_.begin() + off);
  }

  // A new sparse file member of the fixture's size.
  std::unique_ptr<Member> NewFile(const std::string& name) {
    const std::string path = absl::StrFormat("%s/%s", dir_, name);
    FILE* f = fopen(path.c_str(), "w");
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(ftruncate(fileno(f), (16ull << 20) + kMemberBytes), 0);
    fclose(f);
    auto m = OpenFileMember(path);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? std::move(*m) : nullptr;
  }

  // Bytes the file `name` has allocated on disk.
  uint64_t Allocated(const std::string& name) {
    struct stat st;
    EXPECT_EQ(stat(absl::StrFormat("%s/%s", dir_, name).c_str(), &st), 0);
    return static_cast<uint64_t>(st.st_blocks) * 512;
  }

  std::string dir_;
  std::unique_ptr<Array> array_;
  std::vector<uint8_t> ref_;
};

TEST_P(ExtentsTest, NewSparseArrayIsOneHole) {
  Make(4, 0);
  std::vector<Extent> e = All();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_TRUE(e[0].zero);
  EXPECT_EQ(e[0].length, array_->size());
}

TEST_P(ExtentsTest, AWrittenChunkIsDataAndTheRestStaysHoles) {
  Make(4, 0);
  const uint64_t stripe_bytes = kChunk * 3;
  // 4 KiB in the second chunk of stripe 5.
  const uint64_t at = 5 * stripe_bytes + kChunk + 8192;
  Write(at, 4096, 1);
  std::vector<Extent> e = All();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_TRUE(e[0].zero);
  EXPECT_FALSE(e[1].zero);
  EXPECT_EQ(e[1].offset, 5 * stripe_bytes + kChunk) << "the whole chunk";
  EXPECT_EQ(e[1].length, kChunk);
  EXPECT_TRUE(e[2].zero);
  EXPECT_EQ(CheckHolesAreZero(), array_->size() - kChunk);
}

TEST_P(ExtentsTest, CachedWritesAreDataBeforeTheyReachTheMembers) {
  Make(4, 16ull << 20);
  Write(3 * kChunk * 3, 4096, 2);  // a partial stripe: it waits in the cache
  bool data = false;
  for (const Extent& x : All()) data |= !x.zero && x.offset <= 9 * kChunk;
  EXPECT_TRUE(data);
  CheckHolesAreZero();
  ASSERT_TRUE(array_->Flush().ok());
  CheckHolesAreZero();
}

TEST_P(ExtentsTest, DegradedHolesOnlyWhereEveryOtherMemberHasOne) {
  Make(4, 0);
  const uint64_t stripe_bytes = kChunk * 3;
  Write(2 * stripe_bytes, 4096, 3);  // stripe 2, data chunk 0
  const int disk = array_->geometry().Map(2 * stripe_bytes).disk;
  ASSERT_TRUE(array_->FailSlot(disk).ok());
  // The failed member's chunk is rebuilt from parity, which holds data.
  auto e = array_->Extents(2 * stripe_bytes, 4096);
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->front().zero);
  // Elsewhere every member is a hole: holes, also on the failed member.
  EXPECT_EQ(CheckHolesAreZero(), array_->size() - kChunk);
}

TEST_P(ExtentsTest, RandomWritesZeroesAndTrimsNeverHideData) {
  Make(5, 4ull << 20);
  std::mt19937 rng(GetParam() * 7919 + 1);
  const uint64_t size = array_->size();
  for (int round = 0; round < 60; ++round) {
    const uint64_t off = rng() % size / 512 * 512;
    const size_t len = std::min<uint64_t>(size - off, 512 * (1 + rng() % 600));
    switch (rng() % 4) {
      case 0:
      case 1:
        Write(off, len, round);
        break;
      case 2: {
        std::vector<uint8_t> z(len, 0);
        ASSERT_TRUE(array_->Write(z.data(), len, off).ok());
        std::fill(ref_.begin() + off, ref_.begin() + off + len, 0);
        break;
      }
      case 3: {
        // Whole stripes inside the range are discarded (files read back
        // zeros); the partial ones at its ends keep their bytes.
        ASSERT_TRUE(array_->Trim(len, off).ok());
        const uint64_t sb = array_->geometry().stripe_data_bytes();
        const uint64_t a = (off + sb - 1) / sb * sb;
        const uint64_t b = (off + len) / sb * sb;
        if (a < b) std::fill(ref_.begin() + a, ref_.begin() + b, 0);
        break;
      }
    }
    if (round % 15 == 14) {
      CheckHolesAreZero();
      ASSERT_TRUE(array_->Flush().ok());
    }
  }
  EXPECT_GT(CheckHolesAreZero(), 0u) << "some holes should remain";
}

// A mostly empty array: two chunks of data. Each job that writes a whole
// member (replace, rebuild onto a spare, a reshape onto a new member)
// leaves every member with about what it held, not its full size.
TEST_P(ExtentsTest, RebuildReplaceAndReshapeKeepMembersSparse) {
  Make(4, 0);
  Write(0, kChunk, 1);
  Write(array_->size() - kChunk, kChunk, 2);
  ASSERT_TRUE(array_->Flush().ok());
  // Superblock and data written so far, with room for a few chunks more.
  const uint64_t small = 8 * kChunk;
  for (int i = 0; i < 4; ++i) {
    ASSERT_LT(Allocated(absl::StrFormat("m%d.img", i)), small) << i;
  }

  ASSERT_TRUE(
      array_
          ->ReplaceMember(absl::StrFormat("%s/m1.img", dir_), NewFile("r1.img"))
          .ok());
  ASSERT_TRUE(array_->WaitForJob().ok());
  EXPECT_EQ(array_->Info().last_job.kind, JobKind::kReplace);
  EXPECT_LT(Allocated("r1.img"), small) << "replace filled the holes";
  CheckHolesAreZero();

  ASSERT_TRUE(array_->FailSlot(2).ok());
  ASSERT_TRUE(array_->AddMember(NewFile("s2.img")).ok());
  ASSERT_TRUE(array_->WaitForJob().ok());
  EXPECT_FALSE(array_->Info().degraded);
  EXPECT_LT(Allocated("s2.img"), small) << "rebuild filled the holes";
  CheckHolesAreZero();

  GrowOptions grow;
  grow.raid_devices = 5;
  grow.add.push_back(NewFile("g4.img"));
  absl::Status st = array_->Grow(std::move(grow));
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_TRUE(array_->WaitForJob().ok());
  EXPECT_EQ(array_->Info().geometry.raid_disks(), 5);
  ref_.resize(array_->size(), 0);
  for (const char* name : {"m0.img", "r1.img", "s2.img", "m3.img", "g4.img"}) {
    EXPECT_LT(Allocated(name), 2 * small) << name << ": reshape filled holes";
  }
  CheckHolesAreZero();
}

INSTANTIATE_TEST_SUITE_P(Layouts, ExtentsTest, ::testing::Range(0, 6),
                         [](const auto& info) {
                           return absl::StrFormat("layout%d", info.param);
                         });

}  // namespace
}  // namespace uraid
