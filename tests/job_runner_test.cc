// SPDX-License-Identifier: MIT
// The job runner on a simulated clock: md's speed limits and uraid's busy
// share hold in simulated time while nothing really sleeps; the one-deep
// queue and its refusals; recovery cancelling a scrub; milestones; stop.
// And the clock injected through AssembleOptions reaching an array's
// rebuild.

#include "jobs/job_runner.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/sync.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/clock.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;

// Time moves only when a sleeper or the test moves it.
class SimClock final : public Clock {
 public:
  int64_t NowNs() override { return now_.load(); }
  void SleepForNs(int64_t ns) override {
    Advance(ns);
    sleeps_.fetch_add(1);
  }
  void Advance(int64_t ns) {
    now_.fetch_add(ns);
    if (on_advance_) on_advance_();
  }
  // Called after every move of time (a client that never stops). Set
  // before the clock is used.
  void set_on_advance(std::function<void()> f) { on_advance_ = std::move(f); }
  int64_t sleeps() const { return sleeps_.load(); }

 private:
  std::atomic<int64_t> now_{1'000'000'000'000};
  std::atomic<int64_t> sleeps_{0};
  std::function<void()> on_advance_;
};

// Runs each job as a pass over `stripes` stripes of 1 MiB per member,
// each stripe costing `stripe_ns` of the clock (the members' time).
class PassHost : public JobHost {
 public:
  PassHost(SimClock* clock, uint64_t stripes, int64_t stripe_ns)
      : clock_(clock), stripes_(stripes), stripe_ns_(stripe_ns) {}
  void set_runner(JobRunner* r) { runner_ = r; }
  // Holds a job until released (to test the queue).
  void Hold() { held_.store(true); }
  void Release() { held_.store(false); }

  bool PrepareJob(JobRequest* req, JobInfo* info) override {
    if (req->kind == JobKind::kRecover && req->slot < 0) req->slot = 2;
    info->slot = req->slot;
    info->total_bytes = stripes_ * kMiB;
    return true;
  }
  void JobStarted(const JobRequest& req) override {
    MutexLock lock(&mu_);
    started_.push_back(req.kind);
  }
  absl::Status RunJob(const JobRequest& req) override {
    // A resync does not honour a stop (as the array's): only Release ends
    // its hold.
    while (held_.load() &&
           (req.kind == JobKind::kResync || !runner_->StopRequested())) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    StripePass pass;
    pass.stripe_work = kMiB;
    pass.honour_cancel = req.kind != JobKind::kResync;
    pass.work = [&](uint64_t, uint64_t count, absl::Status*) {
      clock_->Advance(stripe_ns_ * static_cast<int64_t>(count));
      worked_.fetch_add(count);
      return count;
    };
    pass.moved = [&](uint64_t s) {
      runner_->Progress(s * kMiB);
      return absl::OkStatus();
    };
    uint64_t at = 0;
    return runner_->RunStripePass(pass, stripes_, &at);
  }
  void JobEnded(const JobInfo& done, const absl::Status&, double,
                bool) override {
    MutexLock lock(&mu_);
    ended_.push_back(done.result);
  }
  void JobMilestone(const JobInfo&, int percent) override {
    MutexLock lock(&mu_);
    milestones_.push_back(percent);
  }
  std::vector<int> milestones() {
    MutexLock lock(&mu_);
    return milestones_;
  }
  std::vector<std::string> ended() {
    MutexLock lock(&mu_);
    return ended_;
  }
  std::vector<JobKind> started() {
    MutexLock lock(&mu_);
    return started_;
  }
  uint64_t worked() const { return worked_.load(); }

 private:
  SimClock* clock_;
  JobRunner* runner_ = nullptr;
  const uint64_t stripes_;
  const int64_t stripe_ns_;
  std::atomic<bool> held_{false};
  std::atomic<uint64_t> worked_{0};
  Mutex mu_;
  std::vector<int> milestones_;
  std::vector<std::string> ended_;
  std::vector<JobKind> started_;
};

