// SPDX-License-Identifier: MIT
// Tests for the md v1.2 superblock codec: byte layout against the md
// reference (§2.2), checksum against hand-computed sums, round trips,
// rejection of every corrupt field, mdadm's data_offset rule, and interop
// with the real mdadm and blkid binaries.

#include "uraid/superblock.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

// --- Helpers written independently of the codec, so the tests do not merely
// --- check the codec against itself.

uint32_t Get32(const std::vector<uint8_t>& b, size_t off) {
  return b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) |
         (static_cast<uint32_t>(b[off + 3]) << 24);
}

uint64_t Get64(const std::vector<uint8_t>& b, size_t off) {
  return Get32(b, off) | (static_cast<uint64_t>(Get32(b, off + 4)) << 32);
}

uint16_t Get16(const std::vector<uint8_t>& b, size_t off) {
  return static_cast<uint16_t>(b[off] | (b[off + 1] << 8));
}

void Set32(std::vector<uint8_t>& b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

void Set64(std::vector<uint8_t>& b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

constexpr size_t kOffFeatureMap = 8;
constexpr size_t kOffDataOffset = 128;
constexpr size_t kOffSbCsum = 216;
constexpr size_t kOffMaxDev = 220;

// Rewrites sb_csum so that a deliberately corrupted field is the only thing
// wrong with the block.
void FixChecksum(std::vector<uint8_t>& b) {
  Set32(b, kOffSbCsum, SuperblockChecksum(b, Get32(b, kOffMaxDev)));
}

// A plausible member of a 4-disk RAID5 as mdadm would create it.
Superblock ValidSuperblock() {
  Superblock sb;
  sb.set_uuid = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10};
  sb.device_uuid = {0xa0, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
                    0xa8, 0xa9, 0xaa, 0xab, 0xac, 0xad, 0xae, 0xaf};
  sb.set_name = "testhost:arr";
  sb.ctime = 1700000000;
  sb.utime = 1700000100;
  sb.level = 5;
  sb.layout = 2;
  sb.chunksize = 1024;
  sb.raid_disks = 4;
  sb.data_offset = 4096;
  sb.data_size = 126976;
  sb.size = 126976;
  sb.super_offset = kSb12OffsetSectors;
  sb.dev_number = 2;
  sb.events = 5;
  sb.resync_offset = kMaxSector;
  sb.max_dev = 128;
  sb.dev_roles = {0, 1, 2, 3};
  return sb;
}

// Field-by-field equality, ignoring sb_csum (Encode computes it) and using
// Encode's rule for max_dev / dev_roles padding.
void ExpectSameSuperblock(const Superblock& want, const Superblock& got) {
  EXPECT_EQ(got.major_version, want.major_version);
  EXPECT_EQ(got.feature_map, want.feature_map);
  EXPECT_EQ(got.set_uuid, want.set_uuid);
  EXPECT_EQ(got.set_name, want.set_name);
  EXPECT_EQ(got.ctime, want.ctime);
  EXPECT_EQ(got.level, want.level);
  EXPECT_EQ(got.layout, want.layout);
  EXPECT_EQ(got.size, want.size);
  EXPECT_EQ(got.chunksize, want.chunksize);
  EXPECT_EQ(got.raid_disks, want.raid_disks);
  EXPECT_EQ(got.bitmap_offset, want.bitmap_offset);
  EXPECT_EQ(got.new_level, want.new_level);
  EXPECT_EQ(got.reshape_position, want.reshape_position);
  EXPECT_EQ(got.delta_disks, want.delta_disks);
  EXPECT_EQ(got.new_layout, want.new_layout);
  EXPECT_EQ(got.new_chunk, want.new_chunk);
  EXPECT_EQ(got.new_offset, want.new_offset);
  EXPECT_EQ(got.data_offset, want.data_offset);
  EXPECT_EQ(got.data_size, want.data_size);
  EXPECT_EQ(got.super_offset, want.super_offset);
  EXPECT_EQ(got.recovery_offset, want.recovery_offset);
  EXPECT_EQ(got.dev_number, want.dev_number);
  EXPECT_EQ(got.cnt_corrected_read, want.cnt_corrected_read);
  EXPECT_EQ(got.device_uuid, want.device_uuid);
  EXPECT_EQ(got.devflags, want.devflags);
  EXPECT_EQ(got.bblog_shift, want.bblog_shift);
  EXPECT_EQ(got.bblog_size, want.bblog_size);
  EXPECT_EQ(got.bblog_offset, want.bblog_offset);
  EXPECT_EQ(got.utime, want.utime);
  EXPECT_EQ(got.events, want.events);
  EXPECT_EQ(got.resync_offset, want.resync_offset);
  const size_t max_dev = std::max<size_t>(want.max_dev, want.dev_roles.size());
  EXPECT_EQ(got.max_dev, max_dev);
  std::vector<uint16_t> roles = want.dev_roles;
  roles.resize(max_dev, kRoleSpare);
  EXPECT_EQ(got.dev_roles, roles);
}

// Decodes `bytes` and expects failure with `code` and `text` in the message.
void ExpectRejected(const std::vector<uint8_t>& bytes, absl::StatusCode code,
                    const std::string& text,
                    uint64_t expected_super_offset = kSb12OffsetSectors) {
  absl::StatusOr<Superblock> sb =
      DecodeSuperblock(bytes, expected_super_offset);
  ASSERT_FALSE(sb.ok()) << "accepted a corrupt superblock; want: " << text;
  EXPECT_EQ(sb.status().code(), code) << sb.status();
  EXPECT_THAT(sb.status().message(), HasSubstr(text));
}

// --- Byte layout ---------------------------------------------------------

// Every field gets a distinct value; the bytes are then read back at the
// offsets of the md reference §2.2 with the test's own LE readers.
TEST(SuperblockEncode, FieldsLandAtMdOffsets) {
  Superblock sb;
  sb.feature_map = kFeatureBitmapOffset | kFeatureNewOffset;
  for (int i = 0; i < 16; ++i) {
    sb.set_uuid[i] = static_cast<uint8_t>(0x10 + i);
    sb.device_uuid[i] = static_cast<uint8_t>(0x80 + i);
  }
  sb.set_name = "host:name";
  sb.ctime = 0x0102030405060708;
  sb.level = -1;
  sb.layout = 0x11121314;
  sb.size = 0x2122232425262728;
  sb.chunksize = 0x31323334;
  sb.raid_disks = 0x41424344;
  sb.bitmap_offset = -8;
  sb.new_level = 0x51525354;
  sb.reshape_position = 0x6162636465666768;
  sb.delta_disks = -2;
  sb.new_layout = 0x71727374;
  sb.new_chunk = 0x81828384;
  sb.new_offset = -3;
  sb.data_offset = 0x0000000091929394;
  sb.data_size = 0xa1a2a3a4a5a6a7a8;
  sb.super_offset = 8;
  sb.recovery_offset = 0xb1b2b3b4b5b6b7b8;
  sb.dev_number = 0xc1c2c3c4;
  sb.cnt_corrected_read = 0xd1d2d3d4;
  sb.devflags = 0xe1;
  sb.bblog_shift = 0xe2;
  sb.bblog_size = 0xe3e4;
  sb.bblog_offset = -16;
  sb.utime = 0xf1f2f3f4f5f6f7f8;
  sb.events = 0x0a0b0c0d0e0f1011;
  sb.resync_offset = 0x1213141516171819;
  sb.max_dev = 3;
  sb.dev_roles = {7, kRoleFaulty};

  const std::vector<uint8_t> b = EncodeSuperblock(sb);
  ASSERT_EQ(b.size(), 4096u);
  EXPECT_EQ(b[0], 0xfc);  // magic 0xa92b4efc, little-endian
  EXPECT_EQ(b[1], 0x4e);
  EXPECT_EQ(b[2], 0x2b);
  EXPECT_EQ(b[3], 0xa9);
  EXPECT_EQ(Get32(b, 4), 1u);
  EXPECT_EQ(Get32(b, 8), 65u);
  EXPECT_EQ(Get32(b, 12), 0u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(b[16 + i], 0x10 + i);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(&b[32]), 9), "host:name");
  for (int i = 41; i < 64; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(Get64(b, 64), 0x0102030405060708u);
  EXPECT_EQ(Get32(b, 72), 0xffffffffu);
  EXPECT_EQ(Get32(b, 76), 0x11121314u);
  EXPECT_EQ(Get64(b, 80), 0x2122232425262728u);
  EXPECT_EQ(Get32(b, 88), 0x31323334u);
  EXPECT_EQ(Get32(b, 92), 0x41424344u);
  EXPECT_EQ(Get32(b, 96), 0xfffffff8u);
  EXPECT_EQ(Get32(b, 100), 0x51525354u);
  EXPECT_EQ(Get64(b, 104), 0x6162636465666768u);
  EXPECT_EQ(Get32(b, 112), 0xfffffffeu);
  EXPECT_EQ(Get32(b, 116), 0x71727374u);
  EXPECT_EQ(Get32(b, 120), 0x81828384u);
  EXPECT_EQ(Get32(b, 124), 0xfffffffdu);
  EXPECT_EQ(Get64(b, 128), 0x91929394u);
  EXPECT_EQ(Get64(b, 136), 0xa1a2a3a4a5a6a7a8u);
  EXPECT_EQ(Get64(b, 144), 8u);
  EXPECT_EQ(Get64(b, 152), 0xb1b2b3b4b5b6b7b8u);
  EXPECT_EQ(Get32(b, 160), 0xc1c2c3c4u);
  EXPECT_EQ(Get32(b, 164), 0xd1d2d3d4u);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(b[168 + i], 0x80 + i);
  EXPECT_EQ(b[184], 0xe1);
  EXPECT_EQ(b[185], 0xe2);
  EXPECT_EQ(Get16(b, 186), 0xe3e4);
  EXPECT_EQ(Get32(b, 188), 0xfffffff0u);
  EXPECT_EQ(Get64(b, 192), 0xf1f2f3f4f5f6f7f8u);
  EXPECT_EQ(Get64(b, 200), 0x0a0b0c0d0e0f1011u);
  EXPECT_EQ(Get64(b, 208), 0x1213141516171819u);
  EXPECT_EQ(Get32(b, 216), SuperblockChecksum(b, 3));
  EXPECT_EQ(Get32(b, 220), 3u);
  for (int i = 224; i < 256; ++i) EXPECT_EQ(b[i], 0) << i;
  EXPECT_EQ(Get16(b, 256), 7);
  EXPECT_EQ(Get16(b, 258), kRoleFaulty);
  EXPECT_EQ(Get16(b, 260), kRoleSpare);  // padded up to max_dev
  for (size_t i = 262; i < b.size(); ++i) EXPECT_EQ(b[i], 0) << i;
}

TEST(SuperblockEncode, MaxDevIsAtLeastTheRoleCount) {
  Superblock sb = ValidSuperblock();
  sb.max_dev = 0;
  sb.dev_roles.assign(5, 1);
  std::vector<uint8_t> b = EncodeSuperblock(sb);
  EXPECT_EQ(Get32(b, kOffMaxDev), 5u);
  for (size_t i = 256 + 10; i < b.size(); ++i) ASSERT_EQ(b[i], 0) << i;

  sb.max_dev = 1920;
  b = EncodeSuperblock(sb);
  ASSERT_EQ(b.size(), 4096u);
  EXPECT_EQ(Get32(b, kOffMaxDev), 1920u);
  EXPECT_EQ(Get16(b, 256 + 2 * 4), 1);
  EXPECT_EQ(Get16(b, 256 + 2 * 5), kRoleSpare);
  EXPECT_EQ(Get16(b, 4094), kRoleSpare);
}

TEST(SuperblockEncode, SetNameFillsAll32BytesWithoutTerminator) {
  Superblock sb = ValidSuperblock();
  sb.set_name = std::string(32, 'n');
  const std::vector<uint8_t> b = EncodeSuperblock(sb);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(b[i], 'n');
  EXPECT_EQ(Get64(b, 64), sb.ctime);  // did not spill into ctime
  absl::StatusOr<Superblock> got = DecodeSuperblock(b);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->set_name, sb.set_name);
}

