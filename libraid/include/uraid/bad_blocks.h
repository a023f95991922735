// SPDX-License-Identifier: MIT
// File: uraid/bad_blocks.h
//
// Codec for md's bad-block log (md reference §2.11): the list of ranges of
// one member that md (or uraid) could not read or write, kept in
// `bblog_size` sectors at `super_offset + bblog_offset`. Each entry is a
// little-endian u64 `(start << 10) | length`, start and length in units of
// 2^bblog_shift sectors, length 1..512; an all-ones entry ends the list.
// Starts are absolute member sectors (from the start of the device, not of
// the data), as the kernel keeps them. The feature bit BAD_BLOCKS in a
// superblock says the list is not empty; without it md ignores the area.
//
// Pure: bytes in, ranges out. Thread-compatible; no shared state.

#ifndef URAID_BAD_BLOCKS_H_
#define URAID_BAD_BLOCKS_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "uraid/export.h"
#include "uraid/superblock.h"

namespace uraid {

// One recorded range, in absolute member sectors (512 bytes).
struct BadBlock {
  uint64_t sector = 0;
  uint64_t sectors = 0;
  friend bool operator==(const BadBlock&, const BadBlock&) = default;
};

// md's longest entry, in units of 2^shift sectors.
inline constexpr uint64_t kBadBlockMaxUnits = 512;
// The log mdadm reserves at create (bblog_size, sectors): one 4 KiB page,
// 512 entries, as much as the kernel reads.
inline constexpr uint16_t kBadBlockLogSectors = 8;
// The start field's width: 54 bits of units.
inline constexpr uint64_t kBadBlockMaxStartUnits = (uint64_t{1} << 54) - 1;

// Where a member's log lives, from its superblock: byte offset on the
// member and size in bytes, plus the shift. Null when the superblock
// reserves none (bblog_size or bblog_offset zero) or names a place before
// the member's first byte or beyond 2^63 bytes (a corrupt field).
struct BadBlockLogArea {
  uint64_t offset_bytes = 0;
  uint64_t size_bytes = 0;
  uint8_t shift = 0;
};
URAID_EXPORT std::optional<BadBlockLogArea> BadBlockLogAreaOf(
    const Superblock& sb);

// Decodes a log area's bytes: the ranges up to the first all-ones entry (or
// the end of `bytes`; a partial entry at the end is ignored), in the order
// stored, converted to sectors; entries after the terminator are ignored,
// as the kernel does. Neither sorted nor disjoint is required. An entry of
// length 0 or over 512 units (md never writes either), or one whose start
// or end in sectors does not fit 64 bits, is corrupt: DataLossError naming
// the entry's index and raw value.
URAID_EXPORT absl::StatusOr<std::vector<BadBlock>> DecodeBadBlockLog(
    std::span<const uint8_t> bytes, uint8_t shift);

// How many entries `blocks` take on disk (a range longer than 512 units
// takes several), or InvalidArgument naming the range when one is empty,
// not aligned to 2^shift sectors, ends past 2^64 sectors or starts an
// entry past the 54-bit start field, or when shift > 63.
URAID_EXPORT absl::StatusOr<size_t> BadBlockLogEntries(
    std::span<const BadBlock> blocks, uint8_t shift);

// Encodes `blocks` (sorted by sector, not overlapping; adjacent ranges are
// kept apart) into `size_bytes` bytes: the entries, a range longer than
// 512 units split into 512-unit entries and the rest, then all-ones to the
// end, as the kernel fills its page. InvalidArgument for what
// BadBlockLogEntries refuses and when ranges are unsorted or overlap;
// ResourceExhausted when the entries (plus nothing: a full area needs no
// terminator) do not fit.
URAID_EXPORT absl::StatusOr<std::vector<uint8_t>> EncodeBadBlockLog(
    std::span<const BadBlock> blocks, uint8_t shift, size_t size_bytes);

}  // namespace uraid

#endif  // URAID_BAD_BLOCKS_H_
