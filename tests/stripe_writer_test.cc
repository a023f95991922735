// SPDX-License-Identifier: MIT
// The write half of the stripe engine on its own (engine/stripe_writer.h),
// without an array: a fake EngineHost over memory members (FaultyMembers)
// records what the writer tells its host when a member fails mid-write,
// and the bytes are checked on the members (data and parity, by parity
// math) and read back through the StripeReader.
#include "engine/stripe_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cctype>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/locked_shared_ptr.h"
#include "base/write_epochs.h"
#include "engine/engine_host.h"
#include "engine/engine_part.h"
#include "engine/shape_set.h"
#include "engine/stripe_reader.h"
#include "engine_test_util.h"
#include "meta/array_bitmap.h"
#include "meta/ppl_log.h"
#include "plan/stripe_plan.h"
#include "report/array_reporter.h"
#include "stripe/stripe_cache.h"
#include "stripe/stripe_locks.h"
#include "stripe/survivor_cache.h"
#include "uraid/clock.h"
#include "uraid/member.h"

namespace uraid {
namespace {

using ::testing::AllOf;
using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Not;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kMemberBytes = 16 * kChunk;
// Room for the v1.2 superblock block the writer probes a failing member
// with (4 KiB at 4 KiB).
constexpr uint64_t kDataOffset = 8192;
constexpr int kDisks = 4;

// The host's side of the contract (engine/engine_host.h), as the array keeps
// it but with every call recorded: a failed member's slot turns faulty, a
// bad range joins the slot's bad-block list (both inside a generation
// change, as the Roster makes them), and writes are bracketed.
class FakeHost : public EngineHost {
 public:
  explicit FakeHost(const SlotTable& slots) : slots_(slots) {}

  absl::Status CheckUsable(bool /*write*/) const override {
    if (slots_.Gone() > 1) return absl::UnavailableError("array failed");
    return absl::OkStatus();
  }
  absl::Status FailSlot(int slot, const std::string& /*why*/,
                        const Member* only_if) override {
    Slot& s = *slots_[slot];
    if (only_if != nullptr && s.member.load().get() != only_if) {
      return absl::OkStatus();
    }
    Record(&failed_, slot);
    ChangeSlot(s, [&] { s.state.store(SlotState::kFaulty); });
    return absl::OkStatus();
  }
  // As ArrayImpl::AbsorbFailures: the first error, each failed member's
  // slot failed, *slot_failed so the writer plans the stripe again.
  absl::Status AbsorbFailures(std::vector<MemberIo>& ios,
                              bool* slot_failed) override {
    *slot_failed = false;
    absl::Status first;
    for (MemberIo& io : ios) {
      if (io.status.ok()) continue;
      Record(&absorbed_, io.slot);
      if (first.ok()) first = io.status;
      if (io.stale || io.to_replacement) {
        *slot_failed = *slot_failed || io.stale;
        continue;
      }
      if (slots_.Present(io.slot)) {
        RecordBackgroundError(FailSlot(io.slot, "", io.used), "fail");
      }
      *slot_failed = true;
    }
    return first;
  }
  absl::Status RecordBadBlocks(int slot, bool /*replacement*/,
                               const Member* /*only_if*/, uint64_t at,
                               uint64_t len,
                               const std::string& /*why*/) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      recorded_.push_back({slot, at, len});
    }
    Slot& s = *slots_[slot];
    ChangeSlot(s, [&] { s.bad.Add(at / 512, len / 512); });
    return absl::OkStatus();
  }
  void WantReplacement(int slot, const Member* /*only_if*/,
                       const std::string& /*why*/) override {
    Record(&want_replacement_, slot);
  }
  absl::Status ClearBadBlocks(int slot, const Member* /*only_if*/, uint64_t at,
                              uint64_t len) override {
    Slot& s = *slots_[slot];
    ChangeSlot(s, [&] { s.bad.Clear(at / 512, len / 512); });
    return absl::OkStatus();
  }
  absl::Status BeginWrite() override {
    ++begun_;
    return absl::OkStatus();
  }
  void EndWrite() override { ++ended_; }
  void RecordBackgroundError(const absl::Status& st,
                             absl::string_view /*what*/) override {
    if (!st.ok()) ++background_errors_;
  }