// --- Checksum ------------------------------------------------------------

// Values worked out by hand from the md reference §2.5: the 64-bit sum, a
// single fold of the carry, the odd-max_dev tail and sb_csum excluded.
TEST(SuperblockChecksum, HandComputedWithCarryAndOddTail) {
  std::vector<uint8_t> b(258, 0);  // 256 + 2*max_dev, max_dev = 1
  Set32(b, 0, 0xffffffff);
  Set32(b, 4, 0xffffffff);
  Set32(b, 8, 2);
  Set32(b, kOffSbCsum, 0x12345678);  // ignored
  b[256] = 0xcd;                     // the tail: one 16-bit word 0xabcd
  b[257] = 0xab;
  // acc = 2*0xffffffff + 2 + 0xabcd = 0x2_0000abcd; fold -> 0xabcd + 2.
  EXPECT_EQ(SuperblockChecksum(b, 1), 0xabcfu);
  // A byte past 256 + 2*max_dev is not covered.
  b.push_back(0x77);
  b.push_back(0x77);
  EXPECT_EQ(SuperblockChecksum(b, 1), 0xabcfu);
}

TEST(SuperblockChecksum, HandComputedAllOnes) {
  // 63 words of 0xffffffff (sb_csum is the 64th and counts as zero):
  // acc = 63 * 0xffffffff = 0x3e_ffffffc1; fold -> 0xffffffc1 + 0x3e.
  std::vector<uint8_t> b(256, 0xff);
  EXPECT_EQ(SuperblockChecksum(b, 0), 0xffffffffu);
  // max_dev = 2 adds the word 1: acc = 0x3e_ffffffc2; the single fold gives
  // 0xffffffc2 + 0x3e = 0x1_00000000, truncated to 0 (md folds only once).
  b.resize(260, 0);
  b[256] = 1;
  EXPECT_EQ(SuperblockChecksum(b, 2), 0u);
}

