// SPDX-License-Identifier: MIT
// FaultyMember: SetFailed, and each FaultPlan fault (errors at ranges, once
// or forever; after N I/Os; at a seeded rate; failed flushes; lost and torn
// writes), the counters, and concurrent use.

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "uraid/member.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kSize = 1 << 20;

class FaultyMemberTest : public testing::Test {
 protected:
  FaultyMemberTest()
      : mem_(NewMemoryMember("m0", kSize)),
        f_(std::make_shared<FaultyMember>(mem_)) {}

  // Reads `len` bytes at `offset` straight from the memory member.
  std::vector<uint8_t> Raw(size_t len, uint64_t offset) {
    std::vector<uint8_t> b(len);
    EXPECT_TRUE(mem_->Read(b.data(), len, offset).ok());
    return b;
  }
  // Fills [offset, offset+len) of the memory member with `v`.
  void Fill(uint8_t v, size_t len, uint64_t offset) {
    std::vector<uint8_t> b(len, v);
    ASSERT_TRUE(mem_->Write(b.data(), len, offset).ok());
  }
  absl::Status ReadAt(size_t len, uint64_t offset) {
    std::vector<uint8_t> b(std::max<size_t>(len, 1));  // never a null buffer
    return f_->Read(b.data(), len, offset);
  }
  absl::Status WriteAt(uint8_t v, size_t len, uint64_t offset) {
    std::vector<uint8_t> b(len, v);
    return f_->Write(b.data(), len, offset);
  }

  std::shared_ptr<Member> mem_;
  std::shared_ptr<FaultyMember> f_;
};

TEST_F(FaultyMemberTest, SetFailedFailsEveryCallUntilCleared) {
  ASSERT_TRUE(WriteAt(7, 100, 10).ok());
  EXPECT_FALSE(f_->failed());
  f_->SetFailed(true);
  EXPECT_TRUE(f_->failed());
  absl::Status st = ReadAt(100, 10);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(st.message(), "m0: read at 10: injected I/O error");
  EXPECT_EQ(WriteAt(1, 100, 4096).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f_->Flush().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f_->Discard(512, 0).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f_->NextDataOffset(0).status().code(),
            absl::StatusCode::kUnavailable);
  // The failed write did not reach the target.
  EXPECT_EQ(Raw(1, 4096)[0], 0);
  // Size, name and discard support still answer.
  EXPECT_EQ(f_->Size(), kSize);
  EXPECT_EQ(f_->Name(), "m0");
  EXPECT_TRUE(f_->DiscardZeroes());

  f_->SetFailed(false);
  EXPECT_FALSE(f_->failed());
  std::vector<uint8_t> b(100);
  ASSERT_TRUE(f_->Read(b.data(), b.size(), 10).ok());
  EXPECT_EQ(b[0], 7);
  EXPECT_TRUE(f_->Flush().ok());
  EXPECT_TRUE(f_->NextDataOffset(0).ok());
}

