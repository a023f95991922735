// SPDX-License-Identifier: MIT
// Tests for md's bad-block log: the codec (uraid/bad_blocks.h) against
// hand-computed entries (md reference §2.11), its refusals, where create
// reserves the log (mdadm 4.2's write_init_super1 rule) and that nothing
// else the array writes lands in it, and mdadm --examine-badblocks reading
// what the codec wrote.

#include "uraid/bad_blocks.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/superblock.h"

namespace uraid {

void PrintTo(const BadBlock& b, std::ostream* os) {
  *os << "{sector " << b.sector << ", " << b.sectors << " sectors}";
}

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Written independently of the codec: a little-endian u64 at `off`.
uint64_t Get64(const std::vector<uint8_t>& b, size_t off) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[off + i];
  return v;
}

void Put64(std::vector<uint8_t>& b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

// A log area of `n` bytes holding `raw` entries, the rest all-ones.
std::vector<uint8_t> Area(const std::vector<uint64_t>& raw, size_t n = 4096) {
  std::vector<uint8_t> b(n, 0xFF);
  for (size_t i = 0; i < raw.size(); ++i) Put64(b, i * 8, raw[i]);
  return b;
}

constexpr size_t kArea = 4096;  // mdadm's 8 sectors

// --- Encoding: md's exact bytes ----------------------------------------------

TEST(BadBlockLog, EncodesMdsBytesForKnownEntries) {
  // (start << 10) | length, little-endian, computed by hand:
  //   sector 4096, 8 sectors  -> 0x0000000000400008
  //   sector 1, 512 sectors   -> 0x0000000000000600
  //   sector 2^40, 1 sector   -> 0x0004000000000001 (2^50 | 1)
  const std::vector<BadBlock> blocks = {
      {1, 512}, {4096, 8}, {uint64_t{1} << 40, 1}};
  absl::StatusOr<std::vector<uint8_t>> got =
      EncodeBadBlockLog(blocks, 0, kArea);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), kArea);
  const std::vector<uint8_t> first16 = {0x00, 0x06, 0,    0, 0, 0, 0, 0,
                                        0x08, 0x00, 0x40, 0, 0, 0, 0, 0};
  EXPECT_EQ(std::vector<uint8_t>(got->begin(), got->begin() + 16), first16);
  EXPECT_EQ(Get64(*got, 16), 0x0004000000000001u);
  // The kernel fills the rest of its page with 0xff.
  for (size_t i = 24; i < kArea; ++i) ASSERT_EQ((*got)[i], 0xFF) << i;
}

TEST(BadBlockLog, EmptyListIsAllOnes) {
  absl::StatusOr<std::vector<uint8_t>> got = EncodeBadBlockLog({}, 0, kArea);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, std::vector<uint8_t>(kArea, 0xFF));
  absl::StatusOr<std::vector<BadBlock>> back = DecodeBadBlockLog(*got, 0);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->empty());
}

TEST(BadBlockLog, ShiftScalesUnits) {
  // Shift 3: units of 8 sectors. Sector 64 = unit 8, 16 sectors = 2 units:
  // (8 << 10) | 2 = 0x2002.
  const std::vector<BadBlock> blocks = {{64, 16}};
  absl::StatusOr<std::vector<uint8_t>> got =
      EncodeBadBlockLog(blocks, 3, kArea);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Get64(*got, 0), 0x2002u);
  absl::StatusOr<std::vector<BadBlock>> back = DecodeBadBlockLog(*got, 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(*back, ElementsAre(BadBlock{64, 16}));
  // The same bytes read with shift 0 name units as sectors.
  back = DecodeBadBlockLog(*got, 0);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(*back, ElementsAre(BadBlock{8, 2}));
}

