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

// Offsets that the validation reads before Unpack, and the fields that
// Fields below leaves to its callers (md reference §2.2).
constexpr size_t kOffMagic = 0;
constexpr size_t kOffMajorVersion = 4;
constexpr size_t kOffFeatureMap = 8;
constexpr size_t kOffPad0 = 12;
constexpr size_t kSetNameBytes = 32;
constexpr size_t kOffSbCsum = 216;
constexpr size_t kOffMaxDev = 220;
constexpr size_t kOffPad3 = 224;
constexpr size_t kPad3Bytes = 32;
constexpr size_t kOffDevRoles = kSbFixedBytes;  // 256

static_assert(kOffPad3 + kPad3Bytes == kSbFixedBytes);

// The kernel refuses a member whose data area is smaller than this.
constexpr uint64_t kMinDataSize = 10;

// Bytes of the superblock that carry meaning (and that the checksum covers).
size_t UsedBytes(uint32_t max_dev) {
  return kSbFixedBytes + 2 * static_cast<size_t>(max_dev);
}

using le::Get16;
using le::Get32;
using le::Put16;
using le::Put32;

// mdp_superblock_1's fields at their byte offsets (md reference §2.2), one
// list for both directions (le::Writer encodes, le::Reader decodes). Left
// to the callers: magic (not a Superblock field), sb_csum and max_dev
// (Encode derives them) and dev_roles (their count is max_dev).
template <typename Io, typename Sb>
void Fields(Io& io, Sb& sb) {
  io.U32(kOffMajorVersion, sb.major_version);
  io.U32(kOffFeatureMap, sb.feature_map);
  io.Bytes(16, sb.set_uuid);
  io.Text(32, kSetNameBytes, sb.set_name);
  io.U64(64, sb.ctime);
  io.S32(72, sb.level);
  io.U32(76, sb.layout);
  io.U64(80, sb.size);
  io.U32(88, sb.chunksize);
  io.U32(92, sb.raid_disks);
  io.S32(96, sb.bitmap_offset);
  io.U32(100, sb.new_level);
  io.U64(104, sb.reshape_position);
  io.S32(112, sb.delta_disks);
  io.U32(116, sb.new_layout);
  io.U32(120, sb.new_chunk);
  io.S32(124, sb.new_offset);
  io.U64(128, sb.data_offset);
  io.U64(136, sb.data_size);
  io.U64(144, sb.super_offset);
  io.U64(152, sb.recovery_offset);
  io.U32(160, sb.dev_number);
  io.U32(164, sb.cnt_corrected_read);
  io.Bytes(168, sb.device_uuid);
  io.U8(184, sb.devflags);
  io.U8(185, sb.bblog_shift);
  io.U16(186, sb.bblog_size);
  io.S32(188, sb.bblog_offset);
  io.U64(192, sb.utime);
  io.U64(200, sb.events);
  io.U64(208, sb.resync_offset);
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
  le::Reader r(b);
  Fields(r, sb);
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
  le::Writer w(b);
  Fields(w, sb);
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

uint64_t MdadmBitmapSpaceSectors(uint64_t sectors) {
  constexpr uint64_t kKiB = 2;  // sectors
  constexpr uint64_t kGiB = 1024 * 1024 * kKiB;
  if (sectors < 64 * kKiB) return 0;
  if (sectors - 64 * kKiB >= 200 * kGiB) return 128 * kKiB;
  if (sectors - 4 * kKiB > 8 * kGiB) return 64 * kKiB;
  return 4 * kKiB;
}

uint64_t DefaultDataOffsetSectors(uint64_t device_sectors,
                                  uint64_t chunk_sectors) {
  constexpr uint64_t kKiB = 2;  // sectors
  // Room for an internal bitmap, as mdadm's choose_bm_space sizes it.
  const uint64_t bmspace = MdadmBitmapSpaceSectors(device_sectors);
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