TEST_F(FaultyMemberTest, EmptyPlanForwardsEverything) {
  f_->SetPlan({});
  ASSERT_TRUE(WriteAt(3, 4096, 8192).ok());
  EXPECT_EQ(Raw(4096, 8192), std::vector<uint8_t>(4096, 3));
  EXPECT_TRUE(ReadAt(4096, 8192).ok());
  EXPECT_TRUE(f_->Flush().ok());
  EXPECT_TRUE(f_->Discard(4096, 8192).ok());
  EXPECT_EQ(Raw(4096, 8192), std::vector<uint8_t>(4096, 0));
  // The target's own errors pass through unchanged.
  EXPECT_EQ(ReadAt(512, kSize).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(f_->counters().injected(), 0u);
}

TEST_F(FaultyMemberTest, ReadErrorAtRangeHitsOnlyOverlappingReads) {
  FaultPlan p;
  p.rules.push_back({.op = FaultOp::kRead, .offset = 8192, .len = 512});
  f_->SetPlan(p);
  // Overlapping reads fail, however they overlap.
  for (auto [len, off] : std::vector<std::pair<size_t, uint64_t>>{
           {512, 8192}, {4096, 8192}, {1, 8192 + 511}, {8192, 4096}}) {
    absl::Status st = ReadAt(len, off);
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << off << "+" << len;
    EXPECT_THAT(
        std::string(st.message()),
        HasSubstr(absl::StrFormat("m0: read at %d: injected I/O error", off)));
  }
  // [offset, offset+len) is half-open: touching reads pass.
  EXPECT_TRUE(ReadAt(512, 8192 - 512).ok());
  EXPECT_TRUE(ReadAt(512, 8192 + 512).ok());
  EXPECT_TRUE(ReadAt(0, 8192).ok());
  // Writes to the range are not affected, and a read rule never fires on
  // them.
  EXPECT_TRUE(WriteAt(9, 512, 8192).ok());
  EXPECT_EQ(Raw(1, 8192)[0], 9);
  EXPECT_TRUE(f_->Discard(512, 8192).ok());
  EXPECT_FALSE(f_->failed());  // a range error does not fail the member
}

TEST_F(FaultyMemberTest, WriteErrorAtRangeLeavesTheOldBytes) {
  Fill(0x11, 4096, 0);
  FaultPlan p;
  p.rules.push_back({.op = FaultOp::kWrite, .offset = 1024, .len = 1024});
  f_->SetPlan(p);
  absl::Status st = WriteAt(0x22, 4096, 0);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("m0: write at 0: injected I/O error"));
  EXPECT_EQ(Raw(4096, 0), std::vector<uint8_t>(4096, 0x11));
  // Discard counts as a write.
  EXPECT_EQ(f_->Discard(4096, 0).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Raw(4096, 0), std::vector<uint8_t>(4096, 0x11));
  EXPECT_TRUE(ReadAt(4096, 0).ok());
  EXPECT_TRUE(WriteAt(0x22, 1024, 2048).ok());
}

TEST_F(FaultyMemberTest, AnyOpRangesAndErrorCode) {
  FaultPlan p;
  p.rules.push_back({.offset = 0, .len = 4096});  // kAny by default
  p.rules.push_back({.offset = 65536, .len = 4096});
  p.error_code = absl::StatusCode::kDataLoss;
  f_->SetPlan(p);
  EXPECT_EQ(ReadAt(512, 4096 - 512).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(WriteAt(1, 512, 0).code(), absl::StatusCode::kDataLoss);
  absl::Status st = ReadAt(512, 65536 + 1024);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("m0: read at 66560: injected I/O error"));
  EXPECT_TRUE(ReadAt(4096, 4096).ok());
  EXPECT_TRUE(WriteAt(1, 4096, 4096).ok());
  EXPECT_TRUE(f_->Flush().ok());  // ranges never match Flush
}

TEST_F(FaultyMemberTest, OneShotReadErrorHeals) {
  Fill(0x5a, 4096, 12288);
  FaultPlan p;
  p.rules.push_back(
      {.op = FaultOp::kRead, .offset = 12288, .len = 4096, .times = 1});
  f_->SetPlan(p);
  EXPECT_TRUE(ReadAt(4096, 0).ok());  // not overlapping: does not use it up
  EXPECT_FALSE(ReadAt(4096, 12288).ok());
  EXPECT_EQ(f_->plan().rules[0].times, 0u);
  std::vector<uint8_t> b(4096);
  ASSERT_TRUE(f_->Read(b.data(), b.size(), 12288).ok());
  EXPECT_EQ(b, std::vector<uint8_t>(4096, 0x5a));
  // The "reconstruct and rewrite" step then works too.
  EXPECT_TRUE(WriteAt(0x5a, 4096, 12288).ok());
  EXPECT_EQ(f_->counters().errors, 1u);
}

