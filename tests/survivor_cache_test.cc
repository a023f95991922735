// SPDX-License-Identifier: MIT
// The survivor cache's keys and freshness rule (stripe/survivor_cache.h).

#include "stripe/survivor_cache.h"

#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace uraid {
namespace {

std::vector<SurvivorCache::Rows> OneRow(int slot, uint8_t fill) {
  std::vector<SurvivorCache::Rows> rows;
  auto data = std::make_shared<AlignedBuffer>(16);
  std::memset(data->data(), fill, data->size());
  rows.push_back(SurvivorCache::Rows{slot, 0, std::move(data)});
  return rows;
}

TEST(SurvivorCache, ServesTheRowsOfItsShapeAndStripe) {
  SurvivorCache cache;
  cache.Put(/*shape=*/0, /*stripe=*/7, /*writes_started=*/3, OneRow(1, 0xab));
  uint8_t dst[8] = {};
  ASSERT_TRUE(cache.Get(0, 7, 3, /*slot=*/1, /*x=*/4, sizeof(dst), dst));
  for (uint8_t b : dst) EXPECT_EQ(b, 0xab);
  EXPECT_FALSE(cache.Get(0, 8, 3, 1, 4, sizeof(dst), dst));   // other stripe
  EXPECT_FALSE(cache.Get(0, 7, 3, 2, 4, sizeof(dst), dst));   // other slot
  EXPECT_FALSE(cache.Get(0, 7, 4, 1, 4, sizeof(dst), dst));   // a write began
  EXPECT_FALSE(cache.Get(0, 7, 3, 1, 12, sizeof(dst), dst));  // past the rows
}

// Requests smaller than a chunk each put their own rows of a stripe: the
// rows of earlier requests stay beside the new ones while no write has
// started, and go when one has.
TEST(SurvivorCache, RowsOfOneStripePutApartAreKeptTogether) {
  SurvivorCache cache;
  std::vector<SurvivorCache::Rows> later = OneRow(2, 0xcd);
  later[0].x = 64;
  cache.Put(0, 7, 3, OneRow(1, 0xab));
  cache.Put(0, 7, 3, std::move(later));
  uint8_t dst[8] = {};
  ASSERT_TRUE(cache.Get(0, 7, 3, /*slot=*/1, /*x=*/4, sizeof(dst), dst));
  for (uint8_t b : dst) EXPECT_EQ(b, 0xab);
  ASSERT_TRUE(cache.Get(0, 7, 3, /*slot=*/2, /*x=*/68, sizeof(dst), dst));
  for (uint8_t b : dst) EXPECT_EQ(b, 0xcd);
  // Put after a write began: the earlier rows are not kept with them.
  cache.Put(0, 7, 4, OneRow(0, 0xef));
  EXPECT_FALSE(cache.Get(0, 7, 4, 1, 4, sizeof(dst), dst));
  EXPECT_FALSE(cache.Get(0, 7, 4, 2, 68, sizeof(dst), dst));
  ASSERT_TRUE(cache.Get(0, 7, 4, 0, 4, sizeof(dst), dst));
  for (uint8_t b : dst) EXPECT_EQ(b, 0xef);
}

TEST(SurvivorCache, AStripeOfOneShapeIsNeverServedForAnother) {
  // A reshape runs two shapes side by side and then makes a third current:
  // stripe 7 of one is not stripe 7 of another.
  SurvivorCache cache;
  cache.Put(/*shape=*/1, /*stripe=*/7, /*writes_started=*/0, OneRow(0, 0x11));
  uint8_t dst[4] = {0, 0, 0, 0};
  EXPECT_FALSE(cache.Get(/*shape=*/2, 7, 0, 0, 0, sizeof(dst), dst));
  EXPECT_EQ(dst[0], 0);
  // Both shapes' entries live side by side.
  cache.Put(2, 7, 0, OneRow(0, 0x22));
  ASSERT_TRUE(cache.Get(1, 7, 0, 0, 0, sizeof(dst), dst));
  EXPECT_EQ(dst[0], 0x11);
  ASSERT_TRUE(cache.Get(2, 7, 0, 0, 0, sizeof(dst), dst));
  EXPECT_EQ(dst[0], 0x22);
}

// A reader that finds rows claimed waits for the claimant's read and then
// takes the rows it put; a second reader never claims rows already
// claimed (Find claims in the same step as it misses).
TEST(SurvivorCache, ClaimedRowsAreAwaitedThenServed) {
  SurvivorCache cache;
  uint8_t dst[8] = {};
  uint64_t ticket = 0, other = 0;
  EXPECT_EQ(cache.Find(0, 7, 3, /*slot=*/1, /*x=*/0, 16, dst, &ticket),
            SurvivorCache::Lookup::kMiss);
  ASSERT_NE(ticket, 0u);
  EXPECT_FALSE(cache.empty());
  // The same rows, or part of them: claimed; others: a miss of its own.
  EXPECT_EQ(cache.Find(0, 7, 3, 1, 4, sizeof(dst), dst, &other),
            SurvivorCache::Lookup::kClaimed);
  EXPECT_EQ(other, 0u);
  EXPECT_EQ(cache.Find(0, 7, 3, 2, 4, sizeof(dst), dst),
            SurvivorCache::Lookup::kMiss);
  EXPECT_EQ(cache.Find(0, 8, 3, 1, 4, sizeof(dst), dst),
            SurvivorCache::Lookup::kMiss);
  auto waiter = std::async(std::launch::async, [&] {
    cache.AwaitUnclaimed(0, 7, 1, 4, sizeof(dst));
    return cache.Get(0, 7, 3, 1, 4, sizeof(dst), dst);
  });
  EXPECT_EQ(waiter.wait_for(std::chrono::milliseconds(200)),
            std::future_status::timeout);
  cache.Put(0, 7, 3, OneRow(1, 0xab));
  cache.Release(ticket);
  ASSERT_TRUE(waiter.get());
  for (uint8_t b : dst) EXPECT_EQ(b, 0xab);
}

// Rows go once as many readers as want them (Rows::uses) had all of
// their bytes: the cache holds only what a read still to come wants.
TEST(SurvivorCache, RowsGoOnceEveryReaderHadThem) {
  SurvivorCache cache;
  std::vector<SurvivorCache::Rows> rows = OneRow(1, 0xab);
  rows[0].uses = 2;
  cache.Put(0, 7, 3, std::move(rows));
  uint8_t dst[16] = {};
  ASSERT_TRUE(cache.Get(0, 7, 3, 1, 0, 8, dst));
  ASSERT_TRUE(cache.Get(0, 7, 3, 1, 8, 8, dst));
  ASSERT_TRUE(cache.Get(0, 7, 3, 1, 0, 16, dst));  // 32 of 2 x 16 bytes
  EXPECT_FALSE(cache.Get(0, 7, 3, 1, 0, 16, dst));
  EXPECT_TRUE(cache.empty());
}

// A rebuild borrows kept rows instead of copying them: the bytes lent are
// the put buffer's own, and stay valid while held after the cache let them
// go (their one reader had them all).
TEST(SurvivorCache, LendsTheRowsItKeepsBeyondTheirEntry) {
  SurvivorCache cache;
  std::vector<SurvivorCache::Rows> rows = OneRow(1, 0xab);
  const uint8_t* const put_at = rows[0].data->data();
  cache.Put(0, 7, 3, std::move(rows));
  SurvivorCache::Held held;
  ASSERT_EQ(cache.Find(0, 7, 3, 1, 0, 16, nullptr, nullptr, &held),
            SurvivorCache::Lookup::kHit);
  EXPECT_EQ(held.data, put_at);
  EXPECT_TRUE(cache.empty());
  uint8_t dst[16] = {};
  EXPECT_FALSE(cache.Get(0, 7, 3, 1, 0, 16, dst));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(held.data[i], 0xab);
}

// A sequential reader's queue spans several wide stripes: the rows of each
// are kept (the bound was four stripes), up to kMaxBytes in all, beyond
// which the oldest stripe goes.
TEST(SurvivorCache, KeepsTheStripesAQueueSpansWithinItsBound) {
  SurvivorCache cache;
  constexpr uint64_t kRows = 4ull << 20;
  constexpr uint64_t kStripes = SurvivorCache::kMaxBytes / kRows;
  ASSERT_LE(kStripes, SurvivorCache::kMaxEntries);
  for (uint64_t s = 0; s < kStripes; ++s) {
    std::vector<SurvivorCache::Rows> rows;
    auto data = std::make_shared<AlignedBuffer>(kRows);
    data->data()[0] = static_cast<uint8_t>(s);
    rows.push_back(SurvivorCache::Rows{1, 0, std::move(data)});
    cache.Put(0, s, 3, std::move(rows));
  }
  uint8_t b = 0;
  for (uint64_t s = 0; s < kStripes; ++s) {
    ASSERT_TRUE(cache.Get(0, s, 3, 1, 0, 1, &b)) << s;
    EXPECT_EQ(b, static_cast<uint8_t>(s));
  }
  // One more stripe: over the bound, the oldest goes.
  std::vector<SurvivorCache::Rows> rows;
  rows.push_back(
      SurvivorCache::Rows{1, 0, std::make_shared<AlignedBuffer>(kRows)});
  cache.Put(0, kStripes, 3, std::move(rows));
  EXPECT_FALSE(cache.Get(0, 0, 3, 1, 0, 1, &b));
  EXPECT_TRUE(cache.Get(0, 1, 3, 1, 0, 1, &b));
  EXPECT_TRUE(cache.Get(0, kStripes, 3, 1, 0, 1, &b));
}

}  // namespace
}  // namespace uraid
