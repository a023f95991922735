// SPDX-License-Identifier: MIT
// Internal: the array's statistics (uraid::Counters) as the data path and
// the jobs bump them: relaxed atomics, one per line of URAID_COUNTERS
// (uraid/counters.h), read together by Snapshot (a view
// that is not one instant, which statistics need not be).

#ifndef URAID_SRC_ENGINE_ATOMIC_COUNTERS_H_
#define URAID_SRC_ENGINE_ATOMIC_COUNTERS_H_

#include <atomic>
#include <cstdint>

#include "uraid/array.h"
#include "uraid/counters.h"

namespace uraid {

struct AtomicCounters {
#define URAID_ATOMIC_COUNTER(name, help) std::atomic<uint64_t> name{0};
  URAID_COUNTERS(URAID_ATOMIC_COUNTER)
#undef URAID_ATOMIC_COUNTER
  Counters Snapshot() const {
    Counters c;
#define URAID_SNAPSHOT_COUNTER(name, help) \
  c.name = name.load(std::memory_order_relaxed);
    URAID_COUNTERS(URAID_SNAPSHOT_COUNTER)
#undef URAID_SNAPSHOT_COUNTER
    return c;
  }
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_ATOMIC_COUNTERS_H_