TEST(SuperblockChecksum, EncodedValueIsStoredAndVerified) {
  const std::vector<uint8_t> b = EncodeSuperblock(ValidSuperblock());
  // Recompute by hand: sum of the 192 LE words of the 512 used bytes.
  uint64_t acc = 0;
  for (size_t off = 0; off < 512; off += 4) {
    if (off != kOffSbCsum) acc += Get32(b, off);
  }
  const uint32_t want = static_cast<uint32_t>((acc & 0xffffffff) + (acc >> 32));
  EXPECT_EQ(Get32(b, kOffSbCsum), want);
  absl::StatusOr<Superblock> sb = DecodeSuperblock(b);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(sb->sb_csum, want);
}

// --- Round trips -----------------------------------------------------------

Superblock RandomValidSuperblock(std::mt19937_64& rng, uint32_t max_dev) {
  auto u32 = [&] { return static_cast<uint32_t>(rng()); };
  Superblock sb;
  sb.feature_map = u32() & kFeatureAllKnown;
  for (auto& x : sb.set_uuid) x = static_cast<uint8_t>(rng());
  for (auto& x : sb.device_uuid) x = static_cast<uint8_t>(rng());
  const size_t name_len = rng() % 33;
  sb.set_name.clear();
  for (size_t i = 0; i < name_len; ++i) {
    // Any byte, but no trailing NUL (Decode strips those by contract).
    char c = static_cast<char>(rng());
    if (i + 1 == name_len && c == 0) c = 'z';
    sb.set_name.push_back(c);
  }
  sb.ctime = rng();
  sb.level = static_cast<int32_t>(u32());
  sb.layout = u32();
  sb.size = rng();
  sb.chunksize = u32();
  sb.raid_disks = u32();
  sb.bitmap_offset = static_cast<int32_t>(u32());
  sb.new_level = u32();
  sb.reshape_position = rng();
  sb.delta_disks = static_cast<int32_t>(u32());
  sb.new_layout = u32();
  sb.new_chunk = u32();
  sb.new_offset = static_cast<int32_t>(u32() % 2000001) - 1000000;
  // Far enough past the superblock that any new_offset above stays valid.
  sb.data_offset = 2000000 + rng() % (1ull << 40);
  sb.data_size = 10 + rng() % (1ull << 50);
  sb.super_offset = kSb12OffsetSectors;
  sb.recovery_offset = rng();
  sb.dev_number = u32();
  sb.cnt_corrected_read = u32();
  sb.devflags = static_cast<uint8_t>(rng());
  sb.bblog_shift = static_cast<uint8_t>(rng());
  sb.bblog_size = static_cast<uint16_t>(rng());
  sb.bblog_offset = static_cast<int32_t>(u32());
  sb.utime = rng();
  sb.events = rng();
  sb.resync_offset = rng();
  sb.max_dev = max_dev;
  sb.dev_roles.resize(max_dev == 0 ? 0 : rng() % (max_dev + 1));
  for (auto& r : sb.dev_roles) r = static_cast<uint16_t>(rng());
  return sb;
}

