// SPDX-License-Identifier: MIT
// Internal: the shape of an array's data (geometry + data offset) as the
// data path sees it, which a reshape makes two-valued.
//
// Outside a reshape an array has one shape. During one, each array byte
// lives in the old or the new shape depending on which side of the reshape
// front it is; the reshape router (reshape.cc) runs each piece of a request
// inside a ShapeScope naming the shape that holds it, and every stripe-level
// routine in array.cc reads `geo_` / `data_offset_`, which resolve to the
// calling thread's scoped shape or else to the array's current one. This
// keeps the stripe code (plans, failures, read-error correction, bitmap)
// single-shaped and shared by both sides of a reshape instead of growing a
// geometry parameter on every function.
//
// Thread-safety: Shapes are immutable once published and live as long as
// their array (ArrayImpl keeps every shape it ever used), so a pointer
// loaded from the atomic stays valid. The override is per thread.

#ifndef URAID_SRC_SHAPE_H_
#define URAID_SRC_SHAPE_H_

#include <atomic>
#include <cstdint>
#include <optional>

#include "uraid/geometry.h"

namespace uraid {

struct Shape {
  Geometry geo;
  uint64_t data_offset = 0;  // bytes from the start of each member
  // Or'ed into stripe-lock keys so that stripe k of the new shape and
  // stripe k of the old one are different locks.
  uint64_t lock_tag = 0;
};

// The calling thread's shape for one array (see ShapeScope).
struct ShapeOverride {
  const void* owner = nullptr;
  const Shape* shape = nullptr;
};
inline thread_local ShapeOverride t_shape_override;

// Runs the enclosed code in `shape` for the array `owner`. Nests.
class ShapeScope {
 public:
  ShapeScope(const void* owner, const Shape* shape) : saved_(t_shape_override) {
    t_shape_override = ShapeOverride{owner, shape};
  }
  ~ShapeScope() { t_shape_override = saved_; }
  ShapeScope(const ShapeScope&) = delete;
  ShapeScope& operator=(const ShapeScope&) = delete;

 private:
  ShapeOverride saved_;
};

// What `geo_` / `data_offset_` are inside ArrayImpl: the thread's scoped
// shape when it has one for this array, else the array's current shape.
class LiveShape {
 public:
  LiveShape(const void* owner, const std::atomic<const Shape*>* current)
      : owner_(owner), current_(current) {}
  const Shape& get() const {
    const ShapeOverride& o = t_shape_override;
    if (o.owner == owner_ && o.shape != nullptr) return *o.shape;
    return *current_->load(std::memory_order_acquire);
  }

 private:
  const void* owner_;
  const std::atomic<const Shape*>* current_;
};

// Geometry's read-only interface, forwarded to the live shape.
class LiveGeometry {
 public:
  explicit LiveGeometry(LiveShape shape) : shape_(shape) {}
  const Geometry& get() const { return shape_.get().geo; }
  operator const Geometry&() const { return get(); }  // NOLINT: a view

  int level() const { return get().level(); }
  Layout layout() const { return get().layout(); }
  uint64_t chunk_bytes() const { return get().chunk_bytes(); }
  int raid_disks() const { return get().raid_disks(); }
  int data_disks() const { return get().data_disks(); }
  uint64_t member_bytes() const { return get().member_bytes(); }
  uint64_t stripe_count() const { return get().stripe_count(); }
  uint64_t stripe_data_bytes() const { return get().stripe_data_bytes(); }
  uint64_t array_bytes() const { return get().array_bytes(); }
  int ParityDisk(uint64_t stripe) const { return get().ParityDisk(stripe); }
  int DataDisk(uint64_t stripe, int k) const {
    return get().DataDisk(stripe, k);
  }
  int DataIndex(uint64_t stripe, int disk) const {
    return get().DataIndex(stripe, disk);
  }
  Location Map(uint64_t array_offset) const { return get().Map(array_offset); }
  std::optional<uint64_t> Unmap(int disk, uint64_t member_offset) const {
    return get().Unmap(disk, member_offset);
  }
  uint64_t PreferredIoBytes() const { return get().PreferredIoBytes(); }

 private:
  LiveShape shape_;
};

// The live shape's data offset, in bytes.
class LiveDataOffset {
 public:
  explicit LiveDataOffset(LiveShape shape) : shape_(shape) {}
  operator uint64_t() const { return shape_.get().data_offset; }  // NOLINT

 private:
  LiveShape shape_;
};

}  // namespace uraid

#endif  // URAID_SRC_SHAPE_H_