struct Rig {
  explicit Rig(uint64_t stripes, int64_t stripe_ns = 0)
      : clock(std::make_shared<SimClock>()),
        host(clock.get(), stripes, stripe_ns),
        runner(&host, *clock) {
    host.set_runner(&runner);
  }
  // Clients keep the array busy all the time.
  void Busy() {
    clock->set_on_advance([this] { runner.NoteClientIo(); });
    runner.NoteClientIo();
  }
  // Waits (really) until the host has started `n` jobs.
  void WaitStarted(size_t n) {
    while (host.started().size() < n) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  // Simulated seconds the job `kind` takes from its request to its end.
  double TimeJob(JobKind kind) {
    const int64_t t0 = clock->NowNs();
    EXPECT_TRUE(runner.Request({kind, -1}).ok());
    EXPECT_TRUE(runner.Wait().ok());
    return static_cast<double>(clock->NowNs() - t0) / 1e9;
  }
  std::shared_ptr<SimClock> clock;
  PassHost host;
  JobRunner runner;
};

TEST(JobRunner, MaximumHoldsInSimulatedTime) {
  Rig rig(/*stripes=*/100);
  rig.runner.SetSpeedLimits({.min_kib_s = 1000, .max_kib_s = 10 * 1024});
  // 100 MiB per member at 10 MiB/s: 10 s, the first window free.
  const double secs = rig.TimeJob(JobKind::kCheck);
  EXPECT_NEAR(secs, 10.0, 0.2);
  EXPECT_GT(rig.clock->sleeps(), 0);
  EXPECT_EQ(rig.host.worked(), 100u);
  EXPECT_EQ(rig.runner.last().result, "completed");
  EXPECT_EQ(rig.runner.last().done_bytes, 100 * kMiB);
}

TEST(JobRunner, WindowsShrinkToAboutATenthOfASecondAtTheLimit) {
  ThrottleState t;
  t.limit = 10 * kMiB;  // bytes/s
  EXPECT_EQ(JobRunner::WindowStripes(t, kJobDepth, kMiB), 1u);
  t.limit = 1000 * kMiB;
  EXPECT_EQ(JobRunner::WindowStripes(t, kJobDepth, kMiB), kJobDepth);
  EXPECT_EQ(JobRunner::WindowStripes(t, 32, 64 * 1024), 32u);
  t.sharing = true;
  EXPECT_EQ(JobRunner::WindowStripes(t, 32, 64 * 1024), kJobDepth / 2);
}

TEST(JobRunner, BusyArrayFallsToMinimumWithoutShare) {
  // Members give 100 MiB/s (10 ms a stripe); clients keep the array busy.
  Rig rig(/*stripes=*/20, /*stripe_ns=*/10'000'000);
  rig.Busy();
  rig.runner.SetSpeedLimits(
      {.min_kib_s = 1024, .max_kib_s = 1 << 30, .busy_share_pct = 0});
  // md's plain minimum: 20 MiB at 1 MiB/s.
  EXPECT_NEAR(rig.TimeJob(JobKind::kCheck), 20.0, 1.5);
}

TEST(JobRunner, BusyShareKeepsItsPercentOfTheMembers) {
  for (uint32_t share : {25u, 50u}) {
    SCOPED_TRACE(share);
    Rig rig(/*stripes=*/400, /*stripe_ns=*/10'000'000);
    rig.Busy();
    rig.runner.SetSpeedLimits(
        {.min_kib_s = 1024, .max_kib_s = 1 << 30, .busy_share_pct = share});
    // Unloaded the job would take 4 s; at a share of s%, about 4 / s%.
    const double secs = rig.TimeJob(JobKind::kCheck);
    const double expect = 4.0 * 100 / share;
    EXPECT_GT(secs, expect * 0.8);
    EXPECT_LT(secs, expect * 1.2);
  }
}

TEST(JobRunner, LowerLimitAppliesToTheWindowInFlight) {
  Rig rig(/*stripes=*/1);
  ThrottleState t;
  rig.runner.SetSpeedLimits({.min_kib_s = 1024, .max_kib_s = 1 << 20});
  ASSERT_TRUE(rig.runner.Throttle(t, 0));
  // 8 MiB done when the limit drops to 1 MiB/s: they are paid for first.
  rig.runner.SetSpeedLimits({.min_kib_s = 1024, .max_kib_s = 1024});
  const int64_t t0 = rig.clock->NowNs();
  ASSERT_TRUE(rig.runner.Throttle(t, 8 * kMiB));
  EXPECT_NEAR(static_cast<double>(rig.clock->NowNs() - t0) / 1e9, 8.0, 0.1);
}

TEST(JobRunner, QueueIsOneDeepAndNamesWhatRuns) {
  Rig rig(/*stripes=*/4);
  rig.host.Hold();
  ASSERT_TRUE(rig.runner.Request({JobKind::kCheck, -1}).ok());
  rig.WaitStarted(1);
  ASSERT_TRUE(rig.runner.Request({JobKind::kReshape, -1}).ok());
  absl::Status third = rig.runner.Request({JobKind::kRepair, -1});
  EXPECT_EQ(third.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(third.message(),
              HasSubstr("a check job is running and a reshape job is queued"));
  EXPECT_EQ(rig.runner.Busy(), JobKind::kCheck);
  EXPECT_TRUE(rig.runner.RunsOrQueued(JobKind::kReshape));
  rig.host.Release();
  ASSERT_TRUE(rig.runner.Wait().ok());
  EXPECT_THAT(rig.host.started(),
              ElementsAre(JobKind::kCheck, JobKind::kReshape));
  EXPECT_FALSE(rig.runner.Busy(/*or_queued=*/true).has_value());
}

TEST(JobRunner, RecoveryCancelsARunningScrub) {
  Rig rig(/*stripes=*/4);
  rig.host.Hold();
  ASSERT_TRUE(rig.runner.Request({JobKind::kCheck, -1}).ok());
  rig.WaitStarted(1);
  ASSERT_TRUE(rig.runner.RequestRecovery().ok());
  // Asked again while one is queued: nothing more is queued.
  ASSERT_TRUE(rig.runner.RequestRecovery().ok());
  rig.host.Release();
  ASSERT_TRUE(rig.runner.Wait().ok());
  EXPECT_THAT(rig.host.started(),
              ElementsAre(JobKind::kCheck, JobKind::kRecover));
  EXPECT_THAT(rig.host.ended(), ElementsAre("interrupted", "completed"));
  EXPECT_EQ(rig.runner.last().slot, 2);  // chosen by the host
}

TEST(JobRunner, RecoveryReportsEachMilestoneOnce) {
  Rig rig(/*stripes=*/50);
  ASSERT_TRUE(rig.runner.Request({JobKind::kRecover, 1}).ok());
  ASSERT_TRUE(rig.runner.Wait().ok());
  EXPECT_THAT(rig.host.milestones(), ElementsAre(20, 40, 60, 80));
  // A check has none.
  rig.TimeJob(JobKind::kCheck);
  EXPECT_THAT(rig.host.milestones(), ElementsAre(20, 40, 60, 80));
}

TEST(JobRunner, StopEndsTheJobAtItsNextWindowAndRefusesAfterShutdown) {
  Rig rig(/*stripes=*/1000);
  rig.runner.SetSpeedLimits({.min_kib_s = 1024, .max_kib_s = 1024});
  rig.host.Hold();
  ASSERT_TRUE(rig.runner.Request({JobKind::kCheck, -1}).ok());
  rig.runner.Stop();
  rig.host.Release();
  ASSERT_TRUE(rig.runner.Wait().ok());
  EXPECT_EQ(rig.runner.last().result, "interrupted");
  EXPECT_LT(rig.host.worked(), 1000u);
  rig.runner.Shutdown();
  EXPECT_THAT(rig.runner.Request({JobKind::kCheck, -1}).message(),
              HasSubstr("shutting down"));
}

TEST(JobRunner, StopReturnsOnceTheJobHasEnded) {
  Rig rig(/*stripes=*/1000);
  rig.host.Hold();
  ASSERT_TRUE(rig.runner.Request({JobKind::kCheck, -1}).ok());
  rig.WaitStarted(1);
  rig.runner.Stop();
  // md's "idle": the caller's next look sees no job and the ended one.
  EXPECT_FALSE(rig.runner.Busy(/*or_queued=*/true).has_value());
  EXPECT_EQ(rig.runner.current().kind, JobKind::kNone);
  EXPECT_EQ(rig.runner.last().result, "interrupted");
  EXPECT_THAT(rig.host.ended(), ElementsAre("interrupted"));
  // A resync goes on (parity must become trustworthy): Stop does not wait
  // for it.
  ASSERT_TRUE(rig.runner.Request({JobKind::kResync, -1}).ok());
  rig.WaitStarted(2);
  rig.runner.Stop();
  EXPECT_EQ(rig.runner.Busy(), JobKind::kResync);
  rig.host.Release();
  ASSERT_TRUE(rig.runner.Wait().ok());
  EXPECT_THAT(rig.host.ended(), ElementsAre("interrupted", "completed"));
}

// The clock given to an array reaches its rebuild: 4 MiB per member at
// 1 MiB/s takes 4 simulated seconds and no real ones to speak of.
TEST(JobRunner, ArrayRebuildRunsOnTheInjectedClock) {
  constexpr uint64_t kChunk = 64 * 1024, kOffset = 1 << 20;
  constexpr uint64_t kMember = 64 * kChunk;
  auto members = testutil::MakeMembers(4, kOffset + kMember);
  auto clock = std::make_shared<SimClock>();
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.cache.bytes = 0;
  o.clock = clock;
  auto a = testutil::MustCreate(members, o);
  ASSERT_NE(a, nullptr);
  auto ref = testutil::Pattern(3 * kMember, 9);
  ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
  ASSERT_TRUE(a->FailSlot(1).ok());
  a->SetSpeedLimits({.min_kib_s = 1024, .max_kib_s = 1024});
  const int64_t sim0 = clock->NowNs();
  const auto real0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(
      a->AddMember(ShareMember(NewMemoryMember("s0", kOffset + kMember))).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  const double sim = static_cast<double>(clock->NowNs() - sim0) / 1e9;
  const double real =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - real0)
          .count();
  EXPECT_EQ(a->Info().last_job.result, "completed");
  EXPECT_FALSE(a->Info().degraded);
  // The first window goes free; the rest waits its turn.
  EXPECT_GT(sim, 3.8);
  EXPECT_LT(sim, 4.3);
  EXPECT_LT(real, sim / 2) << "the job slept in real time";
  testutil::ExpectContents(*a, ref);
}

// A copy of every member as it is now (a crash: nothing more reaches them).
std::vector<std::shared_ptr<Member>> CrashCopy(
    const std::vector<std::shared_ptr<Member>>& members) {
  std::vector<std::shared_ptr<Member>> out;
  for (const auto& m : members) {
    out.push_back(testutil::FromImage(testutil::Snapshot(*m), out.size()));
  }
  return out;
}

uint64_t ResyncOffsetSectors(Member& m) {
  return testutil::SuperOf(m).resync_offset;
}

// A resync without a bitmap records its front as it goes (md's recovery_cp
// checkpoints), so a crash in the middle resumes near where it was, not
// from the start; and once a client has written, the front may not be
// claimed (that write could have torn a stripe below it).
TEST(JobRunner, ResyncWithoutBitmapCheckpointsItsFront) {
  constexpr uint64_t kChunk = 64 * 1024, kOffset = 1 << 20;
  constexpr uint64_t kStripes = 64, kMember = kStripes * kChunk;
  auto members = testutil::MakeMembers(4, kOffset + kMember);
  auto ref = testutil::Pattern(3 * kMember, 21);
  std::vector<std::shared_ptr<Member>> dirty;
  {
    CreateOptions o;
    o.chunk_bytes = kChunk;
    o.data_offset_bytes = kOffset;
    o.cache.bytes = 0;
    o.bitmap = BitmapMode::kNone;
    o.assume_clean = true;
    auto a = testutil::MustCreate(members, o);
    ASSERT_NE(a, nullptr);
    ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
    dirty = CrashCopy(members);  // active: a full resync is due
  }
  ASSERT_EQ(ResyncOffsetSectors(*dirty[0]), 0u);

  // Assembles a copy of `from`, optionally writes one block, and resyncs
  // at 1 MiB/s on a simulated clock; returns the members as they were
  // 2.5 simulated seconds in.
  auto resync_and_crash = [&](const std::vector<std::shared_ptr<Member>>& from,
                              bool client_write) {
    auto copy = CrashCopy(from);
    auto clock = std::make_shared<SimClock>();
    const int64_t t0 = clock->NowNs();
    std::vector<std::shared_ptr<Member>> at_crash;
    clock->set_on_advance([&] {
      // On the job thread, between windows: no member I/O in flight.
      if (at_crash.empty() && clock->NowNs() - t0 >= 2'500'000'000) {
        at_crash = CrashCopy(copy);
      }
    });
    AssembleOptions ao;
    ao.clock = clock;
    auto a = Array::Assemble(testutil::Handles(copy), ao);
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return at_crash;
    EXPECT_TRUE((*a)->Info().resyncing);
    if (client_write) {
      EXPECT_TRUE((*a)->Write(ref.data(), 4096, 0).ok());
    }
    (*a)->SetSpeedLimits({.min_kib_s = 1024, .max_kib_s = 1024});
    (*a)->StartBackground();
    EXPECT_TRUE((*a)->WaitForJob().ok());
    EXPECT_FALSE((*a)->Info().resyncing);
    EXPECT_EQ(testutil::Mismatches(**a), 0u);
    testutil::ExpectContents(**a, ref);
    return at_crash;
  };

  auto crashed = resync_and_crash(dirty, /*client_write=*/false);
  ASSERT_EQ(crashed.size(), 4u);
  // 2.5 s at 1 MiB/s: a checkpoint each second, so at least 1 MiB of the
  // 4 is recorded, and never more than was resynced.
  const uint64_t front = ResyncOffsetSectors(*crashed[0]) * 512;
  EXPECT_GE(front, 1u << 20);
  EXPECT_LE(front, 3u << 20);
  for (const auto& m : crashed) EXPECT_EQ(ResyncOffsetSectors(*m) * 512, front);
  {
    // A client write to an array whose superblocks hold a checkpoint takes
    // the claim back before it writes: a crash now must resync from 0.
    auto again = CrashCopy(crashed);
    auto c = Array::Assemble(testutil::Handles(again), {});
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE((*c)->Write(ref.data(), 4096, 0).ok());
    for (const auto& m : again) EXPECT_EQ(ResyncOffsetSectors(*m), 0u);
  }
  // The crashed copy resumes from the checkpoint.
  auto b = Array::Assemble(testutil::Handles(crashed), {});
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*b)->Resync().ok());
  EXPECT_EQ((*b)->Info().counters.resynced_stripes, kStripes - front / kChunk);
  EXPECT_EQ(testutil::Mismatches(**b), 0u);
  testutil::ExpectContents(**b, ref);
  b->reset();

  // A client write before the resync: nothing below the end may be
  // claimed, so the crash copy still resyncs from 0.
  crashed = resync_and_crash(dirty, /*client_write=*/true);
  ASSERT_EQ(crashed.size(), 4u);
  for (const auto& m : crashed) EXPECT_EQ(ResyncOffsetSectors(*m), 0u);
}

}  // namespace
}  // namespace uraid