  struct Recorded {
    int slot;
    uint64_t at;
    uint64_t len;
  };
  std::vector<int> failed() const { return Get(failed_); }
  std::vector<int> absorbed() const { return Get(absorbed_); }
  std::vector<int> want_replacement() const { return Get(want_replacement_); }
  std::vector<Recorded> recorded() const {
    std::lock_guard<std::mutex> lock(mu_);
    return recorded_;
  }
  int begun() const { return begun_; }
  int ended() const { return ended_; }
  int background_errors() const { return background_errors_; }

 private:
  void Record(std::vector<int>* v, int slot) {
    std::lock_guard<std::mutex> lock(mu_);
    v->push_back(slot);
  }
  std::vector<int> Get(const std::vector<int>& v) const {
    std::lock_guard<std::mutex> lock(mu_);
    return v;
  }

  const SlotTable& slots_;
  mutable std::mutex mu_;
  std::vector<int> failed_;
  std::vector<int> absorbed_;
  std::vector<int> want_replacement_;
  std::vector<Recorded> recorded_;
  std::atomic<int> begun_{0};
  std::atomic<int> ended_{0};
  std::atomic<int> background_errors_{0};
};

// No bitmap is attached, so ArrayBitmap never calls its host.
class NoBitmapHost : public BitmapHost {
 public:
  std::vector<Carrier> BitmapCarriers() const override { return {}; }
  std::vector<absl::Status> WriteDurablyOn(std::span<const Carrier>,
                                           const void*, size_t,
                                           uint64_t) override {
    return {};
  }
  absl::Status FlushAllSlots() override { return absl::OkStatus(); }
  void BitmapCarrierFailed(const Carrier&, const std::string&) override {}
  std::vector<std::string> MemberNames() const override { return {}; }
  void Report(LogLevel, Event, const std::string&) const override {}
  void Log(LogLevel, const std::string&) const override {}
};

// RAID5 left-symmetric over four memory members (or the geometry a
// derived fixture asks for), write-through (no stripe cache, no bitmap, no
// PPL), parity trusted everywhere (no resync).
class StripeWriterTest : public ::testing::Test {
 protected:
  StripeWriterTest()
      : StripeWriterTest(*Geometry::Make(5, Layout::kLeftSymmetric, kChunk,
                                         kDisks, kMemberBytes)) {}
  // The same parts over `geo` (its level, layout and disk count).
  explicit StripeWriterTest(const Geometry& geo)
      : shape_{geo, kDataOffset, 0, 0},
        slots_(testutil::FaultySlots(geo.raid_disks(),
                                     kDataOffset + kMemberBytes, &members_)),
        host_(slots_),
        io_(slots_, counters_, geo.raid_disks() - 1,
            [](const std::string&, int, const absl::Status&) {}),
        cache_(shape_.geo.stripe_data_bytes(), 0),
        reporter_(nullptr, "uuid", "test"),
        reader_(Engine(), cache_, survivors_, reporter_, /*read_only=*/false),
        bitmap_(&bitmap_host_, /*read_only=*/false, *RealClock()),
        shapes_(shape_.geo, shape_.data_offset),
        resync_stripe_(shape_.geo.stripe_count()),
        writer_(Engine(), cache_, reader_, bitmap_, ppl_, ppl_epochs_, shapes_,
                resync_stripe_,
                /*bypass_flush_ns=*/0, *RealClock()) {}

  EngineContext Engine() { return {host_, slots_, io_, locks_, counters_}; }

  // Distinct bytes for each offset of the array's first `len` bytes.
  static std::vector<uint8_t> Pattern(size_t len, uint8_t seed) {
    std::vector<uint8_t> v(len);
    for (size_t i = 0; i < len; ++i) {
      v[i] = static_cast<uint8_t>(i * 131 + i / 4096 + seed);
    }
    return v;
  }

