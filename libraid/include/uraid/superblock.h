// SPDX-License-Identifier: MIT
// File: uraid/superblock.h
//
// Codec for md's version-1.2 superblock (`mdp_superblock_1`): bytes <-> a
// plain struct, with md's checksum. Pure: takes and returns bytes, never
// touches a file. Field names and units are md's (sectors of 512 bytes
// unless a name says otherwise) so that `mdadm --examine` output, the md
// reference notes and this struct can be read side by side.
//
// Thread-compatible; no shared state.

#ifndef URAID_SUPERBLOCK_H_
#define URAID_SUPERBLOCK_H_

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "uraid/export.h"

namespace uraid {

inline constexpr uint32_t kSbMagic = 0xA92B4EFC;
// md's sector: the unit of every sector-counted field and offset.
inline constexpr uint64_t kSectorBytes = 512;
// Byte offset of the 1.2 superblock on a member, and its sector.
inline constexpr uint64_t kSb12OffsetBytes = 4096;
inline constexpr uint64_t kSb12OffsetSectors = 8;
// The kernel always reads this much at the superblock's location.
inline constexpr size_t kSbBlockBytes = 4096;
inline constexpr size_t kSbFixedBytes = 256;
inline constexpr uint32_t kSbMaxDevLimit = (4096 - 256) / 2;  // 1920
inline constexpr uint64_t kMaxSector = ~0ull;

// feature_map bits.
inline constexpr uint32_t kFeatureBitmapOffset = 1;
inline constexpr uint32_t kFeatureRecoveryOffset = 2;
inline constexpr uint32_t kFeatureReshapeActive = 4;
inline constexpr uint32_t kFeatureBadBlocks = 8;
inline constexpr uint32_t kFeatureReplacement = 16;
inline constexpr uint32_t kFeatureReshapeBackwards = 32;
inline constexpr uint32_t kFeatureNewOffset = 64;
inline constexpr uint32_t kFeatureRecoveryBitmap = 128;
inline constexpr uint32_t kFeatureClustered = 256;
inline constexpr uint32_t kFeatureJournal = 512;
inline constexpr uint32_t kFeaturePpl = 1024;
inline constexpr uint32_t kFeatureMultiplePpls = 2048;
inline constexpr uint32_t kFeatureRaid0Layout = 4096;
// Every bit md defines; anything else makes a superblock foreign.
inline constexpr uint32_t kFeatureAllKnown = 8191;

// dev_roles values other than an active slot number.
inline constexpr uint16_t kRoleSpare = 0xFFFF;
inline constexpr uint16_t kRoleFaulty = 0xFFFE;
inline constexpr uint16_t kRoleJournal = 0xFFFD;
inline constexpr uint16_t kRoleMax = 0xFF00;  // roles >= this are reserved

// One member's superblock, field for field (see md reference §2.2).
struct Superblock {
  uint32_t major_version = 1;
  uint32_t feature_map = 0;
  std::array<uint8_t, 16> set_uuid{};
  std::string set_name;  // at most 32 bytes; NUL padding stripped
  uint64_t ctime = 0;    // low 40 bits seconds
  int32_t level = 5;
  uint32_t layout = 2;
  uint64_t size = 0;       // sectors of each component used for data
  uint32_t chunksize = 0;  // sectors
  uint32_t raid_disks = 0;
  // md's union at byte 96: with kFeatureBitmapOffset, the signed sectors
  // from the superblock to the bitmap; with kFeaturePpl or
  // kFeatureMultiplePpls, md's `ppl` struct (le16 offset, le16 size), read
  // and set through ppl_offset(), ppl_size() and set_ppl().
  int32_t bitmap_offset = 0;
  uint32_t new_level = 0;
  uint64_t reshape_position = 0;  // array sectors
  int32_t delta_disks = 0;
  uint32_t new_layout = 0;
  uint32_t new_chunk = 0;  // sectors
  int32_t new_offset = 0;  // signed sectors
  uint64_t data_offset = 0;
  uint64_t data_size = 0;
  uint64_t super_offset = kSb12OffsetSectors;
  uint64_t recovery_offset = 0;
  uint32_t dev_number = 0;
  uint32_t cnt_corrected_read = 0;
  std::array<uint8_t, 16> device_uuid{};
  uint8_t devflags = 0;
  uint8_t bblog_shift = 0;
  uint16_t bblog_size = 0;
  int32_t bblog_offset = 0;
  uint64_t utime = 0;
  uint64_t events = 0;
  uint64_t resync_offset = kMaxSector;  // kMaxSector = clean
  uint32_t sb_csum = 0;                 // filled by Encode; as read by Decode
  uint32_t max_dev = 0;  // Encode uses max(max_dev, dev_roles.size())
  std::vector<uint16_t> dev_roles;  // indexed by dev_number

