// SPDX-License-Identifier: MIT
// The member-I/O executor on its own (engine/io_executor.h): retry-once,
// generations, the replace target's mirror, counting, and the durable
// write of metadata, over FaultyMembers that count every call.
#include "engine/io_executor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine_test_util.h"
#include "test_util.h"
#include "uraid/member.h"

namespace uraid {
namespace {

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kMemberBytes = 16 * kChunk;
constexpr uint64_t kDataOffset = 4096;
constexpr int kDisks = 3;

class IoExecutorTest : public ::testing::Test {
 protected:
  IoExecutorTest()
      : shape_{*Geometry::Make(5, Layout::kLeftSymmetric, kChunk, kDisks,
                               kMemberBytes),
               kDataOffset, 0, 0},
        slots_(testutil::FaultySlots(kDisks, kDataOffset + kMemberBytes,
                                     &members_)),
        io_(slots_, counters_, kDisks - 1,
            [this](const std::string& name, int slot, const absl::Status&) {
              replacement_failures_.push_back(name + "@" +
                                              std::to_string(slot));
            }) {}

  // A replace target for `slot`, holding stripes below `front`.
  std::shared_ptr<FaultyMember> AddReplacement(int slot, uint64_t front) {
    auto r = std::make_shared<FaultyMember>(NewMemoryMember(
        "r" + std::to_string(slot), kDataOffset + kMemberBytes));
    slots_[slot]->replacement.store(r);
    slots_[slot]->repl_front.store(front);
    return r;
  }

  static MemberIo Io(MemberIo::Kind kind, int slot, void* buf, size_t len,
                     uint64_t offset) {
    return MemberIo{kind, slot, buf, len, offset, {}};
  }

  // Members whose reads take `each` (past the latency threshold), busy or
  // asleep; after 200 plans of one read per member, the most reads under
  // way at once over 20 more such plans. Defined below TimedMember.
  int MostTogetherAfterWarmup(bool busy, std::chrono::microseconds each);

