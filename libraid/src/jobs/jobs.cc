// SPDX-License-Identifier: MIT
// Background jobs on the array: the job runner (queue, throttle, the
// window loop every job shares, progress). Recovery onto a spare and
// replace are in recovery.cc, the check/repair scrub in scrub.cc, the
// reshape in reshape.cc; resync after an unclean shutdown (resync.cc) keeps its
// own thread but shares the window loop and the speed limits.
//
// One job runs at a time, on the job thread. Requests queue one deep:
// RequestJob starts the thread when it is idle, or leaves the request for
// the running thread to pick up when its job ends. Every stripe a job
// touches is handled under that stripe's lock, so clients keep reading and
// writing everywhere while it runs.

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"

namespace uraid {
namespace {

// Client I/O this recent makes the array "busy": jobs then run at the
// minimum speed (md's is_mddev_idle, in time rather than sector counts).
constexpr int64_t kBusyWindowNs = 100'000'000;

}  // namespace

const char* JobKindName(JobKind kind) {
  switch (kind) {
    case JobKind::kNone:
      return "idle";
    case JobKind::kResync:
      return "resync";
    case JobKind::kRecover:
      return "recover";
    case JobKind::kReplace:
      return "replace";
    case JobKind::kCheck:
      return "check";
    case JobKind::kRepair:
      return "repair";
    case JobKind::kReshape:
      return "reshape";
  }
  return "unknown";
}

int64_t ArrayImpl::NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

absl::Status ArrayImpl::RequestJob(JobRequest req) {
  MutexLock lock(&job_mu_);
  if (job_stop_) {
    return absl::FailedPreconditionError("the array is shutting down");
  }
  if (job_thread_running_) {
    if (pending_job_.has_value()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "a %s job is running and a %s job is queued; try again later",
          JobKindName(job_.kind), JobKindName(pending_job_->kind)));
    }
    pending_job_ = req;
    return absl::OkStatus();
  }
  // The previous thread (if any) has finished: it cleared
  // job_thread_running_ as its last act under this lock.
  if (job_thread_.joinable()) job_thread_.join();
  pending_job_ = req;
  job_thread_running_ = true;
  // Visible at once (the thread fills in the rest when it starts).
  job_ = JobInfo{};
  job_.kind = req.kind;
  job_thread_ = std::thread([this] { JobThread(); });
  return absl::OkStatus();
}

void ArrayImpl::MaybeStartRecovery() {
  if (read_only_ || failed_.load()) return;
  bool needed = false;
  {
    MutexLock lock(&sb_mu_);
    for (const auto& s : slots_) {
      const SlotState st = s->state.load();
      if (st == SlotState::kRebuilding ||
          (st != SlotState::kActive && !spares_.empty())) {
        needed = true;
      }
    }
  }
  if (!needed) return;
  {
    MutexLock lock(&job_mu_);
    if (job_stop_) return;
    const auto busy_with_recovery = [](JobKind k) {
      return k == JobKind::kRecover || k == JobKind::kReplace;
    };
    if (busy_with_recovery(job_.kind) ||
        (pending_job_.has_value() && busy_with_recovery(pending_job_->kind))) {
      return;
    }
    // md interrupts a scrub to recover: redundancy first.
    if (job_.kind == JobKind::kCheck || job_.kind == JobKind::kRepair) {
      job_cancel_ = true;
    }
  }
  absl::Status st = RequestJob(JobRequest{JobKind::kRecover, -1});
  if (!st.ok()) {
    Log(LogLevel::kWarning,
        absl::StrFormat("recovery not started: %s", st.message()));
  }
}

bool ArrayImpl::JobStopRequested() const {
  MutexLock lock(&job_mu_);
  return job_stop_ || job_cancel_;
}

