// SPDX-License-Identifier: MIT
// Internal: the orchestrator behind uraid::Array. It wires the parts
// together and holds what no part owns: the clean/active state, the shapes
// and the reshape router, and the jobs' bodies. The parts, each a class
// over references to what it uses: the metadata owner (Roster: the
// superblock template, spares, who holds each slot, changed only through
// Roster::Apply), the stripe engine (StripeReader, StripeWriter), the
// member-I/O executor (IoExecutor), the jobs' stripe work (StripeRebuilder,
// StripeScanner, ReshapeCopier), the job runner, the bitmap glue
// (ArrayBitmap), the PPL log, the reporter. They reach back only through
// the interfaces it implements: EngineHost, JobHost, BitmapHost,
// RosterHost and the jobs' hosts.
//
// Its methods are defined in array/ (array.cc: construction, entry points,
// the clean/active state and background threads; create.cc, assemble.cc,
// member_failure.cc, array_events.cc, array_extents.cc, array_jobs.cc,
// bitmap_host.cc, job_host.cc: the array as JobHost, slot_admin.cc,
// ppl_switch.cc, reshape_router.cc, grow.cc, takeover.cc). Recovery,
// check/repair, resync and reshape are job objects (RecoveryJob, ScrubJob,
// ResyncJob, ReshapeJob) the array holds and runs.
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
#include "array/array_state.h"
#include "base/aligned_buffer.h"
#include "base/locked_shared_ptr.h"
#include "base/sync.h"
#include "base/task_pool.h"
#include "base/write_epochs.h"
#include "engine/atomic_counters.h"
#include "engine/io_executor.h"
#include "engine/member_io.h"
#include "engine/shape.h"
#include "engine/shape_set.h"
#include "engine/slot_table.h"
#include "engine/stripe_reader.h"
#include "engine/stripe_writer.h"
#include "jobs/job_runner.h"
#include "jobs/recovery_job.h"
#include "jobs/reshape_job.h"
#include "jobs/resync_job.h"
#include "jobs/scrub_job.h"
#include "jobs/stripe_rebuilder.h"
#include "jobs/stripe_scanner.h"
#include "meta/array_bitmap.h"
#include "meta/ppl_log.h"
#include "plan/stripe_plan.h"
#include "report/array_reporter.h"
#include "roster/roster.h"
#include "stripe/stripe_cache.h"
#include "stripe/stripe_locks.h"
#include "stripe/survivor_cache.h"
#include "uraid/array.h"
#include "uraid/bitmap.h"
#include "uraid/events.h"