  bool clean() const { return resync_offset == kMaxSector; }
  // Either PPL feature bit.
  bool has_ppl() const {
    return (feature_map & (kFeaturePpl | kFeatureMultiplePpls)) != 0;
  }
  // ppl.offset: signed sectors from the superblock to the PPL area.
  int16_t ppl_offset() const {
    return static_cast<int16_t>(static_cast<uint32_t>(bitmap_offset) & 0xFFFF);
  }
  // ppl.size: sectors of the PPL area.
  uint16_t ppl_size() const {
    return static_cast<uint16_t>(static_cast<uint32_t>(bitmap_offset) >> 16);
  }
  void set_ppl(int16_t offset_sectors, uint16_t size_sectors) {
    bitmap_offset =
        static_cast<int32_t>((static_cast<uint32_t>(size_sectors) << 16) |
                             static_cast<uint16_t>(offset_sectors));
  }
  // The role of this device (dev_roles[dev_number]), or kRoleSpare when the
  // table does not reach it.
  uint16_t role() const {
    return dev_number < dev_roles.size() ? dev_roles[dev_number] : kRoleSpare;
  }
};

// Serialises into a kSbBlockBytes block (zero beyond the used bytes), with
// max_dev = max(sb.max_dev, dev_roles.size()) and a fresh sb_csum.
// REQUIRES: set_name.size() <= 32, dev_roles.size() <= kSbMaxDevLimit.
URAID_EXPORT std::vector<uint8_t> EncodeSuperblock(const Superblock& sb);

// Parses and validates like the kernel's super_1_load: magic, major version,
// max_dev bound, no unknown feature bits, pad0/pad3 zero, checksum,
// super_offset == expected_super_offset, data_size >= 10, data_offset past
// the superblock. The error says which check failed and the values seen.
// `bytes` must hold at least 256 + 2*max_dev bytes.
URAID_EXPORT absl::StatusOr<Superblock> DecodeSuperblock(
    std::span<const uint8_t> bytes,
    uint64_t expected_super_offset = kSb12OffsetSectors);

// The feature combinations the kernel's super_1_validate refuses: PPL with
// a bitmap or a journal, and PPL with MULTIPLE_PPLS (one PPL mode at a
// time). DataLoss naming feature_map. DecodeSuperblock does not apply it
// (examine shows such a member); assembly does.
URAID_EXPORT absl::Status CheckFeatureCombination(const Superblock& sb);

// md's sb_csum over the first 256 + 2*max_dev bytes of `bytes`, treating the
// sb_csum field as zero. REQUIRES: bytes.size() >= 256 + 2*max_dev.
URAID_EXPORT uint32_t SuperblockChecksum(std::span<const uint8_t> bytes,
                                         uint32_t max_dev);

// mdadm's choose_bm_space (super1.c), in sectors: the room a 1.2 member
// keeps after its superblock's 4 KiB for an internal bitmap, from a size in
// sectors (the device's when mdadm picks data_offset, the component's when
// it places the bad-block log): 0 below 64 KiB, 4 KiB up to 8 GiB, 64 KiB
// up to 200 GiB, then 128 KiB. Always a multiple of 8 sectors.
URAID_EXPORT uint64_t MdadmBitmapSpaceSectors(uint64_t sectors);

// mdadm's data_offset rule for a 1.2 member (reference §2.8), in sectors:
// bitmap space + headroom rounded up to 1 MiB.
URAID_EXPORT uint64_t DefaultDataOffsetSectors(uint64_t device_sectors,
                                               uint64_t chunk_sectors);

// Formats a 16-byte uuid the way mdadm prints it: "xxxxxxxx:xxxxxxxx:...".
URAID_EXPORT std::string FormatUuid(const std::array<uint8_t, 16>& uuid);

// FormatUuid's inverse, also taking blkid's spelling: 32 hex digits in
// either case, with ':', '-' or '.' allowed between bytes (never inside
// one). InvalidArgument names the text and what is wrong.
URAID_EXPORT absl::StatusOr<std::array<uint8_t, 16>> ParseUuid(
    std::string_view text);

}  // namespace uraid

#endif  // URAID_SUPERBLOCK_H_
