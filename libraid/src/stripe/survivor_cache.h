// SPDX-License-Identifier: MIT
// Internal: the surviving rows a degraded read fetched beyond what its
// client asked for (to rebuild a missing chunk), kept for the next read.
//
// A degraded read whose request ends inside a stripe reads, for the
// rebuild, survivor rows the client did not ask for; a sequential reader
// asks for them in its next request. Kept here, they are not read from
// the members twice: a degraded sequential read costs one member byte per
// byte whatever the request size.
//
// Freshness without locks: the array counts member data writes as they
// start (`writes_started`) and finish. An entry is put only when no write
// was in flight or started while its rows were read, and is tagged with
// the started count; it serves only while that count is unchanged, i.e.
// until any member data write starts anywhere in the array. Coarse (a
// write elsewhere drops every entry) but needs no stripe lock to read,
// which healthy reads do not take.
//
// Bounded: at most kMaxEntries stripes, each at most kMaxEntryBytes; the
// oldest entry goes first.
//
// Thread-safe (a leaf mutex).

#ifndef URAID_SRC_STRIPE_SURVIVOR_CACHE_H_
#define URAID_SRC_STRIPE_SURVIVOR_CACHE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/sync.h"

namespace uraid {

class SurvivorCache {
 public:
  static constexpr size_t kMaxEntries = 4;
  static constexpr uint64_t kMaxEntryBytes = 8ull << 20;

  // One slot's contiguous rows of a stripe: chunk bytes [x, x + data.size()).
  // An AlignedBuffer, not a vector: chunk-sized blocks come back from
  // base/large_buffers.h's free list instead of fresh pages from the
  // kernel (a 512 KiB vector per stripe was mmapped and page-faulted in:
  // about a tenth of a degraded sequential read's CPU).
  struct Rows {
    int slot = 0;
    uint64_t x = 0;
    AlignedBuffer data;
  };

  // Keeps `rows` of stripe `stripe` of the shape with id `shape` (replacing
  // what it held for it), read while `writes_started` data writes had
  // started and none was in flight. Stripes are keyed with their shape: a
  // reshape runs two shapes side by side and then makes a third current,
  // and stripe k of one is not stripe k of another.
  void Put(uint64_t shape, uint64_t stripe, uint64_t writes_started,
           std::vector<Rows> rows);
  // Copies `slot`'s chunk bytes [x, x + len) of stripe `stripe` of shape
  // `shape` into `dst` when an entry holds all of them and no data write
  // has started since it was put (`writes_started` now). False leaves
  // `dst` alone.
  bool Get(uint64_t shape, uint64_t stripe, uint64_t writes_started, int slot,
           uint64_t x, uint64_t len, uint8_t* dst);
  // Nothing is held (a cheap test for the healthy read path).
  bool empty() const { return count_.load(std::memory_order_relaxed) == 0; }

 private:
  struct Entry {
    uint64_t shape = 0;
    uint64_t stripe = 0;
    uint64_t tag = 0;
    std::vector<Rows> rows;
  };
  Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> count_{0};
};

}  // namespace uraid

#endif  // URAID_SRC_STRIPE_SURVIVOR_CACHE_H_
