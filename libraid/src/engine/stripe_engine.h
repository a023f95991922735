// SPDX-License-Identifier: MIT
// Internal: the stripe engine as one part. It owns what a client request
// and a job's stripe work run on: the counters, the stripe locks, the
// member-I/O executor, the stripe cache and the survivor cache, and the
// two halves of the engine (StripeReader, StripeWriter), built in the
// order they refer to each other. The array holds one and hands its
// context() to the jobs' stripe work (StripeRebuilder, StripeScanner).
//
// Thread-safety: as its parts (each thread-safe); WritebackAged runs on
// one background thread at a time (the array's).

#ifndef URAID_SRC_ENGINE_STRIPE_ENGINE_H_
#define URAID_SRC_ENGINE_STRIPE_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "base/locked_shared_ptr.h"
#include "base/write_epochs.h"
#include "engine/atomic_counters.h"
#include "engine/engine_host.h"
#include "engine/engine_part.h"
#include "engine/io_executor.h"
#include "engine/shape_set.h"
#include "engine/slot_table.h"
#include "engine/stripe_reader.h"
#include "engine/stripe_writer.h"
#include "meta/array_bitmap.h"
#include "meta/ppl_log.h"
#include "report/array_reporter.h"
#include "stripe/stripe_cache.h"
#include "stripe/stripe_locks.h"
#include "stripe/survivor_cache.h"
#include "uraid/array.h"
#include "uraid/clock.h"

namespace uraid {

// What the engine is built over: references to parts that outlive it, and
// its options.
struct EngineWiring {
  EngineHost& host;
  const SlotTable& slots;
  // Told when a replace target fails a write (the roster reports it).
  IoExecutor::ReplacementFailed replacement_failed;
  const ShapeSet& shapes;  // shapes.current() sizes the cache and threads
  ArrayBitmap& bitmap;
  // The PPL log (null unless the policy is ppl) and the epochs a policy
  // switch waits on (stripe_writer.h).
  const LockedSharedPtr<PplLog>& ppl;
  WriteEpochs& ppl_epochs;
  // First stripe whose parity is not trusted (unfinished resync).
  const std::atomic<uint64_t>& resync_front;
  const ArrayReporter& reporter;
  const CacheOptions& cache;
  // The array's clock (outlives the engine): the cache's age limit and the
  // flush cadence are measured on it.
  Clock& clock;
  bool read_only;
};

class StripeEngine {
 public:
  explicit StripeEngine(const EngineWiring& w)
      : clock_(w.clock),
        io_(w.slots, counters_, w.shapes.current().geo.raid_disks() - 1,
            w.replacement_failed),
        cache_(w.shapes.current().geo.stripe_data_bytes(),
               w.read_only ? 0 : w.cache.bytes),
        reader_(Context(w), cache_, survivors_, w.reporter, w.read_only),
        writer_(Context(w), cache_, reader_, w.bitmap, w.ppl, w.ppl_epochs,
                w.shapes, w.resync_front,
                int64_t{w.cache.bypass_flush_interval_ms} * 1'000'000, clock_),
        context_(Context(w)),
        max_age_ns_(int64_t{w.cache.max_age_ms} * 1'000'000),
        reporter_(w.reporter) {}
  StripeEngine(const StripeEngine&) = delete;
  StripeEngine& operator=(const StripeEngine&) = delete;

  StripeReader& reader() { return reader_; }
  StripeWriter& writer() { return writer_; }
  IoExecutor& io() { return io_; }
  StripeCache& cache() { return cache_; }
  const AtomicCounters& counters() const { return counters_; }
  // What the jobs' stripe work is built over (engine_part.h).
  const EngineContext& context() const { return context_; }

  // One pass of the cache's writeback: stripes held longer than the
  // cache's age limit (on the array's clock), then the oldest while the cache
  // is over 3/4 full (so writers rarely have to evict inline). A failure is
  // logged and ends the pass (the next one tries again).
  void WritebackAged();

 private:
  EngineContext Context(const EngineWiring& w) {
    return {w.host, w.slots, io_, locks_, counters_};
  }

  Clock& clock_;
  AtomicCounters counters_;
  StripeLocks locks_;
  // Every member call (after counters_, which it counts in).
  IoExecutor io_;
  StripeCache cache_;
  SurvivorCache survivors_;
  // The read half, then the write half (which reads through it).
  StripeReader reader_;
  StripeWriter writer_;
  const EngineContext context_;
  const int64_t max_age_ns_;
  const ArrayReporter& reporter_;
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_STRIPE_ENGINE_H_
