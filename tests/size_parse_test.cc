// SPDX-License-Identifier: MIT
// tools/size_parse: sizes on the command line, and the refusal of a number
// without a unit where mdadm reads KiB ("did you mean 64K?").

#include "size_parse.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace uraid::tool {
namespace {

TEST(ParseSize, BareNumbersAreBytes) {
  // Offsets and cache sizes: a number without a suffix is bytes.
  EXPECT_EQ(*ParseSize("65536"), 65536u);
  EXPECT_EQ(*ParseSize("64"), 64u);
  EXPECT_EQ(*ParseSize("64K"), 65536u);
  EXPECT_EQ(*ParseSize("1MiB"), 1u << 20);
  EXPECT_FALSE(ParseSize("1.5M").ok());
  EXPECT_FALSE(ParseSize("K").ok());
}

TEST(ParseUnitSizeOption, RefusesANumberWithoutAUnit) {
  absl::StatusOr<uint64_t> c = ParseUnitSizeOption("--chunk", "64");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "--chunk 64 has no unit: give K, M, G or T (mdadm reads a bare "
            "number as KiB, uraid used to read bytes); did you mean 64K?");
  // A byte count as uraid used to read it: both readings are offered.
  absl::StatusOr<uint64_t> s = ParseUnitSizeOption("--size", "65536");
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.status().message(),
                                "did you mean 64K (65536 bytes) or 65536K?"))
      << s.status().message();
  // With a unit, and 0 (the same in every unit), it parses.
  EXPECT_EQ(*ParseUnitSizeOption("--chunk", "64K"), 65536u);
  EXPECT_EQ(*ParseUnitSizeOption("--chunk", "64KiB"), 65536u);
  EXPECT_EQ(*ParseUnitSizeOption("--size", "1G"), 1u << 30);
  EXPECT_EQ(*ParseUnitSizeOption("--data-offset", "0"), 0u);
  EXPECT_EQ(*ParseUnitSizeOption("--chunk", "2K"), 2048u);  // range: Geometry
  // Junk names the option.
  absl::StatusOr<uint64_t> junk = ParseUnitSizeOption("--chunk", "sixty");
  ASSERT_FALSE(junk.ok());
  EXPECT_TRUE(absl::StartsWith(junk.status().message(), "--chunk sixty: "))
      << junk.status().message();
}

TEST(HumanBytes, OneDecimalBinaryUnits) {
  EXPECT_EQ(HumanBytes(512), "512 bytes");
  EXPECT_EQ(HumanBytes(1024), "1 KiB");
  EXPECT_EQ(HumanBytes(253u << 20), "253 MiB");
  EXPECT_EQ(HumanBytes(3u << 29), "1.5 GiB");
}

}  // namespace
}  // namespace uraid::tool
