// SPDX-License-Identifier: MIT
// Tests for md's PPL header codec (format/ppl_format.h): the CRC-32C
// convention against published vectors and a bitwise reference written
// here, the byte layout against the md reference §6.5, round trips over
// random headers, rejection of truncated, corrupt and foreign headers, and
// the search for the newest unit of a MULTIPLE_PPLS area.

#include "format/ppl_format.h"

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

// --- Independent helpers: the tests do not check the codec against itself.

// Bitwise CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), init and
// final XOR ~0: the value md stores as ~crc32c_le(~0, ...).
uint32_t RefCrc32c(const uint8_t* p, size_t n) {
  uint32_t crc = ~0u;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & -(crc & 1));
  }
  return ~crc;
}

uint32_t Get32(const std::vector<uint8_t>& b, size_t off) {
  return b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) |
         (static_cast<uint32_t>(b[off + 3]) << 24);
}

uint64_t Get64(const std::vector<uint8_t>& b, size_t off) {
  return Get32(b, off) | (static_cast<uint64_t>(Get32(b, off + 4)) << 32);
}

void Set32(std::vector<uint8_t>& b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Recomputes the header checksum (offset 532) the way md does: CRC-32C of
// the 4 KiB header with the checksum field zero.
void FixChecksum(std::vector<uint8_t>& b) {
  Set32(b, 532, 0);
  Set32(b, 532, RefCrc32c(b.data(), 4096));
}

constexpr std::array<uint8_t, 16> kUuid = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
                                           0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98,
                                           0x76, 0x54, 0x32, 0x10};

PplHeader RandomHeader(std::mt19937_64& rng, size_t count) {
  PplHeader h;
  h.signature = static_cast<uint32_t>(rng());
  h.generation = rng();
  h.entries.resize(count);
  for (PplEntry& e : h.entries) {
    e.data_sector = rng();
    e.pp_size = static_cast<uint32_t>(rng());
    e.data_size = static_cast<uint32_t>(rng());
    e.parity_disk = static_cast<uint32_t>(rng());
    e.checksum = static_cast<uint32_t>(rng());
  }
  return h;
}

void ExpectRejected(const std::vector<uint8_t>& b, uint32_t signature,
                    absl::StatusCode code, const std::string& text) {
  absl::StatusOr<PplHeader> h = DecodePplHeader(b, signature);
  ASSERT_FALSE(h.ok()) << "accepted a bad header; want: " << text;
  EXPECT_EQ(h.status().code(), code) << h.status();
  EXPECT_THAT(h.status().message(), HasSubstr(text));
}

// --- The checksum convention -------------------------------------------

TEST(PplCrc32c, PublishedVectors) {
  // The CRC-32C check value and RFC 3720 (iSCSI) B.4's vectors.
  const std::string check = "123456789";
  EXPECT_EQ(
      Crc32c({reinterpret_cast<const uint8_t*>(check.data()), check.size()}),
      0xE3069283u);
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xFF), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<uint8_t>(i);
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(ones), 0x62A8AB43u);
  EXPECT_EQ(Crc32c(inc), 0x46DD794Eu);
  EXPECT_EQ(Crc32c({}), 0u);
}

TEST(PplCrc32c, MatchesBitwiseReferenceOnRandomBuffers) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> b(rng() % 9000);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    ASSERT_EQ(Crc32c(b), RefCrc32c(b.data(), b.size())) << b.size();
  }
}

TEST(PplSignature, IsCrc32cOfTheArrayUuid) {
  EXPECT_EQ(PplSignature(kUuid), RefCrc32c(kUuid.data(), kUuid.size()));
  std::array<uint8_t, 16> other = kUuid;
  other[15] ^= 1;
  EXPECT_NE(PplSignature(other), PplSignature(kUuid));
}

// --- Byte layout ---------------------------------------------------------

