// SPDX-License-Identifier: MIT
// Internal: the composition root behind uraid::Array. It builds the parts
// in the order they refer to each other, holds the entry points (Array's
// methods: the request router, grow, info) and the few things no part
// owns (the shapes, the PPL pointer and its epochs, the policy switch's
// mutex, the writeback thread). The parts, each a class over references
// to what it uses:
// - Roster (roster/): the metadata owner, changed only through Apply;
// - MemberFaults (member_faults.h): the failure rules, the engine's host
//   and the jobs' edits with the array's after-effects;
// - StripeEngine (engine/stripe_engine.h): member I/O, the caches, the
//   stripe reader and writer;
// - ArrayJobs (array_jobs.h): the job runner, the job objects and which
//   spare goes where;
// - MemberAdmin (member_admin.h): fail, remove, add, replace;
// - ArrayState (array_state.h): md's array_state;
// - ArrayBitmap, the PPL log, the reporter;
// - MetaHost and HostForwards (meta_host.h, array_hosts.h): the roster's,
//   the bitmap's, ArrayState's and the reshape's hosts, as forwards.
//
// Its own methods are defined in array.cc (construction, the entry points,
// start and shutdown, Info, the Array shell), reshape_router.cc, grow.cc,
// takeover.cc, ppl_switch.cc, array_extents.cc, array_events.cc, create.cc
// and assemble.cc.
//
// Locking:
// - stripe locks (StripeLocks) serialise writes, degraded reads and resync
//   of one stripe; healthy reads take none (they read data chunks only, and
//   a read racing an overlapping write may see either, as on any disk).
// - ArrayState's mutex (array_state.h) guards the clean/active transition
//   and the count of writes in flight; it is taken before the roster's
//   mutex when both are needed.
// - the roster's mutex (roster_.mu()) guards the superblock template and
//   serialises superblock writes. Every change of who holds a slot (a
//   member failing, a replacement or a spare taking over, removal) is an
//   edit the roster decides and makes under it (Roster::Apply), so a check
//   of the holder and the change it leads to cannot be split by another.
//   A reshape's state is published under it too.
// - slot health is atomic so the data path reads it without locks.

#ifndef URAID_SRC_ARRAY_IMPL_H_
#define URAID_SRC_ARRAY_IMPL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "array/array_hosts.h"
#include "array/array_jobs.h"
#include "array/array_state.h"
#include "array/member_admin.h"
#include "array/member_faults.h"
#include "array/meta_host.h"
#include "base/aligned_buffer.h"
#include "base/locked_shared_ptr.h"
#include "base/sync.h"
#include "base/write_epochs.h"
#include "engine/member_io.h"
#include "engine/shape.h"
#include "engine/shape_set.h"
#include "engine/slot_table.h"
#include "engine/stripe_engine.h"
#include "meta/array_bitmap.h"
#include "meta/ppl_log.h"
#include "plan/stripe_plan.h"
#include "report/array_reporter.h"
#include "roster/roster.h"
#include "uraid/array.h"
#include "uraid/bitmap.h"
#include "uraid/events.h"

namespace uraid {

class ArrayImpl {
 public:
  // `clock` (null: RealClock()) is the array's one time source, resolved
  // here once and handed (as a Clock&) to every part that measures time: the
  // job runner, the safemode delay (ArrayState), the stripe cache's age limit
  // and flush cadence (StripeEngine) and the bitmap's daemon_sleep
  // (ArrayBitmap).
  ArrayImpl(Geometry geometry, uint64_t data_offset_bytes, Superblock sb,
            std::vector<std::unique_ptr<Slot>> slots, std::vector<Spare> spares,
            bool read_only, const CacheOptions& cache, Logger logger,
            std::shared_ptr<Clock> clock);
  ~ArrayImpl();

  // --- data path (array.cc) ---
  // Client entry points: outside a reshape they run the stripe engine
  // (engine_) in the current shape; during one, the reshape router
  // (reshape_router.cc) runs each part of the request in the shape that
  // holds it (old and new shapes side by side, each passed explicitly).
  absl::Status Read(void* buf, size_t len, uint64_t offset);
  absl::Status Write(const void* buf, size_t len, uint64_t offset, bool fua);
  absl::Status Flush() { return engine_.writer().Flush(); }
  absl::Status Trim(size_t len, uint64_t offset, bool fua);
  absl::Status Zero(size_t len, uint64_t offset, bool fua);
  absl::StatusOr<std::vector<Extent>> Extents(uint64_t offset, uint64_t len);