void ArrayImpl::JobThread() {
  ScratchOrOwned::EnableThreadScratch();
  for (;;) {
    JobRequest req;
    {
      MutexLock lock(&job_mu_);
      if (!pending_job_.has_value() || job_stop_) {
        if (job_.kind != JobKind::kNone) {
          // Queued, then stopped before it began.
          job_.result = "interrupted";
          last_job_ = job_;
          job_ = JobInfo{};
        }
        pending_job_.reset();
        job_thread_running_ = false;
        return;
      }
      req = *pending_job_;
      pending_job_.reset();
      job_cancel_ = false;
    }
    int slot = req.slot;
    JobKind kind = req.kind;
    if (kind == JobKind::kRecover && slot < 0) {
      // Find the slot to recover: one already rebuilding resumes, else the
      // gone slot gets a spare.
      for (int i = 0; i < geo_.raid_disks() && slot < 0; ++i) {
        if (slots_[i]->state.load() == SlotState::kRebuilding) slot = i;
      }
      for (int i = 0; i < geo_.raid_disks() && slot < 0; ++i) {
        if (slots_[i]->state.load() != SlotState::kActive &&
            PromoteSpare(i).ok()) {
          slot = i;
        }
      }
      if (slot < 0 || failed_.load()) {  // nothing to do
        MutexLock lock(&job_mu_);
        job_ = JobInfo{};
        continue;
      }
    }
    {
      MutexLock lock(&job_mu_);
      job_ = JobInfo{};
      job_.kind = kind;
      job_.total_bytes = geo_.stripe_count() * geo_.chunk_bytes();
      job_.slot = slot;
      if (slot >= 0) {
        std::shared_ptr<Member> t = kind == JobKind::kReplace
                                        ? slots_[slot]->replacement.load()
                                        : slots_[slot]->member.load();
        job_.target = t ? t->Name() : "";
      }
      job_samples_.clear();
      job_milestone_ = 0;
    }
    ReportJobStart(kind, slot);
    const int64_t started = NowNs();
    absl::Status st;
    switch (kind) {
      case JobKind::kRecover:
      case JobKind::kReplace:
        st = RunRecovery(slot, kind == JobKind::kReplace);
        break;
      case JobKind::kCheck:
      case JobKind::kRepair:
        st = RunScrub(kind == JobKind::kRepair);
        break;
      case JobKind::kReshape:
        st = RunReshape();  // reshape.cc
        break;
      default:
        break;
    }
    const double secs = static_cast<double>(NowNs() - started) / 1e9;
    bool cancelled;
    JobInfo done;
    {
      MutexLock lock(&job_mu_);
      cancelled = job_cancel_ || job_stop_;
      const bool finished = job_.done_bytes >= job_.total_bytes;
      job_.result = !st.ok()                   ? std::string(st.message())
                    : (finished || !cancelled) ? "completed"
                                               : "interrupted";
      job_.bytes_per_s =
          secs > 0 ? static_cast<double>(job_.done_bytes) / secs : 0;
      last_job_ = job_;
      last_job_status_ = st;
      done = job_;
      job_ = JobInfo{};
    }
    ReportJobEnd(done, st.ok(), secs);
    // A target that failed, or a second spare: recover again. Not after
    // StopJob (the admin asked for quiet).
    if (!cancelled) MaybeStartRecovery();
  }
}

void ArrayImpl::ReportJobStart(JobKind kind, int slot) {
  if ((kind == JobKind::kRecover || kind == JobKind::kReplace) &&
      (slot < 0 || slot >= SlotCount())) {
    return;
  }
  switch (kind) {
    case JobKind::kRecover:
    case JobKind::kReplace: {
      Slot& s = *slots_[slot];
      std::shared_ptr<Member> t =
          kind == JobKind::kReplace ? s.replacement.load() : s.member.load();
      const std::string name = t ? t->Name() : "";
      Event e = MakeEvent("RebuildStarted", name, slot);
      e.details.emplace_back("kind", std::string(JobKindName(kind)));
      const uint64_t from =
          kind == JobKind::kReplace ? s.repl_front.load() : s.front.load();
      e.details.emplace_back("from_stripe", static_cast<int64_t>(from));
      Report(LogLevel::kNotice, std::move(e),
             absl::StrFormat("%s: rebuilding slot %d onto %s from stripe %d",
                             JobKindName(kind), slot, name, from));
      return;
    }
    case JobKind::kReshape:
      Report(LogLevel::kNotice, MakeEvent("ReshapeStarted"),
             "reshape: copying started");
      return;
    case JobKind::kCheck:
    case JobKind::kRepair:
      Log(LogLevel::kNotice, absl::StrFormat("%s started", JobKindName(kind)));
      return;
    case JobKind::kResync:
    case JobKind::kNone:
      return;
  }
}

