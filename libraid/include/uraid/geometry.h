// SPDX-License-Identifier: MIT
// File: uraid/geometry.h
//
// Pure layout math for md RAID4/RAID5/RAID6: where md places each logical
// byte of an array on its members, and the inverse. No I/O, no threads;
// every function is thread-compatible and cheap.
//
// Units: every offset and size here is in BYTES. "Member offset" is counted
// from the member's data_offset (md's "member sector" times 512), never from
// the start of the raw device.
//
// Terms (md's): a chunk is `chunk_bytes` of one member; a stripe is one chunk
// row across all `raid_disks` members, holding `raid_disks - 1` data chunks
// and one parity chunk (RAID6: `raid_disks - 2` data chunks, P and Q). A
// "disk" is a raid role (0..raid_disks-1), the column of md's layout tables,
// not a physical device. A "Q slot" (RAID6 only) is the position of a disk's
// chunk in md's Q syndrome, Q = sum over slots of g^slot * D (see QSlot).

#ifndef URAID_GEOMETRY_H_
#define URAID_GEOMETRY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "uraid/export.h"

namespace uraid {

// md's RAID5 and RAID6 algorithms; the numeric values are what the
// superblock stores. 0..5 are valid at levels 5 and 6 (level 4: 5 only);
// the others only at level 6 (md's algorithm_valid_raid6).
enum class Layout : int {
  kLeftAsymmetric = 0,
  kRightAsymmetric = 1,
  kLeftSymmetric = 2,  // md's default
  kRightSymmetric = 3,
  kParityFirst = 4,
  kParityLast = 5,  // RAID4's layout
  // RAID6 only. The DDF layouts: md's ALGORITHM_ROTATING_*; their Q covers
  // every disk by physical index (see QSlot).
  kDdfZeroRestart = 8,
  kDdfNRestart = 9,
  kDdfNContinue = 10,
  // RAID6 only: a RAID5 layout over disks 0..n-2 with Q on the last disk,
  // the intermediate shape of md's RAID5 -> RAID6 conversion.
  kLeftAsymmetric6 = 16,
  kRightAsymmetric6 = 17,
  kLeftSymmetric6 = 18,
  kRightSymmetric6 = 19,
  kParityFirst6 = 20,
};

// Accepts md's RAID5 names and aliases ("left-symmetric", "ls", "default",
// ...) and the numbers "0".."5", as mdadm parses --layout at level 5 (so
// RAID6-only names are refused and "ddf-N-restart" means left-asymmetric).
// Error names the bad input.
URAID_EXPORT absl::StatusOr<Layout> ParseLayout(std::string_view text);
// As mdadm parses --layout for `level`: levels 4 and 5 as above; level 6
// takes mdadm's RAID6 names (the RAID5 ones, "ddf-zero-restart",
// "ddf-N-restart", "ddf-N-continue", "left-asymmetric-6", ...,
// "parity-first-6", where the ddf names mean layouts 8..10) and the numbers
// 0-5, 8-10 and 16-20. Names are case-insensitive. Any other level is
// InvalidArgument.
URAID_EXPORT absl::StatusOr<Layout> ParseLayout(std::string_view text,
                                                int level);
// md's canonical name, e.g. "left-symmetric", "ddf-N-restart" (mdadm's
// spelling), "left-symmetric-6"; "unknown" for numbers md does not define.
URAID_EXPORT std::string_view LayoutName(Layout layout);

inline constexpr uint64_t kMinChunkBytes = 4096;
inline constexpr uint64_t kMaxChunkBytes = 16ull << 20;
inline constexpr int kMinDisks = 3;
inline constexpr int kMaxDisks = 64;
// md's minimum for RAID6 (two data disks); kMaxDisks applies too.
inline constexpr int kMinRaid6Disks = 4;

// Where one logical byte lives.
struct Location {
  uint64_t stripe = 0;         // chunk row number
  int data_index = 0;          // 0..data_disks-1 within the stripe
  int disk = 0;                // slot holding that data chunk
  int parity_disk = 0;         // slot holding the stripe's parity (RAID6: P)
  uint64_t member_offset = 0;  // bytes from data_offset on `disk`
  uint64_t chunk_offset = 0;   // bytes into the chunk (member_offset % chunk)
};

// An array's shape. Immutable value type (copyable, comparable); construct
// with Make(). Safe to share between threads. Usable on its own, without
// any Array, by tests that need md's placement.
class URAID_EXPORT Geometry {
 public:
  // Validates: level 4, 5 or 6 (level 4 requires kParityLast; level 5 takes
  // layouts 0..5; level 6 also 8..10 and 16..20), chunk a power of two in
  // [4 KiB, 16 MiB], 3..64 disks (level 6: 4..64), member_bytes a non-zero
  // multiple of the chunk. The error names the offending parameter.
  static absl::StatusOr<Geometry> Make(int level, Layout layout,
                                       uint64_t chunk_bytes, int raid_disks,
                                       uint64_t member_bytes);

