// SPDX-License-Identifier: MIT
// The job runner (see job_runner.h). One job runs at a time, on the job
// thread. Requests queue one deep: Request starts the thread when it is
// idle, or leaves the request for the running thread to pick up when its
// job ends.

#include "jobs/job_runner.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace uraid {
namespace {

// Client I/O this recent makes the array "busy": jobs then run at the
// minimum speed (md's is_mddev_idle, in time rather than sector counts).
constexpr int64_t kBusyWindowNs = 100'000'000;

class SteadyClock final : public Clock {
 public:
  int64_t NowNs() override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void SleepForNs(int64_t ns) override {
    std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
  }
};

bool IsRecovery(JobKind k) {
  return k == JobKind::kRecover || k == JobKind::kReplace;
}

}  // namespace

std::shared_ptr<Clock> RealClock() {
  static const std::shared_ptr<Clock> clock = std::make_shared<SteadyClock>();
  return clock;
}

JobRunner::JobRunner(JobHost* host, Clock& clock)
    : host_(host), clock_(clock) {}

JobRunner::~JobRunner() { Shutdown(); }

absl::Status JobRunner::Request(JobRequest req) {
  MutexLock lock(&mu_);
  if (stop_) {
    return absl::FailedPreconditionError("the array is shutting down");
  }
  if (thread_running_) {
    if (pending_.has_value()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "a %s job is running and a %s job is queued; try again later",
          JobKindName(job_.kind), JobKindName(pending_->kind)));
    }
    pending_ = req;
    return absl::OkStatus();
  }
  // The previous thread (if any) has finished: it cleared thread_running_
  // as its last act under this lock.
  if (thread_.joinable()) thread_.join();
  pending_ = req;
  thread_running_ = true;
  // Visible at once (the thread fills in the rest when it starts).
  job_ = JobInfo{};
  job_.kind = req.kind;
  thread_ = std::thread([this] { Thread(); });
  job_thread_ = thread_.get_id();
  return absl::OkStatus();
}

absl::Status JobRunner::RequestRecovery() {
  {
    MutexLock lock(&mu_);
    if (stop_) return absl::OkStatus();
    if (IsRecovery(job_.kind) ||
        (pending_.has_value() && IsRecovery(pending_->kind))) {
      return absl::OkStatus();
    }
    if (job_.kind == JobKind::kCheck || job_.kind == JobKind::kRepair) {
      cancel_ = true;
    }
  }
  return Request(JobRequest{JobKind::kRecover, -1});
}

void JobRunner::Stop() {
  MutexLock lock(&mu_);
  cancel_ = true;
  pending_.reset();
  // As md's sync_action "idle", which returns once the sync thread has
  // stopped: whoever reads the array's state next sees the job gone and
  // its checkpoint written. Not a resync (it does not honour a cancel),
  // and not on the job thread itself (an event callback there would wait
  // for its own job).
  if (!thread_running_ || job_.kind == JobKind::kResync ||
      std::this_thread::get_id() == job_thread_) {
    return;
  }
  const uint64_t ended = jobs_ended_;
  const auto stopped = [this, ended]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !thread_running_ || jobs_ended_ != ended ||
           job_.kind == JobKind::kResync;
  };
  mu_.Await(Condition(&stopped));
}

absl::Status JobRunner::Wait() {
  MutexLock lock(&mu_);
  mu_.Await(Condition(
      +[](bool* running) { return !*running; }, &thread_running_));
  return last_status_;
}

void JobRunner::Shutdown() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    pending_.reset();
  }
  // Not under mu_: the job thread takes it on its way out. Only the
  // array's own shutdown (one thread) calls this while jobs may start.
  if (thread_.joinable()) thread_.join();
}

void JobRunner::Freeze(bool frozen) {
  MutexLock lock(&mu_);
  frozen_ = frozen;
  if (frozen) mu_.Await(Condition(this, &JobRunner::Quiescent));
}

bool JobRunner::frozen() const {
  MutexLock lock(&mu_);
  return frozen_;
}

void JobRunner::ParkLocked(bool (JobRunner::*may_go)() const) {
  if ((this->*may_go)()) return;
  parked_ = true;
  mu_.Await(Condition(this, may_go));
  parked_ = false;
}