  Shape shape_;
  AtomicCounters counters_;
  std::vector<std::shared_ptr<FaultyMember>> members_;
  SlotTable slots_;
  std::vector<std::string> replacement_failures_;
  IoExecutor io_;
};

TEST_F(IoExecutorTest, ATransientErrorIsRetriedOnce) {
  members_[1]->SetPlan(
      FaultPlan{.rules = {FaultRule{.op = FaultOp::kWrite, .times = 1}}});
  std::vector<uint8_t> buf(4096, 0xAB);
  std::vector<MemberIo> ios{Io(MemberIo::kWrite, 1, buf.data(), buf.size(), 0)};
  io_.Submit(shape_, ios);
  EXPECT_TRUE(ios[0].status.ok()) << ios[0].status;
  EXPECT_EQ(members_[1]->counters().writes, 2u);
  std::vector<uint8_t> back(buf.size());
  ASSERT_TRUE(members_[1]->Read(back.data(), back.size(), kDataOffset).ok());
  EXPECT_EQ(back, buf);
}

TEST_F(IoExecutorTest, ASecondFailureIsTheMembersAndNotRetriedAgain) {
  members_[2]->SetPlan(
      FaultPlan{.rules = {FaultRule{.op = FaultOp::kRead, .times = 2}}});
  std::vector<uint8_t> buf(4096);
  std::vector<MemberIo> ios{Io(MemberIo::kRead, 2, buf.data(), buf.size(), 0)};
  io_.Submit(shape_, ios);
  EXPECT_FALSE(ios[0].status.ok());
  EXPECT_EQ(members_[2]->counters().reads, 2u);
  EXPECT_EQ(ios[0].used, members_[2].get());
}

TEST_F(IoExecutorTest, OutOfRangeIsNotRetried) {
  std::vector<uint8_t> buf(4096);
  std::vector<MemberIo> ios{
      Io(MemberIo::kRead, 0, buf.data(), buf.size(), kMemberBytes)};
  io_.Submit(shape_, ios);
  EXPECT_TRUE(absl::IsOutOfRange(ios[0].status)) << ios[0].status;
  EXPECT_EQ(members_[0]->counters().reads, 1u);
}

TEST_F(IoExecutorTest, AnIoPlannedBeforeItsSlotChangedIsRefusedUnrun) {
  const SlotGens gens = slots_.CaptureGens();
  ChangeSlot(*slots_[1], [] {});
  std::vector<uint8_t> buf(4096);
  std::vector<MemberIo> ios{Io(MemberIo::kRead, 0, buf.data(), buf.size(), 0),
                            Io(MemberIo::kRead, 1, buf.data(), buf.size(), 0)};
  io_.Submit(shape_, ios, &gens);
  EXPECT_TRUE(ios[0].status.ok());
  EXPECT_FALSE(ios[0].stale);
  EXPECT_TRUE(ios[1].stale);
  EXPECT_TRUE(absl::IsAborted(ios[1].status)) << ios[1].status;
  EXPECT_EQ(members_[1]->counters().reads, 0u);
}

TEST_F(IoExecutorTest, WritesBelowTheReplaceFrontAreMirroredToTheTarget) {
  auto r = AddReplacement(0, /*front=*/2);
  std::vector<uint8_t> below(4096, 1), above(4096, 2), read(4096);
  std::vector<MemberIo> ios{
      Io(MemberIo::kWrite, 0, below.data(), below.size(), 1 * kChunk),
      Io(MemberIo::kWrite, 0, above.data(), above.size(), 3 * kChunk),
      Io(MemberIo::kRead, 0, read.data(), read.size(), 1 * kChunk)};
  io_.Submit(shape_, ios);
  for (const MemberIo& io : ios) EXPECT_TRUE(io.status.ok()) << io.status;
  // The write below the front and nothing else; never a read.
  EXPECT_EQ(r->counters().writes, 1u);
  EXPECT_EQ(r->counters().reads, 0u);
  std::vector<uint8_t> back(4096);
  ASSERT_TRUE(r->Read(back.data(), back.size(), kDataOffset + kChunk).ok());
  EXPECT_EQ(back, below);
  std::vector<MemberIo> flush{Io(MemberIo::kFlush, 0, nullptr, 0, 0)};
  io_.Submit(shape_, flush);
  EXPECT_EQ(r->counters().flushes, 1u);  // flushes reach it wherever it is
}

TEST_F(IoExecutorTest, AFailingReplaceTargetIsDroppedNotTheSlot) {
  auto r = AddReplacement(2, /*front=*/4);
  r->SetFailed(true);
  std::vector<uint8_t> buf(4096, 7);
  std::vector<MemberIo> ios{Io(MemberIo::kWrite, 2, buf.data(), buf.size(), 0)};
  io_.Submit(shape_, ios);
  EXPECT_TRUE(ios[0].status.ok()) << ios[0].status;
  EXPECT_EQ(slots_[2]->replacement.load(), nullptr);
  EXPECT_EQ(replacement_failures_, std::vector<std::string>{"r2@2"});
  EXPECT_EQ(slots_[2]->writes_done.load(), 1u);
}

TEST_F(IoExecutorTest, CountsMemberIoAndDataWrites) {
  std::vector<uint8_t> buf(8192, 3);
  std::vector<MemberIo> ios{Io(MemberIo::kWrite, 0, buf.data(), buf.size(), 0),
                            Io(MemberIo::kWrite, 1, buf.data(), buf.size(), 0),
                            Io(MemberIo::kRead, 2, buf.data(), 4096, 0),
                            Io(MemberIo::kFlush, 0, nullptr, 0, 0)};
  ios[1].fua = true;
  io_.Submit(shape_, ios);
  EXPECT_EQ(counters_.member_writes.load(), 2u);
  EXPECT_EQ(counters_.member_write_bytes.load(), 2 * buf.size());
  EXPECT_EQ(counters_.member_fua_writes.load(), 1u);
  EXPECT_EQ(counters_.member_reads.load(), 1u);
  EXPECT_EQ(counters_.member_read_bytes.load(), 4096u);
  EXPECT_EQ(counters_.member_flushes.load(), 1u);
  EXPECT_EQ(io_.writes_started(), 2u);
  EXPECT_EQ(io_.writes_finished(), 2u);
}

// Reads of one member at adjacent offsets (a request's pieces of
// consecutive stripes) go as one vectored call, in whatever order the plan
// listed them; a gap, another slot or a write is a call of its own.
TEST_F(IoExecutorTest, AdjacentReadsOfAMemberAreOneCall) {
  std::vector<uint8_t> data(4 * kChunk);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(members_[0]->Write(data.data(), data.size(), kDataOffset).ok());
  std::vector<uint8_t> got(6 * kChunk, 0xEE);
  uint8_t* g = got.data();
  std::vector<uint8_t> wbuf(4096, 5);
  std::vector<MemberIo> ios{
      Io(MemberIo::kRead, 0, g + 2 * kChunk, kChunk, 2 * kChunk),
      Io(MemberIo::kRead, 0, g, kChunk, 0),
      Io(MemberIo::kWrite, 2, wbuf.data(), wbuf.size(), 0),
      Io(MemberIo::kRead, 0, g + kChunk, kChunk, kChunk),
      Io(MemberIo::kRead, 1, g + 4 * kChunk, kChunk, 0),
      // After a gap: its own call.
      Io(MemberIo::kRead, 0, g + 5 * kChunk, kChunk / 2, 4 * kChunk)};
  io_.Submit(shape_, ios);
  for (const MemberIo& io : ios) {
    EXPECT_TRUE(io.status.ok()) << io.status;
    EXPECT_EQ(io.used, members_[io.slot].get());
  }
  EXPECT_TRUE(std::equal(g, g + 3 * kChunk, data.begin()));
  EXPECT_EQ(counters_.member_reads.load(), 3u) << "slot 0 twice, slot 1 once";
  EXPECT_EQ(counters_.member_read_bytes.load(), 4 * kChunk + kChunk / 2);
  EXPECT_EQ(counters_.member_writes.load(), 1u);
  EXPECT_EQ(slots_[0]->stats.ios.load(), 2u);
}

// A vectored read that fails says nothing of which piece failed: each is
// read again on its own, once (the vectored call was its first attempt),
// so that the error stays with the piece that has it and a second failure
// there is the member's, as for a piece read alone.
TEST_F(IoExecutorTest, AFailedVectoredReadLeavesTheErrorWithItsPiece) {
  std::vector<uint8_t> got(3 * kChunk);
  const auto plan = [&] {
    return std::vector<MemberIo>{
        Io(MemberIo::kRead, 1, got.data(), kChunk, 0),
        Io(MemberIo::kRead, 1, got.data() + kChunk, kChunk, kChunk),
        Io(MemberIo::kRead, 1, got.data() + 2 * kChunk, kChunk, 2 * kChunk)};
  };
  // The middle piece's range fails twice: its error, the others' bytes.
  members_[1]->SetPlan(
      FaultPlan{.rules = {FaultRule{.op = FaultOp::kRead,
                                    .offset = kDataOffset + kChunk + 4096,
                                    .len = 1,
                                    .times = 2}}});
  std::vector<MemberIo> ios = plan();
  io_.Submit(shape_, ios);
  EXPECT_TRUE(ios[0].status.ok()) << ios[0].status;
  EXPECT_FALSE(ios[1].status.ok());
  EXPECT_TRUE(ios[1].answered == false && ios[1].used == members_[1].get());
  EXPECT_TRUE(ios[2].status.ok()) << ios[2].status;
  EXPECT_EQ(slots_[1]->stats.read_errors.load(), 1u);
  // Once only: the piece's own read succeeds, nothing is held against it.
  members_[1]->SetPlan(
      FaultPlan{.rules = {FaultRule{.op = FaultOp::kRead,
                                    .offset = kDataOffset + kChunk + 4096,
                                    .len = 1,
                                    .times = 1}}});
  ios = plan();
  io_.Submit(shape_, ios);
  for (const MemberIo& io : ios) EXPECT_TRUE(io.status.ok()) << io.status;
  EXPECT_EQ(slots_[1]->stats.read_errors.load(), 1u) << "unchanged";
}

TEST_F(IoExecutorTest, WriteDurablyWritesThenFlushesEachRetriedOnce) {
  FaultyMember& m = *members_[0];
  m.SetPlan(FaultPlan{.fail_flushes = 1});
  std::vector<uint8_t> sb(4096, 0x5A);
  EXPECT_TRUE(WriteDurably(m, sb.data(), sb.size(), 0).ok());
  EXPECT_EQ(m.counters().writes, 1u);
  EXPECT_EQ(m.counters().flushes, 2u);
  m.SetPlan(FaultPlan{.fail_flushes = 2});
  EXPECT_FALSE(WriteDurably(m, sb.data(), sb.size(), 0).ok());
}

// A write back over a range read from the same member is a Rewrite; one
// over a range not read, read from another member, or whose read failed,
// and a replace target's copy, are Writes.
TEST_F(IoExecutorTest, WritesBackOverWhatWasReadAreRewrites) {
  AddReplacement(0, 1);  // mirrors stripe 0's writes on slot 0
  std::vector<uint8_t> buf(4 * 4096, 1);
  std::vector<MemberIo> reads{Io(MemberIo::kRead, 0, buf.data(), 8192, 0),
                              Io(MemberIo::kRead, 1, buf.data(), 4096, 0)};
  io_.Submit(shape_, reads);
  ASSERT_TRUE(reads[0].status.ok() && reads[1].status.ok());
  members_[1]->SetFailed(true);  // the next read of slot 1 fails
  std::vector<MemberIo> failed{Io(MemberIo::kRead, 1, buf.data(), 4096, 0)};
  io_.Submit(shape_, failed);
  ASSERT_FALSE(failed[0].status.ok());
  members_[1]->SetFailed(false);
  failed[0].status = absl::OkStatus();  // as a caller's correction would
  std::vector<MemberIo> writes{
      Io(MemberIo::kWrite, 0, buf.data(), 4096, 4096),  // inside the read
      Io(MemberIo::kWrite, 1, buf.data(), 8192, 0),     // past the read
      Io(MemberIo::kWrite, 2, buf.data(), 4096, 0)};    // never read
  std::vector<MemberIo> all_reads = reads;
  all_reads.push_back(failed[0]);
  MarkRewrites(all_reads, writes);
  std::vector<MemberIo> again{Io(MemberIo::kWrite, 1, buf.data(), 4096, 0)};
  MarkRewrites(failed, again);  // proven only by the failed read
  io_.Submit(shape_, writes);
  io_.Submit(shape_, again);
  for (const MemberIo& w : writes) EXPECT_TRUE(w.status.ok()) << w.status;
  EXPECT_EQ(members_[0]->counters().rewrites, 1u);
  EXPECT_EQ(members_[1]->counters().rewrites, 0u);
  EXPECT_EQ(members_[2]->counters().rewrites, 0u);
  EXPECT_EQ(members_[1]->counters().writes, 2u);
  auto* target =
      static_cast<FaultyMember*>(slots_[0]->replacement.load().get());
  EXPECT_EQ(target->counters().writes, 1u) << "the copy to the target";
  EXPECT_EQ(target->counters().rewrites, 0u) << "the target was not read";
  // A durable write back over what was read is a RewriteFua (by default a
  // Rewrite then a Flush).
  std::vector<MemberIo> fua{Io(MemberIo::kWrite, 1, buf.data(), 4096, 0)};
  fua[0].fua = true;
  MarkRewrites(reads, fua);
  const uint64_t flushes = members_[1]->counters().flushes;
  io_.Submit(shape_, fua);
  EXPECT_TRUE(fua[0].status.ok()) << fua[0].status;
  EXPECT_EQ(members_[1]->counters().rewrites, 1u);
  EXPECT_EQ(members_[1]->counters().flushes, flushes + 1);
  // Read from one member, written to another that took the slot since.
  auto other = std::make_shared<FaultyMember>(
      NewMemoryMember("other", kDataOffset + kMemberBytes));
  std::vector<MemberIo> moved{Io(MemberIo::kWrite, 0, buf.data(), 4096, 0)};
  MarkRewrites(reads, moved);
  slots_[0]->member.store(other);
  io_.Submit(shape_, moved);
  EXPECT_TRUE(moved[0].status.ok());
  EXPECT_EQ(other->counters().writes, 1u);
  EXPECT_EQ(other->counters().rewrites, 0u);
}

TEST_F(IoExecutorTest, RunTogetherRunsEveryTask) {
  std::atomic<int> ran{0};
  std::vector<std::function<void()>> tasks(5, [&] { ran.fetch_add(1); });
  io_.RunTogether(tasks);
  EXPECT_EQ(ran.load(), 5);
}

// Raises `most` to `now` if it is below (a peak kept by many threads).
void RaiseTo(std::atomic<int>& most, int now) {
  int seen = most.load();
  while (now > seen && !most.compare_exchange_weak(seen, now)) {
  }
}

// Calls that each wait (up to a bound) until `expected` of them are under
// way at once, recording the most seen together: calls made one after
// another each wait out the bound alone.
struct Rendezvous {
  std::atomic<int> in_flight{0};
  std::atomic<int> most{0};
  int expected = 0;
  std::chrono::milliseconds bound{5000};
  void Arrive() {
    RaiseTo(most, in_flight.fetch_add(1) + 1);
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (most.load() < expected &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    in_flight.fetch_sub(1);
  }
};

// A member whose reads meet at a Rendezvous.
class RendezvousMember final : public testutil::ForwardingMember {
 public:
  RendezvousMember(std::shared_ptr<Member> target, Rendezvous* r)
      : ForwardingMember(std::move(target)), r_(r) {}
  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    r_->Arrive();
    return ForwardingMember::Read(buf, len, offset);
  }

