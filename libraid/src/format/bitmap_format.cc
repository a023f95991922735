// SPDX-License-Identifier: MIT
// md's on-disk write-intent bitmap: the bitmap_super_t codec, the area's
// geometry and the checks against the array (see uraid/bitmap.h and the md
// reference §3).
//
// Fields are packed byte by byte as little-endian at fixed offsets, so the
// code does not depend on host endianness or struct layout. The offsets
// are the on-disk format and must never change.

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/le_bytes.h"
#include "base/status_macros.h"
#include "uraid/bitmap.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

constexpr size_t kOffBitmapMagic = 0;
constexpr size_t kOffClusterName = 72;
constexpr size_t kClusterNameBytes = 64;
// The rest of the 256-byte header, from 136 on, is padding.
static_assert(kOffClusterName + kClusterNameBytes < kBitmapSuperBytes);

// bitmap_super_t's fields at their byte offsets (md reference §3.2), one
// list for both directions (le::Writer encodes, le::Reader decodes). The
// magic is not a field of BitmapSuper: Encode writes it, Decode checks it.
template <typename Io, typename Sb>
void BitmapSuperFields(Io& io, Sb& sb) {
  io.U32(4, sb.version);
  io.Bytes(8, sb.uuid);
  io.U64(24, sb.events);
  io.U64(32, sb.events_cleared);
  io.U64(40, sb.sync_size);
  io.U32(48, sb.state);
  io.U32(52, sb.chunksize);
  io.U32(56, sb.daemon_sleep);
  io.U32(60, sb.write_behind);
  io.U32(64, sb.sectors_reserved);
  io.U32(68, sb.nodes);
  io.Text(kOffClusterName, kClusterNameBytes, sb.cluster_name);
}

constexpr uint32_t kVersionClustered = 5;
constexpr uint32_t kVersionLockless = 6;

using le::Get32;
using le::Put32;

uint64_t DivRoundUp(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

}  // namespace

std::vector<uint8_t> EncodeBitmapSuper(const BitmapSuper& sb) {
  assert(sb.cluster_name.size() <= kClusterNameBytes);
  std::vector<uint8_t> b(kBitmapSuperBytes, 0);
  Put32(b, kOffBitmapMagic, kBitmapMagic);
  le::Writer w(b);
  BitmapSuperFields(w, sb);
  return b;
}

absl::Status CheckBitmapSuper(const BitmapSuper& sb) {
  if (sb.version == kVersionClustered || sb.version == kVersionLockless) {
    return absl::UnimplementedError(absl::StrFormat(
        "bitmap version %u (%s) is not supported (want %u)", sb.version,
        sb.version == kVersionClustered ? "clustered md" : "lockless llbitmap",
        kBitmapVersion));
  }
  if (sb.version != kBitmapVersion && sb.version != kBitmapVersionHostEndian) {
    return absl::DataLossError(absl::StrFormat(
        "bitmap version %u is not a known md bitmap version (want %u)",
        sb.version, kBitmapVersion));
  }
  if (sb.chunksize < kBitmapMinChunkBytes) {
    return absl::DataLossError(
        absl::StrFormat("bitmap chunksize %u bytes is below the minimum %u",
                        sb.chunksize, kBitmapMinChunkBytes));
  }
  if (!std::has_single_bit(sb.chunksize)) {
    return absl::DataLossError(absl::StrFormat(
        "bitmap chunksize %u bytes is not a power of two", sb.chunksize));
  }
  if (sb.daemon_sleep < 1 || sb.daemon_sleep > kBitmapMaxDaemonSleep) {
    return absl::DataLossError(absl::StrFormat(
        "bitmap daemon_sleep %u seconds is out of range (1..%u)",
        sb.daemon_sleep, kBitmapMaxDaemonSleep));
  }
  if (sb.write_behind > kBitmapMaxWriteBehind) {
    return absl::DataLossError(
        absl::StrFormat("bitmap write_behind %u is out of range (0..%u)",
                        sb.write_behind, kBitmapMaxWriteBehind));
  }
  if (sb.sync_size == 0) {
    return absl::DataLossError("bitmap sync_size is 0 sectors");
  }
  if (sb.cluster_name.size() > kClusterNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bitmap cluster_name is %u bytes, at most %u fit",
                        sb.cluster_name.size(), kClusterNameBytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<BitmapSuper> DecodeBitmapSuper(std::span<const uint8_t> bytes) {
  if (bytes.size() < kBitmapSuperBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bitmap superblock buffer too short: %u bytes, need %u",
                        bytes.size(), kBitmapSuperBytes));
  }
  const uint32_t magic = Get32(bytes, kOffBitmapMagic);
  if (magic != kBitmapMagic) {
    return absl::DataLossError(absl::StrFormat(
        "not an md bitmap: magic 0x%08x (want 0x%08x)", magic, kBitmapMagic));
  }
  BitmapSuper sb;
  le::Reader r(bytes);
  BitmapSuperFields(r, sb);
  RETURN_IF_ERROR(CheckBitmapSuper(sb));
  return sb;
}