TEST_F(FaultyMemberTest, RuleFiresItsTimesThenHeals) {
  FaultPlan p;
  p.rules.push_back({.times = 3});
  f_->SetPlan(p);
  EXPECT_FALSE(ReadAt(512, 0).ok());
  EXPECT_FALSE(WriteAt(1, 512, 0).ok());
  EXPECT_EQ(f_->plan().rules[0].times, 1u);
  EXPECT_FALSE(ReadAt(512, 4096).ok());
  EXPECT_TRUE(ReadAt(512, 0).ok());
  EXPECT_TRUE(WriteAt(1, 512, 0).ok());
  // A forever rule is not decremented.
  f_->SetPlan({.rules = {{.op = FaultOp::kRead}}});
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(ReadAt(512, 0).ok());
  EXPECT_EQ(f_->plan().rules[0].times, UINT64_MAX);
}

TEST_F(FaultyMemberTest, FirstMatchingRuleWins) {
  Fill(0x11, 1024, 0);
  FaultPlan p;
  // The lose rule comes first, so the error rule never sees the write.
  p.rules.push_back({.action = FaultRule::Action::kLose, .times = 1});
  p.rules.push_back({.op = FaultOp::kWrite, .times = 1});
  f_->SetPlan(p);
  EXPECT_TRUE(WriteAt(0x22, 1024, 0).ok());   // lost
  EXPECT_FALSE(WriteAt(0x22, 1024, 0).ok());  // the error rule
  EXPECT_EQ(Raw(1024, 0), std::vector<uint8_t>(1024, 0x11));
  EXPECT_TRUE(WriteAt(0x22, 1024, 0).ok());
  EXPECT_EQ(Raw(1024, 0), std::vector<uint8_t>(1024, 0x22));
  FaultCounters c = f_->counters();
  EXPECT_EQ(c.lost_writes, 1u);
  EXPECT_EQ(c.errors, 1u);
}

TEST_F(FaultyMemberTest, FailAfterIosFailsTheMemberOnce) {
  FaultPlan p;
  p.fail_after_ios = 3;
  f_->SetPlan(p);
  EXPECT_TRUE(f_->Flush().ok());  // Flush is not a data I/O
  EXPECT_TRUE(WriteAt(1, 512, 0).ok());
  EXPECT_TRUE(ReadAt(512, 0).ok());
  EXPECT_TRUE(f_->Discard(512, 0).ok());
  EXPECT_FALSE(f_->failed());
  absl::Status st = ReadAt(512, 4096);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("m0: read at 4096: injected I/O error"));
  EXPECT_TRUE(f_->failed());
  EXPECT_FALSE(WriteAt(1, 512, 0).ok());
  EXPECT_FALSE(f_->Flush().ok());
  EXPECT_FALSE(f_->NextDataOffset(0).ok());
  EXPECT_FALSE(f_->plan().fail_after_ios.has_value());
  // SetFailed(false) heals it, and the trigger does not fire again.
  f_->SetFailed(false);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(ReadAt(512, 0).ok());
  EXPECT_EQ(f_->counters().errors, 4u);

  // 0: the very next data I/O fails.
  f_->SetPlan({.fail_after_ios = 0});
  EXPECT_FALSE(WriteAt(1, 512, 0).ok());
  EXPECT_TRUE(f_->failed());
}

TEST_F(FaultyMemberTest, FailAfterIosCountsFromSetPlan) {
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ReadAt(512, 0).ok());
  f_->SetPlan({.fail_after_ios = 2});
  EXPECT_TRUE(ReadAt(512, 0).ok());
  EXPECT_TRUE(ReadAt(512, 0).ok());
  EXPECT_FALSE(ReadAt(512, 0).ok());
}

TEST_F(FaultyMemberTest, FailFlushes) {
  f_->SetPlan({.fail_flushes = 2});
  absl::Status st = f_->Flush();
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()), HasSubstr("m0: flush"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("injected I/O error"));
  EXPECT_TRUE(ReadAt(512, 0).ok());
  EXPECT_FALSE(f_->Flush().ok());
  EXPECT_TRUE(f_->Flush().ok());
  EXPECT_FALSE(f_->failed());
  FaultCounters c = f_->counters();
  EXPECT_EQ(c.flushes, 3u);
  EXPECT_EQ(c.errors, 2u);
}

