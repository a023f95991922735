// SPDX-License-Identifier: MIT
// Telling a stream's writes from random ones (stripe/write_streams.h).

#include "stripe/write_streams.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace uraid {
namespace {

constexpr uint64_t k64K = 64 << 10;

TEST(WriteStreams, NothingContinuesBeforeAnyWrite) {
  WriteStreams s;
  EXPECT_FALSE(s.Continues(0, 4096));
  EXPECT_FALSE(s.Continues(k64K, k64K));
}

TEST(WriteStreams, TheNextWriteOfAStreamContinuesIt) {
  WriteStreams s;
  s.Record(10 * k64K, k64K);
  EXPECT_TRUE(s.Continues(11 * k64K, k64K));
  // Reordered: the request right after is still in flight.
  EXPECT_TRUE(s.Continues(12 * k64K, k64K));
  // As far as kReorderLengths of its own lengths past the end, no further.
  const uint64_t end = 11 * k64K;
  const uint64_t reach = WriteStreams::kReorderLengths * k64K;
  EXPECT_TRUE(s.Continues(end + reach, k64K));
  EXPECT_FALSE(s.Continues(end + reach + 1, k64K));
  // The reach is the asking write's: a 4K write 1 MiB past is random.
  EXPECT_FALSE(s.Continues(end + (1 << 20), 4096));
}

TEST(WriteStreams, AWriteOverBytesJustWrittenDoesNotContinue) {
  WriteStreams s;
  s.Record(100 * 4096, 4096);  // ends at 101 blocks
  EXPECT_TRUE(s.Continues(101 * 4096, 4096));
  EXPECT_FALSE(s.Continues(100 * 4096, 4096));  // the same block again
  EXPECT_FALSE(s.Continues(99 * 4096, 8192));   // ends at that end
  EXPECT_FALSE(s.Continues(101 * 4096 - 512, 4096));
  EXPECT_FALSE(s.Continues(0, 4096));
}

TEST(WriteStreams, InterleavedStreamsAreEachFollowed) {
  WriteStreams s;
  const uint64_t starts[] = {0, uint64_t{1} << 30, uint64_t{3} << 30};
  for (int i = 0; i < 10; ++i) {
    for (uint64_t base : starts) {
      if (i > 0) {
        EXPECT_TRUE(s.Continues(base + i * k64K, k64K)) << base << " " << i;
      }
      s.Record(base + i * k64K, k64K);
    }
  }
  EXPECT_FALSE(s.Continues(uint64_t{2} << 30, k64K));
}

TEST(WriteStreams, OnlyTheLastSlotsWritesAreRemembered) {
  WriteStreams s;
  s.Record(0, 4096);
  // kSlots - 1 writes later the first end is still known...
  for (int i = 1; i < WriteStreams::kSlots; ++i) {
    s.Record(uint64_t{1} << 40 | uint64_t(i) << 30, 4096);
  }
  EXPECT_TRUE(s.Continues(4096, 4096));
  // ...one more, and it is forgotten.
  s.Record(uint64_t{1} << 41, 4096);
  EXPECT_FALSE(s.Continues(4096, 4096));
}

}  // namespace
}  // namespace uraid
