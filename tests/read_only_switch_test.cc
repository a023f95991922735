// SPDX-License-Identifier: MIT
// md's --readonly / --readwrite on a live array (Array::SetReadOnly): the
// write gate against racing writers (every write acknowledged before the
// switch is on the members, flushed out of the stripe cache, with clean
// superblocks and consistent parity; none is acknowledged after it), a
// rebuild frozen while read-only and resumed after, and the refusals.

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/status_errno.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;
using testutil::FromImage;
using testutil::Handles;
using testutil::Pattern;
using testutil::Snapshot;
using testutil::SuperOf;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kStripes = 64;
constexpr uint64_t kMemberBytes = kStripes * kChunk;
constexpr uint64_t kSize = kOffset + kMemberBytes;
constexpr int kDisks = 4;
constexpr uint64_t kArrayBytes = (kDisks - 1) * kMemberBytes;
constexpr uint64_t kBlock = 4096;

// A member whose data writes (not its metadata writes) take `delay`, and
// wait while it is held: writes in flight when the gate closes, which a
// switch that did not wait for them would leave behind.
class SlowWrites final : public testutil::ForwardingMember {
 public:
  SlowWrites(std::shared_ptr<Member> target, std::chrono::milliseconds delay)
      : ForwardingMember(std::move(target)), delay_(delay) {}
  void Hold(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = on;
    cv_.notify_all();
  }
  int waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return waiting_;
  }
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
    if (offset >= kOffset) {
      std::this_thread::sleep_for(delay_);
      std::unique_lock<std::mutex> lock(mu_);
      ++waiting_;
      cv_.wait(lock, [&] { return !held_; });
      --waiting_;
    }
    return ForwardingMember::Write(buf, len, offset);
  }

 private:
  const std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int waiting_ = 0;
};

std::unique_ptr<Array> Create(const std::vector<std::shared_ptr<Member>>& m,
                              uint64_t cache_bytes) {
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.assume_clean = true;
  o.bitmap = BitmapMode::kNone;
  o.cache.bytes = cache_bytes;
  return testutil::MustCreate(m, o);
}

// A block's bytes for writer `w`'s write number `seq`.
std::vector<uint8_t> BlockOf(int w, uint32_t seq) {
  std::vector<uint8_t> b(kBlock);
  for (size_t i = 0; i < b.size(); i += 8) {
    std::memcpy(&b[i], &seq, 4);
    const uint32_t tag = static_cast<uint32_t>(w) * 7919u + 1u;
    std::memcpy(&b[i + 4], &tag, 4);
  }
  return b;
}