  int level() const { return level_; }
  Layout layout() const { return layout_; }
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  int raid_disks() const { return raid_disks_; }
  int data_disks() const { return raid_disks_ - parity_disks(); }
  // Members per stripe that hold parity (RAID6: P and Q): also how many
  // the array may lose and still serve every byte.
  int parity_disks() const { return level_ == 6 ? 2 : 1; }
  // Bytes of each member used for data (md's `size`, times 512).
  uint64_t member_bytes() const { return member_bytes_; }
  uint64_t stripe_count() const { return member_bytes_ / chunk_bytes_; }
  // Data bytes in one stripe: chunk * data_disks().
  uint64_t stripe_data_bytes() const { return chunk_bytes_ * data_disks(); }
  // Exported capacity: data_disks() * member_bytes.
  uint64_t array_bytes() const { return member_bytes_ * data_disks(); }

  // Slot holding parity (RAID6: P) for `stripe` (the layouts are periodic,
  // so any stripe number gives md's answer).
  int ParityDisk(uint64_t stripe) const;
  // RAID6: the slot holding Q for `stripe`; -1 at levels 4 and 5.
  int QDisk(uint64_t stripe) const;
  // Slot holding data index `k` of `stripe`. REQUIRES: 0 <= k < data_disks().
  int DataDisk(uint64_t stripe, int k) const;
  // Data index held by `disk` in `stripe`, or -1 when `disk` holds parity
  // (P or Q). REQUIRES: 0 <= disk < raid_disks().
  int DataIndex(uint64_t stripe, int disk) const;

  // RAID6: the number of slots of md's Q syndrome, raid_disks - 2 for md's
  // own layouts, raid_disks for the DDF layouts (8..10); 0 at levels 4, 5.
  int SyndromeSlots() const;
  // RAID6: the slot (0..SyndromeSlots()-1) of `disk`'s data chunk in md's Q
  // of `stripe`, i.e. Q = XOR over data disks of g^QSlot * D; -1 for the P
  // and Q disks and at levels 4 and 5. md's order (raid5.c's
  // set_syndrome_sources): for md's layouts slot 0 is the first disk after
  // Q, then round the disks skipping P and Q -- in the asymmetric and the
  // symmetric -6 layouts this is NOT the data index; for the DDF layouts the
  // slot is the disk number itself (P's and Q's slots are zero blocks).
  // REQUIRES: 0 <= disk < raid_disks().
  int QSlot(uint64_t stripe, int disk) const;

  // Forward map. REQUIRES: array_offset < array_bytes().
  Location Map(uint64_t array_offset) const;
  // Inverse map: the logical offset stored at `member_offset` of `disk`, or
  // nullopt when that byte is parity. REQUIRES: member_offset < member_bytes().
  std::optional<uint64_t> Unmap(int disk, uint64_t member_offset) const;

  // Largest power of two dividing the stripe's data bytes (at least the
  // chunk): what block-size negotiation can advertise as "preferred".
  uint64_t PreferredIoBytes() const;

  friend bool operator==(const Geometry&, const Geometry&) = default;

 private:
  Geometry(int level, Layout layout, uint64_t chunk, int disks, uint64_t mb)
      : level_(level),
        layout_(layout),
        chunk_bytes_(chunk),
        raid_disks_(disks),
        member_bytes_(mb) {}

  int level_;
  Layout layout_;
  uint64_t chunk_bytes_;
  int raid_disks_;
  uint64_t member_bytes_;
};

// md's rule for component size: the largest chunk multiple not above
// `available_bytes`.
inline uint64_t RoundDownToChunk(uint64_t available_bytes, uint64_t chunk) {
  return available_bytes - available_bytes % chunk;
}

}  // namespace uraid

#endif  // URAID_GEOMETRY_H_
