// SPDX-License-Identifier: MIT
// The last data extent a member's hole probe learned
// (member/data_extent_cache.h): a discard keeps what it leaves of the
// extent (which is still data) and never a byte it may have made a hole.
#include "member/data_extent_cache.h"

#include <gtest/gtest.h>

namespace uraid {
namespace {

TEST(DataExtentCache, RemembersOneExtent) {
  DataExtentCache c;
  EXPECT_FALSE(c.Contains(0));
  c.Remember(100, 200);
  EXPECT_FALSE(c.Contains(99));
  EXPECT_TRUE(c.Contains(100));
  EXPECT_TRUE(c.Contains(199));
  EXPECT_FALSE(c.Contains(200));
  c.Remember(300, 300);  // empty: ignored
  EXPECT_TRUE(c.Contains(150));
}

TEST(DataExtentCache, ADiscardBesideTheExtentChangesNothing) {
  DataExtentCache c;
  c.Remember(100, 200);
  c.Forget(0, 100);
  c.Forget(200, 50);
  EXPECT_TRUE(c.Contains(100));
  EXPECT_TRUE(c.Contains(199));
}

// A forward scan that discards as it goes (a grow's zero stripes past the
// old array's end) keeps the rest of the extent ahead of it.
TEST(DataExtentCache, ADiscardAtTheStartKeepsTheRest) {
  DataExtentCache c;
  c.Remember(100, 200);
  c.Forget(100, 10);
  EXPECT_FALSE(c.Contains(100));
  EXPECT_FALSE(c.Contains(109));
  EXPECT_TRUE(c.Contains(110));
  EXPECT_TRUE(c.Contains(199));
  c.Forget(50, 100);  // from before the extent into it
  EXPECT_FALSE(c.Contains(149));
  EXPECT_TRUE(c.Contains(150));
}

TEST(DataExtentCache, ADiscardInsideKeepsThePartAfterIt) {
  DataExtentCache c;
  c.Remember(100, 200);
  c.Forget(140, 20);
  for (uint64_t at : {100, 139, 140, 159}) {
    EXPECT_FALSE(c.Contains(at)) << at;
  }
  EXPECT_TRUE(c.Contains(160));
  EXPECT_TRUE(c.Contains(199));
}

TEST(DataExtentCache, ADiscardOfTheEndKeepsThePartBeforeIt) {
  DataExtentCache c;
  c.Remember(100, 200);
  c.Forget(180, 100);
  EXPECT_TRUE(c.Contains(100));
  EXPECT_TRUE(c.Contains(179));
  EXPECT_FALSE(c.Contains(180));
  EXPECT_FALSE(c.Contains(199));
}

TEST(DataExtentCache, ADiscardOverTheWholeExtentForgetsIt) {
  DataExtentCache c;
  c.Remember(100, 200);
  c.Forget(100, 100);
  EXPECT_FALSE(c.Contains(100));
  EXPECT_FALSE(c.Contains(150));
  c.Remember(100, 200);
  c.Forget(0, 1000);
  EXPECT_FALSE(c.Contains(150));
}

}  // namespace
}  // namespace uraid