  // What disk `disk` must hold for rows [x, x + len) of stripe 0 when the
  // array's first stripe holds `data`: its data chunk, or their parity.
  std::vector<uint8_t> Expected(const std::vector<uint8_t>& data, int disk,
                                uint64_t x, size_t len) const {
    std::vector<uint8_t> out(len, 0);
    for (int k = 0; k < shape_.geo.data_disks(); ++k) {
      const uint8_t* chunk = data.data() + k * kChunk + x;
      if (shape_.geo.DataDisk(0, k) == disk) {
        return std::vector<uint8_t>(chunk, chunk + len);
      }
      for (size_t i = 0; i < len; ++i) out[i] ^= chunk[i];
    }
    EXPECT_EQ(shape_.geo.ParityDisk(0), disk);
    return out;
  }
  // Rows [x, x + len) of stripe 0 as member `disk` holds them.
  std::vector<uint8_t> OnMember(int disk, uint64_t x, size_t len) {
    std::vector<uint8_t> out(len);
    EXPECT_TRUE(members_[disk]->Read(out.data(), len, kDataOffset + x).ok());
    return out;
  }
  std::vector<uint8_t> ReadBack(size_t len) {
    std::vector<uint8_t> out(len);
    EXPECT_TRUE(reader_.Read(shape_, out.data(), len, 0).ok());
    return out;
  }

  Shape shape_;
  AtomicCounters counters_;
  std::vector<std::shared_ptr<FaultyMember>> members_;
  SlotTable slots_;
  FakeHost host_;
  IoExecutor io_;
  StripeLocks locks_;
  StripeCache cache_;
  SurvivorCache survivors_;
  ArrayReporter reporter_;
  StripeReader reader_;
  NoBitmapHost bitmap_host_;
  ArrayBitmap bitmap_;
  LockedSharedPtr<PplLog> ppl_;
  WriteEpochs ppl_epochs_;
  ShapeSet shapes_;  // holds shape_'s twin as the current shape
  std::atomic<uint64_t> resync_stripe_;
  StripeWriter writer_;
};

TEST_F(StripeWriterTest,
       AHealthyFullStripeWriteTellsTheHostNothingButTheBracket) {
  const std::vector<uint8_t> data = Pattern(shape_.geo.stripe_data_bytes(), 1);
  ASSERT_TRUE(writer_.Write(shape_, data.data(), data.size(), 0, false).ok());
  EXPECT_THAT(host_.absorbed(), IsEmpty());
  EXPECT_THAT(host_.failed(), IsEmpty());
  EXPECT_EQ(host_.begun(), 1);
  EXPECT_EQ(host_.ended(), 1);
  EXPECT_EQ(counters_.full_stripe_writes.load(), 1u);
  for (int d = 0; d < kDisks; ++d) {
    EXPECT_EQ(OnMember(d, 0, kChunk), Expected(data, d, 0, kChunk)) << d;
  }
}

// A member that dies during the stripe's member writes (it answers nothing
// more, not even the superblock probe): the writer hands the failed I/O to
// the host, which fails the slot, and writes the stripe again around it.
// The client's bytes are on the others, parity included, and read back
// rebuilt through the reader.
TEST_F(StripeWriterTest,
       AMemberDyingMidWriteIsFailedByTheHostAndWrittenAround) {
  const int dying = 2;
  members_[dying]->SetPlan(FaultPlan{.fail_after_ios = 0});
  const std::vector<uint8_t> data = Pattern(shape_.geo.stripe_data_bytes(), 7);
  const absl::Status st =
      writer_.Write(shape_, data.data(), data.size(), 0, false);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(members_[dying]->failed());
  EXPECT_THAT(host_.absorbed(), ElementsAre(dying));
  EXPECT_THAT(host_.failed(), ElementsAre(dying));
  EXPECT_THAT(host_.recorded(), IsEmpty());  // dead, not a bad block
  EXPECT_EQ(host_.background_errors(), 0);
  EXPECT_EQ(slots_[dying]->state.load(), SlotState::kFaulty);
  // The failed full-stripe attempt, then the stripe again around the slot.
  EXPECT_EQ(counters_.full_stripe_writes.load(), 1u);
  EXPECT_EQ(counters_.degraded_writes.load(), 1u);
  EXPECT_EQ(host_.begun(), 1);
  EXPECT_EQ(host_.ended(), 1);
  for (int d = 0; d < kDisks; ++d) {
    if (d == dying) continue;
    EXPECT_EQ(OnMember(d, 0, kChunk), Expected(data, d, 0, kChunk)) << d;
  }
  // What the dead member held follows from the others (parity math) ...
  std::vector<uint8_t> rebuilt(kChunk, 0);
  for (int d = 0; d < kDisks; ++d) {
    if (d == dying) continue;
    const std::vector<uint8_t> m = OnMember(d, 0, kChunk);
    for (size_t i = 0; i < kChunk; ++i) rebuilt[i] ^= m[i];
  }
  EXPECT_EQ(rebuilt, Expected(data, dying, 0, kChunk));
  // ... and the reader serves it so.
  EXPECT_EQ(ReadBack(data.size()), data);
}

