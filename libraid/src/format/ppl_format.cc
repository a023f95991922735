// SPDX-License-Identifier: MIT
// md PPL header codec (see format/ppl_format.h and the md reference §6.5).
//
// Fields are packed byte by byte, little-endian, at the fixed offsets
// below; the offsets are the on-disk format and must never change.

#include "format/ppl_format.h"

#include <isa-l/crc.h>

#include <algorithm>
#include <cassert>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/le_bytes.h"

namespace uraid {
namespace {

using le::Get32;
using le::Get64;
using le::Put32;
using le::Put64;

constexpr size_t kOffSignature = 512;
constexpr size_t kOffPadding = 516;  // md's le32 padding, written as zero
constexpr size_t kOffGeneration = 520;
static_assert(kOffPadding + 4 == kOffGeneration);
constexpr size_t kOffEntriesCount = 528;
constexpr size_t kOffChecksum = 532;
constexpr size_t kOffEntries = 536;
// Within an entry.
constexpr size_t kEntDataSector = 0;
constexpr size_t kEntPpSize = 8;
constexpr size_t kEntDataSize = 12;
constexpr size_t kEntParityDisk = 16;
constexpr size_t kEntChecksum = 20;

static_assert(kOffSignature == kPplHeaderReservedBytes);
static_assert(kOffEntries + kPplMaxEntries * kPplEntryBytes <= kPplHeaderBytes);
// md's PPL_HDR_MAX_ENTRIES: the space after the fixed fields, in entries.
static_assert(kPplMaxEntries ==
              (kPplHeaderBytes - kPplHeaderReservedBytes - 4 * 4 - 8) /
                  kPplEntryBytes);

// Crc32c over the header with its checksum field read as zero.
uint32_t HeaderChecksum(std::span<const uint8_t> b) {
  std::array<uint8_t, kPplHeaderBytes> copy;
  std::copy_n(b.begin(), kPplHeaderBytes, copy.begin());
  std::fill_n(copy.begin() + kOffChecksum, 4, 0);
  return Crc32c(copy);
}

}  // namespace

uint64_t PplHeader::PartialParityBytes() const {
  uint64_t total = 0;
  for (const PplEntry& e : entries) total += e.pp_size;
  return total;
}

uint32_t Crc32c(std::span<const uint8_t> bytes) {
  // ISA-L's crc32_iscsi is the raw register (the kernel's crc32c_le); the
  // standard value inverts it. It takes an int length, hence the loop.
  uint32_t crc = ~0u;
  size_t done = 0;
  while (done < bytes.size()) {
    const size_t n = std::min<size_t>(bytes.size() - done, 1u << 30);
    crc = crc32_iscsi(const_cast<unsigned char*>(bytes.data() + done),
                      static_cast<int>(n), crc);
    done += n;
  }
  return ~crc;
}

uint32_t PplSignature(const std::array<uint8_t, 16>& set_uuid) {
  return Crc32c(set_uuid);
}

void EncodePplHeaderTo(const PplHeader& header, std::span<uint8_t> out) {
  assert(header.entries.size() <= kPplMaxEntries);
  assert(out.size() >= kPplHeaderBytes);
  const size_t count = std::min(header.entries.size(), kPplMaxEntries);
  std::span<uint8_t> b = out.first(kPplHeaderBytes);
  std::fill_n(b.begin(), kPplHeaderReservedBytes, 0xFF);
  std::fill(b.begin() + kPplHeaderReservedBytes, b.end(), 0);
  Put32(b, kOffSignature, header.signature);
  Put64(b, kOffGeneration, header.generation);
  Put32(b, kOffEntriesCount, static_cast<uint32_t>(count));
  for (size_t i = 0; i < count; ++i) {
    const PplEntry& e = header.entries[i];
    const size_t off = kOffEntries + i * kPplEntryBytes;
    Put64(b, off + kEntDataSector, e.data_sector);
    Put32(b, off + kEntPpSize, e.pp_size);
    Put32(b, off + kEntDataSize, e.data_size);
    Put32(b, off + kEntParityDisk, e.parity_disk);
    Put32(b, off + kEntChecksum, e.checksum);
  }
  // The checksum field is still zero: the sum is over the header as is.
  Put32(b, kOffChecksum, Crc32c(b));
}

std::vector<uint8_t> EncodePplHeader(const PplHeader& header) {
  std::vector<uint8_t> b(kPplHeaderBytes);
  EncodePplHeaderTo(header, b);
  return b;
}

absl::StatusOr<PplHeader> DecodePplHeader(std::span<const uint8_t> bytes,
                                          uint32_t expected_signature) {
  if (bytes.size() < kPplHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ppl header truncated: %u bytes, need %u", bytes.size(),
                        kPplHeaderBytes));
  }
  const uint32_t stored = Get32(bytes, kOffChecksum);
  const uint32_t computed = HeaderChecksum(bytes);
  if (stored != computed) {
    return absl::DataLossError(
        absl::StrFormat("ppl header checksum: stored 0x%08x, computed 0x%08x",
                        stored, computed));
  }
  PplHeader h;
  h.signature = Get32(bytes, kOffSignature);
  if (h.signature != expected_signature) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "ppl header signature 0x%08x is not this array's 0x%08x (a foreign "
        "log)",
        h.signature, expected_signature));
  }
  const uint32_t count = Get32(bytes, kOffEntriesCount);
  if (count > kPplMaxEntries) {
    return absl::DataLossError(
        absl::StrFormat("ppl header entries_count %u exceeds the maximum %u",
                        count, kPplMaxEntries));
  }
  h.generation = Get64(bytes, kOffGeneration);
  h.entries.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t off = kOffEntries + i * kPplEntryBytes;
    PplEntry& e = h.entries[i];
    e.data_sector = Get64(bytes, off + kEntDataSector);
    e.pp_size = Get32(bytes, off + kEntPpSize);
    e.data_size = Get32(bytes, off + kEntDataSize);
    e.parity_disk = Get32(bytes, off + kEntParityDisk);
    e.checksum = Get32(bytes, off + kEntChecksum);
  }
  return h;
}

absl::StatusOr<PplUnit> FindNewestPplHeader(std::span<const uint8_t> area,
                                            uint32_t expected_signature,
                                            bool multiple) {
  if (area.size() < kPplHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("ppl area truncated: %u bytes, need at least %u",
                        area.size(), kPplHeaderBytes));
  }
  absl::StatusOr<PplHeader> first =
      DecodePplHeader(area.first(kPplHeaderBytes), expected_signature);
  if (!first.ok()) return first.status();
  PplUnit newest{0, *std::move(first)};
  if (!multiple) return newest;
  uint64_t next = kPplHeaderBytes + newest.header.PartialParityBytes();
  while (next + kPplHeaderBytes <= area.size()) {
    absl::StatusOr<PplHeader> h = DecodePplHeader(
        area.subspan(next, kPplHeaderBytes), expected_signature);
    // The first invalid or older header ends the walk: what precedes it
    // was written last.
    if (!h.ok() || h->generation <= newest.header.generation) break;
    newest = PplUnit{next, *std::move(h)};
    next += kPplHeaderBytes + newest.header.PartialParityBytes();
  }
  return newest;
}

uint64_t PplEntryDataOffset(const PplUnit& unit, size_t index) {
  assert(index < unit.header.entries.size());
  uint64_t off = unit.offset_bytes + kPplHeaderBytes;
  for (size_t i = 0; i < index && i < unit.header.entries.size(); ++i) {
    off += unit.header.entries[i].pp_size;
  }
  return off;
}

}  // namespace uraid