  // --- reshape (grow.cc; the job is jobs/reshape_job.h) ---
  // Checks a grow request and starts the reshape (or the level change).
  absl::Status Grow(GrowOptions options);
  // md's RAID5 <-> RAID6 takeover (takeover.cc), from Grow once the array
  // is known healthy and idle: `level` is the new level.
  absl::Status Takeover(const Shape& from, int level, GrowOptions options);
  // Assembly found a reshape in progress: the array is in `from` (current
  // shape) below nothing yet moved and in `to` below `front_bytes`.
  // `unclean`: the array was not shut down cleanly, so the moved part's
  // torn stripes are resynced before the copy goes on.
  void ResumeReshape(const Geometry& to, uint64_t to_data_offset,
                     uint64_t front_bytes, bool unclean);
  // First byte of each member past the superblock and internal bitmap.
  uint64_t MetadataEnd() const;
  bool reshaping() const { return jobs_.reshape().running(); }

  // --- jobs (array_jobs.h: the runner, the job objects, which spare goes
  // where) ---
  ArrayJobs& jobs() { return jobs_; }

  void StartBackground();
  // Whether member I/O may start the I/O pool's threads (IoExecutor::
  // SetThreadsAllowed): Assemble holds them while it runs, since nbdkit
  // assembles before it forks.
  void SetIoThreadsAllowed(bool allowed) {
    engine_.io().SetThreadsAllowed(allowed);
  }

  // --- member management (member_admin.h: fail, remove, add, replace) ---
  MemberAdmin& members() { return members_; }

  // Stops threads and marks clean when possible (called by ~Array).
  void Shutdown();

  // Writes the superblock (with the current roles, events+1) to every
  // member (array_hosts.h). A member whose write fails is marked faulty
  // and the write is repeated without it.
  absl::Status WriteSuperblocks(std::optional<bool> clean)
      ABSL_LOCKS_EXCLUDED(roster_.mu()) {
    return uraid::WriteSuperblocks(faults_, clean);
  }
  // Parity of stripes at or beyond this stripe is not trusted (unfinished
  // resync): writes there use reconstruct-write.
  void SetResyncStart(uint64_t stripe) { resync_stripe_.store(stripe); }

  void SetCacheBytes(uint64_t bytes) { engine_.cache().set_capacity(bytes); }
  // Every slot, in whichever shape (loops over all members: superblocks,
  // flushes, the bitmap); a shape's geo.raid_disks() counts only the slots
  // that shape stripes over (fewer than SlotCount() in the old shape while
  // a reshape adds members).
  int SlotCount() const { return static_cast<int>(slots_.size()); }

  // --- write-intent bitmap (meta/array_bitmap.h) ---
  // Set up by create/assembly before any I/O.
  ArrayBitmap& bitmap() { return bitmap_; }
  bool has_bitmap() const { return bitmap_.intent() != nullptr; }
  // Tells the bitmap whether the array is degraded (bits are kept then).
  void UpdateBitmapDegraded() { faults_.UpdateBitmapDegraded(); }
  // The failure rules (member_faults.h): FailSlot, CheckUsable, ApplyEdit.
  MemberFaults& faults() { return faults_; }
  // PPL (meta/ppl_log.h): set by create/assembly before any I/O.
  void AttachPpl(std::shared_ptr<PplLog> log) { ppl_.store(std::move(log)); }
  // Switches the consistency policy online (ppl_switch.cc; see
  // Array::SetConsistencyPolicy).
  absl::Status SetConsistencyPolicy(ConsistencyPolicy policy)
      ABSL_LOCKS_EXCLUDED(policy_mu_, roster_.mu());
  // The current shape's geometry (a reshape changes it when it ends).
  const Geometry& geometry() const { return CurrentShape().geo; }
  // The array's current shape: the only one outside a reshape, the old one
  // during it (the new one is the reshape's `to`). Valid for the array's
  // life; a reshape's end publishes another, so callers that must stay in
  // one shape load it once and pass it on.
  const Shape& CurrentShape() const { return shapes_.current(); }
  bool read_only() const { return read_only_; }
  // md's --readonly / --readwrite on a live array (Array::SetReadOnly).
  absl::Status SetReadOnly(bool read_only) ABSL_LOCKS_EXCLUDED(roster_.mu()) {
    return state_.SetReadOnly(read_only);
  }
  ArrayInfo Info() const;
  // Log lines and events (report/array_reporter.h).
  void Log(LogLevel level, const std::string& line) const {
    reporter_.Log(level, line);
  }
  void Report(LogLevel level, Event e, const std::string& line) const {
    reporter_.Report(level, std::move(e), line);
  }
  EventHub& events() { return reporter_.hub(); }
  // The current state as events, as a new subscriber first sees it:
  // NewArray, then DegradedArray or ArrayFailed, SparesMissing, and the
  // running job's start event.
  std::vector<Event> StateEvents() const;
  // md's spares=N: fewer spares than this gives SparesMissing.
  void SetExpectedSpares(int n) { roster_.SetExpectedSpares(n); }
  void SetSafemodeDelayMs(uint32_t ms) { state_.SetSafemodeDelayMs(ms); }

