// SPDX-License-Identifier: MIT
// Internal: the job runner. It owns what every background job shares (the
// one-deep queue, the job thread, md's speed limits and uraid's busy share,
// progress and its rate, stop and cancel) and nothing of what a job does:
// it reaches the array only through JobHost, so jobs/ policy and the
// array's stripe work do not call each other in a cycle. The jobs
// themselves (RecoveryJob, ScrubJob, ResyncJob, ReshapeJob: objects of
// their own) are run by the host's RunJob and come back
// to the runner for the window loop (RunStripePass), the throttle and
// progress.
//
// Time is the injected Clock's (uraid/clock.h): a test on a simulated
// clock steps a throttled job without real sleeps.
//
// Thread-safety: every public method may be called from any thread. mu_
// is a leaf lock: the runner never holds it while it calls the host, so
// the host may hold any of its own locks when it calls in.

#ifndef URAID_SRC_JOBS_JOB_RUNNER_H_
#define URAID_SRC_JOBS_JOB_RUNNER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "base/sync.h"
#include "uraid/array.h"
#include "uraid/clock.h"

namespace uraid {

// Stripes a job (recovery, replace, check/repair, reshape) works on at
// once: one at a time left members idle between a stripe's reads and its
// write and paid every member's latency per stripe. Bounds a job's
// buffers to kJobDepth stripes' pieces.
inline constexpr uint64_t kJobDepth = 8;

struct JobRequest {
  JobKind kind = JobKind::kNone;
  int slot = -1;  // recover/replace; -1: the host picks (recovery)
  // Recover at RAID6: a second slot rebuilt in the same pass (the host
  // picks it), or -1.
  int second_slot = -1;
};

// Where a throttled job stands against the speed limits (Throttle).
struct ThrottleState {
  int64_t anchor_ns = 0;
  uint64_t anchor_bytes = 0;
  uint64_t limit = 0;  // bytes/s in force since the anchor
  // When Throttle last let the job go (the start of its last window) and
  // where a busy share's rest ends (0: none planned).
  int64_t released_ns = 0;
  uint64_t released_bytes = 0;  // done_bytes when it last let the job go
  int64_t rest_until_ns = 0;
  bool sharing = false;  // released by the busy share, not by min
};

// One pass of a job over the stripes, a window at a time: the loop that
// recovery, scrub and resync share (RunStripePass). Each round stops if
// `stopped` says so, Throttles on the work done so far, moves past what
// `skip` says needs no work or else works a window of WindowStripes
// (narrowed by `cap`), and then reports the new position to `moved`.
struct StripePass {
  // Per-member bytes one worked stripe counts toward the speed limits
  // (skipped stripes count nothing): the chunk size. Must be > 0.
  uint64_t stripe_work = 0;
  // Most stripes one window may take (0: kJobDepth).
  uint64_t max_window = 0;
  bool honour_cancel = true;  // passed to Throttle
  // Optional: true stops the pass before its next window.
  std::function<bool()> stopped;
  // Optional: the first stripe at or after `s` that needs work (`s` when
  // it does). Whatever the skipped stripes need (a front moved past
  // them) it has done itself.
  std::function<uint64_t(uint64_t s)> skip;
  // Optional: narrows a window of `want` stripes from `s` (at least 1 is
  // kept).
  std::function<uint64_t(uint64_t s, uint64_t want)> cap;
  // Works stripes [s, s + count) and records them done (fronts,
  // counters): returns how many from `s` are done in an unbroken run, at
  // least one unless it sets `*error`, which stops the pass.
  std::function<uint64_t(uint64_t s, uint64_t count, absl::Status* error)> work;
  // Optional: after the pass moved to `s` (worked or skipped); progress
  // and checkpoints. An error stops the pass.
  std::function<absl::Status(uint64_t s)> moved;
};

// What the runner needs of the array it runs jobs for. Called on the job
// thread, without the runner's lock.
class JobHost {
 public:
  virtual ~JobHost() = default;
  // Just before `req` runs: resolves a recovery whose slot is -1 (the
  // slot already rebuilding, or a gone slot a spare is promoted into) and
  // fills `info` (slot, target, total_bytes; kind is set). False: there is
  // nothing to do and the request is dropped.
  virtual bool PrepareJob(JobRequest* req, JobInfo* info) = 0;
  // Its start event; then the job itself, on the job thread.
  virtual void JobStarted(const JobRequest& req) = 0;
  virtual absl::Status RunJob(const JobRequest& req) = 0;
  // Its end: `done` as it finished (result set), `secs` how long it ran
  // on the runner's clock, `cancelled` when it was stopped or the runner
  // shuts down (no follow-up wanted).
  virtual void JobEnded(const JobInfo& done, const absl::Status& status,
                        double secs, bool cancelled) = 0;
  // A recovery or replace reached `percent` (20, 40, 60, 80; each once).
  virtual void JobMilestone(const JobInfo& job, int percent) = 0;
};

class JobRunner {
 public:
  // `host` and `clock` (the array's) must outlive the runner.
  JobRunner(JobHost* host, Clock& clock);
  ~JobRunner();  // Shutdown()
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Queues `req` (one deep) and starts the job thread if it is idle.
  // FailedPrecondition when shutting down or when a job runs and another
  // is queued.
  absl::Status Request(JobRequest req);
  // Queues a recovery (slot chosen by the host) unless one runs or is
  // queued; a running check or repair is cancelled first (md: redundancy
  // before a scrub). OK when nothing needed queueing.
  absl::Status RequestRecovery();
  // Cancels the running job at its next window and drops a queued one;
  // returns once the job has ended (JobEnded done), except a resync, which
  // does not stop, or when called on the job thread (an event callback).
  void Stop();
  // Waits until no job runs or is queued; the last job's status.
  absl::Status Wait();
  // Refuses new jobs, stops the running one and joins its thread. Idempotent.
  void Shutdown();
  // Freeze(true) holds every job at its next window (md's frozen sync
  // while an array is read-only): it returns once the job thread is idle
  // or parked where no job I/O is in flight (in Throttle before a window,
  // or before it starts a queued job), so the caller may then mark the
  // array clean. Queued and parked jobs stay; Freeze(false) lets them go
  // on where they stopped. Stop (cancel) and Shutdown end a parked job as
  // they would a running one. Must not be called from the job thread.
  void Freeze(bool frozen);
  bool frozen() const;