std::optional<JobKind> JobRunner::Busy(bool or_queued) const {
  MutexLock lock(&mu_);
  if (thread_running_ || (or_queued && pending_.has_value())) {
    return job_.kind;
  }
  return std::nullopt;
}

bool JobRunner::RunsOrQueued(JobKind kind) const {
  MutexLock lock(&mu_);
  return job_.kind == kind || (pending_.has_value() && pending_->kind == kind);
}

JobInfo JobRunner::current() const {
  MutexLock lock(&mu_);
  return job_;
}

JobInfo JobRunner::last() const {
  MutexLock lock(&mu_);
  return last_job_;
}

SpeedLimits JobRunner::speed() const {
  MutexLock lock(&mu_);
  return speed_;
}

void JobRunner::SetSpeedLimits(const SpeedLimits& limits) {
  MutexLock lock(&mu_);
  speed_ = limits;
}

bool JobRunner::StopRequested() const {
  MutexLock lock(&mu_);
  return stop_ || cancel_;
}

void JobRunner::Thread() {
  // The last job's JobEnded is done: counted for Stop under the same lock
  // that then finds no job queued and ends the thread, so a Stop that
  // returns sees the runner idle.
  bool ended = false;
  for (;;) {
    JobRequest req;
    {
      MutexLock lock(&mu_);
      if (ended) ++jobs_ended_;
      ended = false;
      // Frozen: a queued job waits here, before it does anything.
      ParkLocked(&JobRunner::MayStartNext);
      if (!pending_.has_value() || stop_) {
        if (job_.kind != JobKind::kNone) {
          // Queued, then stopped before it began.
          job_.result = "interrupted";
          last_job_ = job_;
          job_ = JobInfo{};
        }
        pending_.reset();
        thread_running_ = false;
        return;
      }
      req = *pending_;
      pending_.reset();
      cancel_ = false;
    }
    JobInfo info;
    info.kind = req.kind;
    if (!host_->PrepareJob(&req, &info)) {
      MutexLock lock(&mu_);
      job_ = JobInfo{};
      continue;
    }
    {
      MutexLock lock(&mu_);
      job_ = info;
      job_.kind = req.kind;
      samples_.clear();
      milestone_ = 0;
    }
    host_->JobStarted(req);
    const int64_t started = clock_.NowNs();
    const absl::Status st = host_->RunJob(req);
    const double secs = static_cast<double>(clock_.NowNs() - started) / 1e9;
    bool cancelled;
    JobInfo done;
    {
      MutexLock lock(&mu_);
      cancelled = cancel_ || stop_;
      const bool finished = job_.done_bytes >= job_.total_bytes;
      job_.result = !st.ok()                   ? std::string(st.message())
                    : (finished || !cancelled) ? "completed"
                                               : "interrupted";
      job_.bytes_per_s =
          secs > 0 ? static_cast<double>(job_.done_bytes) / secs : 0;
      last_job_ = job_;
      last_status_ = st;
      done = job_;
      job_ = JobInfo{};
    }
    host_->JobEnded(done, st, secs, cancelled);
    ended = true;
  }
}

void JobRunner::Progress(uint64_t done_bytes) {
  std::vector<int> milestones;
  JobInfo job;
  {
    MutexLock lock(&mu_);
    const int64_t now = clock_.NowNs();
    job_.done_bytes = done_bytes;
    if (samples_.empty() || now - samples_.back().first > 250'000'000) {
      samples_.emplace_back(now, done_bytes);
    }
    while (samples_.size() > 2 &&
           now - samples_.front().first > 3'000'000'000) {
      samples_.erase(samples_.begin());
    }
    const auto& [t0, b0] = samples_.front();
    if (now > t0) {
      job_.bytes_per_s = static_cast<double>(done_bytes - b0) * 1e9 /
                         static_cast<double>(now - t0);
    }
    if (IsRecovery(job_.kind) && job_.total_bytes > 0) {
      const int pct = static_cast<int>(done_bytes * 100 / job_.total_bytes);
      // md's monitor reports 20, 40, 60 and 80 per cent, each once, also
      // when one step of the job crosses several.
      const int reached = std::min(80, pct / 20 * 20);
      for (int m = milestone_ + 20; m <= reached; m += 20) {
        milestones.push_back(m);
      }
      if (reached > milestone_) {
        milestone_ = reached;
        job = job_;
      }
    }
  }
  for (int m : milestones) host_->JobMilestone(job, m);
}