 private:
  Rendezvous* r_;
};

// Until a member latency has been measured, the executor cannot know the
// members are fast: a new array's first plans (a job pass's first
// stripes, the first superblock fan-out) go out together, not one member
// after another (on members 2 ms away that cost a recovery's first window
// several times its length).
TEST_F(IoExecutorTest, BeforeAnyLatencyIsMeasuredAPlanRunsInParallel) {
  Rendezvous r;
  r.expected = kDisks;
  for (int i = 0; i < kDisks; ++i) {
    slots_[i]->member.store(
        std::make_shared<RendezvousMember>(members_[i], &r));
  }
  std::vector<std::vector<uint8_t>> bufs(kDisks, std::vector<uint8_t>(4096));
  std::vector<MemberIo> ios;
  for (int i = 0; i < kDisks; ++i) {
    ios.push_back(Io(MemberIo::kRead, i, bufs[i].data(), 4096, 0));
  }
  io_.Submit(shape_, ios);
  for (const MemberIo& io : ios) EXPECT_TRUE(io.status.ok()) << io.status;
  EXPECT_EQ(r.most.load(), kDisks);
}

TEST_F(IoExecutorTest, BeforeAnyLatencyIsMeasuredRunTogetherRunsInParallel) {
  Rendezvous r;
  r.expected = kDisks;
  std::vector<std::function<void()>> tasks(kDisks, [&r] { r.Arrive(); });
  io_.RunTogether(tasks);
  EXPECT_EQ(r.most.load(), kDisks);
}

// Held threads (what Array::Assemble does before nbdkit forks): the same
// unmeasured batch runs in turn, every task on the calling thread.
TEST_F(IoExecutorTest, HeldThreadsRunEveryTaskOnTheCallingThread) {
  io_.SetThreadsAllowed(false);
  std::vector<std::thread::id> ran(kDisks);
  std::vector<std::function<void()>> tasks;
  for (int i = 0; i < kDisks; ++i) {
    tasks.emplace_back([&ran, i] { ran[i] = std::this_thread::get_id(); });
  }
  io_.RunTogether(tasks);
  for (const std::thread::id& id : ran) {
    EXPECT_EQ(id, std::this_thread::get_id());
  }
  // Allowed again, the next unmeasured batch goes out together.
  io_.SetThreadsAllowed(true);
  Rendezvous r;
  r.expected = kDisks;
  std::vector<std::function<void()>> meet(kDisks, [&r] { r.Arrive(); });
  io_.RunTogether(meet);
  EXPECT_EQ(r.most.load(), kDisks);
}

// A member whose next read stalls 20 ms once armed (a thread preempted
// mid-I/O), and whose reads meet at a Rendezvous while one is set.
class StallOnceMember final : public testutil::ForwardingMember {
 public:
  explicit StallOnceMember(std::shared_ptr<Member> target)
      : ForwardingMember(std::move(target)) {}
  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    if (stall_armed_.exchange(false)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (Rendezvous* r = rendezvous_.load()) r->Arrive();
    return ForwardingMember::Read(buf, len, offset);
  }
  void ArmStall() { stall_armed_ = true; }
  void SetRendezvous(Rendezvous* r) { rendezvous_ = r; }

