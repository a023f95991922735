// SPDX-License-Identifier: MIT
// The survivor cache's keys and freshness rule (stripe/survivor_cache.h).

#include "stripe/survivor_cache.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace uraid {
namespace {

std::vector<SurvivorCache::Rows> OneRow(int slot, uint8_t fill) {
  std::vector<SurvivorCache::Rows> rows;
  AlignedBuffer data(16);
  std::memset(data.data(), fill, data.size());
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

}  // namespace
}  // namespace uraid