// md's rule for a member that still answers: a write error is a bad
// block, not a failed member. The failed range is written again block by
// block; the block that keeps failing is recorded with the host (which
// keeps it in the slot's list), the member is asked to be replaced, and
// the stripe is written again around the entry. The member stays.
TEST_F(StripeWriterTest, AWriteErrorOnALiveMemberIsRecordedNotFailed) {
  const int sick = 1;
  const uint64_t bad_at = kDataOffset + 3 * 4096;
  members_[sick]->SetPlan(FaultPlan{.rules = {FaultRule{
                                        .op = FaultOp::kWrite,
                                        .offset = bad_at,
                                        .len = 4096,
                                    }}});
  const std::vector<uint8_t> data = Pattern(shape_.geo.stripe_data_bytes(), 3);
  const absl::Status st =
      writer_.Write(shape_, data.data(), data.size(), 0, false);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_THAT(host_.failed(), IsEmpty());
  ASSERT_EQ(host_.recorded().size(), 1u);
  EXPECT_EQ(host_.recorded()[0].slot, sick);
  EXPECT_EQ(host_.recorded()[0].at, bad_at);
  EXPECT_EQ(host_.recorded()[0].len, 4096u);
  // At least once, for that member only (the host reports it once; the
  // writer asks again when its attempt to make the block good fails).
  EXPECT_THAT(host_.want_replacement(), AllOf(Not(IsEmpty()), Each(sick)));
  EXPECT_EQ(slots_[sick]->state.load(), SlotState::kActive);
  EXPECT_TRUE(slots_.BadAt(sick, bad_at, 4096));
  // Every other block of every member holds its data or parity.
  for (int d = 0; d < kDisks; ++d) {
    for (uint64_t x = 0; x < kChunk; x += 4096) {
      if (d == sick && kDataOffset + x == bad_at) continue;
      EXPECT_EQ(OnMember(d, x, 4096), Expected(data, d, x, 4096))
          << "disk " << d << " at " << x;
    }
  }
  // The bad block is never read: the reader rebuilds it from the others.
  EXPECT_EQ(ReadBack(data.size()), data);
}

// WriteFullStripe (the reshape's copy hands the writer each new stripe's
// parity, computed as the stripe was read), at every level and layout,
// with disk counts that move the rotation, over every stripe of the
// members (every place parity and Q rotate to).
// A stripe completed in the cache whose rows hold a bad block is written
// around it like any other write (from one buffer: the gathered chunks
// are copied together for that path), and reads back whole.
TEST_F(StripeWriterTest, AStripeCompletedInTheCacheIsWrittenAroundBadBlocks) {
  const uint64_t sd = shape_.geo.stripe_data_bytes();
  cache_.set_capacity(64 * sd);
  const int sick = shape_.geo.DataDisk(0, 1);
  ASSERT_TRUE(host_
                  .RecordBadBlocks(sick, false, nullptr, kDataOffset + 8192,
                                   4096, "test")
                  .ok());
  const std::vector<uint8_t> d = Pattern(sd, 9);
  ASSERT_TRUE(writer_.Write(shape_, d.data(), kChunk / 2, 0, false).ok());
  ASSERT_TRUE(writer_
                  .Write(shape_, d.data() + kChunk / 2, sd - kChunk / 2,
                         kChunk / 2, false)
                  .ok());
  EXPECT_EQ(cache_.size(), 0u);
  EXPECT_EQ(ReadBack(sd), d);
  EXPECT_EQ(host_.begun(), host_.ended());
}