 private:
  std::atomic<bool> stall_armed_{false};
  std::atomic<Rendezvous*> rendezvous_{nullptr};
};

// One I/O held up for milliseconds does not make fast members look slow:
// the next plan still runs member after member on the calling thread (its
// reads never meet). A 20 ms sample at 1/8 weight used to lift the average
// to 2.5 ms, and the next few dozen plans went to the pool (under load,
// about 2% of plans). Best of twenty rounds, since a round's fast reads
// can be preempted too: under ASan beside a TCG guest one rehearsal's five
// rounds all had fast reads slow enough that the capped stall (120 us at
// 1/8) lifted the average over the threshold. A round takes about 20 ms.
TEST_F(IoExecutorTest, OneStalledIoDoesNotSendTheNextPlansToThePool) {
  std::vector<std::shared_ptr<StallOnceMember>> m;
  for (int i = 0; i < kDisks; ++i) {
    m.push_back(std::make_shared<StallOnceMember>(members_[i]));
    slots_[i]->member.store(m.back());
  }
  std::vector<std::vector<uint8_t>> bufs(kDisks, std::vector<uint8_t>(4096));
  const auto read = [&](int first, int n) {
    std::vector<MemberIo> ios;
    for (int i = first; i < first + n; ++i) {
      ios.push_back(Io(MemberIo::kRead, i, bufs[i].data(), 4096, 0));
    }
    io_.Submit(shape_, ios);
    for (const MemberIo& io : ios) EXPECT_TRUE(io.status.ok()) << io.status;
  };
  int most_together = 0;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 64; ++i) read(i % kDisks, 1);  // fast samples
    m[0]->ArmStall();
    read(0, 1);
    Rendezvous r;
    r.expected = kDisks;
    r.bound = std::chrono::milliseconds(50);
    for (auto& member : m) member->SetRendezvous(&r);
    read(0, kDisks);
    for (auto& member : m) member->SetRendezvous(nullptr);
    most_together = r.most.load();
    if (most_together == 1) break;
  }
  EXPECT_EQ(most_together, 1)
      << "the plan after one stalled I/O went to the pool";
}

