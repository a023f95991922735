// SPDX-License-Identifier: MIT
// Internal: keeps client requests out of the window a reshape is moving.
//
// A reshape copies the array window by window from the old shape to the
// new one. While a window is being copied, a request touching it could
// read a half-moved stripe or write data the copy then overwrites with
// the old contents, so such requests wait; requests elsewhere go on. The
// job in turn waits for requests already inside the window to leave
// before it starts copying it.
//
// Ranges are array byte ranges [lo, hi). Thread-safe.

#ifndef URAID_SRC_RESHAPE_GATE_H_
#define URAID_SRC_RESHAPE_GATE_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "base/sync.h"

namespace uraid {

class ReshapeGate {
 public:
  // Waits until [lo, hi) is clear of the window, then holds it until
  // Leave(lo, hi). While held, no window that overlaps it is closed.
  void Enter(uint64_t lo, uint64_t hi);
  void Leave(uint64_t lo, uint64_t hi);

  // Closes the window [lo, hi) to new requests and waits until the held
  // ranges overlapping it are left. One window at a time (the job's).
  void Close(uint64_t lo, uint64_t hi);
  void Open();

 private:
  static bool Overlap(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
    return a < d && c < b;
  }
  bool ClearOfWindow(uint64_t lo, uint64_t hi) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool WindowVacated() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t win_lo_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t win_hi_ ABSL_GUARDED_BY(mu_) = 0;
  // Ranges held by requests (one entry per Enter; few at a time).
  std::vector<std::pair<uint64_t, uint64_t>> held_ ABSL_GUARDED_BY(mu_);
};

}  // namespace uraid

#endif  // URAID_SRC_RESHAPE_GATE_H_
