// SPDX-License-Identifier: MIT
// Internal: an online reshape (md's --grow: more members, another layout,
// chunk or level) as a job object over the parts it uses: the metadata
// owner (Roster: the new slots and md's reshape fields), the array's shapes
// (ShapeSet), the copy (ReshapeCopier), the writer's flushes, the scanner
// (the moved part's resync after a crash), the bitmap and the job runner.
// It reaches the array only through ReshapeHost.
//
// How it stays crash-safe without a backup file (see format/reshape_math.h
// and docs/reshape.md): the new shape is written below the old one, at a
// data offset moved down into the headroom, so a window's new rows never
// land on old rows still holding bytes not yet copied. Each window is
// copied (old-shape read, new-shape full-stripe writes), the members
// flushed, and only then is the window's end recorded as md's
// reshape_position in every superblock. After a crash the copy restarts at
// the recorded position, whose old copy is intact.
//
// Client requests during a reshape go through the array's router
// (array/reshape_router.cc) over state(): below the front they use the new
// shape, at or past it the old one, and requests touching the window being
// copied wait for it (ReshapeGate). The stripe cache is written back and
// bypassed for the duration: it is keyed by one shape's stripes.
//
// Checking a grow request against the array (degraded, PPL, jobs, the new
// geometry) is the array's (array/grow.cc); Start takes a checked one.

#ifndef URAID_SRC_JOBS_RESHAPE_JOB_H_
#define URAID_SRC_JOBS_RESHAPE_JOB_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/sync.h"
#include "base/task_pool.h"
#include "engine/atomic_counters.h"
#include "engine/shape_set.h"
#include "engine/slot_table.h"
#include "engine/stripe_reader.h"
#include "engine/stripe_writer.h"
#include "jobs/job_runner.h"
#include "jobs/reshape_copier.h"
#include "jobs/reshape_state.h"
#include "jobs/stripe_scanner.h"
#include "meta/array_bitmap.h"
#include "roster/roster.h"
#include "uraid/events.h"
#include "uraid/geometry.h"
#include "uraid/member.h"

namespace uraid {

// What a reshape needs of its array.
class ReshapeHost {
 public:
  virtual ~ReshapeHost() = default;
  // Writes every member's superblock from the roster's template, keeping
  // the clean/active state (array/array_hosts.h's WriteSuperblocks).
  virtual absl::Status UpdateSuperblocks() = 0;
  // Returns once every request that took the plain path (one shape, maybe
  // the cache) before reshaping() was set has finished.
  virtual void DrainPlainRequests() = 0;
  // `to` is current now: what is keyed by the old shape follows it (the
  // stripe cache's stripe size, the resync front past the new end).
  virtual void ShapeChanged(const Shape& to) = 0;
  virtual void Log(LogLevel level, const std::string& line) const = 0;
};

// Thread-safety: Start and Resume are called with no reshape running (the
// array serializes them with its grow and assembly); Run and Step on one
// thread at a time (the runner's job thread, or a caller of Step while no
// job runs). running() and state() are lock-free reads for the router.
// Holds references to parts that outlive it.
class ReshapeJob {
 public:
  ReshapeJob(ReshapeHost& host, Roster& roster, ShapeSet& shapes,
             const SlotTable& slots, StripeReader& reader, StripeWriter& writer,
             StripeScanner& scanner, ArrayBitmap& bitmap, JobRunner& runner,
             AtomicCounters& counters, TaskPool& pool)
      : host_(host),
        roster_(roster),
        shapes_(shapes),
        slots_(slots),
        writer_(writer),
        scanner_(scanner),
        bitmap_(bitmap),
        runner_(runner),
        counters_(counters),
        copier_(slots, reader, writer, pool) {}

  bool running() const { return shapes_.reshaping(); }
  // The reshape in progress (or the last one); null before the first.
  // Kept, with every earlier one, until the array goes: requests routed by
  // an old state may still be finishing.
  ReshapeState* state() const { return state_.load(); }
  // True while the runner runs or holds a reshape job.
  bool queued() const { return runner_.RunsOrQueued(JobKind::kReshape); }

  // Starts a reshape of the current shape into `to`, at data offset
  // `to_offset`, with `add` (prepared members, their ids in `ids`)
  // appended as new slots: md's reshape fields set, every request of the
  // old shape drained and the cache written back, the superblocks written.
  // The caller queues the job. REQUIRES: a checked request; not running().
  absl::Status Start(const Geometry& to, uint64_t to_offset,
                     std::vector<std::shared_ptr<Member>> add,
                     const std::vector<DeviceId>& ids)
      ABSL_LOCKS_EXCLUDED(roster_.mu());
  // Publishes a reshape found in the superblocks at assembly, at
  // `front_bytes`; with `unclean` (or set bits in the bitmap) the job first
  // resyncs the part already moved.
  void Resume(const Geometry& to, uint64_t to_offset, uint64_t front_bytes,
              bool unclean) ABSL_LOCKS_EXCLUDED(roster_.mu());
  // The job body: copies window after window to the end (or until the
  // runner stops or throttles it), then finishes.
  absl::Status Run() ABSL_LOCKS_EXCLUDED(roster_.mu());
  // One window, for callers stepping a reshape without the job; true once
  // it has finished.
  absl::StatusOr<bool> Step() ABSL_LOCKS_EXCLUDED(roster_.mu());

 private:
  // Publishes `state`, whose new shape is `to` at `to_offset`, and sets
  // reshaping(): from then on requests take the router (Start closes the
  // state's gate first, so they wait there until the cache is out).
  void PublishLocked(std::unique_ptr<ReshapeState> state, const Geometry& to,
                     uint64_t to_offset)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(roster_.mu());
  // md's reshape fields in the roster's template, with the front at
  // `front_bytes`.
  void SetFieldsLocked(uint64_t front_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(roster_.mu());
  // Largest window copied between two checkpoints, in array bytes.
  uint64_t MaxWindow() const;
  // End of the window starting at `lo` that the shapes' offsets allow.
  absl::StatusOr<uint64_t> WindowAt(uint64_t lo, uint64_t max_window) const;
  // Flushes what was copied, then records `hi` as the front.
  absl::Status Checkpoint(uint64_t hi) ABSL_LOCKS_EXCLUDED(roster_.mu());
  // Resyncs the new shape's stripes below the front (after a crash).
  absl::Status ResyncMovedPart();
  // One window copied and recorded (Step's work).
  absl::Status StepWindow(ReshapeWindowBuf buf, uint64_t max_window);
  // The new shape current, the superblocks say so, the cache rekeyed.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(roster_.mu());

  ReshapeHost& host_;
  Roster& roster_;
  ShapeSet& shapes_;
  const SlotTable& slots_;
  StripeWriter& writer_;
  StripeScanner& scanner_;
  ArrayBitmap& bitmap_;
  JobRunner& runner_;
  AtomicCounters& counters_;
  ReshapeCopier copier_;
  std::vector<std::unique_ptr<ReshapeState>> states_;  // start/resume only
  std::atomic<ReshapeState*> state_{nullptr};
};

}  // namespace uraid

#endif  // URAID_SRC_JOBS_RESHAPE_JOB_H_
