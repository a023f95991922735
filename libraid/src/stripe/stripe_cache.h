// SPDX-License-Identifier: MIT
// Internal: the write-back stripe cache.
//
// Partial-stripe writes are gathered here, one entry per stripe, so that a
// sequential stream of writes smaller than a stripe reaches the members as
// full-stripe writes (no reads at all), and random small writes are
// written back later with RMW or RCW. Entries hold only data newer than
// the members (dirty byte ranges over a stripe-sized buffer); an entry is
// dropped once written back, so the cache never serves stale data and
// healthy reads of stripes it does not hold bypass it entirely.
//
// Time: the cache keeps no clock. A writer stamps an entry with the
// array's clock (uraid/clock.h) when it creates it, and the writeback
// thread asks for entries dirty since before a time of that same clock,
// so a test on a simulated clock ages entries without waiting.
//
// Locking contract: the index (which stripes have entries) is guarded by
// an internal mutex; an entry's contents are guarded by the array's lock on
// that stripe. Only the holder of a stripe's lock may create, change or
// erase its entry, so a pointer returned by Find/Create stays valid
// while the caller holds that stripe lock.

#ifndef URAID_SRC_STRIPE_CACHE_H_
#define URAID_SRC_STRIPE_CACHE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/notification.h"
#include "base/aligned_buffer.h"
#include "base/sync.h"

namespace uraid {

// Disjoint, merged [start, end) byte ranges.
class RangeSet {
 public:
  void Add(uint64_t start, uint64_t end);
  // True when [0, size) is covered by one range.
  bool Covers(uint64_t size) const;
  // True when [0, size) would be covered after Add(start, end), without
  // adding it: every gap of the set below `size` lies inside [start, end).
  bool CoversWith(uint64_t start, uint64_t end, uint64_t size) const;
  bool empty() const { return ranges_.empty(); }
  const std::map<uint64_t, uint64_t>& ranges() const { return ranges_; }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // start -> end
};

class StripeCache {
 public:
  struct Entry {
    uint64_t stripe = 0;
    AlignedBuffer data;    // the stripe's data space (chunk * data disks)
    RangeSet dirty;        // bytes of `data` newer than the members
    int64_t since_ns = 0;  // when it first became dirty (the array's clock)
    // Set at creation when its writers' acknowledgments wait for the
    // stripe to reach the members (StripeWriter::AwaitHeld), and never
    // changed after. Notified by Erase, which is called only once the
    // entry's bytes are on the members (written, or overwritten there by a
    // later write), so a notified writer's data is on the members.
    std::shared_ptr<absl::Notification> held;
  };

  // `stripe_bytes`: data bytes per stripe. `capacity_bytes`: bound on the
  // memory held by entries and recycled buffers together. It is hard: an
  // entry that would pass it is not created (Create returns null and the
  // writer writes through), so any number of concurrent writers cannot
  // push the cache over it; writers and the writeback thread evict to
  // keep room for new entries.
  StripeCache(uint64_t stripe_bytes, uint64_t capacity_bytes)
      : stripe_bytes_(stripe_bytes), capacity_(capacity_bytes) {}

  // Caching is pointless when fewer than four stripes fit.
  bool enabled() const { return capacity_.load() >= 4 * stripe_bytes_.load(); }
  void set_capacity(uint64_t bytes) { capacity_.store(bytes); }
  uint64_t capacity() const { return capacity_.load(); }
  uint64_t bytes() const { return entries_.load() * stripe_bytes_.load(); }
  bool over_capacity() const {
    return bytes() + stripe_bytes_.load() > capacity();
  }
  // A reshape changed the stripe size. REQUIRES: no entries, and no
  // writer using the cache until it returns.
  void ResetStripeBytes(uint64_t stripe_bytes);
  size_t size() const { return entries_.load(); }

  // Cheap check for the read path; may race with writers (a read racing a
  // write may see either, as on any disk).
  bool MayContain(uint64_t stripe) const;

  // REQUIRES: the caller holds the lock of `stripe`.
  Entry* Find(uint64_t stripe);
  // A new, empty entry for `stripe` (which has none), dirty since `now_ns`
  // (the array's clock), or null when one more entry would pass the
  // capacity. `held`: its writers are held (Entry::held is set).
  Entry* Create(uint64_t stripe, int64_t now_ns, bool held = false);
  // Drops the entry and notifies its held writers (Entry::held).
  // REQUIRES: the caller holds the lock of `stripe`, and the entry's dirty
  // bytes are on the members (or superseded there).
  void Erase(uint64_t stripe);

  // Stripes with entries, oldest first; with `older_than_ns` set only
  // those dirty since before it (the clock of Create's stamps); with
  // `unheld_only`, none whose writers are held. Racy snapshot: recheck
  // under the stripe lock.
  std::vector<uint64_t> Oldest(size_t max, std::optional<int64_t> older_than_ns,
                               bool unheld_only = false);

 private:
  // Stripe buffers are recycled: a stream allocates one per stripe, and
  // fresh allocations of that size cost page faults on every use.
  AlignedBuffer TakeBuffer();
  void ReturnBuffer(AlignedBuffer b);

  std::atomic<uint64_t> stripe_bytes_;  // changes only by ResetStripeBytes
  std::atomic<uint64_t> capacity_;
  Mutex free_mu_;
  std::vector<AlignedBuffer> free_ ABSL_GUARDED_BY(free_mu_);
  std::atomic<size_t> entries_{0};
  mutable Mutex mu_;
  absl::flat_hash_map<uint64_t, std::unique_ptr<Entry>> map_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace uraid

#endif  // URAID_SRC_STRIPE_CACHE_H_
