// SPDX-License-Identifier: MIT
// The stripe cache's range sets and its memory bound
// (stripe/stripe_cache.h).

#include "stripe/stripe_cache.h"

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace uraid {
namespace {

TEST(RangeSet, MergesOverlappingAndTouchingRanges) {
  RangeSet r;
  r.Add(10, 20);
  r.Add(30, 40);
  EXPECT_EQ(r.ranges().size(), 2u);
  r.Add(20, 30);  // touches both: one range
  ASSERT_EQ(r.ranges().size(), 1u);
  EXPECT_EQ(r.ranges().begin()->first, 10u);
  EXPECT_EQ(r.ranges().begin()->second, 40u);
  EXPECT_FALSE(r.Covers(40));
  r.Add(0, 5);
  r.Add(5, 10);
  EXPECT_TRUE(r.Covers(40));
  EXPECT_FALSE(r.Covers(41));
}

TEST(RangeSet, CoversWithAsksWithoutAdding) {
  RangeSet r;
  EXPECT_TRUE(r.CoversWith(0, 40, 40));
  EXPECT_FALSE(r.CoversWith(1, 40, 40));
  r.Add(10, 20);
  r.Add(30, 40);
  EXPECT_TRUE(r.CoversWith(0, 30, 40));    // both gaps
  EXPECT_FALSE(r.CoversWith(0, 25, 40));   // leaves 25..30
  EXPECT_FALSE(r.CoversWith(20, 30, 40));  // leaves 0..10
  EXPECT_FALSE(r.CoversWith(0, 30, 41));   // leaves 40..41
  EXPECT_TRUE(r.CoversWith(0, 41, 41));
  EXPECT_EQ(r.ranges().size(), 2u);  // nothing added
  r.Add(0, 10);
  EXPECT_TRUE(r.CoversWith(20, 30, 40));
  EXPECT_TRUE(r.CoversWith(25, 25, 20));  // empty piece, covered already
}

TEST(StripeCache, CreateRefusesAnEntryPastTheCapacity) {
  StripeCache cache(/*stripe_bytes=*/4096, /*capacity_bytes=*/4 * 4096);
  ASSERT_TRUE(cache.enabled());
  for (uint64_t s = 0; s < 4; ++s)
    ASSERT_NE(cache.Create(s, /*now_ns=*/0), nullptr) << s;
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(cache.Create(4, /*now_ns=*/0), nullptr);
  EXPECT_EQ(cache.size(), 4u);
  EXPECT_EQ(cache.bytes(), 4u * 4096);
  cache.Erase(1);
  StripeCache::Entry* e = cache.Create(4, /*now_ns=*/0);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->stripe, 4u);
  EXPECT_EQ(cache.Find(4), e);
  EXPECT_EQ(cache.Find(1), nullptr);
  // A smaller capacity refuses new entries until enough are gone.
  cache.set_capacity(2 * 4096);
  cache.Erase(0);
  EXPECT_EQ(cache.Create(0, /*now_ns=*/0), nullptr);
}

// Many creators at once, each on its own stripes (as writers holding their
// own stripe locks are): the bound holds at every instant, not only after
// evictions catch up.
TEST(StripeCache, ConcurrentCreatorsStayWithinTheBound) {
  constexpr uint64_t kStripe = 4096;
  constexpr size_t kCap = 8;
  StripeCache cache(kStripe, kCap * kStripe);
  std::atomic<size_t> peak{0};
  std::atomic<uint64_t> created{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < 2000; ++i) {
        const uint64_t stripe = i * 8 + t;
        if (cache.Create(stripe, /*now_ns=*/0) == nullptr) continue;
        created.fetch_add(1);
        size_t n = cache.size();
        size_t p = peak.load();
        while (n > p && !peak.compare_exchange_weak(p, n)) {
        }
        cache.Erase(stripe);
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_GT(created.load(), 0u);
  EXPECT_LE(peak.load(), kCap);
  EXPECT_EQ(cache.size(), 0u);
}

}  // namespace
}  // namespace uraid