 private:
  // --- the request router (here and reshape_router.cc) ---
  enum class ReqKind { kRead, kWrite, kTrim, kZero };
  // Runs a client request on the plain path unless a reshape runs. A plain
  // request holds a pass of plain_epochs_ while it runs in the shape it
  // read, so a starting reshape (which sets reshaping() first) and a
  // takeover (which publishes the new shape first) can wait out the
  // requests that began before them, however busy the array is.
  template <typename F>
  absl::Status Route(ReqKind kind, void* buf, size_t len, uint64_t offset,
                     bool fua, F plain) {
    if (kind == ReqKind::kRead || kind == ReqKind::kWrite)
      jobs_.runner().NoteClientIo();
    {
      const WriteEpochs::Pass pass = plain_epochs_.Enter();
      if (!shapes_.reshaping()) return plain();
    }
    return RouteDuringReshape(kind, buf, len, offset, fua);
  }
  // Runs one request of `kind` in shape `*shaped`, or, when null, through
  // the public entry point (which routes it afresh).
  absl::Status Dispatch(ReqKind kind, const Shape* shaped, void* buf,
                        size_t len, uint64_t offset, bool fua);
  // Runs one client request during a reshape (see ReshapeState).
  absl::Status RouteDuringReshape(ReqKind kind, void* buf, size_t len,
                                  uint64_t offset, bool fua);
  // Every shape the array has had, the current one, and whether a
  // reshape has two live (shape_set.h).
  ShapeSet shapes_;
  const bool read_only_;
  // The array's one clock (the injected one, or RealClock()), before every
  // part that holds a reference to it.
  const std::shared_ptr<Clock> clock_;
  ArrayReporter reporter_;
  // The roster's and the bitmap's host (before both, which take it).
  MetaHost meta_host_{roster_, shapes_, bitmap_,        engine_,
                      faults_, state_,  resync_stripe_, reporter_};
  // The metadata owner (after the reporter it reports through): the
  // superblock template, spares, and the write side of every slot.
  Roster roster_;
  // The roster's slots, read side (who holds a slot changes only through
  // roster_.Apply).
  SlotTable& slots_;
  // The failure rules: the engine's host and the jobs' edits (after the
  // roster, whose slots it reads).
  MemberFaults faults_{roster_,
                       shapes_,
                       state_,
                       bitmap_,
                       [this] { jobs_.MaybeStartRecovery(); },
                       reporter_,
                       resync_stripe_,
                       read_only_};
  ArrayBitmap bitmap_;
  // Null unless the consistency policy is ppl. Set like bitmap_, and
  // swapped by SetConsistencyPolicy: a stripe write reads it once, inside
  // a ppl_epochs_ pass held until its member writes are done, so a switch
  // can wait out the writes that read the previous value.
  LockedSharedPtr<PplLog> ppl_;
  WriteEpochs ppl_epochs_;
  // Serialises policy switches, and Grow against them (a reshape must not
  // start while a switch to ppl is half done). Taken before the roster's.
  Mutex policy_mu_ ABSL_ACQUIRED_BEFORE(roster_.mu());

  // ArrayState's and the reshape's host (forwards to the parts).
  HostForwards hosts_{faults_, engine_,       jobs_,          bitmap_,  roster_,
                      shapes_, plain_epochs_, resync_stripe_, reporter_};
  // md's array_state: clean/active, writes in flight, the read-only
  // switch, the safemode timer (array_state.h).
  ArrayState state_;

  // First stripe whose parity is not yet known good; stripe_count() when
  // the array is in sync.
  std::atomic<uint64_t> resync_stripe_;
  std::thread writeback_thread_;
  bool shut_down_ = false;

  // Client requests on the plain (no reshape) path, by epoch (Route); a
  // reshape starts copying, and a takeover lets a new member in, only once
  // those that began before it have finished.
  WriteEpochs plain_epochs_;

  // The stripe engine (engine/stripe_engine.h): after everything it refers
  // to (the failure rules, the bitmap, the PPL log, the shapes and the
  // resync front).
  StripeEngine engine_;
  // The background jobs: the runner, the job objects and their stripe
  // work (after everything they touch; Shutdown stops the runner first).
  ArrayJobs jobs_;
  // fail/remove/add/replace (over the roster, the bitmap and the jobs).
  MemberAdmin members_{faults_, faults_, roster_,  shapes_,
                       bitmap_, jobs_,   reporter_};
};

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_IMPL_H_