// A member whose reads take `ns` each, either busy on the CPU (a copy out
// of the page cache) or asleep (a disk, a remote export), and which
// records the most of its reads under way at once across members sharing
// `in_flight` and `most`.
class TimedMember final : public testutil::ForwardingMember {
 public:
  TimedMember(std::shared_ptr<Member> target, bool busy,
              std::chrono::nanoseconds ns, std::atomic<int>* in_flight,
              std::atomic<int>* most)
      : ForwardingMember(std::move(target)),
        busy_(busy),
        ns_(ns),
        in_flight_(in_flight),
        most_(most) {}
  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    RaiseTo(*most_, in_flight_->fetch_add(1) + 1);
    if (busy_) {
      const auto end = std::chrono::steady_clock::now() + ns_;
      while (std::chrono::steady_clock::now() < end) {
      }
    } else {
      std::this_thread::sleep_for(ns_);
    }
    in_flight_->fetch_sub(1);
    return ForwardingMember::Read(buf, len, offset);
  }

 private:
  const bool busy_;
  const std::chrono::nanoseconds ns_;
  std::atomic<int>* const in_flight_;
  std::atomic<int>* const most_;
};

int IoExecutorTest::MostTogetherAfterWarmup(bool busy,
                                            std::chrono::microseconds each) {
  std::atomic<int> in_flight{0}, most{0};
  for (int i = 0; i < kDisks; ++i) {
    slots_[i]->member.store(std::make_shared<TimedMember>(
        members_[i], busy, each, &in_flight, &most));
  }
  std::vector<std::vector<uint8_t>> bufs(kDisks, std::vector<uint8_t>(4096));
  const auto plan = [&] {
    std::vector<MemberIo> ios;
    for (int i = 0; i < kDisks; ++i) {
      ios.push_back(MemberIo{MemberIo::kRead, i, bufs[i].data(), 4096, 0, {}});
    }
    io_.Submit(shape_, ios);
    for (const MemberIo& r : ios) EXPECT_TRUE(r.status.ok()) << r.status;
  };
  for (int i = 0; i < 200; ++i) plan();
  most.store(0);
  for (int i = 0; i < 20; ++i) plan();
  return most.load();
}

// Member reads slower than the latency threshold (200 us) that are CPU
// work on the calling thread (a page-cache copy of a large piece) run in
// turn once sampled: handing them to other threads costs wakeups and takes
// CPUs the other requests use. 200 plans give each thread's sampling (one
// read in 16) several samples.
TEST_F(IoExecutorTest, SlowReadsThatAreCpuWorkRunInTurnOnceMeasured) {
  EXPECT_EQ(
      MostTogetherAfterWarmup(/*busy=*/true, std::chrono::microseconds(200)),
      1);
}

// Slow reads that wait (asleep 1 ms: a disk, a remote member) still go out
// together: one member latency per plan, not three. A millisecond, so that
// the three overlap in some plan even when a loaded machine wakes the pool
// late.
TEST_F(IoExecutorTest, SlowReadsThatWaitStillRunTogether) {
  EXPECT_EQ(
      MostTogetherAfterWarmup(/*busy=*/false, std::chrono::milliseconds(1)),
      kDisks);
}

}  // namespace
}  // namespace uraid
