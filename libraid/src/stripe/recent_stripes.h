// SPDX-License-Identifier: MIT
// Internal: the last kSlots stripes some event touched, for a cheap "did
// that happen here lately?". The stripe writer records the stripes it
// writes a piece of straight through while the array cannot spare a
// member, and holds a gathered piece there only when its stripe is not
// among them: the rest of such a stripe may already be on the members, so
// a piece held for it to fill would wait its whole hold for nothing (and
// stop holding for everyone: engine/stripe_writer.h, AwaitHeld).
//
// Thread-safe and lock-free: relaxed atomics. Writers racing may overwrite
// each other's stripe or read one a moment old; that changes only whether
// a piece is held, never what is written.

#ifndef URAID_SRC_STRIPE_RECENT_STRIPES_H_
#define URAID_SRC_STRIPE_RECENT_STRIPES_H_

#include <array>
#include <atomic>
#include <cstdint>

namespace uraid {

class RecentStripes {
 public:
  // Stripes remembered: a few streams' queues of requests in flight.
  static constexpr int kSlots = 64;

  void Record(uint64_t stripe) {
    const uint32_t i = next_.fetch_add(1, std::memory_order_relaxed);
    slots_[i % kSlots].store(stripe + 1, std::memory_order_relaxed);
  }
  bool Contains(uint64_t stripe) const {
    for (const auto& s : slots_) {
      if (s.load(std::memory_order_relaxed) == stripe + 1) return true;
    }
    return false;
  }

 private:
  std::array<std::atomic<uint64_t>, kSlots> slots_{};  // stripe + 1; 0: none
  std::atomic<uint32_t> next_{0};
};

}  // namespace uraid

#endif  // URAID_SRC_STRIPE_RECENT_STRIPES_H_
