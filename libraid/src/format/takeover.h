// SPDX-License-Identifier: MIT
// Internal: md's takeovers between RAID5 and RAID6, the pure part. md
// converts a RAID5 of n disks to a RAID6 of n + 1 without moving data: the
// RAID6 layout it takes (the "-6" layouts, parity-first-6 and parity-last)
// places data and P exactly as the RAID5 layout did and puts Q on the new,
// last disk, which is then rebuilt from the others. Back to RAID5 the same
// way: from those layouts only, dropping the last disk. No I/O;
// thread-compatible.

#ifndef URAID_SRC_FORMAT_TAKEOVER_H_
#define URAID_SRC_FORMAT_TAKEOVER_H_

#include "absl/status/statusor.h"
#include "uraid/geometry.h"

namespace uraid {

// The RAID6 layout of md's RAID5 -> RAID6 takeover of `from` (level 4 or
// 5): left-symmetric -> left-symmetric-6, ..., parity-first ->
// parity-first-6, parity-last (and RAID4) -> parity-last.
Layout Raid6TakeoverLayout(const Geometry& from);

// The RAID5 layout of md's RAID6 -> RAID5 takeover of `from` (level 6):
// the inverse of Raid6TakeoverLayout. InvalidArgument when `from`'s layout
// rotates Q among the disks (the standard and DDF layouts), naming the
// "-6" layout to restripe to first.
absl::StatusOr<Layout> Raid5TakeoverLayout(const Geometry& from);

// The "-6" layout that keeps `layout`'s data and P placement with Q last:
// what a RAID6 in `layout` restripes to before it can become a RAID5 (the
// DDF layouts, which have no such twin, are offered left-symmetric-6).
Layout Raid6WithQLast(Layout layout);

}  // namespace uraid

#endif  // URAID_SRC_FORMAT_TAKEOVER_H_
