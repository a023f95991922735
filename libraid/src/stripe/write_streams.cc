// SPDX-License-Identifier: MIT
#include "stripe/write_streams.h"

namespace uraid {

bool WriteStreams::Continues(uint64_t offset, uint64_t len) const {
  // Overflow: offsets and lengths are an array's, far below 2^58.
  const uint64_t reach = kReorderLengths * len;
  for (const std::atomic<uint64_t>& slot : ends_) {
    const uint64_t end = slot.load(std::memory_order_relaxed);
    if (end != 0 && offset >= end && offset - end <= reach) return true;
  }
  return false;
}

void WriteStreams::Record(uint64_t offset, uint64_t len) {
  const uint32_t i = next_.fetch_add(1, std::memory_order_relaxed) % kSlots;
  ends_[i].store(offset + len, std::memory_order_relaxed);
}

}  // namespace uraid