// Which of `n` reads fail under `plan`, on a fresh member.
std::vector<bool> FailPattern(const FaultPlan& plan, int n) {
  FaultyMember f(NewMemoryMember("r", kSize));
  f.SetPlan(plan);
  std::vector<bool> out;
  uint8_t b[512];
  for (int i = 0; i < n; ++i) {
    out.push_back(!f.Read(b, sizeof(b), (i % 64) * 512).ok());
  }
  return out;
}

TEST(FaultyMemberRate, SameSeedSameFailuresAndRateIsRoughlyRight) {
  FaultPlan p{.fail_rate = 0.1, .seed = 42};
  std::vector<bool> a = FailPattern(p, 10000);
  EXPECT_EQ(a, FailPattern(p, 10000));
  int fails = static_cast<int>(std::count(a.begin(), a.end(), true));
  EXPECT_GT(fails, 850);
  EXPECT_LT(fails, 1150);
  p.seed = 43;
  EXPECT_NE(a, FailPattern(p, 10000));
  // SetPlan restarts the sequence.
  FaultyMember f(NewMemoryMember("r", kSize));
  uint8_t b[512];
  for (int round = 0; round < 2; ++round) {
    f.SetPlan({.fail_rate = 0.1, .seed = 42});
    for (int i = 0; i < 200; ++i) {
      EXPECT_EQ(!f.Read(b, sizeof(b), (i % 64) * 512).ok(), a[i]) << i;
    }
  }
  EXPECT_FALSE(f.failed());
}

TEST(FaultyMemberRate, ZeroOneAndOpFilter) {
  std::vector<bool> none = FailPattern({.fail_rate = 0, .seed = 1}, 1000);
  EXPECT_EQ(std::count(none.begin(), none.end(), true), 0);
  std::vector<bool> all = FailPattern({.fail_rate = 1, .seed = 1}, 1000);
  EXPECT_EQ(std::count(all.begin(), all.end(), true), 1000);

  FaultyMember f(NewMemoryMember("r", kSize));
  f.SetPlan({.fail_rate = 1, .fail_rate_op = FaultOp::kWrite});
  uint8_t b[512] = {};
  EXPECT_TRUE(f.Read(b, sizeof(b), 0).ok());
  absl::Status st = f.Write(b, sizeof(b), 1024);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("r: write at 1024: injected I/O error"));
  EXPECT_FALSE(f.Discard(512, 0).ok());
  EXPECT_TRUE(f.Flush().ok());  // the rate covers data I/O only
}

TEST_F(FaultyMemberTest, LoseNextWrites) {
  Fill(0x11, 8192, 0);
  f_->SetPlan({.rules = {{.action = FaultRule::Action::kLose, .times = 2}}});
  EXPECT_TRUE(WriteAt(0x22, 4096, 0).ok());
  EXPECT_TRUE(ReadAt(4096, 0).ok());  // reads do not use up a lose rule
  EXPECT_TRUE(WriteAt(0x22, 4096, 4096).ok());
  EXPECT_EQ(Raw(8192, 0), std::vector<uint8_t>(8192, 0x11));
  EXPECT_TRUE(WriteAt(0x33, 4096, 0).ok());
  EXPECT_EQ(Raw(4096, 0), std::vector<uint8_t>(4096, 0x33));
  FaultCounters c = f_->counters();
  EXPECT_EQ(c.lost_writes, 2u);
  EXPECT_EQ(c.errors, 0u);
  EXPECT_EQ(c.writes, 3u);
}

