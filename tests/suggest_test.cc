// SPDX-License-Identifier: MIT
// tools/suggest: the did-you-mean of unknown commands.

#include "suggest.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace uraid::tool {
namespace {

const std::vector<std::string> kCommands = {
    "create", "examine", "detail",  "check",          "map",    "serve",
    "fail",   "remove",  "add",     "replace",        "repair", "stop",
    "set",    "grow",    "monitor", "zero-superblock"};

TEST(EditDistance, CountsEditsAndAdjacentSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("detail", "detail"), 0);
  EXPECT_EQ(EditDistance("detial", "detail"), 1);   // one swap
  EXPECT_EQ(EditDistance("detal", "detail"), 1);    // one insertion
  EXPECT_EQ(EditDistance("detaill", "detail"), 1);  // one deletion
  EXPECT_EQ(EditDistance("derail", "detail"), 1);   // one substitution
  EXPECT_EQ(EditDistance("abc", ""), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
}

TEST(ClosestName, SuggestsTheMeantCommand) {
  EXPECT_EQ(ClosestName("detial", kCommands), "detail");
  EXPECT_EQ(ClosestName("craete", kCommands), "create");
  EXPECT_EQ(ClosestName("exmaine", kCommands), "examine");
  EXPECT_EQ(ClosestName("serv", kCommands), "serve");
  EXPECT_EQ(ClosestName("zero-superblok", kCommands), "zero-superblock");
  EXPECT_EQ(ClosestName("exa", kCommands), "examine");  // a prefix
  EXPECT_EQ(ClosestName("monitr", kCommands), "monitor");
}

TEST(ClosestName, StaysQuietWhenNothingIsClose) {
  EXPECT_EQ(ClosestName("frobnicate", kCommands), "");
  EXPECT_EQ(ClosestName("xyz", kCommands), "");
  EXPECT_EQ(ClosestName("a", kCommands), "");  // distance 1 but 1 letter
  EXPECT_EQ(ClosestName("", kCommands), "");
  EXPECT_EQ(ClosestName("detail", {}), "");
}

TEST(ClosestName, ShortWordsNeedACloserMatch) {
  // One edit is close enough for a 3-letter word; two are not.
  EXPECT_EQ(ClosestName("mup", kCommands), "map");
  EXPECT_EQ(ClosestName("qqp", kCommands), "");
}

}  // namespace
}  // namespace uraid::tool
