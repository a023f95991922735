// SPDX-License-Identifier: MIT
// AlignedBuffer and the large-block free list behind it
// (base/aligned_buffer.h, base/large_buffers.h).

#include "base/aligned_buffer.h"

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <latch>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/large_buffers.h"
#include "gtest/gtest.h"

namespace uraid {
namespace {

bool AllZero(const AlignedBuffer& b) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (b.data()[i] != 0) return false;
  }
  return true;
}

TEST(AlignedBuffer, IsAlignedAndZeroedWhenAsked) {
  for (size_t size :
       {size_t{1}, size_t{4096}, size_t{5000}, kLargeBlockBytes - 1,
        kLargeBlockBytes, size_t{3} << 20}) {
    AlignedBuffer b(size, /*zero=*/true);
    ASSERT_NE(b.data(), nullptr) << size;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % kBufferAlign, 0u);
    EXPECT_EQ(b.size(), size);
    EXPECT_TRUE(AllZero(b)) << size;
  }
}

// A recycled block carries its last user's bytes: zero=true must still
// give zeros.
TEST(AlignedBuffer, ARecycledLargeBlockIsZeroedWhenAsked) {
  constexpr size_t kSize = 512 * 1024;
  {
    AlignedBuffer dirty(kSize);
    std::memset(dirty.data(), 0xa5, kSize);
  }
  AlignedBuffer again(kSize, /*zero=*/true);
  EXPECT_TRUE(AllZero(again));
}

TEST(AlignedBuffer, MovesOwnership) {
  AlignedBuffer a(kLargeBlockBytes);
  uint8_t* p = a.data();
  AlignedBuffer b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  AlignedBuffer c(4096);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
}

// The free list hands a freed block back (no new mapping, no page faults)
// and never keeps more than its reserve, however many blocks were freed
// at once by however many threads.
TEST(LargeBuffers, RecyclesBlocksAndKeepsAtMostTheReserve) {
  if (!kLargeBlocksRecycled) GTEST_SKIP() << "ASan: blocks come from malloc";
  static constexpr size_t kSize = 1536 * 1024;
  void* first;
  {
    AlignedBuffer b(kSize);
    first = b.data();
  }
  {
    AlignedBuffer b(kSize);
    EXPECT_EQ(b.data(), first);
  }
  // Every thread holds its blocks until all have theirs: 64 distinct
  // blocks are freed, not the same few recycled.
  std::latch all_held(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&all_held] {
      std::vector<AlignedBuffer> held;
      for (int i = 0; i < 8; ++i) held.emplace_back(kSize);
      for (AlignedBuffer& b : held) std::memset(b.data(), 1, 4096);
      all_held.arrive_and_wait();
    });
  }
  for (std::thread& th : threads) th.join();
  // 64 blocks of 1.5 MiB were freed; the list kept what fits.
  EXPECT_LE(LargeBlocksKeptBytes(), kLargeKeepBytes);
  EXPECT_GT(LargeBlocksKeptBytes(), kLargeKeepBytes - kSize);
}

// A freed block that does not fit makes room by unmapping the oldest ones,
// so the sizes in use now are kept, not those a finished job left; and a
// block above kLargeKeepMaxBlockBytes (a job's window) is never kept.
TEST(LargeBuffers, ANewSizeEvictsTheOldestBlocks) {
  if (!kLargeBlocksRecycled) GTEST_SKIP() << "ASan: blocks come from malloc";
  static constexpr size_t kOld = 2 << 20, kNew = 512 << 10;
  {
    std::vector<AlignedBuffer> fill;
    for (size_t i = 0; i < kLargeKeepBytes / kOld; ++i) fill.emplace_back(kOld);
  }
  ASSERT_EQ(LargeBlocksKeptBytes(), kLargeKeepBytes);  // full of old blocks
  void* first;
  {
    AlignedBuffer b(kNew);
    first = b.data();
  }
  EXPECT_LE(LargeBlocksKeptBytes(), kLargeKeepBytes);
  {
    AlignedBuffer again(kNew);
    EXPECT_EQ(again.data(), first) << "the new size was not kept";
  }
  const size_t before = LargeBlocksKeptBytes();
  { AlignedBuffer window(kLargeKeepMaxBlockBytes + 4096); }
  EXPECT_EQ(LargeBlocksKeptBytes(), before);
}

// The mapping of this process that holds `addr`, from /proc/self/smaps:
// its bounds and VmFlags, or nothing when `addr` is not mapped.
struct Mapping {
  uintptr_t start, end;
  std::string flags;
};
std::optional<Mapping> MappingOf(const void* addr) {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  std::optional<Mapping> found;
  while (std::getline(smaps, line)) {
    if (found.has_value()) {
      if (line.starts_with("VmFlags:")) {
        found->flags = line.substr(8);
        return found;
      }
      continue;
    }
    // A mapping's first line: "start-end perms offset dev inode [path]".
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash == std::string::npos || space == std::string::npos ||
        dash > space || line.find(':') < dash) {
      continue;
    }
    const uintptr_t start = std::stoull(line.substr(0, dash), nullptr, 16);
    const uintptr_t end =
        std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
    if (start <= a && a < end) found = Mapping{start, end, ""};
  }
  return found;
}

// A kHuge block starts on a huge page boundary (a huge page backs only an
// aligned 2 MiB), is a mapping of exactly its bytes advised for huge pages
// (the slack mapped to align it is given back), and is unmapped whole when
// freed; one under a huge page is an ordinary block.
TEST(LargeBuffers, AHugeBlockIsAlignedAdvisedAndGivenBackWhole) {
  if (!kLargeBlocksRecycled) GTEST_SKIP() << "ASan: blocks come from malloc";
  if (sysconf(_SC_PAGESIZE) != 4096) GTEST_SKIP() << "huge pages need 4K pages";
  // Above kLargeKeepMaxBlockBytes (not kept when freed), not a multiple of
  // the huge page size.
  const size_t bytes = kLargeKeepMaxBlockBytes + kHugePageBytes + 4096;
  const uint8_t* p;
  {
    AlignedBuffer b(bytes, /*zero=*/false, BlockPages::kHuge);
    p = b.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePageBytes, 0u);
    std::memset(b.data(), 0x5a, bytes);  // all of it is writable
    std::optional<Mapping> m = MappingOf(p);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->start, reinterpret_cast<uintptr_t>(p));
    EXPECT_EQ(m->end, reinterpret_cast<uintptr_t>(p) + bytes);
    EXPECT_NE(m->flags.find(" hg"), std::string::npos) << m->flags;
  }
  EXPECT_FALSE(MappingOf(p).has_value());
  EXPECT_FALSE(MappingOf(p + bytes - 1).has_value());
  // Under a huge page: no advice.
  AlignedBuffer small(kHugePageBytes - 4096, /*zero=*/false, BlockPages::kHuge);
  std::optional<Mapping> m = MappingOf(small.data());
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->flags.find(" hg"), std::string::npos) << m->flags;
}

}  // namespace
}  // namespace uraid