void ArrayImpl::ReportJobEnd(const JobInfo& done, bool ok, double secs) {
  const bool completed = done.result == "completed";
  // Routine when it completed or was stopped; an error is worth a look.
  const LogLevel level = ok ? LogLevel::kNotice : LogLevel::kError;
  switch (done.kind) {
    case JobKind::kCheck:
    case JobKind::kRepair: {
      const bool repair = done.kind == JobKind::kRepair;
      Event e = MakeEvent(repair ? "RepairFinished" : "CheckFinished");
      e.details.emplace_back("result", done.result);
      e.details.emplace_back("mismatches",
                             static_cast<int64_t>(done.mismatches));
      e.details.emplace_back("first_mismatches", done.first_mismatches);
      Report(ok && done.mismatches > 0 ? LogLevel::kWarning : level,
             std::move(e),
             absl::StrFormat("%s: %s after %.1f s: %d stripes with mismatched "
                             "parity%s",
                             JobKindName(done.kind), done.result, secs,
                             done.mismatches,
                             repair && done.mismatches ? " (rewritten)" : ""));
      return;
    }
    case JobKind::kReshape: {
      Event e = MakeEvent("ReshapeFinished");
      e.details.emplace_back("result", done.result);
      e.details.emplace_back("raid_devices", int64_t{geo_.raid_disks()});
      Report(level, std::move(e),
             absl::StrFormat("reshape: %s after %.1f s (%.1f MB/s per member)",
                             done.result, secs, done.bytes_per_s / 1e6));
      return;
    }
    case JobKind::kRecover:
    case JobKind::kReplace: {
      Event e = MakeEvent("RebuildFinished", done.target, done.slot);
      e.details.emplace_back("kind", std::string(JobKindName(done.kind)));
      e.details.emplace_back("result", done.result);
      Report(level, std::move(e),
             absl::StrFormat("%s of slot %d onto %s: %s after %.1f s (%.1f "
                             "MB/s)",
                             JobKindName(done.kind), done.slot, done.target,
                             done.result, secs, done.bytes_per_s / 1e6));
      if (!completed || done.slot < 0 || done.slot >= SlotCount()) return;
      const Slot& s = *slots_[done.slot];
      std::shared_ptr<Member> m = s.member.load();
      if (m != nullptr && m->Name() == done.target &&
          s.state.load() == SlotState::kActive) {
        Report(LogLevel::kNotice,
               MakeEvent("SpareActive", done.target, done.slot),
               absl::StrFormat("%s is now active in slot %d", done.target,
                               done.slot));
        CheckSpares();
      }
      return;
    }
    case JobKind::kResync:
    case JobKind::kNone:
      return;
  }
}

void ArrayImpl::JobProgress(uint64_t done_bytes) {
  int milestone = 0;
  JobInfo job;
  {
    MutexLock lock(&job_mu_);
    JobProgressLocked(done_bytes);
    if ((job_.kind == JobKind::kRecover || job_.kind == JobKind::kReplace) &&
        job_.total_bytes > 0) {
      const int pct = static_cast<int>(done_bytes * 100 / job_.total_bytes);
      // md's monitor reports 20, 40, 60 and 80 per cent, each once.
      const int reached = std::min(80, pct / 20 * 20);
      if (reached > job_milestone_) {
        job_milestone_ = reached;
        milestone = reached;
        job = job_;
      }
    }
  }
  if (milestone == 0) return;
  Event e = MakeEvent(absl::StrFormat("Rebuild%d", milestone).c_str(),
                      job.target, job.slot);
  e.details.emplace_back("percent", int64_t{milestone});
  e.details.emplace_back("kind", std::string(JobKindName(job.kind)));
  Report(
      LogLevel::kInfo, std::move(e),
      absl::StrFormat("%s of slot %d onto %s: %d%% done", JobKindName(job.kind),
                      job.slot, job.target, milestone));
}