TEST(BadBlockLog, RoundTripsASortedList) {
  const std::vector<BadBlock> blocks = {
      {0, 1}, {1, 7}, {100, 512}, {5000, 300}, {(uint64_t{1} << 53), 64}};
  absl::StatusOr<std::vector<uint8_t>> enc =
      EncodeBadBlockLog(blocks, 0, kArea);
  ASSERT_TRUE(enc.ok()) << enc.status();
  absl::StatusOr<std::vector<BadBlock>> dec = DecodeBadBlockLog(*enc, 0);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_EQ(*dec, blocks);  // adjacent {0,1} and {1,7} stay apart
  absl::StatusOr<std::vector<uint8_t>> again =
      EncodeBadBlockLog(*dec, 0, kArea);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *enc);
  // With a shift, in whole units.
  const std::vector<BadBlock> big = {{1024, 4096}, {1 << 20, 8}};
  enc = EncodeBadBlockLog(big, 3, kArea);
  ASSERT_TRUE(enc.ok()) << enc.status();
  dec = DecodeBadBlockLog(*enc, 3);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_EQ(*dec, big);
}

// --- Long ranges -------------------------------------------------------------

TEST(BadBlockLog, RangesLongerThan512UnitsAreSplit) {
  // 1300 sectors from 1000: 512 + 512 + 276.
  const std::vector<BadBlock> blocks = {{1000, 1300}};
  absl::StatusOr<size_t> n = BadBlockLogEntries(blocks, 0);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3u);
  absl::StatusOr<std::vector<uint8_t>> enc =
      EncodeBadBlockLog(blocks, 0, kArea);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(Get64(*enc, 0), (uint64_t{1000} << 10) | 512);
  EXPECT_EQ(Get64(*enc, 8), (uint64_t{1512} << 10) | 512);
  EXPECT_EQ(Get64(*enc, 16), (uint64_t{2024} << 10) | 276);
  EXPECT_EQ(Get64(*enc, 24), ~uint64_t{0});
  absl::StatusOr<std::vector<BadBlock>> dec = DecodeBadBlockLog(*enc, 0);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_THAT(*dec, ElementsAre(BadBlock{1000, 512}, BadBlock{1512, 512},
                                BadBlock{2024, 276}));
}

TEST(BadBlockLog, EntryCountsAtThe512Boundary) {
  EXPECT_EQ(*BadBlockLogEntries(std::vector<BadBlock>{{0, 512}}, 0), 1u);
  EXPECT_EQ(*BadBlockLogEntries(std::vector<BadBlock>{{0, 513}}, 0), 2u);
  EXPECT_EQ(*BadBlockLogEntries(std::vector<BadBlock>{{0, 1024}}, 0), 2u);
  // Shift 2: 512 units are 2048 sectors.
  EXPECT_EQ(*BadBlockLogEntries(std::vector<BadBlock>{{0, 2048}}, 2), 1u);
  EXPECT_EQ(*BadBlockLogEntries(std::vector<BadBlock>{{0, 2052}}, 2), 2u);
  EXPECT_EQ(*BadBlockLogEntries(
                std::vector<BadBlock>{{0, 8}, {8, 1025}, {2000, 1}}, 0),
            1u + 3u + 1u);
}

// --- Terminator and capacity -------------------------------------------------

TEST(BadBlockLog, DecodeStopsAtTheFirstAllOnesEntry) {
  // Entries after the terminator (even corrupt ones) are not read.
  std::vector<uint8_t> b =
      Area({(uint64_t{8} << 10) | 1, ~uint64_t{0}, 0, (uint64_t{9} << 10) | 1});
  absl::StatusOr<std::vector<BadBlock>> dec = DecodeBadBlockLog(b, 0);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_THAT(*dec, ElementsAre(BadBlock{8, 1}));
}

