// SPDX-License-Identifier: MIT
#include "jobs/reshape_gate.h"

#include <algorithm>

namespace uraid {

bool ReshapeGate::ClearOfWindow(uint64_t lo, uint64_t hi) const {
  return !closed_ || !Overlap(lo, hi, win_lo_, win_hi_);
}

bool ReshapeGate::WindowVacated() const {
  // Copies: the analysis cannot see that the lambda runs under mu_.
  const uint64_t lo = win_lo_;
  const uint64_t hi = win_hi_;
  return std::none_of(held_.begin(), held_.end(), [&](const auto& r) {
    return Overlap(r.first, r.second, lo, hi);
  });
}

void ReshapeGate::Enter(uint64_t lo, uint64_t hi) {
  struct Arg {
    const ReshapeGate* gate;
    uint64_t lo, hi;
  } arg{this, lo, hi};
  mu_.LockWhen(Condition(
      +[](Arg* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return a->gate->ClearOfWindow(a->lo, a->hi);
      },
      &arg));
  held_.emplace_back(lo, hi);
  mu_.Unlock();
}

void ReshapeGate::Leave(uint64_t lo, uint64_t hi) {
  MutexLock lock(&mu_);
  auto it = std::find(held_.begin(), held_.end(), std::make_pair(lo, hi));
  if (it != held_.end()) {
    *it = held_.back();
    held_.pop_back();
  }
}

void ReshapeGate::Close(uint64_t lo, uint64_t hi) {
  MutexLock lock(&mu_);
  closed_ = true;
  win_lo_ = lo;
  win_hi_ = hi;
  mu_.Await(Condition(
      +[](ReshapeGate* g)
           ABSL_NO_THREAD_SAFETY_ANALYSIS { return g->WindowVacated(); },
      this));
}

void ReshapeGate::Open() {
  MutexLock lock(&mu_);
  closed_ = false;
}

}  // namespace uraid
