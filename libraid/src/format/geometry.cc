// SPDX-License-Identifier: MIT
// md RAID4/RAID5/RAID6 layout math. Written from the prose description of
// md's algorithms in shared/reference/md-raid5.md §1 and
// md-raid6-and-journal.md §1 (md itself is GPL; nothing is copied from it).
//
// Every mapping splits a logical offset into (chunk number, offset in chunk);
// the chunk number splits into (stripe, data index k). The stripe fixes the
// member offset on every disk; the layout only decides which slot holds the
// parity (RAID6: P and Q) of a stripe and which slot holds each k. The
// RAID6 placements live in their own functions (Raid6Row and friends) so the
// RAID4/5 paths stay exactly as they were.

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

// The RAID6-only layouts' names, by md number (mdadm maps.c r6layout; the
// ddf-N-* capital N is mdadm's spelling).
struct LayoutName6 {
  Layout layout;
  std::string_view name;
};
constexpr LayoutName6 kRaid6OnlyNames[] = {
    {Layout::kDdfZeroRestart, "ddf-zero-restart"},
    {Layout::kDdfNRestart, "ddf-N-restart"},
    {Layout::kDdfNContinue, "ddf-N-continue"},
    {Layout::kLeftAsymmetric6, "left-asymmetric-6"},
    {Layout::kRightAsymmetric6, "right-asymmetric-6"},
    {Layout::kLeftSymmetric6, "left-symmetric-6"},
    {Layout::kRightSymmetric6, "right-symmetric-6"},
    {Layout::kParityFirst6, "parity-first-6"},
};

bool IsValidLayout(Layout layout) {
  int v = static_cast<int>(layout);
  return v >= 0 && v < kLayoutCount;
}

// md's algorithm_valid_raid6: 0..5, 8..10, 16..20.
bool IsValidRaid6Layout(Layout layout) {
  const int v = static_cast<int>(layout);
  return (v >= 0 && v <= 5) || (v >= 8 && v <= 10) || (v >= 16 && v <= 20);
}