  // The running job's kind when the job thread is busy (running or about
  // to run a queued job), else nullopt. `or_queued` also counts a queued
  // job with the thread not yet running it.
  std::optional<JobKind> Busy(bool or_queued = false) const;
  // `kind` runs or is queued.
  bool RunsOrQueued(JobKind kind) const;
  JobInfo current() const;
  JobInfo last() const;
  SpeedLimits speed() const;
  void SetSpeedLimits(const SpeedLimits& limits);

  // --- for the jobs, on the job thread ---
  bool StopRequested() const;
  // Records progress (per-member bytes); reports milestones to the host.
  void Progress(uint64_t done_bytes);
  // Sets the running job's totals (a job that knows them only once it
  // runs: reshape).
  void SetTotals(uint64_t total_bytes, uint64_t done_bytes);
  // A recovery that goes on as a RAID6 pair: its second slot and target.
  void SetSecondSlot(int slot, const std::string& target);
  // Adds a scrub's mismatched stripes (the first few are listed).
  void AddMismatches(const std::vector<uint64_t>& stripes);
  // The same, with each stripe's located bad slot (parallel; -1: none).
  void AddMismatches(const std::vector<uint64_t>& stripes,
                     const std::vector<int>& slots);
  // Adds a rebuild's bytes that could not be rebuilt, at array byte
  // offsets `where` (the first few are listed).
  void AddUnrecovered(uint64_t bytes, const std::vector<uint64_t>& where);
  // Check / repair: member bytes of rows skipped for bad blocks, in
  // `stripes` (the first kMaxListedMismatches are kept).
  void AddUnchecked(uint64_t bytes, const std::vector<uint64_t>& stripes);
  // Sleeps as md's speed limits require after `done_bytes` (per member) of
  // job work; false when the job should stop. With `would_wait`, does not
  // sleep: returns false with *would_wait set when it would have (the
  // caller gets ready to rest, then calls again).
  bool Throttle(ThrottleState& t, uint64_t done_bytes,
                bool honour_cancel = true, bool* would_wait = nullptr);
  // Stripes a job's next window may take from the speed limit in force,
  // at most `depth`, for stripes of `stripe_work` per-member bytes.
  static uint64_t WindowStripes(const ThrottleState& t, uint64_t depth,
                                uint64_t stripe_work);
  // Runs `pass` from `*stripe` until `end`, a stop (Throttle or `stopped`)
  // or an error, which it returns; `*stripe` is where it got to (every
  // stripe below it is done).
  absl::Status RunStripePass(const StripePass& pass, uint64_t end,
                             uint64_t* stripe);

  // Client I/O seen now: jobs yield to it down to the minimum speed.
  void NoteClientIo() {
    last_client_io_ns_.store(clock_.NowNs(), std::memory_order_relaxed);
  }
  int64_t NowNs() const { return clock_.NowNs(); }

 private:
  void Thread();
  // Freeze's waits (conditions over mu_'s fields).
  bool Quiescent() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !thread_running_ || parked_;
  }
  bool MayGo() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !frozen_ || stop_;
  }
  bool MayGoOrCancelled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !frozen_ || stop_ || cancel_;
  }
  bool MayStartNext() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !frozen_ || stop_ || !pending_.has_value();
  }
  // Parks the job thread while frozen (until `may_go`); REQUIRES mu_.
  void ParkLocked(bool (JobRunner::*may_go)() const)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  JobHost* const host_;
  Clock& clock_;
  std::atomic<int64_t> last_client_io_ns_{0};

  mutable Mutex mu_;  // leaf
  std::optional<JobRequest> pending_ ABSL_GUARDED_BY(mu_);
  bool thread_running_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool cancel_ ABSL_GUARDED_BY(mu_) = false;  // Stop()
  bool frozen_ ABSL_GUARDED_BY(mu_) = false;  // Freeze()
  bool parked_ ABSL_GUARDED_BY(mu_) = false;  // the job thread waits in it
  std::thread::id job_thread_ ABSL_GUARDED_BY(mu_);  // thread_'s, for Stop
  // Jobs whose JobEnded has returned, for Stop's wait.
  uint64_t jobs_ended_ ABSL_GUARDED_BY(mu_) = 0;
  JobInfo job_ ABSL_GUARDED_BY(mu_);
  // The last Rebuild milestone reported for the running job (20, 40, ...).
  int milestone_ ABSL_GUARDED_BY(mu_) = 0;
  JobInfo last_job_ ABSL_GUARDED_BY(mu_);
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  SpeedLimits speed_ ABSL_GUARDED_BY(mu_);
  // Rate samples (time ns, done bytes) for JobInfo::bytes_per_s.
  std::vector<std::pair<int64_t, uint64_t>> samples_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // started and joined under mu_'s protocol
};

}  // namespace uraid

#endif  // URAID_SRC_JOBS_JOB_RUNNER_H_
