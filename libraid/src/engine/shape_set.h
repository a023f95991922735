// SPDX-License-Identifier: MIT
// Internal: every shape an array has had (shape.h), which one is current,
// and whether a reshape has a second one live.
//
// Outside a reshape, requests, jobs and Info work in current(). A reshape
// (jobs/reshape_job.h) adds its new shape and sets reshaping(); requests
// then go through the array's router, which hands each piece the shape
// that holds it. A level change or the end of a reshape makes another
// shape current. Shapes are never removed: a request or a job may still
// hold a reference to an old one.
//
// Thread-safety: thread-safe. current() and reshaping() are lock-free
// reads (acquire), for the I/O paths; Add takes an internal leaf mutex,
// so it may be called with any of the array's locks held.

#ifndef URAID_SRC_ENGINE_SHAPE_SET_H_
#define URAID_SRC_ENGINE_SHAPE_SET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/sync.h"
#include "engine/shape.h"

namespace uraid {

class ShapeSet {
 public:
  // The first shape (lock tag 0) is current.
  ShapeSet(const Geometry& geo, uint64_t data_offset)
      : current_(Add(geo, data_offset, /*lock_tag=*/0)) {}
  ShapeSet(const ShapeSet&) = delete;
  ShapeSet& operator=(const ShapeSet&) = delete;

  const Shape& current() const {
    return *current_.load(std::memory_order_acquire);
  }
  // Adds a shape with the next id; it lives as long as the set. It is not
  // current until MakeCurrent.
  const Shape* Add(const Geometry& geo, uint64_t data_offset, uint64_t lock_tag)
      ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    const uint64_t id = shapes_.size();
    shapes_.push_back(
        std::make_unique<Shape>(Shape{geo, data_offset, lock_tag, id}));
    return shapes_.back().get();
  }
  // REQUIRES: `sh` came from Add.
  void MakeCurrent(const Shape* sh) {
    current_.store(sh, std::memory_order_release);
  }

  // True from the moment a reshape is published (its new shape added)
  // until it ends: requests take the router, the write cache is bypassed.
  bool reshaping() const { return reshaping_.load(std::memory_order_acquire); }
  void SetReshaping(bool on) {
    reshaping_.store(on, std::memory_order_release);
  }

 private:
  Mutex mu_;
  std::vector<std::unique_ptr<Shape>> shapes_ ABSL_GUARDED_BY(mu_);
  std::atomic<const Shape*> current_;
  std::atomic<bool> reshaping_{false};
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_SHAPE_SET_H_
