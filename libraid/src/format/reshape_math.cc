// SPDX-License-Identifier: MIT
#include "format/reshape_math.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_format.h"

namespace uraid {
namespace {

// The member row (bytes from the data offset) where the old shape's
// stripe holding array byte `pos` starts; every row from here on may hold
// bytes not yet copied.
uint64_t OldRowStart(const Geometry& from, uint64_t pos) {
  const uint64_t stripe = pos / from.stripe_data_bytes();
  return std::min(stripe * from.chunk_bytes(), from.member_bytes());
}

}  // namespace

absl::StatusOr<uint64_t> ChooseReshapeDataOffset(const Geometry& from,
                                                 uint64_t from_offset,
                                                 const Geometry& to,
                                                 uint64_t metadata_end) {
  if (to.array_bytes() < from.array_bytes()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the new shape holds %d bytes, less than the array's %d: shrinking "
        "is not supported",
        to.array_bytes(), from.array_bytes()));
  }
  if (to.member_bytes() != from.member_bytes()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the new shape uses %d bytes of each member, the old %d: a reshape "
        "keeps the component size (round it to both chunks first)",
        to.member_bytes(), from.member_bytes()));
  }
  const uint64_t big = std::max(from.chunk_bytes(), to.chunk_bytes());
  const uint64_t lcm =
      std::lcm(from.stripe_data_bytes(), to.stripe_data_bytes());
  uint64_t want = lcm / static_cast<uint64_t>(from.data_disks());
  want = (want + big - 1) / big * big;
  const uint64_t headroom =
      from_offset > metadata_end ? from_offset - metadata_end : 0;
  const uint64_t delta = std::min(want, headroom / big * big);
  if (delta < big) {
    // The remedy is at create time: more room before the data (mdadm's
    // --data-offset); each reshape moves the data down by up to `want`.
    return absl::FailedPreconditionError(absl::StrFormat(
        "no room to reshape without a backup file: the data offset (%d "
        "bytes) leaves %d bytes of headroom after the metadata, and the new "
        "shape must move down by at least one chunk (%d bytes). An array "
        "created with more room before its data reshapes without one: "
        "uraid create --data-offset SIZE (mdadm's option), leaving %d bytes "
        "after the metadata for each reshape like this one",
        from_offset, headroom, big, want));
  }
  return from_offset - delta;
}

uint64_t ReshapeWindowEnd(const Geometry& from, uint64_t from_offset,
                          const Geometry& to, uint64_t to_offset,
                          uint64_t front, uint64_t max_window) {
  const uint64_t sd = to.stripe_data_bytes();
  // New rows below `limit` (relative to to_offset) are free to write.
  const uint64_t limit = from_offset - to_offset + OldRowStart(from, front);
  const uint64_t safe_end = limit / to.chunk_bytes() * sd;
  const uint64_t room = to.array_bytes() - std::min(front, to.array_bytes());
  uint64_t end = std::min(safe_end, front + std::min(max_window, room));
  end = end / sd * sd;
  return std::max(end, front);
}

absl::Status ValidateReshapeResume(const Geometry& from, uint64_t from_offset,
                                   const Geometry& to, uint64_t to_offset,
                                   uint64_t position, uint64_t metadata_end) {
  if (to_offset >= from_offset) {
    return absl::UnimplementedError(absl::StrFormat(
        "the reshape moves the data offset up (from %d to %d bytes): only "
        "forward reshapes into headroom below the data are supported",
        from_offset, to_offset));
  }
  if (to_offset < metadata_end) {
    return absl::DataLossError(absl::StrFormat(
        "the reshape's new data offset (%d bytes) overlaps the metadata, "
        "which ends at %d",
        to_offset, metadata_end));
  }
  if (position % to.stripe_data_bytes() != 0) {
    return absl::DataLossError(absl::StrFormat(
        "reshape position %d bytes is not on a stripe boundary of the new "
        "shape (%d data bytes per stripe)",
        position, to.stripe_data_bytes()));
  }
  if (position > to.array_bytes()) {
    return absl::DataLossError(
        absl::StrFormat("reshape position %d bytes is past the end of the "
                        "new shape (%d bytes)",
                        position, to.array_bytes()));
  }
  if (position < to.array_bytes() &&
      ReshapeWindowEnd(from, from_offset, to, to_offset, position,
                       UINT64_MAX) == position) {
    return absl::DataLossError(absl::StrFormat(
        "reshape position %d bytes too early for the data offsets (%d -> "
        "%d): the next window would overwrite data not yet copied",
        position, from_offset, to_offset));
  }
  return absl::OkStatus();
}

}  // namespace uraid
