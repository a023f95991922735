// SPDX-License-Identifier: MIT
// md's bad-block log codec (see uraid/bad_blocks.h and the md reference
// §2.11).
//
// The on-disk entry is the kernel's (md.c, super_1_load and super_1_sync):
// a little-endian u64 holding the start in its top 54 bits and the length
// in its low 10, both in units of 2^bblog_shift sectors. The kernel writes
// at most 512 units per entry (BB_MAX_LEN) and fills the rest of its page
// with 0xff, and stops reading at the first all-ones entry.

#include "uraid/bad_blocks.h"

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/le_bytes.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

constexpr size_t kEntryBytes = 8;
constexpr int kLengthBits = 10;
constexpr uint64_t kLengthMask = (uint64_t{1} << kLengthBits) - 1;
constexpr uint64_t kEndOfList = ~uint64_t{0};
// A unit of 2^64 sectors or more cannot be named in sectors.
constexpr int kMaxShift = 63;

static_assert(kBadBlockMaxUnits <= kLengthMask);
static_assert(kBadBlockMaxStartUnits == kEndOfList >> kLengthBits);

// `v << shift`, or false when bits fall off the top.
bool ShiftLeft(uint64_t v, int shift, uint64_t& out) {
  if (v == 0) {
    out = 0;
    return true;
  }
  if (shift > kMaxShift || (shift > 0 && (v >> (64 - shift)) != 0)) {
    return false;
  }
  out = v << shift;
  return true;
}

// Checks one range for encoding and returns how many entries it takes.
absl::StatusOr<uint64_t> RangeEntries(const BadBlock& b, size_t index,
                                      uint8_t shift) {
  if (shift > kMaxShift) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad-block shift %d: units of 2^%d sectors are not representable "
        "(at most 2^%d)",
        shift, shift, kMaxShift));
  }
  const uint64_t unit = uint64_t{1} << shift;
  if (b.sectors == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad block %d (sector %d) is empty: 0 sectors", index, b.sector));
  }
  if (b.sector % unit != 0 || b.sectors % unit != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad block %d (sector %d, %d sectors) is not aligned to the log's "
        "unit of %d sectors (shift %d)",
        index, b.sector, b.sectors, unit, shift));
  }
  if (b.sector > kEndOfList - b.sectors) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bad block %d (sector %d, %d sectors) ends past the "
                        "last sector 2^64 - 1",
                        index, b.sector, b.sectors));
  }
  const uint64_t start = b.sector >> shift;
  const uint64_t units = b.sectors >> shift;
  const uint64_t entries =
      units / kBadBlockMaxUnits + (units % kBadBlockMaxUnits != 0);
  // The last entry starts at most 512 units before the end.
  const uint64_t last_start = start + (entries - 1) * kBadBlockMaxUnits;
  if (last_start > kBadBlockMaxStartUnits) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bad block %d (sector %d, %d sectors) reaches unit %d, past the "
        "54-bit start field's %d (shift %d)",
        index, b.sector, b.sectors, last_start, kBadBlockMaxStartUnits, shift));
  }
  return entries;
}

}  // namespace

std::optional<BadBlockLogArea> BadBlockLogAreaOf(const Superblock& sb) {
  if (sb.bblog_size == 0 || sb.bblog_offset == 0) return std::nullopt;
  // super_offset is a sector number, far below 2^54 on any real member; a
  // larger one (a corrupt field) has no area.
  constexpr uint64_t kMaxSectorNumber = ~uint64_t{0} / kSectorBytes / 2;
  if (sb.super_offset > kMaxSectorNumber) return std::nullopt;
  const int64_t start =
      static_cast<int64_t>(sb.super_offset) + int64_t{sb.bblog_offset};
  if (start < 0) return std::nullopt;
  BadBlockLogArea area;
  area.offset_bytes = static_cast<uint64_t>(start) * kSectorBytes;
  area.size_bytes = uint64_t{sb.bblog_size} * kSectorBytes;
  area.shift = sb.bblog_shift;
  return area;
}

absl::StatusOr<std::vector<BadBlock>> DecodeBadBlockLog(
    std::span<const uint8_t> bytes, uint8_t shift) {
  std::vector<BadBlock> out;
  for (size_t i = 0; i < bytes.size() / kEntryBytes; ++i) {
    const uint64_t raw = le::Get64(bytes, i * kEntryBytes);
    if (raw == kEndOfList) break;
    const uint64_t units = raw & kLengthMask;
    const uint64_t start = raw >> kLengthBits;
    if (units == 0 || units > kBadBlockMaxUnits) {
      return absl::DataLossError(absl::StrFormat(
          "bad-block log entry %d (0x%016x): length %d units, md writes "
          "1..%d",
          i, raw, units, kBadBlockMaxUnits));
    }
    BadBlock b;
    if (!ShiftLeft(start, shift, b.sector) ||
        !ShiftLeft(units, shift, b.sectors) ||
        b.sector > kEndOfList - b.sectors) {
      return absl::DataLossError(absl::StrFormat(
          "bad-block log entry %d (0x%016x): start %d + %d units of 2^%d "
          "sectors ends past the last sector 2^64 - 1",
          i, raw, start, units, shift));
    }
    out.push_back(b);
  }
  return out;
}

absl::StatusOr<size_t> BadBlockLogEntries(std::span<const BadBlock> blocks,
                                          uint8_t shift) {
  uint64_t total = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    absl::StatusOr<uint64_t> n = RangeEntries(blocks[i], i, shift);
    if (!n.ok()) return n.status();
    total += *n;
  }
  return static_cast<size_t>(total);
}

absl::StatusOr<std::vector<uint8_t>> EncodeBadBlockLog(
    std::span<const BadBlock> blocks, uint8_t shift, size_t size_bytes) {
  absl::StatusOr<size_t> entries = BadBlockLogEntries(blocks, shift);
  if (!entries.ok()) return entries.status();
  for (size_t i = 1; i < blocks.size(); ++i) {
    const BadBlock& prev = blocks[i - 1];
    if (blocks[i].sector < prev.sector + prev.sectors) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bad block %d (sector %d, %d sectors) %s bad block %d (sector %d, "
          "%d sectors): the list must be sorted and not overlap",
          i, blocks[i].sector, blocks[i].sectors,
          blocks[i].sector < prev.sector ? "comes before" : "overlaps", i - 1,
          prev.sector, prev.sectors));
    }
  }
  const size_t capacity = size_bytes / kEntryBytes;
  if (*entries > capacity) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%d bad blocks take %d log entries; a log of %d bytes holds %d",
        blocks.size(), *entries, size_bytes, capacity));
  }
  std::vector<uint8_t> out(size_bytes, 0xFF);
  size_t at = 0;
  for (const BadBlock& b : blocks) {
    uint64_t start = b.sector >> shift;
    uint64_t units = b.sectors >> shift;
    while (units > 0) {
      const uint64_t len =
          units < kBadBlockMaxUnits ? units : kBadBlockMaxUnits;
      le::Put64(out, at, (start << kLengthBits) | len);
      at += kEntryBytes;
      start += len;
      units -= len;
    }
  }
  return out;
}

}  // namespace uraid
