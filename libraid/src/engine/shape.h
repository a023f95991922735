// SPDX-License-Identifier: MIT
// Internal: the shape of an array's data (geometry + data offset), which a
// reshape makes two-valued.
//
// Outside a reshape an array has one shape. During one, each array byte
// lives in the old or the new shape depending on which side of the reshape
// front it is. Every stripe-level routine of the engine (StripeReader,
// StripeWriter, StripeScanner, StripeRebuilder, ReshapeCopier: read and
// write paths, reconstruction, read-error correction, scans, rebuilds, trim)
// takes the `const Shape&` it works in as an explicit argument: the
// reshape router (array/reshape_router.cc) passes the shape that holds each
// piece of a request, so the old shape's and the new shape's stripe code run
// side by side; everything else (client requests outside a reshape, jobs,
// superblock positions, Info) loads the array's current shape explicitly
// (ShapeSet::current). No state says which shape a thread is in.
//
// Thread-safety: Shapes are immutable once published and live as long as
// their array (its ShapeSet keeps every shape it ever had), so a reference
// to one stays valid for as long as the array, whichever shape is current
// by then.

#ifndef URAID_SRC_ENGINE_SHAPE_H_
#define URAID_SRC_ENGINE_SHAPE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "uraid/geometry.h"

namespace uraid {

struct Shape {
  Geometry geo;
  uint64_t data_offset = 0;  // bytes from the start of each member
  // Or'ed into stripe-lock keys so that stripe k of the new shape and
  // stripe k of the old one are different locks.
  uint64_t lock_tag = 0;
  // Unique among the shapes of one array (its index in the array's list):
  // what the survivor cache keys entries by, with the stripe, so rows read
  // in one shape are never served for the same stripe number of another
  // (lock tags repeat: the current shape's is always 0).
  uint64_t id = 0;
};

// Stripe-lock key of `stripe` of shape `sh`.
inline uint64_t LockKey(const Shape& sh, uint64_t stripe) {
  return stripe | sh.lock_tag;
}

// OutOfRange naming `op` when [offset, offset+len) leaves the array in
// shape `sh` (shape.cc).
absl::Status CheckRange(const Shape& sh, const char* op, size_t len,
                        uint64_t offset);

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_SHAPE_H_