void ArrayImpl::JobProgressLocked(uint64_t done_bytes) {
  const int64_t now = NowNs();
  job_.done_bytes = done_bytes;
  if (job_samples_.empty() || now - job_samples_.back().first > 250'000'000) {
    job_samples_.emplace_back(now, done_bytes);
  }
  while (job_samples_.size() > 2 &&
         now - job_samples_.front().first > 3'000'000'000) {
    job_samples_.erase(job_samples_.begin());
  }
  const auto& [t0, b0] = job_samples_.front();
  if (now > t0) {
    job_.bytes_per_s = static_cast<double>(done_bytes - b0) * 1e9 /
                       static_cast<double>(now - t0);
  }
}

bool ArrayImpl::Throttle(ThrottleState& t, uint64_t done_bytes,
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
      MutexLock lock(&job_mu_);
      if (job_stop_ || (honour_cancel && job_cancel_)) return false;
      lim = speed_;
    }
    const int64_t now = NowNs();
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
    std::this_thread::sleep_for(std::chrono::nanoseconds(
        std::clamp<int64_t>(wake - now, 1'000, 50'000'000)));
  }
}

uint64_t ArrayImpl::WindowStripes(const ThrottleState& t,
                                  uint64_t depth) const {
  // About 100 ms of work at the limit in force, so a low limit (a busy
  // array at md's minimum, a test stepping a job) still moves a stripe at
  // a time and holds few stripe locks; at full speed, `depth`.
  // A busy share's window is half the depth: enough in flight to use its
  // share of the members, few stripe locks held against the clients.
  if (t.sharing) return kJobDepth / 2;
  const uint64_t stripes = t.limit / 10 / geo_.chunk_bytes();
  return std::clamp<uint64_t>(stripes, 1, depth);
}

void ArrayImpl::RunWindow(uint64_t n, const std::function<void(uint64_t)>& fn) {
  if (n == 1) return fn(0);
  const ShapeOverride shape = t_shape_override;
  std::vector<std::function<void()>> tasks;
  tasks.reserve(n);
  for (uint64_t i = 0; i < n; ++i) {
    tasks.emplace_back([&fn, shape, i] {
      ShapeScope scope(shape.owner, shape.shape);
      fn(i);
    });
  }
  job_pool_.RunAll(tasks);
}

absl::Status ArrayImpl::RunStripePass(const StripePass& pass, uint64_t end,
                                      uint64_t* stripe) {
  ThrottleState throttle;
  uint64_t work = 0;
  while (*stripe < end) {
    if (pass.stopped && pass.stopped()) break;
    // The limit is on work done: skipped stripes cost nothing.
    if (!Throttle(throttle, work, pass.honour_cancel)) break;
    const uint64_t at = *stripe;
    uint64_t next = pass.skip ? std::clamp(pass.skip(at), at, end) : at;
    if (next == at) {
      uint64_t count =
          std::min(WindowStripes(throttle,
                                 pass.max_window ? pass.max_window : kJobDepth),
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

absl::Status ArrayImpl::StopJob() {
  MutexLock lock(&job_mu_);
  job_cancel_ = true;
  pending_job_.reset();
  return absl::OkStatus();
}

absl::Status ArrayImpl::WaitForJob() {
  MutexLock lock(&job_mu_);
  job_mu_.Await(Condition(
      +[](bool* running) { return !*running; }, &job_thread_running_));
  return last_job_status_;
}

void ArrayImpl::SetSpeedLimits(const SpeedLimits& limits) {
  MutexLock lock(&job_mu_);
  speed_ = limits;
}

}  // namespace uraid