TEST(SuperblockRoundTrip, RandomFieldsManyMaxDev) {
  std::mt19937_64 rng(20240601);
  const uint32_t max_devs[] = {0,   1,   2,   3,   5,    127, 128,
                               129, 255, 384, 511, 1919, 1920};
  for (uint32_t max_dev : max_devs) {
    for (int iter = 0; iter < 25; ++iter) {
      SCOPED_TRACE(absl::StrFormat("max_dev %u iter %d", max_dev, iter));
      const Superblock want = RandomValidSuperblock(rng, max_dev);
      const std::vector<uint8_t> b = EncodeSuperblock(want);
      ASSERT_EQ(b.size(), kSbBlockBytes);
      absl::StatusOr<Superblock> got = DecodeSuperblock(b);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectSameSuperblock(want, *got);
      EXPECT_EQ(got->sb_csum, Get32(b, kOffSbCsum));
      // Re-encoding the decoded value reproduces the block exactly.
      EXPECT_EQ(EncodeSuperblock(*got), b);
    }
  }
}

TEST(SuperblockRoundTrip, OddMaxDevTailIsChecksummed) {
  for (uint32_t max_dev : {1u, 3u, 129u, 1919u}) {
    SCOPED_TRACE(max_dev);
    Superblock sb = ValidSuperblock();
    sb.max_dev = max_dev;
    sb.dev_roles.resize(std::min<size_t>(sb.dev_roles.size(), max_dev));
    std::vector<uint8_t> b = EncodeSuperblock(sb);
    ASSERT_TRUE(DecodeSuperblock(b).ok());
    // Corrupt only the last role (the 16-bit tail): the checksum must notice.
    b[256 + 2 * (max_dev - 1)] ^= 0x01;
    ExpectRejected(b, absl::StatusCode::kDataLoss, "bad superblock checksum");
  }
}

TEST(SuperblockDecode, StripsTrailingNulsOnly) {
  Superblock sb = ValidSuperblock();
  std::vector<uint8_t> b = EncodeSuperblock(sb);
  // "a\0b" followed by padding: the inner NUL is data, the rest is padding.
  for (int i = 32; i < 64; ++i) b[i] = 0;
  b[32] = 'a';
  b[34] = 'b';
  FixChecksum(b);
  absl::StatusOr<Superblock> got = DecodeSuperblock(b);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->set_name, std::string("a\0b", 3));
}

TEST(SuperblockDecode, IgnoresBytesPastTheRolesTable) {
  std::vector<uint8_t> b = EncodeSuperblock(ValidSuperblock());
  for (size_t i = 512; i < b.size(); ++i) b[i] = 0x5a;
  EXPECT_TRUE(DecodeSuperblock(b).ok());
  b.resize(512);  // exactly 256 + 2*max_dev is enough
  EXPECT_TRUE(DecodeSuperblock(b).ok());
}

TEST(SuperblockDecode, HonoursExpectedSuperOffset) {
  // A 1.1-style superblock at sector 0, data right after it.
  Superblock sb = ValidSuperblock();
  sb.super_offset = 0;
  sb.data_offset = 1;
  const std::vector<uint8_t> b = EncodeSuperblock(sb);
  EXPECT_TRUE(DecodeSuperblock(b, 0).ok());
  ExpectRejected(b, absl::StatusCode::kDataLoss,
                 "super_offset 0 does not match where it was read (sector 8)");
}

// --- Rejection of each corrupt field ---------------------------------------

class SuperblockReject : public ::testing::Test {
 protected:
  std::vector<uint8_t> b_ = EncodeSuperblock(ValidSuperblock());
};

TEST_F(SuperblockReject, BadMagic) {
  Set32(b_, 0, 0);
  FixChecksum(b_);
  ExpectRejected(b_, absl::StatusCode::kDataLoss,
                 "not an md superblock: magic 0x00000000 (want 0xa92b4efc)");
  Set32(b_, 0, 0xfc4e2ba9);  // byte-swapped: a big-endian writer
  ExpectRejected(b_, absl::StatusCode::kDataLoss, "magic 0xfc4e2ba9");
}

TEST_F(SuperblockReject, MajorVersion) {
  for (uint32_t v : {0u, 2u, 0x01000000u}) {
    Set32(b_, 4, v);
    FixChecksum(b_);
    ExpectRejected(b_, absl::StatusCode::kUnimplemented,
                   absl::StrFormat("major_version %u (want 1): foreign or "
                                   "newer md",
                                   v));
  }
}

TEST_F(SuperblockReject, EachUnknownFeatureBit) {
  for (int bit = 13; bit < 32; ++bit) {
    const uint32_t unknown = 1u << bit;
    const uint32_t map = unknown | kFeatureBitmapOffset;
    Set32(b_, kOffFeatureMap, map);
    FixChecksum(b_);
    ExpectRejected(b_, absl::StatusCode::kUnimplemented,
                   absl::StrFormat("unknown feature bits 0x%x in feature_map "
                                   "0x%x: foreign or newer md",
                                   unknown, map));
  }
}