void JobRunner::SetTotals(uint64_t total_bytes, uint64_t done_bytes) {
  MutexLock lock(&mu_);
  job_.total_bytes = total_bytes;
  job_.done_bytes = done_bytes;
}

void JobRunner::SetSecondSlot(int slot, const std::string& target) {
  MutexLock lock(&mu_);
  job_.second_slot = slot;
  job_.second_target = target;
}

namespace {

// Adds `amount` to a job's `total` and lists the first `items` in `listed`,
// which keeps at most kMaxListedMismatches.
void AddListed(uint64_t amount, const std::vector<uint64_t>& items,
               uint64_t* total, std::vector<uint64_t>* listed) {
  *total += amount;
  for (uint64_t item : items) {
    if (listed->size() >= kMaxListedMismatches) break;
    listed->push_back(item);
  }
}

}  // namespace

void JobRunner::AddMismatches(const std::vector<uint64_t>& stripes) {
  MutexLock lock(&mu_);
  AddListed(stripes.size(), stripes, &job_.mismatches, &job_.first_mismatches);
}

void JobRunner::AddMismatches(const std::vector<uint64_t>& stripes,
                              const std::vector<int>& slots) {
  MutexLock lock(&mu_);
  AddListed(stripes.size(), stripes, &job_.mismatches, &job_.first_mismatches);
  for (size_t i = 0; i < stripes.size() && i < slots.size(); ++i) {
    if (slots[i] < 0) continue;
    ++job_.located_mismatches;
    if (job_.first_located.size() >= kMaxListedMismatches) continue;
    job_.first_located.push_back(stripes[i]);
    job_.first_located_slots.push_back(static_cast<uint64_t>(slots[i]));
  }
}

void JobRunner::AddUnrecovered(uint64_t bytes,
                               const std::vector<uint64_t>& where) {
  MutexLock lock(&mu_);
  AddListed(bytes, where, &job_.unrecovered_bytes, &job_.first_unrecovered);
}

void JobRunner::AddUnchecked(uint64_t bytes,
                             const std::vector<uint64_t>& stripes) {
  MutexLock lock(&mu_);
  AddListed(bytes, stripes, &job_.unchecked_bytes, &job_.first_unchecked);
}