TEST_F(FaultyMemberTest, LoseWritesAtRange) {
  Fill(0x11, 3 * 4096, 0);
  f_->SetPlan(
      {.rules = {
           {.action = FaultRule::Action::kLose, .offset = 4096, .len = 4096}}});
  for (uint64_t off = 0; off < 3 * 4096; off += 4096) {
    EXPECT_TRUE(WriteAt(0x22, 4096, off).ok());
  }
  EXPECT_EQ(Raw(4096, 0), std::vector<uint8_t>(4096, 0x22));
  EXPECT_EQ(Raw(4096, 4096), std::vector<uint8_t>(4096, 0x11));
  EXPECT_EQ(Raw(4096, 8192), std::vector<uint8_t>(4096, 0x22));
  // Discards are never lost.
  EXPECT_TRUE(f_->Discard(4096, 4096).ok());
  EXPECT_EQ(Raw(4096, 4096), std::vector<uint8_t>(4096, 0));
  EXPECT_EQ(f_->counters().lost_writes, 1u);
}

TEST_F(FaultyMemberTest, TornWriteLeavesExactlyThePrefix) {
  Fill(0x11, 8192, 4096);
  f_->SetPlan({.rules = {{.action = FaultRule::Action::kTear,
                          .times = 1,
                          .torn_bytes = 1500}}});  // rounds down to 1024
  absl::Status st = WriteAt(0x22, 8192, 4096);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("m0: write at 4096: injected I/O error"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("1024 of 8192"));
  std::vector<uint8_t> want(8192, 0x11);
  std::fill(want.begin(), want.begin() + 1024, 0x22);
  EXPECT_EQ(Raw(8192, 4096), want);
  // One-shot: the next write is whole.
  EXPECT_TRUE(WriteAt(0x33, 8192, 4096).ok());
  EXPECT_EQ(Raw(8192, 4096), std::vector<uint8_t>(8192, 0x33));
  FaultCounters c = f_->counters();
  EXPECT_EQ(c.torn_writes, 1u);
  EXPECT_EQ(c.errors, 0u);
  EXPECT_EQ(c.injected(), 1u);
}

TEST_F(FaultyMemberTest, TornWriteCanReportOkAndClampsToTheLength) {
  Fill(0x11, 4096, 0);
  f_->SetPlan({.rules = {{.action = FaultRule::Action::kTear,
                          .torn_bytes = 2048,
                          .torn_ok = true}}});
  EXPECT_TRUE(WriteAt(0x22, 4096, 0).ok());
  std::vector<uint8_t> want(4096, 0x11);
  std::fill(want.begin(), want.begin() + 2048, 0x22);
  EXPECT_EQ(Raw(4096, 0), want);
  // Shorter than torn_bytes: all of it lands.
  EXPECT_TRUE(WriteAt(0x33, 1024, 0).ok());
  EXPECT_EQ(Raw(1024, 0), std::vector<uint8_t>(1024, 0x33));
  // Under one sector: nothing lands.
  f_->SetPlan(
      {.rules = {{.action = FaultRule::Action::kTear, .torn_bytes = 511}}});
  EXPECT_FALSE(WriteAt(0x44, 4096, 0).ok());
  EXPECT_EQ(Raw(1024, 0), std::vector<uint8_t>(1024, 0x33));
  // Reads are never torn.
  EXPECT_TRUE(ReadAt(4096, 0).ok());
  EXPECT_EQ(f_->counters().torn_writes, 3u);
}

TEST_F(FaultyMemberTest, CountersCountEveryCall) {
  f_->SetPlan({.rules = {{.op = FaultOp::kRead, .offset = 0, .len = 512},
                         {.action = FaultRule::Action::kLose,
                          .offset = 4096,
                          .len = 512},
                         {.action = FaultRule::Action::kTear,
                          .offset = 8192,
                          .len = 512,
                          .torn_ok = true}},
               .fail_flushes = 1});
  EXPECT_FALSE(ReadAt(512, 0).ok());
  EXPECT_TRUE(ReadAt(512, 512).ok());
  EXPECT_TRUE(WriteAt(1, 512, 4096).ok());
  EXPECT_TRUE(WriteAt(1, 512, 8192).ok());
  EXPECT_TRUE(WriteAt(1, 512, 12288).ok());
  EXPECT_FALSE(f_->Flush().ok());
  EXPECT_TRUE(f_->Flush().ok());
  EXPECT_TRUE(f_->Discard(512, 12288).ok());
  f_->SetFailed(true);
  EXPECT_FALSE(ReadAt(512, 512).ok());
  f_->SetFailed(false);
  FaultCounters c = f_->counters();
  EXPECT_EQ(c.reads, 3u);
  EXPECT_EQ(c.writes, 3u);
  EXPECT_EQ(c.flushes, 2u);
  EXPECT_EQ(c.discards, 1u);
  EXPECT_EQ(c.errors, 3u);
  EXPECT_EQ(c.lost_writes, 1u);
  EXPECT_EQ(c.torn_writes, 1u);
  EXPECT_EQ(c.injected(), 5u);
  f_->ResetCounters();
  c = f_->counters();
  EXPECT_EQ(c.reads + c.writes + c.flushes + c.discards + c.injected(), 0u);
}