struct FullStripeCase {
  int level;
  Layout layout;
  int disks;
};

class FullStripeParityTest
    : public StripeWriterTest,
      public ::testing::WithParamInterface<FullStripeCase> {
 protected:
  FullStripeParityTest()
      : StripeWriterTest(*Geometry::Make(GetParam().level, GetParam().layout,
                                         kChunk, GetParam().disks,
                                         kMemberBytes)) {}

  uint64_t Stripes() const { return shape_.geo.stripe_count(); }
  // Stripe `s`'s chunk on every member, by slot.
  std::vector<std::vector<uint8_t>> OnMembers(uint64_t s) {
    std::vector<std::vector<uint8_t>> out;
    for (const auto& m : members_) {
      std::vector<uint8_t> chunk(kChunk);
      EXPECT_TRUE(m->Read(chunk.data(), kChunk, kDataOffset + s * kChunk).ok());
      out.push_back(std::move(chunk));
    }
    return out;
  }
  // Stripe `s` holds `want` (an OnMembers) on every slot but `lost`.
  void ExpectOthersHold(uint64_t s,
                        const std::vector<std::vector<uint8_t>>& want,
                        int lost) {
    const std::vector<std::vector<uint8_t>> on = OnMembers(s);
    for (int i = 0; i < shape_.geo.raid_disks(); ++i) {
      if (i == lost) continue;
      EXPECT_EQ(on[i], want[i]) << "stripe " << s << " slot " << i;
    }
  }
  // OnMembers of every stripe, by stripe.
  std::vector<std::vector<std::vector<uint8_t>>> AllOnMembers() {
    std::vector<std::vector<std::vector<uint8_t>>> all;
    for (uint64_t s = 0; s < Stripes(); ++s) all.push_back(OnMembers(s));
    return all;
  }
  // Writes every stripe through Write, with pattern seeds from `seed`.
  void WriteAll(uint8_t seed) {
    const uint64_t sd = shape_.geo.stripe_data_bytes();
    for (uint64_t s = 0; s < Stripes(); ++s) {
      const std::vector<uint8_t> d =
          Pattern(sd, static_cast<uint8_t>(seed + s));
      ASSERT_TRUE(writer_.Write(shape_, d.data(), sd, s * sd, false).ok());
    }
  }
  // Stripe `s` written by WriteFullStripe from pattern `seed + s`, its
  // parity from ComputeFullStripeParity.
  void WriteFullWithComputedParity(uint64_t s, uint8_t seed) {
    const uint64_t sd = shape_.geo.stripe_data_bytes();
    const std::vector<uint8_t> d = Pattern(sd, static_cast<uint8_t>(seed + s));
    std::vector<uint8_t> parity(FullStripeParityBytes(shape_.geo));
    ComputeFullStripeParity(shape_.geo, s, d.data(), parity.data());
    const absl::Status st =
        writer_.WriteFullStripe(shape_, s, d.data(), parity.data());
    ASSERT_TRUE(st.ok()) << st;
  }
};

// The parity handed in is byte for byte what the writer would have
// computed and written for the same data.
TEST_P(FullStripeParityTest, HandedParityIsWhatTheWriterWouldWrite) {
  WriteAll(/*seed=*/1);
  const std::vector<std::vector<std::vector<uint8_t>>> want = AllOnMembers();
  WriteAll(/*seed=*/101);  // other bytes everywhere
  const uint64_t full_before = counters_.full_stripe_writes.load();
  for (uint64_t s = 0; s < Stripes(); ++s) {
    WriteFullWithComputedParity(s, /*seed=*/1);
    EXPECT_EQ(OnMembers(s), want[s]) << "stripe " << s;
  }
  EXPECT_EQ(counters_.full_stripe_writes.load() - full_before, Stripes());
  EXPECT_EQ(host_.begun(), host_.ended());
}