bool JobRunner::Throttle(ThrottleState& t, uint64_t done_bytes,
                         bool honour_cancel, bool* would_wait) {
  if (would_wait != nullptr) *would_wait = false;
  const auto release = [&](int64_t now, bool sharing) {
    t.released_ns = now;
    t.released_bytes = done_bytes;
    t.rest_until_ns = 0;
    t.sharing = sharing;
    return true;
  };
  for (;;) {
    SpeedLimits lim;
    {
      MutexLock lock(&mu_);
      if (frozen_ && !stop_ && !(honour_cancel && cancel_)) {
        if (would_wait != nullptr) {
          // The caller gets ready to rest (a reshape checkpoints and
          // opens its gate), then calls again without would_wait.
          *would_wait = true;
          return false;
        }
        // Frozen between windows: nothing of the job is in flight.
        ParkLocked(honour_cancel ? &JobRunner::MayGoOrCancelled
                                 : &JobRunner::MayGo);
      }
      if (stop_ || (honour_cancel && cancel_)) return false;
      lim = speed_;
    }
    const int64_t now = clock_.NowNs();
    const bool busy = now - last_client_io_ns_.load(std::memory_order_relaxed) <
                      kBusyWindowNs;
    // md's meaning: never above max; while clients are busy, yield to them
    // down to min.
    const uint64_t kib = std::max<uint64_t>(
        1, busy ? std::min(lim.min_kib_s, lim.max_kib_s) : lim.max_kib_s);
    const uint64_t limit = kib * 1024;
    if (limit != t.limit) {
      // A lower limit applies to the window that was in flight when it
      // came (the job could not see it sooner): anchored where that window
      // started, its bytes are paid for at the new rate before the next.
      // A higher one starts from now.
      const bool lower = t.released_ns != 0 && limit < t.limit;
      const int64_t released = t.released_ns;
      const uint64_t released_bytes = t.released_bytes;
      t = lower ? ThrottleState{released, released_bytes, limit}
                : ThrottleState{now, done_bytes, limit};
      t.released_ns = released;
      t.released_bytes = released_bytes;
    }
    // When `done_bytes` fall due at `rate` bytes/s from the anchor.
    const auto due_at = [&](double rate) {
      return t.anchor_ns +
             static_cast<int64_t>(
                 static_cast<double>(done_bytes - t.anchor_bytes) * 1e9 / rate);
    };
    const int64_t due = due_at(static_cast<double>(limit));
    // The busy share: the job may go once it has rested (100 - pct) / pct
    // times its last window, even before min's schedule, but never ahead
    // of max's.
    const uint32_t pct = std::min<uint32_t>(lim.busy_share_pct, 90);
    if (busy && pct > 0 && lim.max_kib_s > lim.min_kib_s && t.released_ns) {
      if (t.rest_until_ns == 0) {
        const int64_t worked = std::max<int64_t>(now - t.released_ns, 0);
        t.rest_until_ns = now + worked * (100 - pct) / pct;
      }
      const int64_t max_due = due_at(static_cast<double>(lim.max_kib_s) * 1024);
      if (now >= std::max(t.rest_until_ns, max_due)) {
        // Ahead of min's schedule: re-anchor, so min does not bank it.
        t = ThrottleState{now, done_bytes, limit};
        return release(now, true);
      }
    }
    if (now >= due) {
      // Running behind the limit (slow members): do not bank the lag as a
      // burst for later.
      if (now - due > 200'000'000) t = ThrottleState{now, done_bytes, limit};
      return release(now, false);
    }
    if (would_wait != nullptr) {
      *would_wait = true;
      return false;
    }
    int64_t wake = due;
    if (t.rest_until_ns) wake = std::min(wake, t.rest_until_ns);
    // Bounded, so a stop or a new limit is seen within 50 ms.
    clock_.SleepForNs(std::clamp<int64_t>(wake - now, 1'000, 50'000'000));
  }
}

uint64_t JobRunner::WindowStripes(const ThrottleState& t, uint64_t depth,
                                  uint64_t stripe_work) {
  // About 100 ms of work at the limit in force, so a low limit (a busy
  // array at md's minimum, a test stepping a job) still moves a stripe at
  // a time and holds few stripe locks; at full speed, `depth`.
  // A busy share's window is half the depth: enough in flight to use its
  // share of the members, few stripe locks held against the clients.
  if (t.sharing) return kJobDepth / 2;
  const uint64_t stripes = t.limit / 10 / std::max<uint64_t>(stripe_work, 1);
  return std::clamp<uint64_t>(stripes, 1, depth);
}

absl::Status JobRunner::RunStripePass(const StripePass& pass, uint64_t end,
                                      uint64_t* stripe) {
  ThrottleState throttle;
  uint64_t work = 0;
  while (*stripe < end) {
    if (pass.stopped && pass.stopped()) break;
    // The limit is on work done: skipped stripes cost nothing.
    if (!Throttle(throttle, work, pass.honour_cancel)) break;
    // Again after the throttle's rest, which may have been long (a low
    // limit): what `stopped` watches may have happened meanwhile, and the
    // next window may be large (the limit raised during the rest).
    if (pass.stopped && pass.stopped()) break;
    const uint64_t at = *stripe;
    uint64_t next = pass.skip ? std::clamp(pass.skip(at), at, end) : at;
    if (next == at) {
      uint64_t count = std::min(
          WindowStripes(throttle, pass.max_window ? pass.max_window : kJobDepth,
                        pass.stripe_work),
          end - at);
      if (pass.cap) count = std::clamp<uint64_t>(pass.cap(at, count), 1, count);
      absl::Status error;
      const uint64_t done = std::min(pass.work(at, count, &error), count);
      *stripe = at + done;
      work += done * pass.stripe_work;
      if (!error.ok()) return error;
      if (done == 0) {
        return absl::InternalError(
            absl::StrFormat("a job made no progress at stripe %d", at));
      }
      next = at + done;
    }
    *stripe = next;
    if (pass.moved) RETURN_IF_ERROR(pass.moved(next));
  }
  return absl::OkStatus();
}

}  // namespace uraid