TEST_F(SuperblockReject, EveryKnownFeatureBitIsAccepted) {
  for (int bit = 0; bit < 13; ++bit) {
    Set32(b_, kOffFeatureMap, 1u << bit);
    FixChecksum(b_);
    absl::StatusOr<Superblock> sb = DecodeSuperblock(b_);
    ASSERT_TRUE(sb.ok()) << "bit " << bit << ": " << sb.status();
    EXPECT_EQ(sb->feature_map, 1u << bit);
  }
}

// md_p.h's union at byte 96: `struct { __le16 offset; __le16 size; } ppl`
// in place of bitmap_offset when a PPL feature bit is set.
TEST(SuperblockPpl, OffsetAndSizeLandInTheBitmapUnion) {
  Superblock sb = ValidSuperblock();
  sb.feature_map = kFeaturePpl;
  sb.set_ppl(8, 2048);
  const std::vector<uint8_t> b = EncodeSuperblock(sb);
  EXPECT_EQ(Get16(b, 96), 8);
  EXPECT_EQ(Get16(b, 98), 2048);
  absl::StatusOr<Superblock> got = DecodeSuperblock(b);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->has_ppl());
  EXPECT_EQ(got->ppl_offset(), 8);
  EXPECT_EQ(got->ppl_size(), 2048);
  EXPECT_TRUE(CheckFeatureCombination(*got).ok());
}

TEST(SuperblockPpl, NegativeOffsetIsSigned16Bit) {
  Superblock sb = ValidSuperblock();
  sb.feature_map = kFeatureMultiplePpls;
  sb.set_ppl(-2056, 2048);  // a 1.0 member keeps its PPL before the sb
  const std::vector<uint8_t> b = EncodeSuperblock(sb);
  EXPECT_EQ(Get16(b, 96), 0x10000 - 2056);
  absl::StatusOr<Superblock> got = DecodeSuperblock(b);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->ppl_offset(), -2056);
  EXPECT_EQ(got->ppl_size(), 2048);
}

TEST(SuperblockPpl, RoundTripOverManyValues) {
  std::mt19937_64 rng(1024);
  for (int i = 0; i < 200; ++i) {
    const auto off = static_cast<int16_t>(rng());
    const auto size = static_cast<uint16_t>(rng());
    Superblock sb = ValidSuperblock();
    sb.feature_map = kFeaturePpl;
    sb.set_ppl(off, size);
    EXPECT_EQ(sb.ppl_offset(), off);
    EXPECT_EQ(sb.ppl_size(), size);
    absl::StatusOr<Superblock> got = DecodeSuperblock(EncodeSuperblock(sb));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->ppl_offset(), off);
    EXPECT_EQ(got->ppl_size(), size);
  }
}

TEST(SuperblockPpl, KernelRefusedCombinationsNameFeatureMap) {
  struct Case {
    uint32_t features;
    const char* text;
  };
  const Case cases[] = {
      {kFeaturePpl | kFeatureBitmapOffset, "combines PPL with a bitmap"},
      {kFeaturePpl | kFeatureJournal,
       "combines PPL with a bitmap or a journal"},
      {kFeatureMultiplePpls | kFeatureBitmapOffset, "combines PPL"},
      {kFeaturePpl | kFeatureMultiplePpls, "both PPL and MULTIPLE_PPLS"},
  };
  for (const Case& c : cases) {
    Superblock sb = ValidSuperblock();
    sb.feature_map = c.features;
    const absl::Status st = CheckFeatureCombination(sb);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << c.features;
    EXPECT_THAT(st.message(), HasSubstr("feature_map"));
    EXPECT_THAT(st.message(), HasSubstr(c.text));
  }
  for (uint32_t ok : {0u, kFeaturePpl, kFeatureMultiplePpls,
                      kFeatureBitmapOffset | kFeatureJournal}) {
    Superblock sb = ValidSuperblock();
    sb.feature_map = ok;
    EXPECT_TRUE(CheckFeatureCombination(sb).ok()) << ok;
  }
}

TEST_F(SuperblockReject, Pad0) {
  for (size_t off = 12; off < 16; ++off) {
    std::vector<uint8_t> b = b_;
    b[off] = 1;
    FixChecksum(b);
    ExpectRejected(b, absl::StatusCode::kDataLoss,
                   absl::StrFormat("pad0 (offset 12) is 0x%08x, want 0",
                                   1u << (8 * (off - 12))));
  }
}

TEST_F(SuperblockReject, EachPad3Byte) {
  for (size_t off = 224; off < 256; ++off) {
    std::vector<uint8_t> b = b_;
    b[off] = 0x80;
    FixChecksum(b);
    ExpectRejected(
        b, absl::StatusCode::kDataLoss,
        absl::StrFormat("pad3 byte at offset %u is 0x80, want 0", off));
  }
}

TEST_F(SuperblockReject, Checksum) {
  const uint32_t good = Get32(b_, kOffSbCsum);
  Set32(b_, kOffSbCsum, good + 1);
  ExpectRejected(b_, absl::StatusCode::kDataLoss,
                 absl::StrFormat("bad superblock checksum: stored 0x%08x, "
                                 "computed 0x%08x",
                                 good + 1, good));
  // A corrupt payload byte with the old checksum is caught too.
  Set32(b_, kOffSbCsum, good);
  b_[200] ^= 0x40;  // events
  ExpectRejected(b_, absl::StatusCode::kDataLoss, "bad superblock checksum");
}

TEST_F(SuperblockReject, SuperOffsetMismatch) {
  Set64(b_, 144, 0);
  FixChecksum(b_);
  ExpectRejected(b_, absl::StatusCode::kDataLoss,
                 "super_offset 0 does not match where it was read (sector 8)");
}

