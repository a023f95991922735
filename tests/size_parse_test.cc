// SPDX-License-Identifier: MIT
// tools/size_parse: sizes on the command line, and the hint for a bare
// --chunk number ("did you mean 64K?").

#include "size_parse.h"

#include "gtest/gtest.h"

namespace uraid::tool {
namespace {

TEST(ParseSize, BareNumbersAreBytes) {
  // Backward compatible: a number without a suffix always meant bytes.
  EXPECT_EQ(*ParseSize("65536"), 65536u);
  EXPECT_EQ(*ParseSize("64"), 64u);
  EXPECT_EQ(*ParseSize("64K"), 65536u);
  EXPECT_EQ(*ParseSize("1MiB"), 1u << 20);
  EXPECT_FALSE(ParseSize("1.5M").ok());
  EXPECT_FALSE(ParseSize("K").ok());
}

TEST(BareNumberHint, AsksAboutSmallBareNumbers) {
  EXPECT_EQ(BareNumberHint("64", 4096), "did you mean 64K?");
  EXPECT_EQ(BareNumberHint("512", 4096), "did you mean 512K?");
  EXPECT_EQ(BareNumberHint("4095", 4096), "did you mean 4095K?");
  // Sensible byte counts, suffixed sizes, zero and junk: no hint.
  EXPECT_EQ(BareNumberHint("4096", 4096), "");
  EXPECT_EQ(BareNumberHint("65536", 4096), "");
  EXPECT_EQ(BareNumberHint("64K", 4096), "");
  EXPECT_EQ(BareNumberHint("2K", 4096), "");
  EXPECT_EQ(BareNumberHint("0", 4096), "");
  EXPECT_EQ(BareNumberHint("banana", 4096), "");
  EXPECT_EQ(BareNumberHint("", 4096), "");
}

TEST(ParseChunkOption, RefusesBareSmallNumbersWithTheHint) {
  absl::StatusOr<uint64_t> c = ParseChunkOption("64");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "--chunk 64 is 64 bytes (a number without a suffix is bytes); "
            "did you mean 64K?");
  EXPECT_EQ(*ParseChunkOption("64K"), 65536u);
  EXPECT_EQ(*ParseChunkOption("65536"), 65536u);
  // Out-of-range suffixed values are the library's to refuse.
  EXPECT_EQ(*ParseChunkOption("2K"), 2048u);
  EXPECT_FALSE(ParseChunkOption("sixty").ok());
}

TEST(HumanBytes, OneDecimalBinaryUnits) {
  EXPECT_EQ(HumanBytes(512), "512 bytes");
  EXPECT_EQ(HumanBytes(1024), "1 KiB");
  EXPECT_EQ(HumanBytes(253u << 20), "253 MiB");
  EXPECT_EQ(HumanBytes(3u << 29), "1.5 GiB");
}

}  // namespace
}  // namespace uraid::tool
