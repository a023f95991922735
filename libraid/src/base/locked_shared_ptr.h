// SPDX-License-Identifier: MIT
// Internal: a shared_ptr that threads load and replace at once, under a
// leaf mutex.
//
// Why not std::atomic<std::shared_ptr<T>>: libstdc++ 12 implements it with
// a lock bit in the control-block word whose unlock after a load is
// relaxed, which ThreadSanitizer reports as a race between a load and the
// next store (seen in ppl_switch_test under TSan). A mutex costs the same
// uncontended (one lock per load) and every checker understands it.
//
// Thread-safety: load and store from any threads. A load returns its own
// reference, which stays valid whatever is stored after.

#ifndef URAID_SRC_BASE_LOCKED_SHARED_PTR_H_
#define URAID_SRC_BASE_LOCKED_SHARED_PTR_H_

#include <memory>
#include <utility>

#include "base/sync.h"

namespace uraid {

template <typename T>
class LockedSharedPtr {
 public:
  std::shared_ptr<T> load() const {
    MutexLock lock(&mu_);
    return ptr_;
  }
  // The old value is released outside the lock (its destructor may run
  // anything).
  void store(std::shared_ptr<T> p) {
    {
      MutexLock lock(&mu_);
      ptr_.swap(p);
    }
  }

 private:
  mutable Mutex mu_;  // leaf
  std::shared_ptr<T> ptr_ ABSL_GUARDED_BY(mu_);
};

}  // namespace uraid

#endif  // URAID_SRC_BASE_LOCKED_SHARED_PTR_H_