TEST_F(SuperblockReject, TinyDataSize) {
  for (uint64_t size : {0ull, 9ull}) {
    Set64(b_, 136, size);
    FixChecksum(b_);
    ExpectRejected(
        b_, absl::StatusCode::kDataLoss,
        absl::StrFormat("data_size %u sectors is below the minimum 10", size));
  }
  Set64(b_, 136, 10);
  FixChecksum(b_);
  EXPECT_TRUE(DecodeSuperblock(b_).ok());
}

TEST_F(SuperblockReject, DataOffsetInsideSuperblock) {
  // max_dev 128: 512 bytes = sector 8 only, so the superblock ends at 9.
  Set64(b_, kOffDataOffset, 8);
  FixChecksum(b_);
  ExpectRejected(b_, absl::StatusCode::kDataLoss,
                 "data_offset 8 lies inside the superblock (which ends at "
                 "sector 9)");
  Set64(b_, kOffDataOffset, 9);
  FixChecksum(b_);
  EXPECT_TRUE(DecodeSuperblock(b_).ok());
}

TEST(SuperblockRejectBounds, DataOffsetRoundsPartialSectorUp) {
  // max_dev 129: 514 bytes spill into sector 9, so data may start at 10.
  Superblock sb = ValidSuperblock();
  sb.max_dev = 129;
  sb.data_offset = 9;
  ExpectRejected(EncodeSuperblock(sb), absl::StatusCode::kDataLoss,
                 "data_offset 9 lies inside the superblock (which ends at "
                 "sector 10)");
  sb.data_offset = 10;
  EXPECT_TRUE(DecodeSuperblock(EncodeSuperblock(sb)).ok());
}

TEST(SuperblockRejectBounds, NewOffsetInsideSuperblock) {
  Superblock sb = ValidSuperblock();
  sb.feature_map = kFeatureNewOffset | kFeatureReshapeActive;
  sb.data_offset = 4096;
  sb.new_offset = -4088;  // new data start 8, inside the superblock
  ExpectRejected(EncodeSuperblock(sb), absl::StatusCode::kDataLoss,
                 "data_offset + new_offset (4096 + -4088) lies inside the "
                 "superblock (which ends at sector 9)");
  sb.new_offset = -5000;  // negative start must not wrap into "far away"
  ExpectRejected(EncodeSuperblock(sb), absl::StatusCode::kDataLoss,
                 "(4096 + -5000) lies inside");
  sb.new_offset = -4087;
  EXPECT_TRUE(DecodeSuperblock(EncodeSuperblock(sb)).ok());
  // Without NEW_OFFSET the field is not meaningful and not checked.
  sb.feature_map = 0;
  sb.new_offset = -5000;
  EXPECT_TRUE(DecodeSuperblock(EncodeSuperblock(sb)).ok());
}

TEST_F(SuperblockReject, MaxDevTooBig) {
  // max_dev is checked before the checksum (which it sizes), so the stale
  // checksum does not matter here.
  Set32(b_, kOffMaxDev, 1921);
  ExpectRejected(b_, absl::StatusCode::kDataLoss,
                 "max_dev 1921 exceeds the limit 1920");
  Set32(b_, kOffMaxDev, 0xffffffff);
  ExpectRejected(b_, absl::StatusCode::kDataLoss,
                 "max_dev 4294967295 exceeds the limit 1920");
}

TEST_F(SuperblockReject, TruncatedInput) {
  ExpectRejected({}, absl::StatusCode::kInvalidArgument,
                 "too short: 0 bytes, need at least 256");
  std::vector<uint8_t> b(b_.begin(), b_.begin() + 255);
  ExpectRejected(b, absl::StatusCode::kInvalidArgument,
                 "too short: 255 bytes, need at least 256");
  // Long enough for the fixed part but not for 128 roles.
  b.assign(b_.begin(), b_.begin() + 511);
  ExpectRejected(b, absl::StatusCode::kInvalidArgument,
                 "too short: 511 bytes, need 512 (256 + 2*max_dev 128)");
}

// --- mdadm's data_offset rule ------------------------------------------------

TEST(DefaultDataOffset, ReferenceTable) {
  constexpr uint64_t kGiB = 2 * 1024 * 1024;  // sectors
  EXPECT_EQ(DefaultDataOffsetSectors(1 * kGiB, 1024), 4096u);
  EXPECT_EQ(DefaultDataOffsetSectors(10 * kGiB, 1024), 18432u);
  EXPECT_EQ(DefaultDataOffsetSectors(100 * kGiB, 1024), 133120u);
  EXPECT_EQ(DefaultDataOffsetSectors(128 * kGiB, 1024), 264192u);
  EXPECT_EQ(DefaultDataOffsetSectors(200 * kGiB, 1024), 264192u);
  EXPECT_EQ(DefaultDataOffsetSectors(4096 * kGiB, 1024), 264192u);
}

TEST(DefaultDataOffset, HeadroomNeverBelowTwoChunks) {
  constexpr uint64_t kMiB = 2 * 1024;  // sectors
  // 64 MiB device: 0.1% would be tiny, but two 512 KiB chunks (2048 sectors)
  // are kept: 24 + 8 + 2048 rounds up to 4096.
  EXPECT_EQ(DefaultDataOffsetSectors(64 * kMiB, 1024), 4096u);
  // One sector more per chunk and halving stops a step earlier, at 4096:
  // 24 + 8 + 4096 rounds up to 6144.
  EXPECT_EQ(DefaultDataOffsetSectors(64 * kMiB, 1025), 6144u);
  // Chunk 0 means no lower bound: headroom halves to 128, 24+8+128 -> 2048.
  EXPECT_EQ(DefaultDataOffsetSectors(64 * kMiB, 0), 2048u);
  // Two 64 MiB chunks are the 128 MiB cap, so no halving at all even on a
  // 1 GiB device: 24 + 8 + 262144 -> 264192.
  EXPECT_EQ(DefaultDataOffsetSectors(1024 * kMiB, 131072), 264192u);
}

