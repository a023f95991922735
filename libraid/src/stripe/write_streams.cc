// SPDX-License-Identifier: MIT
#include "stripe/write_streams.h"

namespace uraid {

bool WriteStreams::Continues(uint64_t offset, uint64_t len) const {
  // Overflow: offsets and lengths are an array's, far below 2^58.
  const uint64_t reach = kReorderLengths * len;
  return ends_.Any(
      [&](uint64_t end) { return offset >= end && offset - end <= reach; });
}

void WriteStreams::Record(uint64_t offset, uint64_t len) {
  ends_.Record(offset + len);
}

}  // namespace uraid
