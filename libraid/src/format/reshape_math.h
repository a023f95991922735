// SPDX-License-Identifier: MIT
// Internal: the pure arithmetic of a reshape without a backup file.
//
// md's modern reshape (mdadm's set_new_data_offset) writes the new shape
// below the old one: the new data offset is lower by `delta` bytes, taken
// from the headroom between the metadata and the data. Copying forwards,
// the new shape's rows for the array bytes [front, end) then land below the
// old rows still holding bytes not yet copied, as long as the window end
// respects ReshapeWindowEnd; so a crash mid-window leaves the old copy of
// everything from the last checkpointed front intact, and the copy simply
// restarts there. All offsets and sizes are bytes. No I/O; thread-compatible.

#ifndef URAID_SRC_RESHAPE_MATH_H_
#define URAID_SRC_RESHAPE_MATH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "uraid/geometry.h"

namespace uraid {

// The new shape's data offset for a reshape from `from` (data at
// `from_offset`) to `to`, given that bytes below `metadata_end` hold the
// superblock and bitmap. md's amount of movement (the least common
// multiple of the two stripes' data, divided by the old data-disk count),
// rounded up to the larger chunk, or as much of it as the headroom allows,
// rounded down; at least the larger chunk. FailedPrecondition naming the
// headroom when even that does not fit; InvalidArgument for a shrink (the
// new shape smaller than the old: md runs those backwards, uraid does not).
absl::StatusOr<uint64_t> ChooseReshapeDataOffset(const Geometry& from,
                                                 uint64_t from_offset,
                                                 const Geometry& to,
                                                 uint64_t metadata_end);

// How far a window starting at `front` (a multiple of
// to.stripe_data_bytes()) may reach: the largest multiple of
// to.stripe_data_bytes() not above front + max_window or to.array_bytes()
// whose new-shape rows all lie below the old-shape row holding `front`.
// Returns `front` when no window fits (offsets too close together).
// REQUIRES: to_offset < from_offset.
uint64_t ReshapeWindowEnd(const Geometry& from, uint64_t from_offset,
                          const Geometry& to, uint64_t to_offset,
                          uint64_t front, uint64_t max_window);

// Checks a reshape found in the superblocks before resuming it: the
// position on a new-stripe boundary and inside the new shape, the new data
// offset below the old and above the metadata, and room for a window at
// the position. The error names the field.
absl::Status ValidateReshapeResume(const Geometry& from, uint64_t from_offset,
                                   const Geometry& to, uint64_t to_offset,
                                   uint64_t position, uint64_t metadata_end);

// The superblock's layout field for `g`: md stores 0 for a RAID4 array.
inline uint32_t MdLayout(const Geometry& g) {
  return g.level() == 4 ? 0 : static_cast<uint32_t>(g.layout());
}

}  // namespace uraid

#endif  // URAID_SRC_RESHAPE_MATH_H_
