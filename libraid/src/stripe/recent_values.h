// SPDX-License-Identifier: MIT
// Internal: the last N values some event recorded, for a cheap "did one
// like this happen lately?" on the write path: a ring of relaxed atomics,
// the oldest overwritten. WriteStreams keeps recent write ends in one,
// the stripe writer the stripes it wrote through in part while the array
// could not spare a member.
//
// Thread-safe and lock-free. Writers racing may overwrite each other's
// value or a reader see one a moment old; users only take hints from it
// (whether to gather or hold a piece), never decide what is written.

#ifndef URAID_SRC_STRIPE_RECENT_VALUES_H_
#define URAID_SRC_STRIPE_RECENT_VALUES_H_

#include <array>
#include <atomic>
#include <cstdint>

namespace uraid {

template <int N>
class RecentValues {
 public:
  // `value` != 0 (0 marks a slot never written).
  void Record(uint64_t value) {
    const uint32_t i = next_.fetch_add(1, std::memory_order_relaxed) % N;
    slots_[i].store(value, std::memory_order_relaxed);
  }
  // Whether `pred` holds for one of the values recorded (slots never
  // written are skipped).
  template <typename Pred>
  bool Any(Pred pred) const {
    for (const std::atomic<uint64_t>& slot : slots_) {
      const uint64_t v = slot.load(std::memory_order_relaxed);
      if (v != 0 && pred(v)) return true;
    }
    return false;
  }

 private:
  std::array<std::atomic<uint64_t>, N> slots_{};
  std::atomic<uint32_t> next_{0};
};

}  // namespace uraid

#endif  // URAID_SRC_STRIPE_RECENT_VALUES_H_
