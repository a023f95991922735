// SPDX-License-Identifier: MIT
// Internal: the surviving rows of degraded stripes that one read fetched
// and another needs, kept so that no member byte is read twice; and the
// rows being fetched right now (claims), so that a second reader waits for
// them instead of reading them again.
//
// A stripe that lost a data chunk is read by several requests of a
// sequential reader at once (qd8): the one that covers the lost chunk
// rebuilds it from every survivor's rows, the others read those rows for
// their own clients. Whichever reads a row first puts it here; the other
// takes it. A degraded sequential read then costs one member byte per byte
// whatever the request size and queue depth.
//
// Freshness without locks: the array counts member data writes as they
// start (`writes_started`) and finish. An entry is put only when no write
// was in flight or started while its rows were read, and is tagged with
// the started count; it serves only while that count is unchanged, i.e.
// until any member data write starts anywhere in the array. Coarse (a
// write elsewhere drops every entry) but needs no stripe lock to read,
// which reads of intact members do not take.
//
// Claims: a reader about to fetch rows another may want claims them in the
// same step as its lookup misses (Find with a `claim` ticket) and releases
// the claim when its read is over, after putting the rows if they are
// fresh (Release). A reader that finds the rows it wants claimed (Find:
// kClaimed) waits for the release (AwaitUnclaimed) and then looks again
// (Get); a miss means the claimant's read failed or went stale, and it
// reads them itself. No deadlock: a claimant releases its claims before
// it waits for anyone else's, so a release never waits on a claim.
//
// Rows are shared, immutable buffers: a taker copies them outside the
// mutex (a copy of a 1 MiB row under it, page faults and all, held up
// every other reader of the array: issue 35's 8 x 1M shape), and a rebuild
// can XOR straight from them (Find's `held`) instead of copying them into
// its scratch first; a reader that fetched rows into buffers of its own
// puts those same buffers, no copy.
//
// Consumed rows go: every row a reader takes is wanted by a known number
// of readers (`Rows::uses`: the stripe's lost data chunks, whose rebuilds
// want it, or the one intact reader a rebuild fetched it for, beside the
// other lost chunk's rebuild at level 6), and goes when that many of its
// bytes' worth were taken. Rows nobody takes (the run ends, a request is
// skipped) go oldest first.
//
// Bounded: at most kMaxBytes (64 MiB) of rows, in at most kMaxEntries
// (16) stripes; the oldest stripe goes first. A stripe holds at most its
// survivors' data rows, (data chunks - 1) x chunk (6 MiB at 8 members of
// 1 MiB chunks); rows wait here only while the requests that want them
// are in flight, so the bound is what a sequential reader's queue spans:
// 32 requests of 1 MiB are 32 MiB, about five such stripes, held twice
// over. (It was four stripes of at most 8 MiB each, whatever the width.)
//
// Thread-safe (a leaf mutex).

#ifndef URAID_SRC_STRIPE_SURVIVOR_CACHE_H_
#define URAID_SRC_STRIPE_SURVIVOR_CACHE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "base/aligned_buffer.h"
#include "base/sync.h"

namespace uraid {

class SurvivorCache {
 public:
  static constexpr size_t kMaxEntries = 16;
  static constexpr uint64_t kMaxBytes = 64ull << 20;

  // One slot's contiguous rows of a stripe: chunk bytes [x, x + data->size()).
  // An AlignedBuffer, not a vector: chunk-sized blocks come back from
  // base/large_buffers.h's free list instead of fresh pages from the
  // kernel (a 512 KiB vector per stripe was mmapped and page-faulted in:
  // about a tenth of a degraded sequential read's CPU). Shared and never
  // written once put: a taker may hold it past its removal (Held).
  struct Rows {
    int slot = 0;
    uint64_t x = 0;
    std::shared_ptr<const AlignedBuffer> data;
    // How many readers want these rows: they go once `uses` times their
    // size was taken.
    uint32_t uses = 1;
    uint64_t taken = 0;
  };

  // Keeps `rows` of stripe `stripe` of the shape with id `shape` (beside
  // what it holds for it), read while `writes_started` data writes had
  // started and none was in flight. Stripes are keyed with their shape: a
  // reshape runs two shapes side by side and then makes a third current,
  // and stripe k of one is not stripe k of another.
  void Put(uint64_t shape, uint64_t stripe, uint64_t writes_started,
           std::vector<Rows> rows);
  // Copies `slot`'s chunk bytes [x, x + len) of stripe `stripe` of shape
  // `shape` into `dst` when an entry holds all of them and no data write
  // has started since it was put (`writes_started` now). False leaves
  // `dst` alone. The bytes count as taken (Rows::uses).
  bool Get(uint64_t shape, uint64_t stripe, uint64_t writes_started, int slot,
           uint64_t x, uint64_t len, uint8_t* dst);

  // Kept bytes lent to a taker instead of copied: `data` points at them
  // and stays valid while `rows` is held.
  struct Held {
    std::shared_ptr<const AlignedBuffer> rows;
    const uint8_t* data = nullptr;
  };

  enum class Lookup { kHit, kClaimed, kMiss };
  // Get (with `held`, a hit lends the bytes there instead of copying them
  // into `dst`, which may then be null); on a miss, kClaimed when a claim
  // covers all of the bytes, else kMiss, and then with `claim` the
  // caller's claim is made in the same step (no two readers both miss and
  // both read): the caller is reading `slot`'s chunk bytes [x, x + len) of
  // the stripe and will Put them if they are fresh. *claim is its ticket
  // for Release (0: none made), which the caller REQUIRES to call, before
  // it waits for any other claim.
  Lookup Find(uint64_t shape, uint64_t stripe, uint64_t writes_started,
              int slot, uint64_t x, uint64_t len, uint8_t* dst,
              uint64_t* claim = nullptr, Held* held = nullptr);
  void Release(uint64_t ticket);
  // Returns when no claim covers all of the bytes.
  void AwaitUnclaimed(uint64_t shape, uint64_t stripe, int slot, uint64_t x,
                      uint64_t len);

  // Nothing is held or claimed (a cheap test for the read paths).
  bool empty() const { return count_.load(std::memory_order_relaxed) == 0; }

 private:
  struct Entry {
    uint64_t shape = 0;
    uint64_t stripe = 0;
    uint64_t tag = 0;
    std::vector<Rows> rows;
  };
  struct Claimed {
    uint64_t ticket = 0;
    uint64_t shape = 0;
    uint64_t stripe = 0;
    int slot = 0;
    uint64_t x = 0, len = 0;
  };
  // The kept bytes, counted as taken (the copy is the caller's, after
  // the mutex: Held keeps them alive).
  bool TakeLocked(uint64_t shape, uint64_t stripe, uint64_t writes_started,
                  int slot, uint64_t x, uint64_t len, Held* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ClaimedLocked(uint64_t shape, uint64_t stripe, int slot, uint64_t x,
                     uint64_t len) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Claimed> claims_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  std::atomic<size_t> count_{0};  // entries and claims
};

}  // namespace uraid

#endif  // URAID_SRC_STRIPE_SURVIVOR_CACHE_H_
