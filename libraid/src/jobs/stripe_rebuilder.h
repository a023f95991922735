// SPDX-License-Identifier: MIT
// Internal: recovery's stripe work. A window of stripes rebuilt onto a
// slot's target (or, for a replace, copied onto the replacement), kJobDepth
// at once in a sliding window that moves the slot's front as an unbroken
// run from its start completes; and windows the target needs nothing in
// (holes on every member, or clear bitmap regions of a re-added member)
// passed without I/O. Works in the shape it is handed.

#ifndef URAID_SRC_JOBS_STRIPE_REBUILDER_H_
#define URAID_SRC_JOBS_STRIPE_REBUILDER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "base/sync.h"
#include "base/task_pool.h"
#include "engine/atomic_counters.h"
#include "engine/engine_part.h"
#include "engine/io_executor.h"
#include "engine/shape.h"
#include "engine/slot_table.h"
#include "engine/stripe_reader.h"
#include "meta/array_bitmap.h"
#include "roster/roster.h"
#include "stripe/stripe_locks.h"

namespace uraid {

// One of the two targets of a pass that rebuilds two slots at once
// (RAID6): the slot and the member the pass writes there, which must keep
// holding it (rebuilding, or as the slot's replace target; a replace
// target that takes over its failed slot still counts) for the pass to go
// on writing it.
struct RebuildTarget {
  int slot = -1;
  const Member* member = nullptr;
};

// Thread-safe. Holds references to the array's parts, which outlive it.
class StripeRebuilder : private EnginePart {
 public:
  // Beyond the engine's common parts: the reader, which rebuilds (or, for
  // a copy, reads) each stripe; the jobs' window pool; the bitmap (a
  // re-added member's clear regions); and the array's metadata owner,
  // which moves a front past skipped stripes only while the target still
  // holds the slot (Roster::SkipFront, under the mutex every hand-over
  // takes).
  StripeRebuilder(const EngineContext& ctx, StripeReader& reader,
                  TaskPool& pool, ArrayBitmap& bitmap, Roster& roster);

  // Rebuilds (or, for a replace, copies) up to `count` stripes from `from`
  // of `slot`, kJobDepth at once (a sliding window), `buf_len` bytes of
  // `bufs` per worker (kJobDepth of them). Holds each stripe's lock until
  // the front has moved past it, so no client write can slip between a
  // stripe's copy and the front; the window ends early at a stripe a
  // client holds. Returns how many stripes from `from` are done (the front
  // moved that far); fewer than asked sets `*error` or `*target_gone`
  // unless the window ended at a client's stripe.
  uint64_t RebuildStripes(const Shape& sh, int slot, uint64_t from,
                          uint64_t count, uint8_t* bufs, size_t buf_len,
                          absl::Status* error, bool* target_gone);
  // RebuildStripes for two targets at once (RAID6 recovery of two slots, or
  // of one beside a replace): each stripe's survivors are read once and
  // both targets written (a target whose front is already past a stripe is
  // left alone there). `bufs` holds 2 * `buf_len` bytes per worker. Both
  // fronts move together; `*target_gone` when either target no longer
  // holds its slot or its write failed.
  uint64_t RebuildPair(const Shape& sh, const RebuildTarget (&pair)[2],
                       uint64_t from, uint64_t count, uint8_t* bufs,
                       size_t buf_len, absl::Status* error, bool* target_gone);
  // SkipWindow for a pair of rebuilding targets whose fronts are both at
  // `from`: holes on every member and on both targets. Never skips for a
  // replace target.
  uint64_t SkipPairWindow(const Shape& sh, const RebuildTarget (&pair)[2],
                          uint64_t from, uint64_t count);
  // Marks stripes [from, from + count) rebuilt on `slot` when the target
  // needs nothing there: they are holes on every member and on the target,
  // or (a re-added member) their bitmap regions are clear. Returns how many
  // were skipped (0 when the window must be rebuilt). Takes their locks,
  // then the roster's mutex to move the front.
  uint64_t SkipWindow(const Shape& sh, int slot, uint64_t from, uint64_t count);
  // Target bytes not rebuilt since the last call (recorded bad on the
  // target instead) and the array byte offsets of the first of them.
  uint64_t TakeUnrecovered(std::vector<uint64_t>* where)
      ABSL_LOCKS_EXCLUDED(lost_mu_);

 private:
  // Rows of [w, w + len) that cannot be rebuilt (a source unreadable or
  // listed bad there too): 4 KiB block by block, those that still cannot
  // are recorded bad on the target (and zeroed in `buf`) so the rebuild
  // goes on, md's rule; the rest are rebuilt into `buf`.
  absl::Status RebuildAroundLossLocked(const Shape& sh, int slot,
                                       uint64_t stripe, uint64_t w, size_t len,
                                       uint8_t* buf, bool replace);
  // One stripe of RebuildStripes, its lock held by the caller; does not
  // move the front.
  absl::Status RebuildStripeLocked(const Shape& sh, int slot, uint64_t stripe,
                                   uint8_t* buf, size_t buf_len,
                                   bool* target_gone);

  // One stripe of RebuildPair, its lock held by the caller.
  absl::Status RebuildPairStripeLocked(const Shape& sh,
                                       const RebuildTarget (&pair)[2],
                                       uint64_t stripe, uint8_t* buf,
                                       size_t buf_len, bool* target_gone);
  // `slot`'s piece [w, w + len) of `stripe` into `buf`: copied from the old
  // member (`replace`) or rebuilt from the others, rows that cannot be
  // recorded bad on the target (RebuildAroundLossLocked).
  absl::Status FillPieceLocked(const Shape& sh, int slot, uint64_t stripe,
                               uint64_t w, size_t len, uint8_t* buf,
                               bool replace);
  // Whether `t.member` still holds `t.slot`, and (`*to_repl`) whether as
  // its replace target.
  bool Holds(const RebuildTarget& t, bool* to_repl) const;
  // The sliding window both RebuildStripes and RebuildPair run: `one`
  // works a stripe (its lock held), `advance` records an unbroken run
  // done below the new front it is given.
  uint64_t SlideWindow(const Shape& sh, uint64_t from, uint64_t count,
                       const std::function<absl::Status(
                           uint64_t stripe, uint64_t worker, bool* gone)>& one,
                       const std::function<void(uint64_t front)>& advance,
                       absl::Status* error, bool* target_gone);

  StripeReader& reader_;
  TaskPool& pool_;
  ArrayBitmap& bitmap_;
  Roster& roster_;
  // What TakeUnrecovered hands out.
  Mutex lost_mu_;
  uint64_t lost_bytes_ ABSL_GUARDED_BY(lost_mu_) = 0;
  std::vector<uint64_t> lost_at_ ABSL_GUARDED_BY(lost_mu_);
};

}  // namespace uraid

#endif  // URAID_SRC_JOBS_STRIPE_REBUILDER_H_
