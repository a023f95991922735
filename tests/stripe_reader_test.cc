// SPDX-License-Identifier: MIT
// The read path of a degraded array (engine/stripe_reader.h): pieces on
// intact members are not held behind the rebuild of their stripe's lost
// chunk, and reads running at once still read each survivor byte once.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"

namespace uraid {
namespace {

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 32 * kChunk;
constexpr int kDisks = 8;

using Shared = std::shared_ptr<Member>;

// A member whose reads that touch [lo, hi) wait, once armed, until
// released. Thread-safe.
class HeldMember : public testutil::ForwardingMember {
 public:
  using ForwardingMember::ForwardingMember;
  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    {
      std::unique_lock l(mu_);
      if (armed_ && offset < hi_ && lo_ < offset + len) {
        ++held_;
        cv_.notify_all();
        cv_.wait(l, [&] { return !armed_; });
      }
    }
    return ForwardingMember::Read(buf, len, offset);
  }
  void Arm(uint64_t lo, uint64_t hi) {
    std::lock_guard l(mu_);
    armed_ = true;
    lo_ = lo;
    hi_ = hi;
  }
  bool WaitHeld() {
    std::unique_lock l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(20), [&] { return held_ > 0; });
  }
  void Release() {
    std::lock_guard l(mu_);
    armed_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool armed_ = false;
  uint64_t lo_ = 0, hi_ = 0;
  int held_ = 0;
};

// An 8-member array (left-symmetric: stripe 0's parity on slot 7, its data
// chunk i on slot i) without the stripe cache over `m`, filled with
// Pattern(seed) (*data) and flushed, with slot 1 failed.
std::unique_ptr<Array> FilledThenDegraded(const std::vector<Shared>& m,
                                          uint32_t seed,
                                          std::vector<uint8_t>* data) {
  CreateOptions o;
  o.layout = Layout::kLeftSymmetric;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.member_bytes = kMemberBytes;
  o.cache.bytes = 0;
  return testutil::FilledThenDegraded(m, o, seed, data);
}

bool Same(const std::vector<uint8_t>& got, const std::vector<uint8_t>& data,
          uint64_t at) {
  return std::equal(got.begin(), got.end(), data.begin() + at);
}

// The rebuild of stripe 0's lost chunk (slot 1) waits for its parity (slot
// 7, held) with the stripe's lock held; reads of the stripe's intact
// chunks go on meanwhile: a whole chunk, and half of another whose other
// half the rebuild is reading. (They queued behind the rebuild on the
// stripe lock before: a degraded wide stripe was read one request at a
// time.)
TEST(StripeReader, IntactPiecesOfAStripeAreNotHeldBehindItsRebuild) {
  std::vector<Shared> m = testutil::MakeMembers(kDisks, kOffset + kMemberBytes);
  auto held = std::make_shared<HeldMember>(m[7]);
  m[7] = held;
  std::vector<uint8_t> data;
  auto a = FilledThenDegraded(m, 31, &data);
  ASSERT_NE(a, nullptr);
  held->Arm(kOffset, kOffset + kChunk / 2);
  std::vector<uint8_t> lost(kChunk / 2);
  auto rebuild = std::async(std::launch::async, [&] {
    return a->Read(lost.data(), lost.size(), 1 * kChunk);
  });
  ASSERT_TRUE(held->WaitHeld());
  std::vector<uint8_t> whole(kChunk), half(kChunk / 2);
  auto intact = std::async(std::launch::async, [&] {
    absl::Status st = a->Read(whole.data(), whole.size(), 3 * kChunk);
    if (!st.ok()) return st;
    return a->Read(half.data(), half.size(), 2 * kChunk + kChunk / 2);
  });
  const bool done =
      intact.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(done) << "an intact chunk's read waited for the rebuild";
  EXPECT_EQ(rebuild.wait_for(std::chrono::seconds(0)),
            std::future_status::timeout);
  held->Release();
  ASSERT_TRUE(intact.get().ok());
  ASSERT_TRUE(rebuild.get().ok());
  EXPECT_TRUE(Same(whole, data, 3 * kChunk));
  EXPECT_TRUE(Same(half, data, 2 * kChunk + kChunk / 2));
  EXPECT_TRUE(Same(lost, data, 1 * kChunk));
}

// The rebuild of stripe 0's lost chunk (slot 1) meets slot 2's row while
// an intact read of chunk 2 is fetching it (held, its claim made): it
// waits for that read and XORs the row the reader kept, lent by the
// survivor cache, with the rows it reads itself (parity among them).
// Nothing is read twice, and every byte is right.
TEST(StripeReader, ARebuildUsesTheRowAnIntactReadWasFetching) {
  std::vector<Shared> m = testutil::MakeMembers(kDisks, kOffset + kMemberBytes);
  auto held = std::make_shared<HeldMember>(m[2]);
  m[2] = held;
  std::vector<uint8_t> data;
  auto a = FilledThenDegraded(m, 33, &data);
  ASSERT_NE(a, nullptr);
  const Counters before = a->Info().counters;
  held->Arm(kOffset, kOffset + kChunk);
  std::vector<uint8_t> intact(kChunk), lost(kChunk);
  auto first = std::async(std::launch::async, [&] {
    return a->Read(intact.data(), intact.size(), 2 * kChunk);
  });
  ASSERT_TRUE(held->WaitHeld());
  auto rebuild = std::async(std::launch::async, [&] {
    return a->Read(lost.data(), lost.size(), 1 * kChunk);
  });
  // The rebuild reads the other survivors and then waits on the claim.
  EXPECT_EQ(rebuild.wait_for(std::chrono::milliseconds(200)),
            std::future_status::timeout);
  held->Release();
  ASSERT_TRUE(first.get().ok());
  ASSERT_TRUE(rebuild.get().ok());
  EXPECT_TRUE(Same(intact, data, 2 * kChunk));
  EXPECT_TRUE(Same(lost, data, 1 * kChunk));
  // Slot 2's row once (the intact read), and slots 0, 3-6 and parity (7)
  // once each for the rebuild.
  EXPECT_EQ(a->Info().counters.member_read_bytes - before.member_read_bytes,
            7 * kChunk);
}

// A sequential reader with 8 requests in flight over 7-chunk stripes: the
// requests of a stripe run at once, the one on the lost chunk rebuilding
// it from rows the others are reading. Each survivor byte is read once
// (the survivor cache's rows and claims), as a single reader reads it.
TEST(StripeReader, ConcurrentDegradedSequentialReadReadsEachSurvivorOnce) {
  for (const uint64_t step : {kChunk, 3 * kChunk}) {
    SCOPED_TRACE(step);
    std::vector<Shared> m =
        testutil::MakeMembers(kDisks, kOffset + kMemberBytes);
    std::vector<uint8_t> data;
    auto a = FilledThenDegraded(m, 32, &data);
    ASSERT_NE(a, nullptr);
    const Counters before = a->Info().counters;
    std::vector<uint8_t> got(a->size());
    std::atomic<uint64_t> next{0};
    std::atomic<int> errors{0};
    std::vector<std::thread> readers;
    for (int t = 0; t < 8; ++t) {
      readers.emplace_back([&] {
        for (uint64_t at; (at = next.fetch_add(step)) < got.size();) {
          const size_t n = std::min<uint64_t>(step, got.size() - at);
          if (!a->Read(got.data() + at, n, at).ok()) ++errors;
        }
      });
    }
    for (std::thread& t : readers) t.join();
    const Counters after = a->Info().counters;
    EXPECT_EQ(errors.load(), 0);
    EXPECT_TRUE(got == data);
    EXPECT_EQ(after.member_read_bytes - before.member_read_bytes, a->size());
  }
}

}  // namespace
}  // namespace uraid