// The writer writes the parity it is handed, unchecked: it computes none
// of its own on a full-stripe write (the point of handing it in).
TEST_P(FullStripeParityTest, TheWriterWritesTheParityItIsHanded) {
  const uint64_t sd = shape_.geo.stripe_data_bytes();
  for (uint64_t s = 0; s < Stripes(); ++s) {
    const std::vector<uint8_t> d = Pattern(sd, static_cast<uint8_t>(s));
    const std::vector<uint8_t> marker = Pattern(
        FullStripeParityBytes(shape_.geo), static_cast<uint8_t>(77 + s));
    ASSERT_TRUE(
        writer_.WriteFullStripe(shape_, s, d.data(), marker.data()).ok());
    const std::vector<std::vector<uint8_t>> on = OnMembers(s);
    const auto part = [&](int i) {
      return std::vector<uint8_t>(marker.begin() + i * kChunk,
                                  marker.begin() + (i + 1) * kChunk);
    };
    EXPECT_EQ(on[shape_.geo.ParityDisk(s)], part(0)) << "P of stripe " << s;
    if (shape_.geo.level() == 6) {
      EXPECT_EQ(on[shape_.geo.QDisk(s)], part(1)) << "Q of stripe " << s;
    }
  }
}

// With a member gone, a full-stripe write still takes the parity handed
// in (P, or Q where P is the lost one): the others hold what a healthy
// write puts there, and the reader rebuilds the lost chunk from them.
TEST_P(FullStripeParityTest, ADegradedStripeTakesTheHandedParity) {
  WriteAll(/*seed=*/3);
  const std::vector<std::vector<std::vector<uint8_t>>> want = AllOnMembers();
  const int lost = 1;  // data, P or Q as the rotation turns
  ASSERT_TRUE(host_.FailSlot(lost, "test", nullptr).ok());
  WriteAll(/*seed=*/103);
  for (uint64_t s = 0; s < Stripes(); ++s) {
    WriteFullWithComputedParity(s, /*seed=*/3);
    ExpectOthersHold(s, want[s], lost);
  }
  const uint64_t sd = shape_.geo.stripe_data_bytes();
  for (uint64_t s = 0; s < Stripes(); ++s) {
    std::vector<uint8_t> got(sd);
    ASSERT_TRUE(reader_.Read(shape_, got.data(), sd, s * sd).ok());
    EXPECT_EQ(got, Pattern(sd, static_cast<uint8_t>(3 + s))) << "stripe " << s;
  }
}

// A stripe gathered in the write cache from two pieces goes out when the
// second completes it, each chunk from where its bytes are (the entry, or
// the completing piece itself): the members then hold exactly what one
// full-stripe write of the same bytes makes, whichever piece came first,
// wherever the split falls (on a chunk boundary, or inside a chunk, which
// the entry takes a copy of), and when the second piece rewrites bytes the
// first had cached (the newer bytes win).
TEST_P(FullStripeParityTest, AStripeCompletedInTheCacheIsWhatOneWriteMakes) {
  const uint64_t sd = shape_.geo.stripe_data_bytes();
  cache_.set_capacity(64 * sd);
  WriteAll(/*seed=*/1);
  const std::vector<std::vector<std::vector<uint8_t>>> want = AllOnMembers();
  WriteAll(/*seed=*/101);
  const uint64_t full_before = counters_.full_stripe_writes.load();
  const uint64_t rmw_before = counters_.rmw_writes.load();
  const uint64_t rcw_before = counters_.rcw_writes.load();
  for (uint64_t s = 0; s < Stripes(); ++s) {
    const std::vector<uint8_t> d = Pattern(sd, static_cast<uint8_t>(1 + s));
    // Split inside a chunk, on a chunk boundary, inside the last chunk.
    const uint64_t splits[] = {kChunk / 2, kChunk, sd - kChunk / 2};
    const uint64_t split = splits[s % 3];
    // The first piece ends (or starts) where the second starts (or ends),
    // or, two stripes in three, overlaps it by a quarter chunk with bytes the
    // second replaces.
    const uint64_t overlap = s % 3 == 2 ? 0 : kChunk / 4;
    std::vector<uint8_t> early = d;
    const bool head_first = s % 2 == 0;
    uint64_t ea, eb, la, lb;  // the early and the late piece
    if (head_first) {
      ea = 0, eb = split + overlap, la = split, lb = sd;
    } else {
      ea = split - overlap, eb = sd, la = 0, lb = split;
    }
    for (uint64_t i = la; i < lb; ++i) {
      if (i >= ea && i < eb) early[i] ^= 0x5a;  // stale where both write
    }
    ASSERT_TRUE(
        writer_.Write(shape_, early.data() + ea, eb - ea, s * sd + ea, false)
            .ok());
    EXPECT_EQ(cache_.size(), 1u) << "stripe " << s;
    ASSERT_TRUE(
        writer_.Write(shape_, d.data() + la, lb - la, s * sd + la, false).ok());
    EXPECT_EQ(cache_.size(), 0u) << "stripe " << s;
    EXPECT_EQ(OnMembers(s), want[s]) << "stripe " << s << " split " << split;
  }
  EXPECT_EQ(counters_.full_stripe_writes.load() - full_before, Stripes());
  EXPECT_EQ(counters_.rmw_writes.load(), rmw_before);
  EXPECT_EQ(counters_.rcw_writes.load(), rcw_before);
  EXPECT_EQ(host_.begun(), host_.ended());
}