bool IsDdf(Layout layout) {
  return layout == Layout::kDdfZeroRestart || layout == Layout::kDdfNRestart ||
         layout == Layout::kDdfNContinue;
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

// Where P and Q of one RAID6 stripe are (md's raid5_compute_sector, level 6).
struct Raid6Parity {
  int p;
  int q;
};

Raid6Parity Raid6Row(Layout layout, int n, uint64_t stripe) {
  const uint64_t un = static_cast<uint64_t>(n);
  const int r = static_cast<int>(stripe % un);
  // The asymmetric ones: Q just after P, or on disk 0 when P is last.
  auto after = [n](int p) { return Raid6Parity{p, p == n - 1 ? 0 : p + 1}; };
  switch (layout) {
    case Layout::kLeftAsymmetric:
      return after(n - 1 - r);
    case Layout::kRightAsymmetric:
    case Layout::kDdfZeroRestart:  // right-asymmetric, DDF's Q order
      return after(r);
    case Layout::kDdfNRestart:
      // left-asymmetric shifted by one stripe: stripe 0 is D..D P Q.
      return after(n - 1 - static_cast<int>((stripe + 1) % un));
    case Layout::kLeftSymmetric:
      return {n - 1 - r, (n - r) % n};
    case Layout::kRightSymmetric:
      return {r, (r + 1) % n};
    case Layout::kDdfNContinue:
      // left-symmetric with Q just before P.
      return {n - 1 - r, (2 * n - 2 - r) % n};
    case Layout::kParityFirst:
      return {0, 1};
    case Layout::kParityLast:
      return {n - 2, n - 1};
    case Layout::kLeftAsymmetric6:
    case Layout::kLeftSymmetric6:
      // RAID5's rotation over disks 0..n-2; Q fixed on the last disk.
      return {n - 2 - static_cast<int>(stripe % (un - 1)), n - 1};
    case Layout::kRightAsymmetric6:
    case Layout::kRightSymmetric6:
      return {static_cast<int>(stripe % (un - 1)), n - 1};
    case Layout::kParityFirst6:
      return {0, n - 1};
  }
  assert(false && "invalid RAID6 layout");
  return {n - 2, n - 1};
}

int Raid6DataDisk(Layout layout, int n, uint64_t stripe, int k) {
  const Raid6Parity row = Raid6Row(layout, n, stripe);
  switch (layout) {
    case Layout::kLeftAsymmetric:
    case Layout::kRightAsymmetric:
    case Layout::kDdfZeroRestart:
    case Layout::kDdfNRestart:
      // Left to right, stepping over P and Q (Q P at the ends when P is
      // last: Q D D D P).
      if (row.p == n - 1) return k + 1;
      return k < row.p ? k : k + 2;
    case Layout::kLeftSymmetric:
    case Layout::kRightSymmetric:
      return (row.p + 2 + k) % n;  // after Q, wrapping
    case Layout::kDdfNContinue:
      return (row.p + 1 + k) % n;  // after P, wrapping round to Q
    case Layout::kParityFirst:
      return k + 2;
    case Layout::kParityLast:
      return k;
    case Layout::kLeftAsymmetric6:
    case Layout::kRightAsymmetric6:
      return k < row.p ? k : k + 1;
    case Layout::kLeftSymmetric6:
    case Layout::kRightSymmetric6:
      return (row.p + 1 + k) % (n - 1);
    case Layout::kParityFirst6:
      return k + 1;
  }
  assert(false && "invalid RAID6 layout");
  return k;
}

int Raid6DataIndex(Layout layout, int n, uint64_t stripe, int disk) {
  const Raid6Parity row = Raid6Row(layout, n, stripe);
  if (disk == row.p || disk == row.q) return -1;
  switch (layout) {
    case Layout::kLeftAsymmetric:
    case Layout::kRightAsymmetric:
    case Layout::kDdfZeroRestart:
    case Layout::kDdfNRestart:
      if (row.p == n - 1) return disk - 1;
      return disk < row.p ? disk : disk - 2;
    case Layout::kLeftSymmetric:
    case Layout::kRightSymmetric:
      return (disk - row.p - 2 + 2 * n) % n;
    case Layout::kDdfNContinue:
      return (disk - row.p - 1 + n) % n;
    case Layout::kParityFirst:
      return disk - 2;
    case Layout::kParityLast:
      return disk;
    case Layout::kLeftAsymmetric6:
    case Layout::kRightAsymmetric6:
      return disk < row.p ? disk : disk - 1;
    case Layout::kLeftSymmetric6:
    case Layout::kRightSymmetric6:
      return (disk - row.p - 1 + (n - 1)) % (n - 1);
    case Layout::kParityFirst6:
      return disk - 1;
  }
  assert(false && "invalid RAID6 layout");
  return -1;
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

absl::StatusOr<Layout> ParseLayout(std::string_view text, int level) {
  if (level == 4 || level == 5) return ParseLayout(text);
  if (level != 6) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "no layouts for level %d (levels 4, 5 and 6 have them)", level));
  }
  // mdadm's r6layout: the RAID5 names and two-letter aliases mean the same
  // numbers, the ddf names are the DDF layouts (not RAID5 aliases), and the
  // -6 names are the conversion layouts.
  for (const LayoutName6& l : kRaid6OnlyNames) {
    if (EqualsIgnoreCase(text, l.name)) return l.layout;
  }
  for (int i = 0; i < kLayoutCount; ++i) {
    if (EqualsIgnoreCase(text, kLayoutNames[i])) return static_cast<Layout>(i);
  }
  for (const LayoutAlias& alias : kLayoutAliases) {
    if (alias.name.substr(0, 4) == "ddf-") continue;  // matched above
    if (EqualsIgnoreCase(text, alias.name)) return alias.layout;
  }
  // md's number, in its shortest spelling ("8", "16"; not "08").
  const bool leading_zero = text.size() > 1 && text[0] == '0';
  if (!text.empty() && text.size() <= 2 && !leading_zero) {
    int v = 0;
    bool digits = true;
    for (char c : text) {
      if (c < '0' || c > '9') digits = false;
      v = v * 10 + (c - '0');
    }
    if (digits && IsValidRaid6Layout(static_cast<Layout>(v))) {
      return static_cast<Layout>(v);
    }
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown RAID6 layout '%s' (expected left-asymmetric, right-asymmetric, "
      "left-symmetric, right-symmetric, parity-first, parity-last, "
      "ddf-zero-restart, ddf-N-restart, ddf-N-continue, left-asymmetric-6, "
      "right-asymmetric-6, left-symmetric-6, right-symmetric-6, "
      "parity-first-6 or 0-5, 8-10, 16-20)",
      text));
}