TEST(DefaultDataOffset, HalvingStopsAtOnePerMille) {
  // headroom * 1024 > device_sectors keeps halving; equality stops it. With
  // chunk 0 only that rule applies. 1 GiB: headroom 2048 -> 2080 -> 4096.
  EXPECT_EQ(DefaultDataOffsetSectors(2048 * 1024, 0), 4096u);
  // One sector less: headroom 1024 -> 24 + 8 + 1024 = 1056 -> 2048.
  EXPECT_EQ(DefaultDataOffsetSectors(2048 * 1024 - 1, 0), 2048u);
  // Devices under 64 KiB get no bitmap space and no headroom.
  EXPECT_EQ(DefaultDataOffsetSectors(100, 0), 2048u);
  EXPECT_EQ(DefaultDataOffsetSectors(0, 0), 2048u);
}

TEST(MdadmBitmapSpace, ChooseBmSpaceBoundaries) {
  constexpr uint64_t kKiB = 2;  // sectors
  constexpr uint64_t kGiB = 1024 * 1024 * kKiB;
  EXPECT_EQ(MdadmBitmapSpaceSectors(0), 0u);
  EXPECT_EQ(MdadmBitmapSpaceSectors(64 * kKiB - 1), 0u);
  EXPECT_EQ(MdadmBitmapSpaceSectors(64 * kKiB), 8u);
  // "devsize - 4K > 8G": 8 GiB + 4 KiB is still 4 KiB, one sector more is
  // 64 KiB.
  EXPECT_EQ(MdadmBitmapSpaceSectors(8 * kGiB + 4 * kKiB), 8u);
  EXPECT_EQ(MdadmBitmapSpaceSectors(8 * kGiB + 4 * kKiB + 1), 128u);
  // "devsize - 64K >= 200G".
  EXPECT_EQ(MdadmBitmapSpaceSectors(200 * kGiB + 64 * kKiB - 1), 128u);
  EXPECT_EQ(MdadmBitmapSpaceSectors(200 * kGiB + 64 * kKiB), 256u);
  EXPECT_EQ(MdadmBitmapSpaceSectors(~0ull), 256u);
}

TEST(DefaultDataOffset, AlignedAndMonotonic) {
  uint64_t prev = 0;
  for (uint64_t dev = 1; dev < (1ull << 40); dev = dev * 3 / 2 + 1) {
    const uint64_t off = DefaultDataOffsetSectors(dev, 1024);
    EXPECT_EQ(off % 2048, 0u) << dev;
    EXPECT_GE(off, prev) << dev;
    EXPECT_LE(off, 264192u) << dev;
    prev = off;
  }
}

// --- FormatUuid --------------------------------------------------------------

TEST(FormatUuid, MdadmStyle) {
  EXPECT_EQ(FormatUuid(ValidSuperblock().set_uuid),
            "01234567:89abcdef:fedcba98:76543210");
  EXPECT_EQ(FormatUuid({}), "00000000:00000000:00000000:00000000");
}

// --- Interop with mdadm and blkid
// ---------------------------------------------

using testutil::HaveTool;
using testutil::ParseExamine;
using testutil::RunCommand;

// "8-4-4-4-12" form of a uuid, bytes in order, as libblkid prints it.
std::string DashedUuid(const std::array<uint8_t, 16>& u) {
  std::string out;
  for (size_t i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    absl::StrAppendFormat(&out, "%02x", u[i]);
  }
  return out;
}

class SuperblockInterop : public ::testing::Test {
 protected:
  static constexpr uint64_t kDeviceSectors = 64 * 1024 * 2;  // 64 MiB

  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "uraid_sb_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << strerror(errno);
    dir_ = tmpl;
    path_ = dir_ + "/member2.img";

    sb_ = ValidSuperblock();
    sb_.data_offset = DefaultDataOffsetSectors(kDeviceSectors, 1024);
    sb_.data_size = kDeviceSectors - sb_.data_offset;
    sb_.size = sb_.data_size / sb_.chunksize * sb_.chunksize;
    WriteMember(sb_);
  }

  // (Re)creates the sparse member image with `sb` encoded at 4 KiB.
  void WriteMember(const Superblock& sb) {
    const std::vector<uint8_t> block = EncodeSuperblock(sb);
    const int fd = open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(ftruncate(fd, kDeviceSectors * 512), 0) << strerror(errno);
    ASSERT_EQ(pwrite(fd, block.data(), block.size(), kSb12OffsetBytes),
              static_cast<ssize_t>(block.size()));
    ASSERT_EQ(close(fd), 0);
  }

  std::map<std::string, std::string> Examine() {
    int status = 0;
    std::optional<std::string> out =
        RunCommand("mdadm --examine '" + path_ + "' 2>&1", &status);
    if (!out.has_value()) return {};
    EXPECT_EQ(status, 0) << *out;
    return ParseExamine(*out);
  }

  void TearDown() override {
    if (!path_.empty()) unlink(path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }

  std::string dir_;
  std::string path_;
  Superblock sb_;
};