TEST(BadBlockLog, AFullAreaNeedsNoTerminator) {
  std::vector<BadBlock> blocks;
  for (uint64_t i = 0; i < kArea / 8; ++i) blocks.push_back({i * 10, 2});
  absl::StatusOr<std::vector<uint8_t>> enc =
      EncodeBadBlockLog(blocks, 0, kArea);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(Get64(*enc, kArea - 8), (uint64_t{511 * 10} << 10) | 2);
  absl::StatusOr<std::vector<BadBlock>> dec = DecodeBadBlockLog(*enc, 0);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_EQ(*dec, blocks);

  // One more entry does not fit, neither as a range of its own nor as the
  // split of a long one.
  std::vector<BadBlock> over = blocks;
  over.push_back({100000, 1});
  absl::StatusOr<std::vector<uint8_t>> full = EncodeBadBlockLog(over, 0, kArea);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(), HasSubstr("513 log entries"));
  over.pop_back();
  over.back().sectors = 513;  // the last range now takes two entries
  full = EncodeBadBlockLog(over, 0, kArea);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST(BadBlockLog, PartialTrailingEntryIsIgnored) {
  std::vector<uint8_t> b = Area({(uint64_t{3} << 10) | 4}, 8);
  b.push_back(0x00);  // 10 bytes: one entry and two stray ones
  b.push_back(0x00);
  absl::StatusOr<std::vector<BadBlock>> dec = DecodeBadBlockLog(b, 0);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_THAT(*dec, ElementsAre(BadBlock{3, 4}));
  // An area whose size is not a multiple of 8 is filled to its end.
  absl::StatusOr<std::vector<uint8_t>> enc =
      EncodeBadBlockLog(std::vector<BadBlock>{{3, 4}}, 0, 12);
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->size(), 12u);
  EXPECT_EQ(Get64(*enc, 0), (uint64_t{3} << 10) | 4);
  EXPECT_EQ((*enc)[8], 0xFF);
  EXPECT_EQ((*enc)[11], 0xFF);
}

// --- Corrupt entries ---------------------------------------------------------

TEST(BadBlockLog, ZeroLengthEntryIsCorrupt) {
  // A zeroed area is what an uninitialised log looks like: the kernel's
  // badblocks_set refuses its first entry (0 sectors).
  absl::StatusOr<std::vector<BadBlock>> dec =
      DecodeBadBlockLog(std::vector<uint8_t>(kArea, 0), 0);
  EXPECT_EQ(dec.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dec.status().message(), HasSubstr("entry 0"));
  EXPECT_THAT(dec.status().message(), HasSubstr("length 0"));
  // Named by its index.
  dec =
      DecodeBadBlockLog(Area({(uint64_t{1} << 10) | 1, uint64_t{77} << 10}), 0);
  EXPECT_EQ(dec.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dec.status().message(), HasSubstr("entry 1"));
}

TEST(BadBlockLog, LengthOver512UnitsIsCorrupt) {
  for (uint64_t len : {513u, 1000u, 1023u}) {
    absl::StatusOr<std::vector<BadBlock>> dec =
        DecodeBadBlockLog(Area({(uint64_t{5} << 10) | len}), 0);
    EXPECT_EQ(dec.status().code(), absl::StatusCode::kDataLoss) << len;
    EXPECT_THAT(dec.status().message(),
                HasSubstr(absl::StrFormat("length %d units", len)));
  }
  absl::StatusOr<std::vector<BadBlock>> ok =
      DecodeBadBlockLog(Area({(uint64_t{5} << 10) | 512}), 0);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(*ok, ElementsAre(BadBlock{5, 512}));
}