uint64_t BitmapChunks(uint64_t sync_size_sectors, uint64_t chunk_bytes) {
  assert(chunk_bytes >= kBitmapMinChunkBytes &&
         std::has_single_bit(chunk_bytes));
  // In sectors, so that sync_size * 512 cannot overflow.
  return DivRoundUp(sync_size_sectors, chunk_bytes / kSectorBytes);
}

uint64_t BitmapBitBytes(uint64_t chunks) { return DivRoundUp(chunks, 8); }

uint64_t BitmapAreaBytes(uint64_t chunks) {
  return kBitmapSuperBytes + BitmapBitBytes(chunks);
}

uint64_t BitmapAreaSectors(uint64_t chunks) {
  return DivRoundUp(BitmapAreaBytes(chunks), kSectorBytes);
}

uint64_t BitmapAreaPages(uint64_t chunks) {
  return DivRoundUp(BitmapAreaBytes(chunks), kBitmapPageBytes);
}

absl::StatusOr<uint32_t> DefaultBitmapChunkBytes(uint64_t member_data_bytes,
                                                 uint64_t space_bytes) {
  if (space_bytes <= kBitmapSuperBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no room for bitmap bits: %u bytes of space, the header alone takes "
        "%u",
        space_bytes, kBitmapSuperBytes));
  }
  // Saturate: any space beyond 2^61 bytes holds every possible bit.
  const uint64_t bit_bytes = space_bytes - kBitmapSuperBytes;
  const uint64_t max_bits = bit_bytes > (~0ull >> 3) ? ~0ull : bit_bytes * 8;
  const uint64_t sectors = DivRoundUp(member_data_bytes, kSectorBytes);
  for (uint64_t chunk = kBitmapDefaultChunkBytes; chunk <= (1ull << 31);
       chunk *= 2) {
    if (BitmapChunks(sectors, chunk) <= max_bits) {
      return static_cast<uint32_t>(chunk);
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "bitmap bits for %u bytes per member do not fit in %u bytes even with "
      "2 GiB chunks",
      member_data_bytes, space_bytes));
}

std::vector<uint8_t> NewBitmapArea(const BitmapSuper& sb) {
  const uint64_t chunks = BitmapChunks(sb);
  std::vector<uint8_t> area(BitmapAreaPages(chunks) * kBitmapPageBytes, 0xFF);
  const std::vector<uint8_t> header = EncodeBitmapSuper(sb);
  std::copy(header.begin(), header.end(), area.begin());
  return area;
}

uint64_t CountBitmapDirty(std::span<const uint8_t> bits, uint64_t chunks) {
  uint64_t dirty = 0;
  const uint64_t whole = chunks / 8;
  for (uint64_t i = 0; i < whole; ++i) dirty += std::popcount(bits[i]);
  if (chunks % 8 != 0) {
    const uint8_t mask = static_cast<uint8_t>((1u << (chunks % 8)) - 1);
    dirty += std::popcount(static_cast<uint8_t>(bits[whole] & mask));
  }
  return dirty;
}

absl::StatusOr<BitmapVerdict> ValidateBitmapForArray(
    const BitmapSuper& sb, const std::array<uint8_t, 16>& array_uuid,
    uint64_t sb_events, uint64_t member_data_sectors) {
  if (sb.uuid != array_uuid) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "bitmap belongs to another array: bitmap uuid %s, array uuid %s",
        FormatUuid(sb.uuid), FormatUuid(array_uuid)));
  }
  if (sb.sync_size != member_data_sectors) {
    return absl::DataLossError(absl::StrFormat(
        "bitmap sync_size %u sectors differs from the component size %u "
        "sectors: the bits do not describe this array (remove the bitmap "
        "and add it again)",
        sb.sync_size, member_data_sectors));
  }
  if (sb.events > sb_events && sb.events - sb_events > 1) {
    return absl::DataLossError(absl::StrFormat(
        "bitmap events %u are %u ahead of the superblock's %u (md leaves at "
        "most 1): the bitmap does not come from this array's history",
        sb.events, sb.events - sb_events, sb_events));
  }
  if (sb.events < sb_events || sb.stale()) return BitmapVerdict::kStale;
  return BitmapVerdict::kCurrent;
}

}  // namespace uraid
