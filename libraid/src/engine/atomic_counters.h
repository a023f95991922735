// SPDX-License-Identifier: MIT
// Internal: the array's statistics (uraid::Counters) as the data path and
// the jobs bump them: relaxed atomics, read together by Snapshot (a view
// that is not one instant, which statistics need not be).

#ifndef URAID_SRC_ENGINE_ATOMIC_COUNTERS_H_
#define URAID_SRC_ENGINE_ATOMIC_COUNTERS_H_

#include <atomic>
#include <cstdint>

#include "uraid/array.h"

namespace uraid {

struct AtomicCounters {
  std::atomic<uint64_t> member_reads{0}, member_read_bytes{0}, member_writes{0},
      member_write_bytes{0}, member_flushes{0}, full_stripe_writes{0},
      rmw_writes{0}, rcw_writes{0}, degraded_writes{0}, reconstructions{0},
      resynced_stripes{0}, resync_repairs{0}, cached_writes{0},
      cache_writebacks{0}, cache_evictions{0}, read_errors_corrected{0},
      recovered_stripes{0}, scrubbed_stripes{0}, resync_bitmap_chunks{0},
      resync_bytes{0}, cache_full_writes{0}, member_fua_writes{0};
  Counters Snapshot() const;  // array.cc
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_ATOMIC_COUNTERS_H_