TEST(PplEncode, FieldsLandAtMdOffsets) {
  PplHeader h;
  h.signature = 0x11223344;
  h.generation = 0x0102030405060708ull;
  h.entries = {{0x1111222233334444ull, 0x1000, 0x3000, 2, 0xAABBCCDD},
               {0x55, 0, 0x20000, 3, 0}};
  const std::vector<uint8_t> b = EncodePplHeader(h);
  ASSERT_EQ(b.size(), 4096u);
  for (int i = 0; i < 512; ++i) ASSERT_EQ(b[i], 0xFF) << i;
  EXPECT_EQ(Get32(b, 512), 0x11223344u);
  EXPECT_EQ(Get32(b, 516), 0u);  // padding
  EXPECT_EQ(Get64(b, 520), 0x0102030405060708ull);
  EXPECT_EQ(Get32(b, 528), 2u);
  EXPECT_EQ(Get64(b, 536), 0x1111222233334444ull);
  EXPECT_EQ(Get32(b, 544), 0x1000u);
  EXPECT_EQ(Get32(b, 548), 0x3000u);
  EXPECT_EQ(Get32(b, 552), 2u);
  EXPECT_EQ(Get32(b, 556), 0xAABBCCDDu);
  EXPECT_EQ(Get64(b, 560), 0x55u);
  EXPECT_EQ(Get32(b, 572), 0x20000u);
  EXPECT_EQ(Get32(b, 576), 3u);
  for (size_t i = 536 + 2 * 24; i < 4096; ++i) ASSERT_EQ(b[i], 0) << i;
  std::vector<uint8_t> zeroed = b;
  Set32(zeroed, 532, 0);
  EXPECT_EQ(Get32(b, 532), RefCrc32c(zeroed.data(), 4096));
}

// What mdadm's write_init_ppl1 and the kernel's ppl_write_empty_header put
// at the start of a fresh area: 0xFF reserved, the signature, nothing else.
TEST(PplEncode, EmptyHeaderAsMdWritesIt) {
  PplHeader h;
  h.signature = PplSignature(kUuid);
  const std::vector<uint8_t> b = EncodePplHeader(h);
  std::vector<uint8_t> want(4096, 0);
  std::fill_n(want.begin(), 512, 0xFF);
  Set32(want, 512, RefCrc32c(kUuid.data(), 16));
  FixChecksum(want);
  EXPECT_EQ(b, want);
}

TEST(PplEncode, MaxEntriesFillTheHeader) {
  std::mt19937_64 rng(148);
  const PplHeader h = RandomHeader(rng, kPplMaxEntries);
  const std::vector<uint8_t> b = EncodePplHeader(h);
  EXPECT_EQ(Get32(b, 528), 148u);
  // The last entry ends at 536 + 148 * 24 = 4088; 8 zero bytes follow.
  EXPECT_EQ(Get32(b, 536 + 147 * 24 + 20), h.entries.back().checksum);
  for (size_t i = 4088; i < 4096; ++i) EXPECT_EQ(b[i], 0) << i;
}

// --- Round trips -----------------------------------------------------------

TEST(PplRoundTrip, RandomHeaders) {
  std::mt19937_64 rng(20261201);
  for (int iter = 0; iter < 300; ++iter) {
    const size_t count = iter < 149 ? iter : rng() % (kPplMaxEntries + 1);
    const PplHeader want = RandomHeader(rng, count);
    const std::vector<uint8_t> b = EncodePplHeader(want);
    absl::StatusOr<PplHeader> got = DecodePplHeader(b, want.signature);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(*got, want) << iter;
    EXPECT_EQ(EncodePplHeader(*got), b);
  }
}

TEST(PplRoundTrip, DecodeIgnoresBytesPastTheHeader) {
  PplHeader h;
  h.signature = 9;
  std::vector<uint8_t> b = EncodePplHeader(h);
  b.resize(8192, 0xAB);  // partial parity follows
  absl::StatusOr<PplHeader> got = DecodePplHeader(b, 9);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, h);
}

// --- Rejection -----------------------------------------------------------

TEST(PplReject, Truncated) {
  std::vector<uint8_t> b = EncodePplHeader(PplHeader{});
  for (size_t n : {0u, 1u, 512u, 4095u}) {
    ExpectRejected(std::vector<uint8_t>(b.begin(), b.begin() + n), 0,
                   absl::StatusCode::kInvalidArgument,
                   absl::StrFormat("ppl header truncated: %u bytes", n));
  }
}

TEST(PplReject, EveryCorruptByteFailsTheChecksum) {
  std::mt19937_64 rng(3);
  const PplHeader h = RandomHeader(rng, 40);
  const std::vector<uint8_t> good = EncodePplHeader(h);
  for (size_t off = 0; off < 4096; ++off) {
    std::vector<uint8_t> b = good;
    b[off] ^= static_cast<uint8_t>(1u << (off % 8));
    absl::StatusOr<PplHeader> got = DecodePplHeader(b, h.signature);
    ASSERT_FALSE(got.ok()) << "flip at " << off;
    ASSERT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << off;
    ASSERT_THAT(got.status().message(), HasSubstr("ppl header checksum"));
  }
}

TEST(PplReject, NeverWrittenAreaIsNotAHeader) {
  ExpectRejected(std::vector<uint8_t>(4096, 0), 0, absl::StatusCode::kDataLoss,
                 "ppl header checksum: stored 0x00000000");
}