TEST_F(SuperblockInterop, MdadmExamineAgrees) {
  if (!HaveTool("mdadm")) GTEST_SKIP() << "mdadm not installed; skipping";
  int status = 0;
  std::optional<std::string> out =
      RunCommand("mdadm --examine '" + path_ + "' 2>&1", &status);
  ASSERT_TRUE(out.has_value());
  ASSERT_EQ(status, 0) << *out;
  const std::map<std::string, std::string> kv = ParseExamine(*out);
  auto field = [&](const std::string& k) {
    auto it = kv.find(k);
    return it == kv.end() ? std::string("<missing>") : it->second;
  };
  SCOPED_TRACE(*out);
  EXPECT_EQ(field("Magic"), "a92b4efc");
  EXPECT_EQ(field("Version"), "1.2");
  EXPECT_EQ(field("Array UUID"), FormatUuid(sb_.set_uuid));
  EXPECT_EQ(field("Device UUID"), FormatUuid(sb_.device_uuid));
  EXPECT_THAT(field("Name"), ::testing::StartsWith("testhost:arr"));
  EXPECT_EQ(field("Raid Level"), "raid5");
  EXPECT_EQ(field("Raid Devices"), "4");
  EXPECT_EQ(field("Layout"), "left-symmetric");
  EXPECT_EQ(field("Chunk Size"), "512K");
  EXPECT_EQ(field("Device Role"), "Active device 2");
  EXPECT_EQ(field("Events"), "5");
  EXPECT_EQ(field("State"), "clean");
  EXPECT_EQ(field("Data Offset"), "4096 sectors");
  EXPECT_EQ(field("Super Offset"), "8 sectors");
  // RAID5 capacity (raid_disks - 1) * size, printed in KiB.
  EXPECT_THAT(field("Array Size"), ::testing::StartsWith(absl::StrFormat(
                                       "%u KiB", (4 - 1) * sb_.size / 2)));
  EXPECT_THAT(field("Avail Dev Size"), ::testing::StartsWith(absl::StrFormat(
                                           "%u sectors", sb_.data_size)));
  EXPECT_EQ(field("Checksum"),
            absl::StrFormat("%x - correct",
                            Get32(EncodeSuperblock(sb_), kOffSbCsum)));
  EXPECT_THAT(field("Array State"), ::testing::StartsWith("AAAA"));
}

TEST_F(SuperblockInterop, MdadmSeesOurCorruptionToo) {
  if (!HaveTool("mdadm")) GTEST_SKIP() << "mdadm not installed; skipping";
  // Flip an events bit on disk: mdadm must call the checksum wrong, which
  // shows the "correct" verdict above is mdadm's own computation.
  const int fd = open(path_.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  uint8_t byte = 0;
  ASSERT_EQ(pread(fd, &byte, 1, kSb12OffsetBytes + 200), 1);
  byte ^= 0x40;
  ASSERT_EQ(pwrite(fd, &byte, 1, kSb12OffsetBytes + 200), 1);
  ASSERT_EQ(close(fd), 0);
  int status = 0;
  std::optional<std::string> out =
      RunCommand("mdadm --examine '" + path_ + "' 2>&1", &status);
  ASSERT_TRUE(out.has_value());
  EXPECT_THAT(ParseExamine(*out)["Checksum"], HasSubstr("expected")) << *out;
}

// The checksum's 16-bit tail (odd max_dev) and the role table, checked by
// mdadm's own implementation rather than ours.
TEST_F(SuperblockInterop, MdadmAgreesOnOddMaxDevChecksum) {
  if (!HaveTool("mdadm")) GTEST_SKIP() << "mdadm not installed; skipping";
  for (uint32_t max_dev : {5u, 129u, 1919u}) {
    SCOPED_TRACE(max_dev);
    // This device sits in the last slot, i.e. in the 16-bit checksum tail.
    Superblock sb = sb_;
    sb.max_dev = max_dev;
    sb.dev_roles.assign(max_dev, kRoleSpare);
    sb.dev_roles[0] = 0;
    sb.dev_roles[1] = 1;
    sb.dev_roles[2] = 2;
    sb.dev_roles[max_dev - 1] = 3;
    sb.dev_number = max_dev - 1;
    sb.data_offset = std::max<uint64_t>(
        sb.data_offset, kSb12OffsetSectors + (256 + 2 * max_dev + 511) / 512);
    WriteMember(sb);
    std::map<std::string, std::string> kv = Examine();
    EXPECT_THAT(kv["Checksum"], HasSubstr("- correct"));
    EXPECT_EQ(kv["Device Role"], "Active device 3");
    EXPECT_THAT(kv["Array State"], ::testing::StartsWith("AAAA "));
  }
}

TEST_F(SuperblockInterop, BlkidIdentifiesRaidMember) {
  if (!HaveTool("blkid")) GTEST_SKIP() << "blkid not installed; skipping";
  int status = 0;
  std::optional<std::string> out =
      RunCommand("blkid -p -o export '" + path_ + "' 2>&1", &status);
  ASSERT_TRUE(out.has_value());
  ASSERT_EQ(status, 0) << *out;
  std::map<std::string, std::string> kv;
  for (absl::string_view line : absl::StrSplit(*out, '\n')) {
    std::pair<std::string, std::string> p = absl::StrSplit(line, '=');
    if (!p.first.empty()) kv[p.first] = p.second;
  }
  SCOPED_TRACE(*out);
  EXPECT_EQ(kv["TYPE"], "linux_raid_member");
  EXPECT_EQ(kv["UUID"], DashedUuid(sb_.set_uuid));
  EXPECT_EQ(kv["UUID_SUB"], DashedUuid(sb_.device_uuid));
  EXPECT_EQ(kv["LABEL"], "testhost:arr");
  EXPECT_EQ(kv["VERSION"], "1.2");
}

}  // namespace
}  // namespace uraid
