// SPDX-License-Identifier: MIT
// Internal: the last data extent a member's hole probe learned, so that the
// probes jobs make stripe after stripe (NextDataOffset) cost one query per
// extent instead of one per stripe. Over NBD a query is a round trip, and
// servers that build their answer from SEEK_DATA/SEEK_HOLE on tmpfs spend
// time in proportion to the range (17 ms per query over 1 GiB measured):
// asked once per stripe, a check or resync crawled at 0.17x.
//
// Only data is remembered, never a hole: a write turns a hole into data
// behind the cache's back, but nothing turns data into a hole except the
// member's own discard, which calls Forget. And a range wrongly taken for
// data is still safe, only slower: it is read or copied like data.
//
// Thread-safe.

#ifndef URAID_SRC_DATA_EXTENT_CACHE_H_
#define URAID_SRC_DATA_EXTENT_CACHE_H_

#include <cstdint>

#include "base/sync.h"

namespace uraid {

class DataExtentCache {
 public:
  // Whether `offset` lies in the remembered data extent.
  bool Contains(uint64_t offset) const {
    MutexLock l(&mu_);
    return offset >= lo_ && offset < hi_;
  }
  // Member bytes [lo, hi) hold data (an empty range is ignored).
  void Remember(uint64_t lo, uint64_t hi) {
    if (hi <= lo) return;
    MutexLock l(&mu_);
    lo_ = lo;
    hi_ = hi;
  }
  // Bytes [offset, offset + len) may be holes now (discarded). What the
  // discard leaves of the extent is still data and is kept: the part after
  // it where there is one, since the jobs probe forward and discard as
  // they go (a grow discards each zero stripe past the old array's end,
  // then probes the next). Forgetting the whole extent there cost a
  // SEEK_DATA and a SEEK_HOLE per stripe, the hole probe walking tmpfs's
  // pages to the end of the member each time: 4.6% of a grow's CPU.
  void Forget(uint64_t offset, uint64_t len) {
    MutexLock l(&mu_);
    const uint64_t end = offset + len;
    if (offset >= hi_ || end <= lo_) return;
    if (end < hi_) {
      lo_ = end;
    } else if (offset > lo_) {
      hi_ = offset;
    } else {
      lo_ = hi_ = 0;
    }
  }

 private:
  mutable Mutex mu_;
  uint64_t lo_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t hi_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace uraid

#endif  // URAID_SRC_DATA_EXTENT_CACHE_H_