TEST(PplReject, ForeignSignature) {
  PplHeader h;
  h.signature = PplSignature(kUuid);
  h.entries = {{8, 4096, 4096, 1, 0}};
  const std::vector<uint8_t> b = EncodePplHeader(h);
  ExpectRejected(b, h.signature + 1, absl::StatusCode::kFailedPrecondition,
                 absl::StrFormat("ppl header signature 0x%08x is not this "
                                 "array's 0x%08x",
                                 h.signature, h.signature + 1));
}

TEST(PplReject, EntriesCountBeyondTheHeader) {
  for (uint32_t count : {149u, 1000u, 0xFFFFFFFFu}) {
    std::vector<uint8_t> b = EncodePplHeader(PplHeader{});
    Set32(b, 528, count);
    FixChecksum(b);
    ExpectRejected(
        b, 0, absl::StatusCode::kDataLoss,
        absl::StrFormat("entries_count %u exceeds the maximum 148", count));
  }
}

// --- Finding the log in an area --------------------------------------------

// Appends a unit (header + its partial parity bytes) to `area`.
void AppendUnit(std::vector<uint8_t>& area, uint32_t sig, uint64_t gen,
                std::vector<uint32_t> pp_sizes) {
  PplHeader h;
  h.signature = sig;
  h.generation = gen;
  for (uint32_t pp : pp_sizes) h.entries.push_back({gen, pp, pp, 0, 0});
  const std::vector<uint8_t> b = EncodePplHeader(h);
  area.insert(area.end(), b.begin(), b.end());
  area.resize(area.size() + h.PartialParityBytes(), static_cast<uint8_t>(gen));
}

TEST(PplFind, SingleModeReadsOnlyTheFirstHeader) {
  std::vector<uint8_t> area;
  AppendUnit(area, 5, 1, {4096});
  AppendUnit(area, 5, 9, {});
  area.resize(1 << 20);
  absl::StatusOr<PplUnit> u = FindNewestPplHeader(area, 5, false);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->offset_bytes, 0u);
  EXPECT_EQ(u->header.generation, 1u);
}

TEST(PplFind, MultipleModeWalksToTheNewest) {
  std::vector<uint8_t> area;
  AppendUnit(area, 5, 10, {4096, 8192});
  AppendUnit(area, 5, 11, {});
  AppendUnit(area, 5, 12, {512});
  const uint64_t newest_at = 4096 + 12288 + 4096;
  AppendUnit(area, 5, 3, {4096});  // left from before the log wrapped
  area.resize(1 << 20);
  absl::StatusOr<PplUnit> u = FindNewestPplHeader(area, 5, true);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->header.generation, 12u);
  EXPECT_EQ(u->offset_bytes, newest_at);
  EXPECT_EQ(PplEntryDataOffset(*u, 0), newest_at + 4096);
}

TEST(PplFind, MultipleModeStopsAtACorruptOrForeignHeader) {
  for (int bad : {0, 1}) {
    std::vector<uint8_t> area;
    AppendUnit(area, 5, 10, {4096});
    AppendUnit(area, bad ? 6 : 5, 11, {});   // foreign signature
    if (!bad) area[4096 + 4096 + 600] ^= 1;  // corrupt second header
    AppendUnit(area, 5, 12, {});
    area.resize(1 << 20);
    absl::StatusOr<PplUnit> u = FindNewestPplHeader(area, 5, true);
    ASSERT_TRUE(u.ok()) << u.status();
    EXPECT_EQ(u->header.generation, 10u) << bad;
  }
}

TEST(PplFind, FirstHeaderInvalidIsAnError) {
  std::vector<uint8_t> area(1 << 20, 0);
  absl::StatusOr<PplUnit> u = FindNewestPplHeader(area, 5, true);
  EXPECT_EQ(u.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(u.status().message(), HasSubstr("checksum"));
  EXPECT_EQ(
      FindNewestPplHeader(std::vector<uint8_t>(100), 5, false).status().code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(PplFind, EntryDataOffsetsFollowEntryOrder) {
  PplUnit u;
  u.offset_bytes = 8192;
  u.header.entries = {{0, 4096, 0, 0, 0}, {0, 0, 0, 0, 0}, {0, 512, 0, 0, 0}};
  EXPECT_EQ(PplEntryDataOffset(u, 0), 8192u + 4096);
  EXPECT_EQ(PplEntryDataOffset(u, 1), 8192u + 4096 + 4096);
  EXPECT_EQ(PplEntryDataOffset(u, 2), 8192u + 4096 + 4096);
  EXPECT_EQ(u.header.PartialParityBytes(), 4608u);
}

}  // namespace
}  // namespace uraid