TEST_F(FaultyMemberTest, EightThreadsCountsAddUp) {
  constexpr int kThreads = 8;
  constexpr int kOps = 2000;
  // A limited rule: exactly 100 calls fail, whoever makes them.
  f_->SetPlan({.rules = {{.op = FaultOp::kRead, .times = 100}}});
  std::atomic<uint64_t> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> b(512, static_cast<uint8_t>(t));
      for (int i = 0; i < kOps; ++i) {
        uint64_t off = (t * kOps + i) % (kSize / 512) * 512;
        if (!f_->Read(b.data(), b.size(), off).ok()) failed.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 100u);
  EXPECT_EQ(f_->counters().errors, 100u);
  EXPECT_EQ(f_->counters().reads, uint64_t{kThreads} * kOps);
  EXPECT_EQ(f_->plan().rules[0].times, 0u);
}

TEST_F(FaultyMemberTest, EightThreadsWithPlanChangesUnderway) {
  constexpr int kThreads = 8;
  constexpr int kOps = 2000;
  auto plan = [](uint64_t seed) {
    return FaultPlan{.rules = {{.op = FaultOp::kWrite,
                                .offset = seed % 64 * 4096,
                                .len = 4096,
                                .times = 1},
                               {.action = FaultRule::Action::kTear,
                                .times = 1,
                                .torn_bytes = 1024}},
                     .fail_flushes = 1,
                     .fail_rate = 0.05,
                     .seed = seed};
  };
  f_->SetPlan(plan(0));
  std::atomic<bool> done{false};
  std::atomic<int> changes{0};
  std::atomic<uint64_t> failed{0};
  // Another thread swaps plans and reads the state meanwhile.
  std::thread changer([&] {
    for (uint64_t seed = 1; !done.load(); ++seed) {
      f_->SetPlan(plan(seed));
      (void)f_->plan();
      (void)f_->counters();
      changes.fetch_add(1);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (changes.load() == 0) std::this_thread::yield();
      std::vector<uint8_t> b(4096, static_cast<uint8_t>(t));
      for (int i = 0; i < kOps; ++i) {
        // Each thread owns its own 4 KiB blocks: no overlapping writes.
        uint64_t off = (static_cast<uint64_t>(t) + kThreads * (i % 16)) * 4096;
        absl::Status s;
        switch (i % 4) {
          case 0:
          case 1:
            s = f_->Read(b.data(), b.size(), off);
            break;
          case 2:
            s = f_->Write(b.data(), b.size(), off);
            break;
          case 3:
            s = f_->Flush();
            break;
        }
        if (!s.ok()) failed.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  done.store(true);
  changer.join();
  FaultCounters c = f_->counters();
  EXPECT_EQ(c.reads, uint64_t{kThreads} * kOps / 2);
  EXPECT_EQ(c.writes, uint64_t{kThreads} * kOps / 4);
  EXPECT_EQ(c.flushes, uint64_t{kThreads} * kOps / 4);
  // Torn writes here report errors; nothing is lost.
  EXPECT_EQ(c.errors + c.torn_writes, failed.load());
  EXPECT_EQ(c.lost_writes, 0u);
  EXPECT_GT(failed.load(), 0u);
  EXPECT_FALSE(f_->failed());
}

}  // namespace
}  // namespace uraid
