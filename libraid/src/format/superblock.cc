// SPDX-License-Identifier: MIT
// md v1.2 superblock codec (see uraid/superblock.h and the md reference §2).
//
// Every field is packed and unpacked byte by byte as little-endian at its
// fixed offset, so the code is independent of host endianness, struct
// padding and alignment. The offsets below are the on-disk format and must
// never change.

#include "uraid/superblock.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/le_bytes.h"
#include "base/status_macros.h"

namespace uraid {
namespace {

// Byte offsets of mdp_superblock_1 fields (md reference §2.2).
constexpr size_t kOffMagic = 0;
constexpr size_t kOffMajorVersion = 4;
constexpr size_t kOffFeatureMap = 8;
constexpr size_t kOffPad0 = 12;
constexpr size_t kOffSetUuid = 16;
constexpr size_t kOffSetName = 32;
constexpr size_t kSetNameBytes = 32;
constexpr size_t kOffCtime = 64;
constexpr size_t kOffLevel = 72;
constexpr size_t kOffLayout = 76;
constexpr size_t kOffSize = 80;
constexpr size_t kOffChunksize = 88;
constexpr size_t kOffRaidDisks = 92;
constexpr size_t kOffBitmapOffset = 96;
constexpr size_t kOffNewLevel = 100;
constexpr size_t kOffReshapePosition = 104;
constexpr size_t kOffDeltaDisks = 112;
constexpr size_t kOffNewLayout = 116;
constexpr size_t kOffNewChunk = 120;
constexpr size_t kOffNewOffset = 124;
constexpr size_t kOffDataOffset = 128;
constexpr size_t kOffDataSize = 136;
constexpr size_t kOffSuperOffset = 144;
constexpr size_t kOffRecoveryOffset = 152;
constexpr size_t kOffDevNumber = 160;
constexpr size_t kOffCntCorrectedRead = 164;
constexpr size_t kOffDeviceUuid = 168;
constexpr size_t kOffDevflags = 184;
constexpr size_t kOffBblogShift = 185;
constexpr size_t kOffBblogSize = 186;
constexpr size_t kOffBblogOffset = 188;
constexpr size_t kOffUtime = 192;
constexpr size_t kOffEvents = 200;
constexpr size_t kOffResyncOffset = 208;
constexpr size_t kOffSbCsum = 216;
constexpr size_t kOffMaxDev = 220;
constexpr size_t kOffPad3 = 224;
constexpr size_t kPad3Bytes = 32;
constexpr size_t kOffDevRoles = kSbFixedBytes;  // 256

static_assert(kOffPad3 + kPad3Bytes == kSbFixedBytes);
static_assert(kOffSetName + kSetNameBytes == kOffCtime);

// The kernel refuses a member whose data area is smaller than this.
constexpr uint64_t kMinDataSize = 10;
constexpr uint64_t kSectorBytes = 512;

// Bytes of the superblock that carry meaning (and that the checksum covers).
size_t UsedBytes(uint32_t max_dev) {
  return kSbFixedBytes + 2 * static_cast<size_t>(max_dev);
}

// --- Little-endian loads; callers guarantee `off + width <= b.size()`. ---

using le::Get16;
using le::Get32;
using le::Get64;
using le::Put16;
using le::Put32;
using le::Put64;

// Two's-complement reinterpretation, well defined since C++20.
int32_t LeS32(std::span<const uint8_t> b, size_t off) {
  return static_cast<int32_t>(Get32(b, off));
}

template <size_t N>
void PutBytes(std::vector<uint8_t>& b, size_t off,
              const std::array<uint8_t, N>& v) {
  std::copy(v.begin(), v.end(), b.begin() + off);
}

template <size_t N>
std::array<uint8_t, N> GetBytes(std::span<const uint8_t> b, size_t off) {
  std::array<uint8_t, N> out;
  std::copy_n(b.begin() + off, N, out.begin());
  return out;
}

// --- Validation steps, in the order DecodeSuperblock applies them. ---

// The identity checks: is this a v1 md superblock at all, one we understand?
absl::Status CheckIdentity(std::span<const uint8_t> b) {
  const uint32_t magic = Get32(b, kOffMagic);
  if (magic != kSbMagic) {
    return absl::DataLossError(absl::StrFormat(
        "not an md superblock: magic 0x%08x (want 0x%08x)", magic, kSbMagic));
  }
  const uint32_t major = Get32(b, kOffMajorVersion);
  if (major != 1) {
    return absl::UnimplementedError(absl::StrFormat(
        "unsupported md superblock major_version %u (want 1): foreign or "
        "newer md",
        major));
  }
  return absl::OkStatus();
}

// max_dev bounds the dev_roles table, so it must be sane before the table's
// length can be trusted.
absl::Status CheckMaxDev(std::span<const uint8_t> b) {
  const uint32_t max_dev = Get32(b, kOffMaxDev);
  if (max_dev > kSbMaxDevLimit) {
    return absl::DataLossError(absl::StrFormat(
        "superblock max_dev %u exceeds the limit %u", max_dev, kSbMaxDevLimit));
  }
  if (b.size() < UsedBytes(max_dev)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "superblock buffer too short: %u bytes, need %u (256 + 2*max_dev "
        "%u)",
        b.size(), UsedBytes(max_dev), max_dev));
  }
  return absl::OkStatus();
}