namespace uraid {

class ArrayImpl : private JobHost,
                  private BitmapHost,
                  private EngineHost,
                  private RosterHost,
                  private RecoveryHost,
                  private ResyncHost,
                  private ReshapeHost,
                  private ArrayStateHost {
 public:
  ArrayImpl(Geometry geometry, uint64_t data_offset_bytes, Superblock sb,
            std::vector<std::unique_ptr<Slot>> slots, std::vector<Spare> spares,
            bool read_only, const CacheOptions& cache, Logger logger,
            std::shared_ptr<Clock> clock);
  ~ArrayImpl();

  // --- data path (array.cc) ---
  // Client entry points: outside a reshape they run the stripe engine
  // (reader_, writer_) in the current shape; during one, the reshape router
  // (reshape_router.cc) runs each part of the request in the shape that
  // holds it (old and new shapes side by side, each passed explicitly).
  absl::Status Read(void* buf, size_t len, uint64_t offset);
  absl::Status Write(const void* buf, size_t len, uint64_t offset, bool fua);
  absl::Status Flush() override { return writer_.Flush(); }
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
  bool reshaping() const { return reshape_.running(); }
  // Copies the next window of a reshape started with start_job = false (or
  // resumed by assembly with no background threads); true once it ended.
  absl::StatusOr<bool> StepReshape() { return reshape_.Step(); }

  // --- maintenance (array_jobs.cc) ---
  // Recomputes untrusted parity (ResyncJob), unless a reshape runs (it
  // resyncs what it moved itself), the array is read-only or in sync.
  // `as_job`: on the job runner's thread, reporting progress to it; else
  // in the caller's thread (create, Array::Resync).
  absl::Status Resync(bool as_job = false);
  // Without a bitmap: flushes the members and records the resync's front
  // as resync_offset in the superblocks, unless a client has written
  // since assembly (then the offset must stay 0). Called by the resync
  // itself, on its own thread (ResyncHost).
  absl::Status CheckpointResync() override { return state_.CheckpointResync(); }
  // The offline parity check (ScrubJob::CheckParity in the current shape);
  // refused during a reshape (array_jobs.cc).
  absl::StatusOr<uint64_t> CheckParity(std::vector<uint64_t>* first_bad);
  // The same as a check job's outcome (ScrubJob::CheckParityReport).
  absl::StatusOr<JobInfo> CheckParityReport();
  // Marks `slot` faulty (the roster's edit::Fail: with `only_if`, only
  // while that member still holds the slot; an active member with a
  // replace target hands the slot over to it), then lets a spare step in.
  absl::Status FailSlot(int slot, const std::string& why,
                        const Member* only_if = nullptr) override
      ABSL_LOCKS_EXCLUDED(roster_.mu());
  void StartBackground();

  // --- member management (slot_admin.cc) ---
  absl::Status FailMember(const std::string& name);
  absl::Status RemoveMember(const std::string& name);
  absl::Status AddMember(std::unique_ptr<Member> member);
  absl::Status ReplaceMember(const std::string& old_name,
                             std::unique_ptr<Member> replacement);

  // --- jobs (job_host.cc; array_jobs.cc) ---
  // Queues check (or with `repair`, repair) when the array can be checked
  // (not degraded, no resync, no other job): ScrubJob runs it.
  absl::Status StartScrub(bool repair);
  absl::Status StopJob();
  absl::Status WaitForJob();
  void SetSpeedLimits(const SpeedLimits& limits);
  // Stops threads and marks clean when possible (called by ~Array).
  void Shutdown();

  // Writes the superblock (with the current roles, events+1) to every
  // member (Roster::Apply of edit::SetClean or edit::Persist). A member
  // whose write fails is marked faulty and the write is repeated without
  // it. `clean`: persist clean (true), dirty (false) or keep what the
  // superblocks say now (nullopt, for role changes).
  absl::Status WriteSuperblocks(std::optional<bool> clean) override
      ABSL_LOCKS_EXCLUDED(roster_.mu());
  // Applies `edit` to the metadata (Roster::Apply), then what the array
  // does after any superblock update: the members that failed the bitmap
  // header are handed over, and a member that failed its superblock write
  // lets a spare step in. Returns what Apply did.
  Applied ApplyEdit(const RosterEdit& edit) override
      ABSL_LOCKS_EXCLUDED(roster_.mu());

  // Parity of stripes at or beyond this stripe is not trusted (unfinished
  // resync): writes there use reconstruct-write.
  void SetResyncStart(uint64_t stripe) { resync_stripe_.store(stripe); }

  void SetCacheBytes(uint64_t bytes) { cache_.set_capacity(bytes); }
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
  void UpdateBitmapDegraded();
  // Names of the slot members, replacements and spares (BitmapHost).
  std::vector<std::string> MemberNames() const override;
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
  // Log lines and events (report/array_reporter.h); JobHost and
  // BitmapHost report through these.
  void Log(LogLevel level, const std::string& line) const override {
    reporter_.Log(level, line);
  }
  void Report(LogLevel level, Event e, const std::string& line) const override {
    reporter_.Report(level, std::move(e), line);
  }
  EventHub& events() { return reporter_.hub(); }
  // The current state as events, as a new subscriber first sees it:
  // NewArray, then DegradedArray or ArrayFailed, SparesMissing, and the
  // running job's start event.
  std::vector<Event> StateEvents() const;
  // md's spares=N: fewer spares than this gives SparesMissing.
  void SetExpectedSpares(int n) { expected_spares_.store(n); }
  // Reports SparesMissing when the array has fewer spares than expected.
  void CheckSpares() const;

 private:
  // What every part of the stripe engine works on (engine_part.h): built
  // for each part as it is constructed, from members declared before it.
  EngineContext Engine() { return {*this, slots_, io_, locks_, counters_}; }
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
    if (kind == ReqKind::kRead || kind == ReqKind::kWrite) jobs_.NoteClientIo();
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
  // --- ReshapeHost (grow.cc) ---
  absl::Status UpdateSuperblocks() override {
    return WriteSuperblocks(std::nullopt);
  }
  void DrainPlainRequests() override { plain_epochs_.Drain(); }
  void ShapeChanged(const Shape& to) override;

  // --- EngineHost (engine_host.h; array.cc, member_failure.cc) ---
  // The first background error stays (see bg_error_).
  absl::Status CheckUsable(bool write) const override;
  absl::Status AbsorbFailures(std::vector<MemberIo>& ios,
                              bool* slot_failed) override;
  absl::Status BeginWrite() override { return state_.BeginWrite(); }
  void EndWrite() override { state_.EndWrite(); }
  // Bad-block lists (bad_block_records.cc).
  absl::Status RecordBadBlocks(int slot, bool replacement,
                               const Member* only_if, uint64_t at, uint64_t len,
                               const std::string& why) override
      ABSL_LOCKS_EXCLUDED(roster_.mu());
  absl::Status ClearBadBlocks(int slot, const Member* only_if, uint64_t at,
                              uint64_t len) override
      ABSL_LOCKS_EXCLUDED(roster_.mu());
  void WantReplacement(int slot, const Member* only_if,
                       const std::string& why) override
      ABSL_LOCKS_EXCLUDED(roster_.mu());
  // Writes `list` to member `m`'s log area, durably. Fails when the array
  // has no log or the list does not fit.
  absl::Status WriteBadBlockLogLocked(Member& m, const BadBlockList& list)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(roster_.mu());
  // What member bytes [at, at + len) of `slot` hold in the current shape,
  // for log lines: array byte ranges, or the parity of some.
  std::string DescribeMemberRange(int slot, uint64_t at, uint64_t len) const;
  void RecordBackgroundError(const absl::Status& st,
                             absl::string_view what) override;

  // --- BitmapHost (meta/array_bitmap.cc) ---
  std::vector<Carrier> BitmapCarriers() const override;
  std::vector<absl::Status> WriteDurablyOn(std::span<const Carrier> carriers,
                                           const void* buf, size_t len,
                                           uint64_t raw) override;
  absl::Status FlushAllSlots() override;
  void BitmapCarrierFailed(const Carrier& c, const std::string& why) override;

  // --- ArrayStateHost (array.cc) ---
  absl::Status FlushMembers(bool writeback) override;
  bool Failed() const override { return roster_.failed(); }
  bool ResyncPending() const override {
    return resync_stripe_.load() < CurrentShape().geo.stripe_count();
  }
  void FreezeJobs(bool frozen) override { jobs_.Freeze(frozen); }
  void WritesResumed() override { MaybeStartRecovery(); }

  // Writes back stripes the cache has held longer than cache_max_age_.
  void WritebackLoop();

  // --- jobs (job_host.cc: the array as the runner's JobHost) ---
  // When the array is degraded and a spare or a partly rebuilt member is
  // present, queues recovery onto it (a no-op before StartBackground: no
  // threads before nbdkit forks).
  void MaybeStartRecovery();
  bool PrepareJob(JobRequest* req, JobInfo* info) override;
  void JobStarted(const JobRequest& req) override;
  absl::Status RunJob(const JobRequest& req) override;
  void JobEnded(const JobInfo& done, const absl::Status& status, double secs,
                bool cancelled) override;
  void JobMilestone(const JobInfo& job, int percent) override;
  // A job's end as events and log lines (JobEnded's first half).
  void ReportJobEnd(const JobInfo& done, bool ok, double secs);
  // A scrub's located chunks for its end message ("" when none).
  std::string LocatedText(const JobInfo& done) const;
  // The first spare, its copy of the bitmap refreshed (a spare that cannot
  // take it is dropped, and the error returned). REQUIRES: the roster's
  // mutex not held.
  absl::StatusOr<std::shared_ptr<Member>> ReadySpare();
  // Promotes the first spare into the gone slot; REQUIRES: the roster's
  // mutex not held.
  absl::Status PromoteSpare(int slot);
  // Makes the first spare the replace target of active `slot` (a member
  // that wants replacement) and writes the superblocks; the caller runs
  // the replace job. REQUIRES: the roster's mutex not held.
  absl::Status SpareAsReplacement(int slot);
  // The first active slot that wants replacement and has no replace
  // target yet, or -1.
  int SlotWantingReplacement() const;
  // RAID6: the slot a recovery of `slot` rebuilds in the same pass (another
  // slot rebuilding onto a spare, else an active one being copied onto a
  // replace target), or -1. Not beside a re-added member (its bitmap
  // regions are rebuilt alone), nor at other levels.
  int PairedRecoverySlot(int slot) const;
  // RAID6: while `slot` is rebuilt alone, a second slot became
  // recoverable (gone, with a spare in the pool): the single pass hands
  // over to a pair pass (RunRecovery). Never beside a re-added member.
  bool SecondSlotRecoverable(int slot) const;
  // Recovery of req.slot (alone, or with req.second_slot); a single RAID6
  // rebuild that a second recoverable slot stops goes on as a pair.
  absl::Status RunRecovery(const JobRequest& req);
  std::shared_ptr<Member> FindByName(const std::string& name, int* slot,
                                     int* spare) const;
  // Checks a member about to join (size, not ours already, not another
  // array's) and gives it a device uuid and size; not yet a dev_number.
  absl::StatusOr<DeviceId> PrepareNewMember(Member& member);

  // --- RosterHost (roster/roster.h; member_failure.cc) ---
  uint64_t CurrentChunkBytes() const override {
    return CurrentShape().geo.chunk_bytes();
  }
  uint64_t DirtyResyncSectors() const override;
  void WriteBitmapEvents(uint64_t events) override;
  std::optional<BitmapSuper> BitmapHeader() const override;
  void SlotHealthChanged() override { UpdateBitmapDegraded(); }

  // --- ResyncHost (jobs/resync_job.h; array_jobs.cc) ---
  uint64_t ResyncFront() const override { return resync_stripe_.load(); }
  void SetResyncFront(uint64_t stripe) override {
    resync_stripe_.store(stripe, std::memory_order_release);
  }
  bool Closing() const override { return state_.stopping(); }
  absl::Status ResyncDone() override { return state_.MarkCleanIfIdle(); }

  // Every shape the array has had, the current one, and whether a
  // reshape has two live (shape_set.h).
  ShapeSet shapes_;
  const bool read_only_;
  ArrayReporter reporter_;
  std::atomic<int> expected_spares_{0};
  // The metadata owner (after the reporter it reports through): the
  // superblock template, spares, and the write side of every slot.
  Roster roster_;
  // The roster's slots, read side (who holds a slot changes only through
  // roster_.Apply).
  SlotTable& slots_;
  // The sticky background error: a metadata update that had to record a
  // member's failure (or a spare's or replacement's loss) did not make it
  // to the members. From then on writes fail with it (reads go on), so
  // nothing is acknowledged that the superblocks may contradict after a
  // restart. Set once; never cleared while the array is open.
  mutable Mutex bg_mu_;
  absl::Status bg_error_ ABSL_GUARDED_BY(bg_mu_);
  std::atomic<bool> has_bg_error_{false};
  AtomicCounters counters_;
  StripeLocks locks_;
  // Every member call (after roster_ and counters_, which it refers to).
  IoExecutor io_;
  // Runs a job's window; its tasks submit member I/O on pool_.
  TaskPool job_pool_{static_cast<int>(kJobDepth) - 1};
  StripeCache cache_;
  SurvivorCache survivors_;
  // The read half of the stripe engine (after everything it refers to).
  StripeReader reader_;
  const std::chrono::milliseconds cache_max_age_;

  // The end of the bad-block log area on each member (bytes; 0 without a
  // log): metadata a reshape's new data offset must stay clear of.
  const uint64_t bblog_end_;

  // The job runner: the queue, the job thread, speed limits, progress.
  // Declared after everything its jobs touch; Shutdown stops it first.
  JobRunner jobs_;

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

  // The write half of the stripe engine: last, after everything it refers
  // to (the bitmap, the PPL log, the shapes and the resync front).
  StripeWriter writer_;
  // The jobs' parity scan (after the writer it corrects read errors with).
  StripeScanner scanner_;
  // The check/repair job (over the scan and the runner).
  ScrubJob scrub_{scanner_, jobs_, counters_};
  // The resync (over the scan, the bitmap and the runner).
  ResyncJob resync_{*this, scanner_, bitmap_, jobs_, counters_};
  // Recovery's stripe work.
  StripeRebuilder rebuilder_;
  // Recovery and replace (over the roster, the rebuilder, the writer, the
  // bitmap and the runner).
  RecoveryJob recovery_{*this, roster_, rebuilder_, writer_, bitmap_, jobs_};
  // The reshape (over the roster, the shapes, the writer, the scanner, the
  // bitmap and the runner).
  ReshapeJob reshape_{*this,    roster_, shapes_, slots_,    reader_,  writer_,
                      scanner_, bitmap_, jobs_,   counters_, job_pool_};
};

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_IMPL_H_