std::string_view LayoutName(Layout layout) {
  for (const LayoutName6& l : kRaid6OnlyNames) {
    if (l.layout == layout) return l.name;
  }
  if (!IsValidLayout(layout)) return "unknown";
  return kLayoutNames[static_cast<int>(layout)];
}

absl::StatusOr<Geometry> Geometry::Make(int level, Layout layout,
                                        uint64_t chunk_bytes, int raid_disks,
                                        uint64_t member_bytes) {
  if (level != 4 && level != 5 && level != 6) {
    return absl::InvalidArgumentError(
        absl::StrFormat("level %d not supported (levels 4, 5 and 6)", level));
  }
  if (level == 6 && !IsValidRaid6Layout(layout)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layout %d not supported at level 6 (0-5, 8-10, 16-20)",
                        static_cast<int>(layout)));
  }
  if (level != 6 && !IsValidLayout(layout)) {
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
  const int min_disks = level == 6 ? kMinRaid6Disks : kMinDisks;
  if (raid_disks < min_disks || raid_disks > kMaxDisks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "raid disks %d out of range %d..%d", raid_disks, min_disks, kMaxDisks));
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
  const uint64_t data_disks = raid_disks - (level == 6 ? 2 : 1);
  if (member_bytes > std::numeric_limits<uint64_t>::max() / data_disks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "member size %d is too large for %d raid disks (array size overflows "
        "64 bits)",
        member_bytes, raid_disks));
  }
  return Geometry(level, layout, chunk_bytes, raid_disks, member_bytes);
}

int Geometry::ParityDisk(uint64_t stripe) const {
  if (level_ == 6) return Raid6Row(layout_, raid_disks_, stripe).p;
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
    default:  // RAID6-only layouts: Make refuses them at levels 4, 5
      break;
  }
  assert(false && "invalid layout");
  return last;
}

int Geometry::DataDisk(uint64_t stripe, int k) const {
  assert(k >= 0 && k < data_disks());
  if (level_ == 6) return Raid6DataDisk(layout_, raid_disks_, stripe, k);
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
    default:  // RAID6-only layouts: Make refuses them at levels 4, 5
      break;
  }
  assert(false && "invalid layout");
  return k;
}

int Geometry::DataIndex(uint64_t stripe, int disk) const {
  assert(disk >= 0 && disk < raid_disks_);
  if (level_ == 6) return Raid6DataIndex(layout_, raid_disks_, stripe, disk);
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

int Geometry::QDisk(uint64_t stripe) const {
  if (level_ != 6) return -1;
  return Raid6Row(layout_, raid_disks_, stripe).q;
}

int Geometry::SyndromeSlots() const {
  if (level_ != 6) return 0;
  return IsDdf(layout_) ? raid_disks_ : raid_disks_ - 2;
}

int Geometry::QSlot(uint64_t stripe, int disk) const {
  assert(disk >= 0 && disk < raid_disks_);
  if (level_ != 6) return -1;
  const int n = raid_disks_;
  const Raid6Parity row = Raid6Row(layout_, n, stripe);
  if (disk == row.p || disk == row.q) return -1;
  // DDF: every disk has a slot, its own number (P and Q count as zeros).
  if (IsDdf(layout_)) return disk;
  // md's layouts: count the disks from the one after Q up to `disk`,
  // skipping P and Q (Q itself is never in between: it is the start - 1).
  const int d0 = (row.q + 1) % n;
  const int distance = (disk - d0 + n) % n;
  const int p_before = (row.p - d0 + n) % n < distance ? 1 : 0;
  return distance - p_before;
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
