// SPDX-License-Identifier: MIT
// File: format/ppl_format.h
//
// Codec for md's partial parity log (PPL) area (md reference §6.5; the
// kernel's `struct ppl_header` in md_p.h). Pure: bytes in, structs out; no
// member I/O. Thread-compatible; no shared state.
//
// A RAID5 member with the PPL feature keeps a PPL area at
// `super_offset + ppl.offset` sectors, `ppl.size` sectors long (mdadm: +8
// sectors, 2048 sectors = 1 MiB). The area starts with a 4 KiB header:
//
//   off   size  field
//     0    512  reserved, filled with 0xFF
//   512      4  signature      ~crc32c_le(~0, set_uuid[16]) for native md
//   516      4  padding        zero
//   520      8  generation     bumped by every header the writer writes
//   528      4  entries_count  <= 148
//   532      4  checksum       ~crc32c_le(~0, header with checksum = 0)
//   536  24*148 entries:
//                 +0  u64 data_sector  array sector (512 B units, native md)
//                 +8  u32 pp_size      bytes of partial parity
//                +12  u32 data_size    bytes of data the entry covers
//                +16  u32 parity_disk  raid slot holding the row's parity
//                +20  u32 checksum     ~crc32c_le(~0, the partial parity)
//  4088      8  zero
//
// followed by each entry's partial parity, in entry order. All fields are
// little-endian. md's `~crc32c_le(~0, ...)` is the standard CRC-32C
// (Castagnoli, reflected, init and final XOR ~0): Crc32c() below.
//
// With the MULTIPLE_PPLS feature the area holds several such units one
// after another (header, then its partial parity, then the next header);
// the newest valid one, by generation, is the log (FindNewestPplHeader).

#ifndef URAID_SRC_FORMAT_PPL_FORMAT_H_
#define URAID_SRC_FORMAT_PPL_FORMAT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace uraid {

inline constexpr size_t kPplHeaderBytes = 4096;
inline constexpr size_t kPplHeaderReservedBytes = 512;
inline constexpr size_t kPplEntryBytes = 24;
inline constexpr size_t kPplMaxEntries = 148;
// mdadm's placement for a 1.2 member: the area right after the superblock's
// 4 KiB, 1 MiB long (both in sectors).
inline constexpr int16_t kPplDefaultOffsetSectors = 8;
inline constexpr uint16_t kPplDefaultSizeSectors = 2048;
// The kernel's per-unit space in MULTIPLE_PPLS mode (PPL_SPACE_SIZE).
inline constexpr size_t kPplMultiSpaceBytes = 128 * 1024;

// One logged write (one rectangle of a row: consecutive data slots from the
// one holding data_sector, the same member sectors on each).
struct PplEntry {
  uint64_t data_sector = 0;  // array sector of the first modified data
  uint32_t pp_size = 0;      // bytes; 0 for a full-row write
  uint32_t data_size = 0;    // bytes of data covered, over all data slots
  uint32_t parity_disk = 0;  // raid slot of the row's parity
  uint32_t checksum = 0;     // Crc32c of the entry's partial parity

  bool operator==(const PplEntry&) const = default;
};

struct PplHeader {
  uint32_t signature = 0;
  uint64_t generation = 0;
  std::vector<PplEntry> entries;  // at most kPplMaxEntries

  bool operator==(const PplHeader&) const = default;
  // Bytes of partial parity that follow the header.
  uint64_t PartialParityBytes() const;
};

// Standard CRC-32C of `bytes` (md's ~crc32c_le(~0, bytes)).
uint32_t Crc32c(std::span<const uint8_t> bytes);

// The signature native md writes for an array: Crc32c(set_uuid).
uint32_t PplSignature(const std::array<uint8_t, 16>& set_uuid);

// Serialises into kPplHeaderBytes bytes: 0xFF reserved, zero padding and
// tail, a fresh checksum. REQUIRES: entries.size() <= kPplMaxEntries.
std::vector<uint8_t> EncodePplHeader(const PplHeader& header);
// The same into the first kPplHeaderBytes of `out` (the rest untouched),
// for a writer that sends header and partial parity in one buffer.
// REQUIRES: out.size() >= kPplHeaderBytes, and as EncodePplHeader.
void EncodePplHeaderTo(const PplHeader& header, std::span<uint8_t> out);

// Parses and checks one header as the kernel's ppl_load does: length, then
// checksum, then signature, then entries_count. Errors name the field:
// InvalidArgument for a short buffer, DataLoss for a bad checksum or
// entries_count, FailedPrecondition for a foreign signature (another
// array's log: md ignores it and writes a fresh one).
absl::StatusOr<PplHeader> DecodePplHeader(std::span<const uint8_t> bytes,
                                          uint32_t expected_signature);

// Where a decoded header sits in its area and what it holds.
struct PplUnit {
  uint64_t offset_bytes = 0;  // from the start of the PPL area
  PplHeader header;
};

// Finds the log in a whole PPL area. Single-PPL mode (multiple = false):
// the header at offset 0. MULTIPLE_PPLS: walks header -> partial parity ->
// next header while headers stay valid and generations rise, and returns
// the last one, as the kernel's ppl_load_distributed does. NotFound when no
// valid header starts the area; otherwise DecodePplHeader's error for the
// first header.
absl::StatusOr<PplUnit> FindNewestPplHeader(std::span<const uint8_t> area,
                                            uint32_t expected_signature,
                                            bool multiple);

// Bytes of the entry's partial parity in `area`, for a unit found at
// `unit.offset_bytes`: where entry `index`'s partial parity starts.
// REQUIRES: index < unit.header.entries.size().
uint64_t PplEntryDataOffset(const PplUnit& unit, size_t index);

}  // namespace uraid

#endif  // URAID_SRC_FORMAT_PPL_FORMAT_H_
