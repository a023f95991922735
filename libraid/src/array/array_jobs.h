// SPDX-License-Identifier: MIT
// Internal: the array's background jobs and what decides them. ArrayJobs
// owns the job runner (jobs/job_runner.h: queue, thread, throttle, window
// loop), the jobs' stripe work (StripeScanner, StripeRebuilder) and the
// job objects (RecoveryJob, ScrubJob, ResyncJob, ReshapeJob), and is the
// runner's JobHost: which slot a recovery takes and which spare goes where
// (md adds every spare it can before recovery starts), when a second
// RAID6 failure joins a running rebuild, and the events each job's start
// and end give. It is also the resync's host (the resync front it moves).
//
// It reaches the rest of the array only through references to parts the
// array declares before it (ArrayImpl, the composition root, wires them):
// the roster for every metadata change, the engine's host for the failure
// rules (CheckUsable, RecordBackgroundError), RecoveryHost::ApplyEdit for
// edits with the array's after-effects, the array state, the reporter.
//
// Thread-safety: every method may be called from any thread; the JobHost
// methods run on the runner's thread. Lock order: takes the roster's mutex
// only briefly, never while calling into the runner.

#ifndef URAID_SRC_ARRAY_ARRAY_JOBS_H_
#define URAID_SRC_ARRAY_ARRAY_JOBS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "array/array_state.h"
#include "base/task_pool.h"
#include "engine/engine_part.h"
#include "engine/shape_set.h"
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
#include "report/array_reporter.h"
#include "roster/roster.h"
#include "uraid/array.h"
#include "uraid/clock.h"

namespace uraid {

// What ArrayJobs works on: references to parts that outlive it.
struct JobParts {
  EngineContext engine;  // its host: CheckUsable, RecordBackgroundError
  Roster& roster;
  ShapeSet& shapes;
  StripeReader& reader;
  StripeWriter& writer;
  ArrayBitmap& bitmap;
  ArrayState& state;
  ArrayReporter& reporter;
  // First stripe whose parity is not yet known good (the writer's and the
  // superblocks' view too); stripe_count() when in sync.
  std::atomic<uint64_t>& resync_front;
  RecoveryHost& recovery_host;  // ApplyEdit with the array's after-effects
  ReshapeHost& reshape_host;
  bool read_only;
};

class ArrayJobs final : private JobHost, private ResyncHost {
 public:
  ArrayJobs(const JobParts& parts, Clock& clock);
  ArrayJobs(const ArrayJobs&) = delete;
  ArrayJobs& operator=(const ArrayJobs&) = delete;

  // --- entry points (array_jobs.cc) ---
  // Queues check (or with `repair`, repair) when the array can be checked
  // (not degraded, no resync, no other job): ScrubJob runs it.
  absl::Status StartScrub(bool repair);
  // The offline parity check (ScrubJob::CheckParity in the current shape)
  // and its report as a check job's outcome; refused during a reshape.
  absl::StatusOr<uint64_t> CheckParity(std::vector<uint64_t>* first_bad);
  absl::StatusOr<JobInfo> CheckParityReport();
  // Recomputes untrusted parity (ResyncJob), unless a reshape runs (it
  // resyncs what it moved itself), the array is read-only or in sync.
  // `as_job`: on the runner's thread, reporting progress to it; else in the
  // caller's thread (create, Array::Resync).
  absl::Status Resync(bool as_job = false);
  // Queues what assembly left to do, in md's order: the resync, then a
  // reshape found in progress, then recovery (after it, in the new shape).
  void StartQueued();
  // When the array is degraded and a spare or a partly rebuilt member is
  // present, queues recovery onto it; when a member wants replacement and
  // a spare is there, the replace (a no-op before the runner's thread
  // runs: no threads before nbdkit forks).
  void MaybeStartRecovery();

  JobRunner& runner() { return runner_; }
  const JobRunner& runner() const { return runner_; }
  ReshapeJob& reshape() { return reshape_; }
  const ReshapeJob& reshape() const { return reshape_; }
  const ResyncJob& resync() const { return resync_; }

 private:
  // --- JobHost (job_host.cc) ---
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
  // Recovery of req.slot (alone, or with req.second_slot); a single pass
  // (a RAID6 rebuild, or a replace copy at any level) that a second
  // recoverable slot stops goes on as a pair.
  absl::Status RunRecovery(const JobRequest& req);
  // The slot a recovery of `slot` rebuilds in the same pass (another slot
  // rebuilding onto a spare, else an active one being copied onto a
  // replace target), or -1. Two rebuilding slots only at RAID6; at level
  // 4/5 one of the two must be a replace copy. Not beside a re-added
  // member (its bitmap regions are rebuilt alone).
  int PairedRecoverySlot(int slot) const;
  // While `slot` is rebuilt alone (RAID6) or copied onto its replace
  // target (any level), a second slot became recoverable (gone, with a
  // spare in the pool): the single pass hands over to a pair pass
  // (RunRecovery). Never beside a re-added member.
  bool SecondSlotRecoverable(int slot) const;

  // --- spares (spare_use.cc) ---
  // The first gone slot (neither active nor rebuilding) of the current
  // shape other than `except`, or -1.
  int GoneSlotOtherThan(int except) const;
  // Promotes a spare into every gone slot but `except` (while spares
  // last; RAID6 rebuilds two in one pass).
  void PromoteSparesIntoGoneSlots(int except);
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

  // --- ResyncHost (array_jobs.cc) ---
  uint64_t ResyncFront() const override { return resync_front_.load(); }
  void SetResyncFront(uint64_t stripe) override {
    resync_front_.store(stripe, std::memory_order_release);
  }
  absl::Status CheckpointResync() override { return state_.CheckpointResync(); }
  bool Closing() const override { return state_.stopping(); }
  absl::Status ResyncDone() override { return state_.MarkCleanIfIdle(); }
  void Report(LogLevel level, Event e, const std::string& line) const override {
    reporter_.Report(level, std::move(e), line);
  }
  void Log(LogLevel level, const std::string& line) const {
    reporter_.Log(level, line);
  }
  const Shape& CurrentShape() const { return shapes_.current(); }

  EngineHost& host_;
  Roster& roster_;
  const SlotTable& slots_;
  ShapeSet& shapes_;
  ArrayBitmap& bitmap_;
  ArrayState& state_;
  ArrayReporter& reporter_;
  std::atomic<uint64_t>& resync_front_;
  RecoveryHost& recovery_host_;
  const bool read_only_;

  // The runner: the queue, the job thread, speed limits, progress. Its
  // thread runs only the jobs below; the array's Shutdown stops it first.
  JobRunner runner_;
  // Runs a job's window; its tasks submit member I/O on the executor.
  TaskPool pool_{static_cast<int>(kJobDepth) - 1};
  // The jobs' parity scan (with the writer it corrects read errors with).
  StripeScanner scanner_;
  // The check/repair job (over the scan and the runner).
  ScrubJob scrub_;
  // The resync (over the scan, the bitmap and the runner).
  ResyncJob resync_;
  // Recovery's stripe work.
  StripeRebuilder rebuilder_;
  // Recovery and replace (over the roster, the rebuilder, the writer, the
  // bitmap and the runner).
  RecoveryJob recovery_;
  // The reshape (over the roster, the shapes, the writer, the scanner, the
  // bitmap and the runner).
  ReshapeJob reshape_;
};

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_ARRAY_JOBS_H_
