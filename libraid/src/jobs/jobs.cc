// SPDX-License-Identifier: MIT
// Background jobs on the array: the job runner (queue, throttle, the
// window loop every job shares, progress), recovery onto a spare and
// replace. The check/repair scrub is in scrub.cc, the reshape in
// reshape.cc; resync after an unclean shutdown (resync.cc) keeps its own
// thread but shares the window loop and the speed limits.
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
// Recovery persists its position this often (md checkpoints as it goes).
constexpr int64_t kCheckpointNs = 1'000'000'000;
// Stripes examined per hole-skipping step (their locks are held together).
constexpr uint64_t kHoleWindowStripes = 256;
// Work per member I/O of a rebuild: bounds memory for large chunks.
constexpr uint64_t kRebuildWindow = 1 << 20;

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

uint64_t ArrayImpl::SkipRecoveryWindow(int slot, uint64_t from,
                                       uint64_t count) {
  const uint64_t C = geo_.chunk_bytes();
  Slot& s = *slots_[slot];
  const std::shared_ptr<Member> target = s.member.load();
  const bool partial = s.partial.load() && bitmap_ != nullptr;
  count = std::min(count, geo_.stripe_count() - from);
  uint64_t B = 0;
  if (partial) {
    // Whole bitmap regions at a time: a window that reaches into a region
    // with its bit set would be rebuilt stripe by stripe up to it.
    B = bitmap_->chunk_bytes();
    const uint64_t region_end = (from * C / B + 1) * B;
    count = std::min(count, std::max<uint64_t>(1, (region_end - from * C) / C));
  }
  if (count == 0 || target == nullptr) return 0;
  const auto holes = [&]() {
    for (int i = 0; i < geo_.raid_disks(); ++i) {
      std::shared_ptr<Member> m = slots_[i]->member.load();
      if (m == nullptr) {
        if (i == slot) return false;
        continue;
      }
      if (i != slot && !SlotUsable(i)) continue;
      absl::StatusOr<uint64_t> d = m->NextDataOffset(data_offset_ + from * C);
      if (!d.ok() || *d < data_offset_ + (from + count) * C) return false;
    }
    return true;
  };
  // A write sets its region's bit (under its stripe lock) before it skips
  // the rebuilding member, so a clear region has had no write the member
  // missed.
  const auto clear = [&]() {
    if (!partial) return false;
    const uint64_t last = ((from + count) * C - 1) / B;
    for (uint64_t k = from * C / B; k <= last; ++k) {
      if (k >= bitmap_->chunks() || bitmap_->IsChunkDirty(k)) return false;
    }
    return true;
  };
  // Ask first without locks: most windows of a full rebuild hold data.
  if (!clear() && !holes()) return 0;
  // Then again with every stripe of the window locked (ascending order, as
  // the lock rule allows): no write can slip in between the answer and the
  // front moving past it.
  for (uint64_t st = from; st < from + count; ++st) locks_.Lock(st);
  const bool was_clear = clear();
  bool ok = was_clear || holes();
  if (ok) {
    // The member could have failed and another taken the slot since the
    // look above; hand-overs happen under sb_mu_.
    MutexLock lock(&sb_mu_);
    ok = s.state.load() == SlotState::kRebuilding &&
         s.member.load() == target && s.front.load() == from &&
         (!was_clear || s.partial.load());
    if (ok) s.front.store(from + count);
  }
  for (uint64_t st = from; st < from + count; ++st) locks_.Unlock(st);
  return ok ? count : 0;
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

absl::Status ArrayImpl::RebuildStripeLocked(int slot, uint64_t stripe,
                                            uint8_t* buf, size_t buf_len,
                                            bool* target_gone) {
  *target_gone = false;
  const uint64_t C = geo_.chunk_bytes();
  Slot& s = *slots_[slot];
  RETURN_IF_ERROR(CheckUsable(false));
  for (uint64_t w = 0; w < C; w += buf_len) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(buf_len, C - w));
    const SlotState state = s.state.load();
    const bool replace =
        state == SlotState::kActive && s.replacement.load() != nullptr;
    if (state != SlotState::kRebuilding && !replace) {
      *target_gone = true;
      return absl::OkStatus();
    }
    // Replace copies from the old member (parity steps in if it fails);
    // recovery rebuilds from the others.
    RETURN_IF_ERROR(replace ? ReadPieceDegraded(stripe, slot, w, len, buf)
                            : ReconstructLocked(stripe, slot, w, len, buf));
    // The old member may have failed while being read: its replacement is
    // then the slot's member, rebuilding.
    const bool to_repl =
        s.state.load() == SlotState::kActive && s.replacement.load() != nullptr;
    if (!to_repl && s.state.load() != SlotState::kRebuilding) {
      *target_gone = true;
      return absl::OkStatus();
    }
    std::vector<MemberIo> io{
        MemberIo{MemberIo::kWrite, slot, buf, len, stripe * C + w, {}}};
    io[0].to_replacement = to_repl;
    io[0].keep_sparse = true;  // the caller holds the stripe lock
    Submit(io);
    if (!io[0].status.ok()) {
      bool slot_failed;
      (void)AbsorbFailures(io, &slot_failed);
      *target_gone = true;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

uint64_t ArrayImpl::RebuildStripes(int slot, uint64_t from, uint64_t count,
                                   uint8_t* bufs, size_t buf_len,
                                   absl::Status* error, bool* target_gone) {
  *error = absl::OkStatus();
  *target_gone = false;
  count = std::min(count, geo_.stripe_count() - from);
  if (count == 0) return 0;
  Slot& s = *slots_[slot];
  // The first lock is waited for; the rest only taken while free, so a
  // client holding a stripe further on shortens the window instead of
  // holding up the stripes before it.
  locks_.Lock(from);
  for (uint64_t i = 1; i < count; ++i) {
    if (!locks_.TryLock(from + i)) {
      count = i;
      break;
    }
  }
  std::vector<absl::Status> status(count);
  std::unique_ptr<bool[]> gone(new bool[count]());
  RunWindow(count, [&](uint64_t i) {
    status[i] = RebuildStripeLocked(slot, from + i, bufs + i * buf_len, buf_len,
                                    &gone[i]);
  });
  uint64_t done = 0;
  while (done < count && status[done].ok() && !gone[done]) ++done;
  if (done > 0) {
    // Stripes past a failed one were copied too, but the front may claim
    // only an unbroken run; they are done again on the next attempt.
    if (s.state.load() == SlotState::kRebuilding) {
      s.front.store(from + done, std::memory_order_release);
    } else {
      s.repl_front.store(from + done, std::memory_order_release);
    }
    counters_.recovered_stripes.fetch_add(done, std::memory_order_relaxed);
  }
  for (uint64_t i = 0; i < count; ++i) locks_.Unlock(from + i);
  if (done < count) {
    *error = status[done];
    *target_gone = gone[done];
  }
  return done;
}

absl::Status ArrayImpl::CheckpointRecovery(int slot) {
  Slot& s = *slots_[slot];
  if (s.state.load() != SlotState::kRebuilding) return absl::OkStatus();
  // The superblock may claim only what is durable on the target.
  const uint64_t front = s.front.load();
  std::vector<bool> which(geo_.raid_disks(), false);
  which[slot] = true;
  RETURN_IF_ERROR(FlushSlots(which));
  if (s.state.load() != SlotState::kRebuilding) return absl::OkStatus();
  s.durable_front.store(front);
  return WriteSuperblocks(std::nullopt);
}

absl::Status ArrayImpl::RunRecovery(int slot, bool replace) {
  Slot& s = *slots_[slot];
  const uint64_t C = geo_.chunk_bytes();
  const uint64_t stripes = geo_.stripe_count();
  const size_t piece = static_cast<size_t>(std::min(C, kRebuildWindow));
  AlignedBuffer bufs(piece * kJobDepth);
  uint64_t stripe = replace ? s.repl_front.load() : s.front.load();
  if (!replace) {
    Log(LogLevel::kInfo,
        absl::StrFormat(
            "recover: rebuilding slot %d onto %s from stripe %d%s", slot,
            s.member.load()->Name(), stripe,
            s.partial.load() && bitmap_ != nullptr
                ? absl::StrFormat(
                      " (re-added: only the %d of %d bitmap regions "
                      "with bits set)",
                      bitmap_->DirtyChunks(), bitmap_->chunks())
                : ""));
  }
  StripePass pass;
  pass.stripe_work = C;  // the limits count stripes rebuilt, not skipped
  pass.skip = [&](uint64_t at) {
    if (s.state.load() != SlotState::kRebuilding) return at;
    return at + SkipRecoveryWindow(slot, at, kHoleWindowStripes);
  };
  pass.cap = [&](uint64_t at, uint64_t want) {
    if (s.state.load() != SlotState::kRebuilding || !s.partial.load() ||
        bitmap_ == nullptr) {
      return want;
    }
    // A re-added member: never past this bitmap region, whose bit was
    // set; the next one may be clear and skipped whole.
    const uint64_t B = bitmap_->chunk_bytes();
    const uint64_t region_end = (at * C / B + 1) * B;
    return std::min(want, std::max<uint64_t>(1, (region_end - at * C) / C));
  };
  pass.work = [&](uint64_t at, uint64_t count, absl::Status* error) {
    bool target_gone;
    const uint64_t done = RebuildStripes(slot, at, count, bufs.data(), piece,
                                         error, &target_gone);
    if (error->ok() && target_gone) {
      *error = absl::AbortedError(
          absl::StrFormat("the %s target for slot %d failed or was removed",
                          replace ? "replace" : "recovery", slot));
    }
    return done;
  };
  int64_t last_checkpoint = NowNs();
  pass.moved = [&](uint64_t at) -> absl::Status {
    JobProgress(at * C);
    if (NowNs() - last_checkpoint > kCheckpointNs) {
      RETURN_IF_ERROR(CheckpointRecovery(slot));
      last_checkpoint = NowNs();
    }
    return absl::OkStatus();
  };
  JobProgress(stripe * C);
  RETURN_IF_ERROR(RunStripePass(pass, stripes, &stripe));
  if (stripe < stripes) {
    // Stopped: keep the position for the next run (or assembly).
    return CheckpointRecovery(slot);
  }
  std::vector<bool> which(geo_.raid_disks(), false);
  which[slot] = true;
  if (s.state.load() == SlotState::kRebuilding) {
    RETURN_IF_ERROR(FlushSlots(which));
    SlotState expected = SlotState::kRebuilding;
    if (!s.state.compare_exchange_strong(expected, SlotState::kActive)) {
      return absl::AbortedError("the recovery target failed at the end");
    }
    s.durable_front.store(stripes);
    s.partial.store(false);
    // Whole again: the bits kept for writes made while degraded have done
    // their job (every stripe was rebuilt after them).
    UpdateBitmapDegraded();
    if (bitmap_ != nullptr && GoneSlots() == 0) {
      bitmap_->ForEachDirtyChunk(
          [this](uint64_t k) { bitmap_->ClearChunk(k); });
    }
    return WriteSuperblocks(std::nullopt);
  }
  // Replace: make the copy durable (FlushSlots also flushes the
  // replacement), then swap it into the slot.
  RETURN_IF_ERROR(FlushSlots(which));
  std::shared_ptr<Member> r, old;
  {
    // Under sb_mu_, like every hand-over: the old member failing now
    // (FailSlot) either happened before, and the replacement is already
    // the slot's rebuilding member, or waits until the swap is done.
    MutexLock lock(&sb_mu_);
    r = s.replacement.load();
    if (r == nullptr || s.state.load() != SlotState::kActive) {
      r = nullptr;
    } else {
      old = s.member.load();
      // Writes in flight to the old member are refused (stale) and redone
      // on the new one: see Slot::gen.
      ChangeSlot(s, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        retired_devs_.push_back(s.id.dev_number);
        s.id = s.repl_id;
        s.member.store(r);
        s.replacement.store(nullptr);
      });
    }
  }
  if (r == nullptr) {
    // A replacement that took over its failed old member finishes as a
    // rebuild (front at the end): the next recovery run completes it.
    return absl::AbortedError("the replacement failed at the end");
  }
  s.read_errors.store(0);
  Log(LogLevel::kNotice,
      absl::StrFormat("replace: %s now holds slot %d; %s is released",
                      r->Name(), slot, old ? old->Name() : "?"));
  return WriteSuperblocks(std::nullopt);
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
