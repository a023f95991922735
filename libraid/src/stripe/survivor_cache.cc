// SPDX-License-Identifier: MIT
#include "stripe/survivor_cache.h"

#include <algorithm>
#include <cstring>

namespace uraid {

void SurvivorCache::Put(uint64_t shape, uint64_t stripe,
                        uint64_t writes_started, std::vector<Rows> rows) {
  uint64_t bytes = 0;
  for (const Rows& r : rows) bytes += r.data.size();
  MutexLock lock(&mu_);
  std::erase_if(entries_, [&](const Entry& e) {
    // Replaced or stale.
    return (e.shape == shape && e.stripe == stripe) || e.tag != writes_started;
  });
  if (bytes > 0 && bytes <= kMaxEntryBytes) {
    if (entries_.size() >= kMaxEntries) entries_.pop_front();
    entries_.push_back(Entry{shape, stripe, writes_started, std::move(rows)});
  }
  count_.store(entries_.size(), std::memory_order_relaxed);
}

bool SurvivorCache::Get(uint64_t shape, uint64_t stripe,
                        uint64_t writes_started, int slot, uint64_t x,
                        uint64_t len, uint8_t* dst) {
  MutexLock lock(&mu_);
  for (const Entry& e : entries_) {
    if (e.shape != shape || e.stripe != stripe) continue;
    if (e.tag != writes_started) return false;
    for (const Rows& r : e.rows) {
      if (r.slot == slot && r.x <= x && x + len <= r.x + r.data.size()) {
        std::memcpy(dst, r.data.data() + (x - r.x), len);
        return true;
      }
    }
    return false;
  }
  return false;
}

}  // namespace uraid