// Unknown feature bits and non-zero padding both signal a format we do not
// know; the kernel refuses both rather than guess.
absl::Status CheckFeaturesAndPadding(std::span<const uint8_t> b) {
  const uint32_t features = Get32(b, kOffFeatureMap);
  if ((features & ~kFeatureAllKnown) != 0) {
    return absl::UnimplementedError(absl::StrFormat(
        "unknown feature bits 0x%x in feature_map 0x%x: foreign or newer md",
        features & ~kFeatureAllKnown, features));
  }
  const uint32_t pad0 = Get32(b, kOffPad0);
  if (pad0 != 0) {
    return absl::DataLossError(absl::StrFormat(
        "superblock pad0 (offset %u) is 0x%08x, want 0", kOffPad0, pad0));
  }
  for (size_t off = kOffPad3; off < kOffPad3 + kPad3Bytes; ++off) {
    if (b[off] != 0) {
      return absl::DataLossError(absl::StrFormat(
          "superblock pad3 byte at offset %u is 0x%02x, want 0", off, b[off]));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckChecksum(std::span<const uint8_t> b) {
  const uint32_t stored = Get32(b, kOffSbCsum);
  const uint32_t computed = SuperblockChecksum(b, Get32(b, kOffMaxDev));
  if (stored != computed) {
    return absl::DataLossError(
        absl::StrFormat("bad superblock checksum: stored 0x%08x, computed "
                        "0x%08x",
                        stored, computed));
  }
  return absl::OkStatus();
}

// Placement checks on already-parsed fields.
absl::Status CheckPlacement(const Superblock& sb,
                            uint64_t expected_super_offset) {
  if (sb.super_offset != expected_super_offset) {
    return absl::DataLossError(absl::StrFormat(
        "superblock super_offset %u does not match where it was read "
        "(sector %u)",
        sb.super_offset, expected_super_offset));
  }
  if (sb.data_size < kMinDataSize) {
    return absl::DataLossError(
        absl::StrFormat("superblock data_size %u sectors is below the "
                        "minimum %u",
                        sb.data_size, kMinDataSize));
  }
  // The kernel rounds the superblock up to the logical block size; 512 is
  // the smallest, hence the least strict, and what mdadm itself uses.
  const uint64_t sb_end =
      sb.super_offset +
      (UsedBytes(sb.max_dev) + kSectorBytes - 1) / kSectorBytes;
  if (sb.data_offset < sb_end) {
    return absl::DataLossError(absl::StrFormat(
        "superblock data_offset %u lies inside the superblock (which ends at "
        "sector %u)",
        sb.data_offset, sb_end));
  }
  if ((sb.feature_map & kFeatureNewOffset) != 0) {
    // Computed in signed 128-bit so a negative result is caught rather than
    // wrapped (the kernel's unsigned sum would wrap and accept it).
    const __int128 new_start =
        static_cast<__int128>(sb.data_offset) + sb.new_offset;
    if (new_start < static_cast<__int128>(sb_end)) {
      return absl::DataLossError(absl::StrFormat(
          "superblock data_offset + new_offset (%u + %d) lies inside the "
          "superblock (which ends at sector %u)",
          sb.data_offset, sb.new_offset, sb_end));
    }
  }
  return absl::OkStatus();
}

// Unpacks every field; no validation beyond what the caller did already
// (the buffer holds UsedBytes(max_dev) bytes, max_dev <= kSbMaxDevLimit).
Superblock Unpack(std::span<const uint8_t> b) {
  Superblock sb;
  sb.major_version = Get32(b, kOffMajorVersion);
  sb.feature_map = Get32(b, kOffFeatureMap);
  sb.set_uuid = GetBytes<16>(b, kOffSetUuid);
  size_t name_len = kSetNameBytes;
  while (name_len > 0 && b[kOffSetName + name_len - 1] == 0) --name_len;
  sb.set_name.assign(reinterpret_cast<const char*>(b.data() + kOffSetName),
                     name_len);
  sb.ctime = Get64(b, kOffCtime);
  sb.level = LeS32(b, kOffLevel);
  sb.layout = Get32(b, kOffLayout);
  sb.size = Get64(b, kOffSize);
  sb.chunksize = Get32(b, kOffChunksize);
  sb.raid_disks = Get32(b, kOffRaidDisks);
  sb.bitmap_offset = LeS32(b, kOffBitmapOffset);
  sb.new_level = Get32(b, kOffNewLevel);
  sb.reshape_position = Get64(b, kOffReshapePosition);
  sb.delta_disks = LeS32(b, kOffDeltaDisks);
  sb.new_layout = Get32(b, kOffNewLayout);
  sb.new_chunk = Get32(b, kOffNewChunk);
  sb.new_offset = LeS32(b, kOffNewOffset);
  sb.data_offset = Get64(b, kOffDataOffset);
  sb.data_size = Get64(b, kOffDataSize);
  sb.super_offset = Get64(b, kOffSuperOffset);
  sb.recovery_offset = Get64(b, kOffRecoveryOffset);
  sb.dev_number = Get32(b, kOffDevNumber);
  sb.cnt_corrected_read = Get32(b, kOffCntCorrectedRead);
  sb.device_uuid = GetBytes<16>(b, kOffDeviceUuid);
  sb.devflags = b[kOffDevflags];
  sb.bblog_shift = b[kOffBblogShift];
  sb.bblog_size = Get16(b, kOffBblogSize);
  sb.bblog_offset = LeS32(b, kOffBblogOffset);
  sb.utime = Get64(b, kOffUtime);
  sb.events = Get64(b, kOffEvents);
  sb.resync_offset = Get64(b, kOffResyncOffset);
  sb.sb_csum = Get32(b, kOffSbCsum);
  sb.max_dev = Get32(b, kOffMaxDev);
  sb.dev_roles.resize(sb.max_dev);
  for (uint32_t i = 0; i < sb.max_dev; ++i) {
    sb.dev_roles[i] = Get16(b, kOffDevRoles + 2 * static_cast<size_t>(i));
  }
  return sb;
}

}  // namespace

uint32_t SuperblockChecksum(std::span<const uint8_t> bytes, uint32_t max_dev) {
  const size_t len = UsedBytes(max_dev);
  assert(bytes.size() >= len);
  // Out-of-contract calls sum what is there rather than read out of bounds.
  const size_t end = std::min(len, bytes.size());
  uint64_t acc = 0;
  size_t off = 0;
  for (; off + 4 <= end; off += 4) {
    // sb_csum itself counts as zero.
    if (off != kOffSbCsum) acc += Get32(bytes, off);
  }
  // 256 + 2*max_dev is a multiple of 4 unless max_dev is odd; md adds the
  // trailing half word on its own.
  if (off + 2 <= end) acc += Get16(bytes, off);
  return static_cast<uint32_t>((acc & 0xFFFFFFFFu) + (acc >> 32));
}

std::vector<uint8_t> EncodeSuperblock(const Superblock& sb) {
  assert(sb.set_name.size() <= kSetNameBytes);
  assert(sb.dev_roles.size() <= kSbMaxDevLimit);
  assert(sb.max_dev <= kSbMaxDevLimit);
  // Out-of-contract inputs are clamped so the result is always a well-formed
  // 4096-byte block rather than an overrun.
  const uint32_t max_dev = std::min<uint64_t>(
      std::max<uint64_t>(sb.max_dev, sb.dev_roles.size()), kSbMaxDevLimit);

  std::vector<uint8_t> b(kSbBlockBytes, 0);
  Put32(b, kOffMagic, kSbMagic);
  Put32(b, kOffMajorVersion, sb.major_version);
  Put32(b, kOffFeatureMap, sb.feature_map);
  PutBytes(b, kOffSetUuid, sb.set_uuid);
  const size_t name_len = std::min(sb.set_name.size(), kSetNameBytes);
  std::copy_n(sb.set_name.begin(), name_len, b.begin() + kOffSetName);
  Put64(b, kOffCtime, sb.ctime);
  Put32(b, kOffLevel, static_cast<uint32_t>(sb.level));
  Put32(b, kOffLayout, sb.layout);
  Put64(b, kOffSize, sb.size);
  Put32(b, kOffChunksize, sb.chunksize);
  Put32(b, kOffRaidDisks, sb.raid_disks);
  Put32(b, kOffBitmapOffset, static_cast<uint32_t>(sb.bitmap_offset));
  Put32(b, kOffNewLevel, sb.new_level);
  Put64(b, kOffReshapePosition, sb.reshape_position);
  Put32(b, kOffDeltaDisks, static_cast<uint32_t>(sb.delta_disks));
  Put32(b, kOffNewLayout, sb.new_layout);
  Put32(b, kOffNewChunk, sb.new_chunk);
  Put32(b, kOffNewOffset, static_cast<uint32_t>(sb.new_offset));
  Put64(b, kOffDataOffset, sb.data_offset);
  Put64(b, kOffDataSize, sb.data_size);
  Put64(b, kOffSuperOffset, sb.super_offset);
  Put64(b, kOffRecoveryOffset, sb.recovery_offset);
  Put32(b, kOffDevNumber, sb.dev_number);
  Put32(b, kOffCntCorrectedRead, sb.cnt_corrected_read);
  PutBytes(b, kOffDeviceUuid, sb.device_uuid);
  b[kOffDevflags] = sb.devflags;
  b[kOffBblogShift] = sb.bblog_shift;
  Put16(b, kOffBblogSize, sb.bblog_size);
  Put32(b, kOffBblogOffset, static_cast<uint32_t>(sb.bblog_offset));
  Put64(b, kOffUtime, sb.utime);
  Put64(b, kOffEvents, sb.events);
  Put64(b, kOffResyncOffset, sb.resync_offset);
  Put32(b, kOffMaxDev, max_dev);
  // Slots without a device are spares, as mdadm and the kernel write them.
  for (uint32_t i = 0; i < max_dev; ++i) {
    const uint16_t role =
        i < sb.dev_roles.size() ? sb.dev_roles[i] : kRoleSpare;
    Put16(b, kOffDevRoles + 2 * static_cast<size_t>(i), role);
  }
  Put32(b, kOffSbCsum, SuperblockChecksum(b, max_dev));
  return b;
}

absl::StatusOr<Superblock> DecodeSuperblock(std::span<const uint8_t> bytes,
                                            uint64_t expected_super_offset) {
  if (bytes.size() < kSbFixedBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("superblock buffer too short: %u bytes, need at least "
                        "%u",
                        bytes.size(), kSbFixedBytes));
  }
  RETURN_IF_ERROR(CheckIdentity(bytes));
  RETURN_IF_ERROR(CheckMaxDev(bytes));
  RETURN_IF_ERROR(CheckFeaturesAndPadding(bytes));
  RETURN_IF_ERROR(CheckChecksum(bytes));
  Superblock sb = Unpack(bytes);
  RETURN_IF_ERROR(CheckPlacement(sb, expected_super_offset));
  return sb;
}

absl::Status CheckFeatureCombination(const Superblock& sb) {
  constexpr uint32_t kPplBits = kFeaturePpl | kFeatureMultiplePpls;
  const uint32_t features = sb.feature_map;
  if ((features & kPplBits) == 0) return absl::OkStatus();
  if ((features & (kFeatureBitmapOffset | kFeatureJournal)) != 0) {
    return absl::DataLossError(absl::StrFormat(
        "feature_map 0x%x combines PPL with a bitmap or a journal", features));
  }
  if ((features & kPplBits) == kPplBits) {
    return absl::DataLossError(absl::StrFormat(
        "feature_map 0x%x sets both PPL and MULTIPLE_PPLS", features));
  }
  return absl::OkStatus();
}

uint64_t DefaultDataOffsetSectors(uint64_t device_sectors,
                                  uint64_t chunk_sectors) {
  // Room for an internal bitmap, as mdadm's choose_bm_space sizes it.
  constexpr uint64_t kKiB = 2;  // sectors
  constexpr uint64_t kGiB = 1024 * 1024 * kKiB;
  uint64_t bmspace;
  if (device_sectors < 64 * kKiB) {
    bmspace = 0;
  } else if (device_sectors - 64 * kKiB >= 200 * kGiB) {
    bmspace = 128 * kKiB;
  } else if (device_sectors - 4 * kKiB > 8 * kGiB) {
    bmspace = 64 * kKiB;
  } else {
    bmspace = 4 * kKiB;
  }
  // Reshape headroom: ~0.1% of the device, capped at 128 MiB and kept at two
  // chunks or more (chunk 0 = no lower bound, as in mdadm).
  uint64_t headroom = 128 * 1024 * kKiB;
  while (headroom * 1024 > device_sectors &&
         (chunk_sectors == 0 || headroom / 2 >= 2 * chunk_sectors)) {
    headroom /= 2;
  }
  // 12 KiB covers the 4 KiB gap before the superblock, the superblock and
  // the bad-block log; the total is aligned to 1 MiB.
  constexpr uint64_t kMetadata = 12 * kKiB;
  constexpr uint64_t kAlign = 1024 * kKiB;
  const uint64_t raw = kMetadata + bmspace + headroom;
  return (raw + kAlign - 1) / kAlign * kAlign;
}

absl::StatusOr<std::array<uint8_t, 16>> ParseUuid(std::string_view text) {
  std::array<uint8_t, 16> uuid{};
  int nibbles = 0;
  for (char c : text) {
    if (c == ':' || c == '-' || c == '.') {
      if (nibbles % 2 != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "bad uuid '", std::string(text), "' (a separator inside a byte)"));
      }
      continue;
    }
    if (!absl::ascii_isxdigit(c) || nibbles == 32) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bad uuid '", std::string(text),
          "' (expected 32 hex digits, e.g. as uraid examine prints it)"));
    }
    const int v =
        absl::ascii_isdigit(c) ? c - '0' : absl::ascii_tolower(c) - 'a' + 10;
    uuid[nibbles / 2] |= static_cast<uint8_t>(nibbles % 2 ? v : v << 4);
    ++nibbles;
  }
  if (nibbles != 32) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad uuid '", std::string(text), "' (", nibbles,
                     " hex digits; expected 32)"));
  }
  return uuid;
}

std::string FormatUuid(const std::array<uint8_t, 16>& uuid) {
  std::string out;
  out.reserve(35);
  for (size_t i = 0; i < uuid.size(); ++i) {
    if (i != 0 && i % 4 == 0) out += ':';
    absl::StrAppendFormat(&out, "%02x", uuid[i]);
  }
  return out;
}

}  // namespace uraid