// Writers race the switch: each rewrites blocks of its own region (small
// writes, which the stripe cache gathers) and remembers, per block, the
// last write acknowledged. Once SetReadOnly returns, the members are
// copied: that copy, assembled on its own, must hold exactly the
// acknowledged writes, be clean (no resync needed) and have consistent
// parity; and no write may be acknowledged after the switch, each failing
// with EROFS.
TEST(ReadOnlySwitch, WritersRacingTheGate) {
  // Even rounds: the stripe cache gathers the writes (the switch writes
  // it back); odd rounds: no cache and slow member writes (many writes in
  // flight at the switch).
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    auto m = testutil::MakeMembers(kDisks, kSize);
    std::vector<std::shared_ptr<Member>> used = m;
    if (round % 2 == 1) {
      for (auto& x : used) {
        x = std::make_shared<SlowWrites>(x, std::chrono::milliseconds(10));
      }
    }
    auto a = Create(used, round % 2 == 0 ? 8 << 20 : 0);
    ASSERT_NE(a, nullptr);
    a->StartBackground();
    constexpr int kWriters = 6;
    constexpr uint64_t kRegion = kArrayBytes / kWriters / kBlock * kBlock;
    constexpr uint64_t kBlocksPerWriter = kRegion / kBlock;
    std::vector<std::vector<uint32_t>> acked(
        kWriters, std::vector<uint32_t>(kBlocksPerWriter, 0));
    std::atomic<bool> switched{false};
    std::atomic<bool> done{false};
    std::atomic<int> acked_after{0};
    std::atomic<int> refused{0};
    std::atomic<int> wrong_errno{0};
    std::vector<std::thread> writers;
    for (int w = 0; w < kWriters; ++w) {
      writers.emplace_back([&, w] {
        std::mt19937 rng(w * 31 + round);
        for (uint32_t seq = 1; !done.load(); ++seq) {
          const uint64_t blk = rng() % kBlocksPerWriter;
          const std::vector<uint8_t> b = BlockOf(w, seq);
          const bool after = switched.load();
          const absl::Status st =
              a->Write(b.data(), b.size(), w * kRegion + blk * kBlock, false);
          if (st.ok()) {
            acked[w][blk] = seq;
            if (after) acked_after.fetch_add(1);
          } else {
            refused.fetch_add(1);
            if (StatusToErrno(st) != EROFS) wrong_errno.fetch_add(1);
            std::this_thread::yield();
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + 20 * round));
    ASSERT_TRUE(a->SetReadOnly(true).ok());
    switched.store(true);
    std::vector<testutil::Image> images;
    for (auto& member : m) images.push_back(Snapshot(*member));
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    done.store(true);
    for (auto& t : writers) t.join();
    EXPECT_EQ(acked_after.load(), 0);
    EXPECT_GT(refused.load(), 0);
    EXPECT_EQ(wrong_errno.load(), 0);
    const ArrayInfo info = a->Info();
    EXPECT_TRUE(info.read_only);
    EXPECT_TRUE(info.switched_read_only);
    EXPECT_TRUE(info.clean);
    EXPECT_FALSE(a->read_only());  // opened writable

    // The copy taken right after the switch is the whole story.
    std::vector<std::shared_ptr<Member>> copy;
    for (int i = 0; i < kDisks; ++i) copy.push_back(FromImage(images[i], i));
    for (auto& c : copy) EXPECT_TRUE(SuperOf(*c).clean());
    AssembleOptions ro;
    ro.read_only = true;
    auto b = Array::Assemble(Handles(copy), ro);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_TRUE((*b)->Info().clean);
    EXPECT_EQ(testutil::Mismatches(**b), 0u);
    int wrong = 0;
    for (int w = 0; w < kWriters; ++w) {
      for (uint64_t blk = 0; blk < kBlocksPerWriter; ++blk) {
        std::vector<uint8_t> got(kBlock);
        ASSERT_TRUE(
            (*b)->Read(got.data(), kBlock, w * kRegion + blk * kBlock).ok());
        const std::vector<uint8_t> want = acked[w][blk] == 0
                                              ? std::vector<uint8_t>(kBlock, 0)
                                              : BlockOf(w, acked[w][blk]);
        wrong += got != want;
      }
    }
    EXPECT_EQ(wrong, 0) << "blocks that do not hold their last acked write";

    // Back to read-write: the same array takes writes again.
    ASSERT_TRUE(a->SetReadOnly(false).ok());
    EXPECT_FALSE(a->Info().read_only);
    const std::vector<uint8_t> b0 = BlockOf(0, 1u << 30);
    EXPECT_TRUE(a->Write(b0.data(), kBlock, 0, false).ok());
    EXPECT_FALSE(a->Info().clean);
  }
}

// A rebuild is frozen while the array is read-only (its front stays, the
// superblocks are clean with the spare's recovery offset) and resumes
// where it stopped once writable; data and parity are right at the end.
// Member changes and scrubs are refused while read-only, naming the cause.
TEST(ReadOnlySwitch, FreezesARebuildAndResumesIt) {
  auto m = testutil::MakeMembers(kDisks, kSize);
  auto a = Create(m, 0);
  ASSERT_NE(a, nullptr);
  a->StartBackground();
  const auto data = Pattern(kArrayBytes, 7);
  ASSERT_TRUE(a->Write(data.data(), data.size(), 0, false).ok());
  ASSERT_TRUE(a->FailMember("m2").ok());
  ASSERT_TRUE(a->RemoveMember("m2").ok());
  // Slow enough that the switch lands mid-rebuild: 64 KiB chunks at
  // 256 KiB/s, 64 stripes take about 16 s.
  a->SetSpeedLimits({.min_kib_s = 256, .max_kib_s = 256, .busy_share_pct = 0});
  std::shared_ptr<Member> spare(NewMemoryMember("s0", kSize));
  ASSERT_TRUE(a->AddMember(ShareMember(spare)).ok());
  auto front = [&] { return a->Info().slots[2].recovery_bytes; };
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (front() < 2 * kChunk && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(front(), 2 * kChunk);
  ASSERT_TRUE(a->SetReadOnly(true).ok());
  const uint64_t frozen_at = front();
  EXPECT_EQ(a->Info().job.kind, JobKind::kRecover);  // parked, not ended
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_EQ(front(), frozen_at) << "the rebuild moved while read-only";
  for (int i : {0, 1, 3}) EXPECT_TRUE(SuperOf(*m[i]).clean()) << i;

  const std::vector<uint8_t> blk(kBlock, 1);
  const absl::Status w = a->Write(blk.data(), kBlock, 0, false);
  EXPECT_EQ(StatusToErrno(w), EROFS) << w;
  EXPECT_EQ(StatusToErrno(a->Trim(kArrayBytes, 0, false)), EROFS);
  EXPECT_EQ(StatusToErrno(a->Zero(kBlock, 0, false)), EROFS);
  std::shared_ptr<Member> other(NewMemoryMember("s1", kSize));
  EXPECT_THAT(std::string(a->AddMember(ShareMember(other)).message()),
              HasSubstr("read-only"));
  EXPECT_THAT(std::string(a->StartScrub(false).message()),
              HasSubstr("read-only"));
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE(a->Read(got.data(), got.size(), 0).ok());  // reads go on
  EXPECT_TRUE(got == data);
  EXPECT_TRUE(a->Flush().ok());

  a->SetSpeedLimits(
      {.min_kib_s = 1 << 20, .max_kib_s = 1 << 20, .busy_share_pct = 0});
  ASSERT_TRUE(a->SetReadOnly(false).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  const ArrayInfo info = a->Info();
  EXPECT_EQ(info.last_job.kind, JobKind::kRecover);
  EXPECT_EQ(info.last_job.result, "completed");
  EXPECT_FALSE(info.degraded);
  EXPECT_EQ(info.slots[2].name, "s0");
  ASSERT_TRUE(a->Read(got.data(), got.size(), 0).ok());
  EXPECT_TRUE(got == data);
  EXPECT_EQ(testutil::Mismatches(*a), 0u);
}

// The switch waits for a write already in flight: it returns only after
// that write has reached the members (and it is acknowledged); a write
// arriving meanwhile is refused at once.
TEST(ReadOnlySwitch, WaitsForTheWriteInFlight) {
  auto m = testutil::MakeMembers(kDisks, kSize);
  auto held = std::make_shared<SlowWrites>(m[1], std::chrono::milliseconds(0));
  std::vector<std::shared_ptr<Member>> used = m;
  used[1] = held;
  auto a = Create(used, 0);
  ASSERT_NE(a, nullptr);
  const std::vector<uint8_t> data = Pattern(kChunk * 3, 3);  // a full stripe
  held->Hold(true);
  absl::Status write_status = absl::UnknownError("not run");
  std::thread writer(
      [&] { write_status = a->Write(data.data(), data.size(), 0, false); });
  while (held->waiting() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::atomic<bool> switched{false};
  std::thread switcher([&] {
    EXPECT_TRUE(a->SetReadOnly(true).ok());
    switched.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(switched.load()) << "switched with a write in flight";
  const absl::Status late = a->Write(data.data(), kBlock, kChunk * 3, false);
  EXPECT_EQ(StatusToErrno(late), EROFS) << late;
  held->Hold(false);
  writer.join();
  switcher.join();
  EXPECT_TRUE(write_status.ok()) << write_status;
  for (auto& member : m) EXPECT_TRUE(SuperOf(*member).clean());
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE(a->Read(got.data(), got.size(), 0).ok());
  EXPECT_TRUE(got == data);
  EXPECT_EQ(testutil::Mismatches(*a), 0u);
}

// Once switched read-only the members are not written at all, however
// long the array stays so: the write-intent bitmap's bits are cleared at
// the switch (md flushes its bitmap when it goes read-only), not by the
// lazy clear afterwards, nor by the stop. Back to read-write, the lazy
// clear goes on.
TEST(ReadOnlySwitch, WritesNothingOnceSwitched) {
  auto clock = std::make_shared<testutil::StepClock>();
  auto m = testutil::MakeMembers(kDisks, kSize);
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.assume_clean = true;
  o.bitmap = BitmapMode::kInternal;
  o.bitmap_chunk_bytes = 4 * kChunk;
  o.cache.bytes = 0;
  o.clock = clock;
  auto a = testutil::MustCreate(m, o);
  ASSERT_NE(a, nullptr);
  a->StartBackground();
  const auto data = Pattern(kArrayBytes / 2, 11);
  ASSERT_TRUE(a->Write(data.data(), data.size(), 0, false).ok());
  ASSERT_GT(a->Info().bitmap.dirty_chunks, 0u);  // the clock has not moved

  ASSERT_TRUE(a->SetReadOnly(true).ok());
  EXPECT_EQ(a->Info().bitmap.dirty_chunks, 0u) << "bits left at the switch";
  std::vector<testutil::Image> images;
  for (auto& member : m) images.push_back(Snapshot(*member));
  // Well past daemon_sleep on the array's clock, and many real ticks of
  // the background thread (every 10 ms).
  const int64_t sleep_ns =
      int64_t{a->Info().bitmap.daemon_sleep_s} * 1'000'000'000;
  for (int i = 0; i < 10; ++i) {
    clock->Advance(sleep_ns + 1'000'000'000);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  for (int i = 0; i < kDisks; ++i) {
    EXPECT_TRUE(Snapshot(*m[i]) == images[i])
        << "member " << i << " written while read-only";
  }
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE(a->Read(got.data(), got.size(), 0).ok());
  EXPECT_TRUE(got == data);

  // Writable again: a write sets its bit and the lazy clear takes it.
  ASSERT_TRUE(a->SetReadOnly(false).ok());
  ASSERT_TRUE(a->Write(data.data(), kBlock, 0, false).ok());
  EXPECT_GT(a->Info().bitmap.dirty_chunks, 0u);
  EXPECT_TRUE(testutil::WaitUntil(
      [&] {
        clock->Advance(sleep_ns + 1'000'000'000);
        return a->Info().bitmap.dirty_chunks == 0;
      },
      10));
  ASSERT_TRUE(a->SetReadOnly(true).ok());
  for (int i = 0; i < kDisks; ++i) images[i] = Snapshot(*m[i]);
  a.reset();  // the stop of a read-only array writes nothing either
  for (int i = 0; i < kDisks; ++i) {
    EXPECT_TRUE(Snapshot(*m[i]) == images[i])
        << "member " << i << " written by the stop";
  }
}

// An array opened read-only cannot be made writable live; read-only on it
// is a no-op, and switching twice is too.
TEST(ReadOnlySwitch, RefusalsNameTheCause) {
  auto m = testutil::MakeMembers(kDisks, kSize);
  Create(m, 0).reset();
  AssembleOptions ro;
  ro.read_only = true;
  auto a = Array::Assemble(Handles(m), ro);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE((*a)->SetReadOnly(true).ok());
  const absl::Status st = (*a)->SetReadOnly(false);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("opened read-only"));
  a->reset();

  auto b = Array::Assemble(Handles(m), {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*b)->SetReadOnly(false).ok());  // already writable
  EXPECT_TRUE((*b)->SetReadOnly(true).ok());
  EXPECT_TRUE((*b)->SetReadOnly(true).ok());
  EXPECT_TRUE((*b)->Info().switched_read_only);
}

}  // namespace
}  // namespace uraid
