// SPDX-License-Identifier: MIT
// md RAID4/RAID5 layout math. Written from the prose description of md's
// algorithms in shared/reference/md-raid5.md §1 (md itself is GPL; nothing is
// copied from it).
//
// Every mapping splits a logical offset into (chunk number, offset in chunk);
// the chunk number splits into (stripe, data index k). The stripe fixes the
// member offset on every disk; the layout only decides which slot holds the
// parity of a stripe and which slot holds each k.

#include "uraid/geometry.h"

#include <bit>
#include <cassert>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

namespace uraid {
namespace {

// Canonical names indexed by the md algorithm number.
constexpr std::string_view kLayoutNames[] = {
    "left-asymmetric", "right-asymmetric", "left-symmetric",
    "right-symmetric", "parity-first",     "parity-last",
};
constexpr int kLayoutCount = 6;

struct LayoutAlias {
  std::string_view name;
  Layout layout;
};

// mdadm's extra spellings (maps.c r5layout): the two-letter forms, "default",
// and the DDF names that fall back to RAID5 algorithms.
constexpr LayoutAlias kLayoutAliases[] = {
    {"la", Layout::kLeftAsymmetric},
    {"ra", Layout::kRightAsymmetric},
    {"ls", Layout::kLeftSymmetric},
    {"rs", Layout::kRightSymmetric},
    {"default", Layout::kLeftSymmetric},
    {"ddf-n-restart", Layout::kLeftAsymmetric},
    {"ddf-zero-restart", Layout::kRightAsymmetric},
    {"ddf-n-continue", Layout::kLeftSymmetric},
};

bool IsValidLayout(Layout layout) {
  int v = static_cast<int>(layout);
  return v >= 0 && v < kLayoutCount;
}

bool IsPowerOfTwo(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// ASCII case-insensitive equality: layout names are plain ASCII and users
// type them in either case ("ddf-N-restart" is mdadm's own spelling).
bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

// "32 MiB", "4 KiB", or plain bytes when not a whole unit.
std::string HumanBytes(uint64_t v) {
  if (v != 0 && v % (1ull << 30) == 0) {
    return absl::StrFormat("%d GiB", v >> 30);
  }
  if (v != 0 && v % (1ull << 20) == 0) {
    return absl::StrFormat("%d MiB", v >> 20);
  }
  if (v != 0 && v % (1ull << 10) == 0) {
    return absl::StrFormat("%d KiB", v >> 10);
  }
  return absl::StrFormat("%d", v);
}

bool IsAsymmetric(Layout layout) {
  return layout == Layout::kLeftAsymmetric ||
         layout == Layout::kRightAsymmetric;
}

}  // namespace

absl::StatusOr<Layout> ParseLayout(std::string_view text) {
  for (int i = 0; i < kLayoutCount; ++i) {
    if (EqualsIgnoreCase(text, kLayoutNames[i])) return static_cast<Layout>(i);
  }
  for (const LayoutAlias& alias : kLayoutAliases) {
    if (EqualsIgnoreCase(text, alias.name)) return alias.layout;
  }
  // Exactly one digit: the superblock / /proc/mdstat numbering.
  if (text.size() == 1 && text[0] >= '0' && text[0] < '0' + kLayoutCount) {
    return static_cast<Layout>(text[0] - '0');
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown layout '%s' (expected left-asymmetric, right-asymmetric, "
      "left-symmetric, right-symmetric, parity-first, parity-last or 0-5)",
      text));
}

std::string_view LayoutName(Layout layout) {
  if (!IsValidLayout(layout)) return "unknown";
  return kLayoutNames[static_cast<int>(layout)];
}

absl::StatusOr<Geometry> Geometry::Make(int level, Layout layout,
                                        uint64_t chunk_bytes, int raid_disks,
                                        uint64_t member_bytes) {
  if (level != 4 && level != 5) {
    return absl::InvalidArgumentError(
        absl::StrFormat("level %d not supported (levels 4 and 5)", level));
  }
  if (!IsValidLayout(layout)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "layout %d not supported (0-5)", static_cast<int>(layout)));
  }
  // RAID4 has a single layout; insisting on the explicit value keeps one
  // representation per shape (operator== then means "same placement").
  if (level == 4 && layout != Layout::kParityLast) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "level 4 requires layout parity-last (got %s)", LayoutName(layout)));
  }
  if (!IsPowerOfTwo(chunk_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk size %d is not a power of two", chunk_bytes));
  }
  if (chunk_bytes < kMinChunkBytes || chunk_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk size %s is out of range %s..%s", HumanBytes(chunk_bytes),
        HumanBytes(kMinChunkBytes), HumanBytes(kMaxChunkBytes)));
  }
  if (raid_disks < kMinDisks || raid_disks > kMaxDisks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "raid disks %d out of range %d..%d", raid_disks, kMinDisks, kMaxDisks));
  }
  if (member_bytes == 0) {
    return absl::InvalidArgumentError(
        "member size 0 is too small (need at least one chunk)");
  }
  if (member_bytes % chunk_bytes != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("member size %d is not a multiple of the chunk (%s)",
                        member_bytes, HumanBytes(chunk_bytes)));
  }
  // array_bytes() and every logical offset must fit in 64 bits.
  if (member_bytes >
      std::numeric_limits<uint64_t>::max() / uint64_t(raid_disks - 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "member size %d is too large for %d raid disks (array size overflows "
        "64 bits)",
        member_bytes, raid_disks));
  }
  return Geometry(level, layout, chunk_bytes, raid_disks, member_bytes);
}