// The same with a member gone: the others hold what a healthy write puts
// there (a lost P or Q is simply not written), and the reader rebuilds
// the lost chunk from them.
TEST_P(FullStripeParityTest, ADegradedStripeCompletedInTheCacheReadsBack) {
  const uint64_t sd = shape_.geo.stripe_data_bytes();
  cache_.set_capacity(64 * sd);
  WriteAll(/*seed=*/5);
  const std::vector<std::vector<std::vector<uint8_t>>> want = AllOnMembers();
  const int lost = 1;  // data, P or Q as the rotation turns
  ASSERT_TRUE(host_.FailSlot(lost, "test", nullptr).ok());
  WriteAll(/*seed=*/105);
  for (uint64_t s = 0; s < Stripes(); ++s) {
    const std::vector<uint8_t> d = Pattern(sd, static_cast<uint8_t>(5 + s));
    const uint64_t split = s % 2 ? kChunk + kChunk / 2 : kChunk;
    ASSERT_TRUE(writer_.Write(shape_, d.data(), split, s * sd, false).ok());
    ASSERT_TRUE(
        writer_
            .Write(shape_, d.data() + split, sd - split, s * sd + split, false)
            .ok());
    ExpectOthersHold(s, want[s], lost);
    std::vector<uint8_t> got(sd);
    ASSERT_TRUE(reader_.Read(shape_, got.data(), sd, s * sd).ok());
    EXPECT_EQ(got, d) << "stripe " << s;
  }
  EXPECT_EQ(cache_.size(), 0u);
}

std::vector<FullStripeCase> FullStripeCases() {
  std::vector<FullStripeCase> v{{4, Layout::kParityLast, 4}};
  for (const Layout l : {Layout::kLeftAsymmetric, Layout::kRightAsymmetric,
                         Layout::kLeftSymmetric, Layout::kRightSymmetric,
                         Layout::kParityFirst, Layout::kParityLast}) {
    for (const int disks : {3, 5}) v.push_back({5, l, disks});
  }
  for (const Layout l :
       {Layout::kLeftAsymmetric, Layout::kRightAsymmetric,
        Layout::kLeftSymmetric, Layout::kRightSymmetric, Layout::kParityFirst,
        Layout::kParityLast, Layout::kDdfZeroRestart, Layout::kDdfNRestart,
        Layout::kDdfNContinue, Layout::kLeftAsymmetric6,
        Layout::kRightAsymmetric6, Layout::kLeftSymmetric6,
        Layout::kRightSymmetric6, Layout::kParityFirst6}) {
    for (const int disks : {4, 6}) v.push_back({6, l, disks});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    EveryLayout, FullStripeParityTest, ::testing::ValuesIn(FullStripeCases()),
    [](const ::testing::TestParamInfo<FullStripeCase>& info) {
      std::string name = absl::StrCat(
          "raid", info.param.level, "_",
          std::string(LayoutName(info.param.layout)), "_", info.param.disks);
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

}  // namespace
}  // namespace uraid