TEST(BadBlockLog, EntryPastTheLastSectorIsCorrupt) {
  // Start 2^53 units of 2^11 sectors = 2^64: does not fit.
  const uint64_t raw = (uint64_t{1} << 53 << 10) | 1;
  absl::StatusOr<std::vector<BadBlock>> dec =
      DecodeBadBlockLog(Area({raw}), 11);
  EXPECT_EQ(dec.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(dec.status().message(), HasSubstr("entry 0"));
  // Shift 10 fits (2^63), its end too.
  dec = DecodeBadBlockLog(Area({raw}), 10);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_THAT(*dec,
              ElementsAre(BadBlock{uint64_t{1} << 63, uint64_t{1} << 10}));
  // The largest start with shift 0, and a length whose end would wrap
  // once shifted by 63.
  dec = DecodeBadBlockLog(Area({~uint64_t{0} - 1023 + 512}), 0);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_THAT(*dec, ElementsAre(BadBlock{kBadBlockMaxStartUnits, 512}));
  dec = DecodeBadBlockLog(Area({(uint64_t{0} << 10) | 2}), 63);
  EXPECT_EQ(dec.status().code(), absl::StatusCode::kDataLoss);
  // A shift of 64 or more names no sector at all.
  dec = DecodeBadBlockLog(Area({(uint64_t{1} << 10) | 1}), 64);
  EXPECT_EQ(dec.status().code(), absl::StatusCode::kDataLoss);
  dec = DecodeBadBlockLog(Area({}), 200);  // but an empty list is empty
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_TRUE(dec->empty());
}

// --- Refused input -----------------------------------------------------------

TEST(BadBlockLog, UnalignedRangesAreRefused) {
  for (const BadBlock& b : {BadBlock{4, 8}, BadBlock{8, 4}, BadBlock{9, 7}}) {
    absl::StatusOr<std::vector<uint8_t>> enc =
        EncodeBadBlockLog(std::vector<BadBlock>{{0, 8}, b}, 3, kArea);
    EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(enc.status().message(), HasSubstr("bad block 1"));
    EXPECT_THAT(enc.status().message(), HasSubstr("not aligned"));
    EXPECT_EQ(BadBlockLogEntries(std::vector<BadBlock>{b}, 3).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  // The same ranges are fine in sectors.
  EXPECT_TRUE(
      EncodeBadBlockLog(std::vector<BadBlock>{{4, 4}, {9, 7}}, 0, kArea).ok());
}

TEST(BadBlockLog, EmptyRangesAreRefused) {
  absl::StatusOr<std::vector<uint8_t>> enc =
      EncodeBadBlockLog(std::vector<BadBlock>{{16, 0}}, 0, kArea);
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(enc.status().message(), HasSubstr("empty"));
}

TEST(BadBlockLog, UnsortedOrOverlappingRangesAreRefused) {
  absl::StatusOr<std::vector<uint8_t>> enc =
      EncodeBadBlockLog(std::vector<BadBlock>{{100, 8}, {50, 8}}, 0, kArea);
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(enc.status().message(), HasSubstr("comes before"));
  enc = EncodeBadBlockLog(std::vector<BadBlock>{{100, 8}, {107, 8}}, 0, kArea);
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(enc.status().message(), HasSubstr("overlaps"));
  enc = EncodeBadBlockLog(std::vector<BadBlock>{{100, 8}, {100, 8}}, 0, kArea);
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
  // Touching is not overlapping.
  EXPECT_TRUE(
      EncodeBadBlockLog(std::vector<BadBlock>{{100, 8}, {108, 8}}, 0, kArea)
          .ok());
}

TEST(BadBlockLog, RangesBeyondTheFieldsAreRefused) {
  // The 54-bit start field: the last unit is fine, the next one is not.
  EXPECT_TRUE(EncodeBadBlockLog(
                  std::vector<BadBlock>{{kBadBlockMaxStartUnits, 1}}, 0, kArea)
                  .ok());
  absl::StatusOr<std::vector<uint8_t>> enc = EncodeBadBlockLog(
      std::vector<BadBlock>{{kBadBlockMaxStartUnits + 1, 1}}, 0, kArea);
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(enc.status().message(), HasSubstr("54-bit"));
  // A split whose last entry would start past the field.
  enc = EncodeBadBlockLog(
      std::vector<BadBlock>{{kBadBlockMaxStartUnits - 100, 600}}, 0, kArea);
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
  // An end past 2^64 sectors.
  enc =
      EncodeBadBlockLog(std::vector<BadBlock>{{~uint64_t{0} - 3, 8}}, 0, kArea);
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
  // A unit of 2^64 sectors.
  enc = EncodeBadBlockLog(std::vector<BadBlock>{{0, 8}}, 64, kArea);
  EXPECT_EQ(enc.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(enc.status().message(), HasSubstr("shift 64"));
}

// --- Where the area is -------------------------------------------------------

TEST(BadBlockLogArea, FromTheSuperblock) {
  Superblock sb;
  EXPECT_FALSE(BadBlockLogAreaOf(sb).has_value());
  sb.bblog_size = 8;
  EXPECT_FALSE(BadBlockLogAreaOf(sb).has_value());  // offset 0: none
  sb.bblog_offset = 16;
  sb.bblog_shift = 2;
  std::optional<BadBlockLogArea> area = BadBlockLogAreaOf(sb);
  ASSERT_TRUE(area.has_value());
  EXPECT_EQ(area->offset_bytes, (8u + 16u) * 512u);
  EXPECT_EQ(area->size_bytes, 4096u);
  EXPECT_EQ(area->shift, 2);
  sb.bblog_size = 0;
  EXPECT_FALSE(BadBlockLogAreaOf(sb).has_value());
  // 1.0: before the superblock at the end of the member.
  sb.bblog_size = 8;
  sb.super_offset = 2000000;
  sb.bblog_offset = -8;
  area = BadBlockLogAreaOf(sb);
  ASSERT_TRUE(area.has_value());
  EXPECT_EQ(area->offset_bytes, (2000000u - 8u) * 512u);
  // Before the member's first byte, or too far to name in bytes.
  sb.super_offset = 8;
  sb.bblog_offset = -16;
  EXPECT_FALSE(BadBlockLogAreaOf(sb).has_value());
  sb.super_offset = uint64_t{1} << 60;
  sb.bblog_offset = 8;
  EXPECT_FALSE(BadBlockLogAreaOf(sb).has_value());
}

// --- Where create puts it ----------------------------------------------------

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kMemberBytes = 20 << 20;

using testutil::MakeMembers;
using testutil::SuperOf;

CreateOptions Options(BitmapMode bitmap) {
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.bitmap = bitmap;
  o.assume_clean = true;
  o.cache.bytes = 0;
  return o;
}

// Every member carries `offset` and mdadm's 8 sectors (or no log at all
// when `offset` is 0), shift 0, BAD_BLOCKS clear.
void ExpectLog(const std::vector<std::shared_ptr<Member>>& m, int32_t offset) {
  for (const auto& x : m) {
    SCOPED_TRACE(x->Name());
    const Superblock sb = SuperOf(*x);
    EXPECT_EQ(sb.bblog_offset, offset);
    EXPECT_EQ(sb.bblog_size, offset != 0 ? 8 : 0);
    EXPECT_EQ(sb.bblog_shift, 0);
    EXPECT_EQ(sb.feature_map & kFeatureBadBlocks, 0u);
  }
}

TEST(CreateBadBlockLog, AfterChooseBmSpaceWithoutABitmap) {
  // 19 MiB per member: choose_bm_space gives 8 sectors, so the log sits
  // at 8 (the superblock's 4 KiB) + 8, as mdadm 4.2 puts it.
  auto m = MakeMembers(3, kMemberBytes);
  ASSERT_NE(testutil::MustCreate(m, Options(BitmapMode::kNone)), nullptr);
  ASSERT_EQ(MdadmBitmapSpaceSectors(SuperOf(*m[0]).size), 8u);
  ExpectLog(m, 16);
  // mdadm.conf's CREATE bbl=no: none.
  auto n = MakeMembers(3, kMemberBytes, "n");
  CreateOptions o = Options(BitmapMode::kNone);
  o.bad_block_log = false;
  ASSERT_NE(testutil::MustCreate(n, o), nullptr);
  ExpectLog(n, 0);
}

TEST(CreateBadBlockLog, AfterTheBitmapsPages) {
  // 512-byte bitmap chunks over 16 MiB: 32768 bits = 4096 bytes + the
  // 256-byte header, two 4 KiB pages; the log follows them at 8 + 16.
  auto m = MakeMembers(3, kMemberBytes);
  CreateOptions o = Options(BitmapMode::kInternal);
  o.member_bytes = 16 << 20;
  o.bitmap_chunk_bytes = 512;
  ASSERT_NE(testutil::MustCreate(m, o), nullptr);
  ExpectLog(m, 24);
  // The default chunk (64 MiB): one bit, one page.
  auto n = MakeMembers(3, kMemberBytes, "n");
  ASSERT_NE(testutil::MustCreate(n, Options(BitmapMode::kInternal)), nullptr);
  ExpectLog(n, 16);
}

TEST(CreateBadBlockLog, AfterThePplArea) {
  auto m = MakeMembers(3, kMemberBytes);
  CreateOptions o = Options(BitmapMode::kNone);
  o.ppl = true;
  ASSERT_NE(testutil::MustCreate(m, o), nullptr);
  // The PPL's 1 MiB from +8: the log at 8 + 2048.
  ExpectLog(m, 2056);
  EXPECT_EQ(SuperOf(*m[0]).ppl_offset(), 8);
  EXPECT_EQ(SuperOf(*m[0]).ppl_size(), 2048);
}

TEST(CreateBadBlockLog, TightDataOffsets) {
  // 12 KiB of data offset, no bitmap: mdadm's fallback, the last 8 sectors
  // before the data, right after the superblock's 4 KiB.
  {
    auto m = MakeMembers(3, kMemberBytes, "a");
    CreateOptions o = Options(BitmapMode::kNone);
    o.data_offset_bytes = 12 << 10;
    ASSERT_NE(testutil::MustCreate(m, o), nullptr);
    ExpectLog(m, 8);
  }
  // 16 KiB with a bitmap: the default chunk leaves the log its 4 KiB.
  {
    auto m = MakeMembers(3, kMemberBytes, "b");
    CreateOptions o = Options(BitmapMode::kInternal);
    o.data_offset_bytes = 16 << 10;
    ASSERT_NE(testutil::MustCreate(m, o), nullptr);
    ExpectLog(m, 16);
  }
  // 12 KiB with a bitmap: the bitmap takes the only page, and the fallback
  // would overlay it (mdadm would), so no log.
  {
    auto m = MakeMembers(3, kMemberBytes, "c");
    CreateOptions o = Options(BitmapMode::kInternal);
    o.data_offset_bytes = 12 << 10;
    ASSERT_NE(testutil::MustCreate(m, o), nullptr);
    ExpectLog(m, 0);
  }
  // 16 KiB with an explicit chunk whose bitmap fills both pages: no log.
  {
    auto m = MakeMembers(3, kMemberBytes, "d");
    CreateOptions o = Options(BitmapMode::kInternal);
    o.data_offset_bytes = 16 << 10;
    o.member_bytes = 16 << 20;
    o.bitmap_chunk_bytes = 512;
    ASSERT_NE(testutil::MustCreate(m, o), nullptr);
    ExpectLog(m, 0);
  }
}

// A sentinel in every member's log area survives create, writes, bitmap
// flushes, a clean close and assembly: nothing of the array writes there.
void ExpectLogUntouched(CreateOptions o, const std::string& prefix) {
  auto m = MakeMembers(3, kMemberBytes, prefix);
  // Where create will put the log, from a first create on scratch members.
  Superblock probe;
  {
    auto s = MakeMembers(3, kMemberBytes, prefix + "probe");
    ASSERT_NE(testutil::MustCreate(s, o), nullptr);
    probe = SuperOf(*s[0]);
  }
  std::optional<BadBlockLogArea> area = BadBlockLogAreaOf(probe);
  ASSERT_TRUE(area.has_value());
  const std::vector<uint8_t> sentinel(area->size_bytes, 0xA5);
  for (auto& x : m) {
    ASSERT_TRUE(
        x->Write(sentinel.data(), sentinel.size(), area->offset_bytes).ok());
  }
  {
    std::unique_ptr<Array> a = testutil::MustCreate(m, o);
    ASSERT_NE(a, nullptr);
    const uint64_t n = a->Info().geometry.array_bytes();
    const std::vector<uint8_t> w = testutil::Pattern(n, 3);
    ASSERT_TRUE(a->Write(w.data(), w.size(), 0).ok());
    ASSERT_TRUE(a->Flush().ok());
  }
  absl::StatusOr<std::unique_ptr<Array>> b =
      Array::Assemble(testutil::Handles(m), AssembleOptions{});
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<uint8_t> w = testutil::Pattern(1 << 20, 4);
  ASSERT_TRUE((*b)->Write(w.data(), w.size(), 0).ok());
  b->reset();
  for (auto& x : m) {
    SCOPED_TRACE(x->Name());
    EXPECT_EQ(SuperOf(*x).bblog_offset, probe.bblog_offset);
    std::vector<uint8_t> got(area->size_bytes);
    ASSERT_TRUE(x->Read(got.data(), got.size(), area->offset_bytes).ok());
    EXPECT_TRUE(got == sentinel) << "the log area was written";
  }
}

TEST(CreateBadBlockLog, NothingElseWritesTheLog) {
  {
    SCOPED_TRACE("bitmap");
    CreateOptions o = Options(BitmapMode::kInternal);
    o.member_bytes = 16 << 20;
    o.bitmap_chunk_bytes = 512;  // two pages of bits, all written
    ExpectLogUntouched(o, "b");
  }
  {
    SCOPED_TRACE("ppl");
    CreateOptions o = Options(BitmapMode::kNone);
    o.ppl = true;
    ExpectLogUntouched(o, "p");
  }
  {
    SCOPED_TRACE("resync");
    ExpectLogUntouched(Options(BitmapMode::kNone), "r");
  }
}

// --- mdadm reads what the codec writes ---------------------------------------

using testutil::HaveTool;
using testutil::RunCommand;

TEST(BadBlockLogInterop, MdadmExamineBadblocksReadsTheEncoding) {
  if (!HaveTool("mdadm")) GTEST_SKIP() << "mdadm not installed; skipping";
  std::string tmpl = ::testing::TempDir() + "uraid_bbl_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << strerror(errno);
  const std::string path = tmpl + "/member.img";
  constexpr uint64_t kDeviceSectors = 64 * 1024 * 2;  // 64 MiB

  Superblock sb;
  sb.set_uuid = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  sb.set_name = "bbl";
  sb.level = 5;
  sb.layout = 2;
  sb.chunksize = 1024;
  sb.raid_disks = 3;
  sb.data_offset = DefaultDataOffsetSectors(kDeviceSectors, 1024);
  sb.data_size = kDeviceSectors - sb.data_offset;
  sb.size = sb.data_size / 1024 * 1024;
  sb.dev_number = 1;
  sb.max_dev = 128;
  sb.dev_roles = {0, 1, 2};
  sb.feature_map = kFeatureBadBlocks;
  sb.bblog_size = 8;
  sb.bblog_offset = 16;
  sb.bblog_shift = 0;
  const std::vector<BadBlock> blocks = {{sb.data_offset + 100, 8},
                                        {sb.data_offset + 4096, 1300}};
  absl::StatusOr<std::vector<uint8_t>> log =
      EncodeBadBlockLog(blocks, 0, kArea);
  ASSERT_TRUE(log.ok()) << log.status();
  const std::vector<uint8_t> block = EncodeSuperblock(sb);
  const int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  ASSERT_GE(fd, 0) << strerror(errno);
  ASSERT_EQ(ftruncate(fd, kDeviceSectors * 512), 0);
  ASSERT_EQ(pwrite(fd, block.data(), block.size(), kSb12OffsetBytes),
            static_cast<ssize_t>(block.size()));
  ASSERT_EQ(pwrite(fd, log->data(), log->size(), (8 + 16) * 512),
            static_cast<ssize_t>(log->size()));
  ASSERT_EQ(close(fd), 0);

  int status = 0;
  std::optional<std::string> out =
      RunCommand("mdadm --examine-badblocks '" + path + "' 2>&1", &status);
  unlink(path.c_str());
  rmdir(tmpl.c_str());
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(status, 0) << *out;
  const uint64_t d = sb.data_offset;
  const std::string want = absl::StrFormat(
      "Bad-blocks on %s:\n%20d for 8 sectors\n%20d for 512 sectors\n"
      "%20d for 512 sectors\n%20d for 276 sectors\n",
      path, d + 100, d + 4096, d + 4608, d + 5120);
  EXPECT_EQ(*out, want);
}

}  // namespace
}  // namespace uraid