int Geometry::ParityDisk(uint64_t stripe) const {
  const int n = raid_disks_;
  const int last = n - 1;
  // Level 4 is only ever built with kParityLast (Make enforces it).
  switch (layout_) {
    case Layout::kLeftAsymmetric:
    case Layout::kLeftSymmetric:
      // Starts on the last slot, moves one slot left per stripe.
      return last - static_cast<int>(stripe % n);
    case Layout::kRightAsymmetric:
    case Layout::kRightSymmetric:
      // Starts on slot 0, moves one slot right per stripe.
      return static_cast<int>(stripe % n);
    case Layout::kParityFirst:
      return 0;
    case Layout::kParityLast:
      return last;
  }
  assert(false && "invalid layout");
  return last;
}

int Geometry::DataDisk(uint64_t stripe, int k) const {
  assert(k >= 0 && k < data_disks());
  const int pd = ParityDisk(stripe);
  switch (layout_) {
    case Layout::kLeftAsymmetric:
    case Layout::kRightAsymmetric:
      // Left to right, stepping over the parity slot.
      return k < pd ? k : k + 1;
    case Layout::kLeftSymmetric:
    case Layout::kRightSymmetric:
      // Starts just after parity and wraps.
      return (pd + 1 + k) % raid_disks_;
    case Layout::kParityFirst:
      return k + 1;
    case Layout::kParityLast:
      return k;
  }
  assert(false && "invalid layout");
  return k;
}

int Geometry::DataIndex(uint64_t stripe, int disk) const {
  assert(disk >= 0 && disk < raid_disks_);
  const int pd = ParityDisk(stripe);
  if (disk == pd) return -1;
  if (IsAsymmetric(layout_)) return disk > pd ? disk - 1 : disk;
  switch (layout_) {
    case Layout::kLeftSymmetric:
    case Layout::kRightSymmetric:
      return (disk < pd ? disk + raid_disks_ : disk) - (pd + 1);
    case Layout::kParityFirst:
      return disk - 1;
    default:  // kParityLast
      return disk;
  }
}

Location Geometry::Map(uint64_t array_offset) const {
  assert(array_offset < array_bytes());
  const uint64_t dd = static_cast<uint64_t>(data_disks());
  // chunk_bytes_ is a power of two (Make checks); the compiler cannot know,
  // so shift and mask instead of dividing.
  const uint64_t chunk_number = array_offset >> std::countr_zero(chunk_bytes_);
  Location loc;
  loc.chunk_offset = array_offset & (chunk_bytes_ - 1);
  loc.stripe = chunk_number / dd;
  loc.data_index = static_cast<int>(chunk_number % dd);
  loc.parity_disk = ParityDisk(loc.stripe);
  loc.disk = DataDisk(loc.stripe, loc.data_index);
  loc.member_offset = loc.stripe * chunk_bytes_ + loc.chunk_offset;
  return loc;
}

std::optional<uint64_t> Geometry::Unmap(int disk,
                                        uint64_t member_offset) const {
  assert(member_offset < member_bytes_);
  const uint64_t stripe = member_offset >> std::countr_zero(chunk_bytes_);
  const int k = DataIndex(stripe, disk);
  if (k < 0) return std::nullopt;
  const uint64_t chunk_number =
      stripe * static_cast<uint64_t>(data_disks()) + static_cast<uint64_t>(k);
  return chunk_number * chunk_bytes_ + (member_offset & (chunk_bytes_ - 1));
}

uint64_t Geometry::PreferredIoBytes() const {
  // chunk is a power of two, so the largest power of two dividing
  // chunk * dd is chunk times the lowest set bit of dd.
  const uint64_t dd = static_cast<uint64_t>(data_disks());
  return chunk_bytes_ * (dd & (~dd + 1));
}

}  // namespace uraid
