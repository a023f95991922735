// SPDX-License-Identifier: MIT
// Tests for switching the consistency policy of a live array
// (Array::SetConsistencyPolicy, array/ppl_switch.cc) on in-memory members:
// data written before, after and during a switch reads back; after a
// switch to ppl the superblocks say so and a crash then a lost member is
// recovered from the log without force; after a switch back to resync the
// log is no longer trusted; md's refusals; the control protocol's field.

#include <atomic>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "format/ppl_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/consistency_policy.h"
#include "uraid/control_protocol.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;
using testutil::FromImage;
using testutil::Handles;
using testutil::Image;
using testutil::MakeMembers;
using testutil::MustCreate;
using testutil::Pattern;
using testutil::Snapshot;
using testutil::SuperOf;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kMemberBytes = 3 << 20;
constexpr uint64_t kPplArea = (8 + 8) * 512;  // 8 sectors past the superblock

CreateOptions Options(bool ppl) {
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.bitmap = BitmapMode::kNone;  // policy resync unless ppl
  o.ppl = ppl;
  o.assume_clean = true;  // zeroed members are consistent
  // No bad-block log (mdadm's bbl=no, and every array uraid made before
  // it reserved one): a switch to ppl gets the room up to the data.
  // ResyncToPplStopsAtTheBadBlockLog covers arrays with a log.
  o.bad_block_log = false;
  return o;
}

class PplSwitchTest : public ::testing::Test {
 protected:
  void Make(bool ppl) {
    members_ = MakeMembers(4, kMemberBytes);
    std::unique_ptr<Array> a = MustCreate(members_, Options(ppl));
    ASSERT_NE(a, nullptr);
    geo_ = a->Info().geometry;
    data_offset_ = a->Info().data_offset_bytes;
    model_ = Pattern(geo_->array_bytes(), 7);
    ASSERT_TRUE(a->Write(model_.data(), model_.size(), 0).ok());
  }
  std::unique_ptr<Array> Open() {
    absl::StatusOr<std::unique_ptr<Array>> a =
        Array::Assemble(Handles(members_), AssembleOptions{});
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? std::move(*a) : nullptr;
  }
  // A partial write of `n` bytes at `off`, kept in the model.
  void PartialWrite(Array& a, uint64_t off, size_t n, uint32_t seed) {
    const std::vector<uint8_t> w = Pattern(n, seed);
    ASSERT_TRUE(a.Write(w.data(), w.size(), off).ok());
    std::memcpy(model_.data() + off, w.data(), n);
  }
  void ExpectModel(Array& a) { testutil::ExpectContents(a, model_); }

  // The crash after a partial write into `stripe`: every member as the
  // array left it (still open, dirty), but the stripe's parity chunk as
  // `before`; then the first data member of the stripe (not written) is
  // lost. Returns the surviving images as members.
  std::vector<std::shared_ptr<Member>> TornAndDegraded(
      const std::vector<Image>& before, const std::vector<Image>& now,
      uint64_t stripe) {
    const int p = geo_->ParityDisk(stripe);
    const int lost = geo_->DataDisk(stripe, 0);
    const uint64_t prow = data_offset_ + stripe * kChunk;
    std::vector<std::shared_ptr<Member>> out;
    for (int s = 0; s < 4; ++s) {
      if (s == lost) continue;
      Image img = now[s];
      if (s == p) {
        std::memcpy(img.data() + prow, before[p].data() + prow, kChunk);
      }
      out.push_back(FromImage(img, s));
    }
    return out;
  }

  std::vector<std::shared_ptr<Member>> members_;
  std::optional<Geometry> geo_;
  uint64_t data_offset_ = 0;
  std::vector<uint8_t> model_;
};

TEST_F(PplSwitchTest, ResyncToPplWritesMdsFieldsAndAnEmptyLog) {
  Make(/*ppl=*/false);
  std::unique_ptr<Array> a = Open();
  ASSERT_FALSE(a->Info().ppl);
  for (auto& m : members_) ASSERT_FALSE(SuperOf(*m).has_ppl());
  ASSERT_TRUE(a->SetConsistencyPolicy(ConsistencyPolicy::kPpl).ok());
  EXPECT_TRUE(a->Info().ppl);
  const std::array<uint8_t, 16> uuid = a->Info().uuid;
  for (auto& m : members_) {
    SCOPED_TRACE(m->Name());
    const Superblock sb = SuperOf(*m);
    EXPECT_TRUE(sb.feature_map & kFeaturePpl);
    EXPECT_EQ(sb.ppl_offset(), 8);
    // mdadm's rule: up to the data (1 MiB here), less the 8 sectors of
    // the superblock's block and the 8 of the offset.
    EXPECT_EQ(sb.ppl_size(), data_offset_ / 512 - 16);
    EXPECT_TRUE(CheckFeatureCombination(sb).ok());
    std::vector<uint8_t> hdr(kPplHeaderBytes);
    ASSERT_TRUE(m->Read(hdr.data(), hdr.size(), kPplArea).ok());
    absl::StatusOr<PplHeader> h = DecodePplHeader(hdr, PplSignature(uuid));
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_TRUE(h->entries.empty());
  }
  // Data written before the switch, and after it.
  const uint64_t sd = geo_->stripe_data_bytes();
  PartialWrite(*a, 4 * sd + kChunk + 8192, 4096, 21);
  ExpectModel(*a);
  EXPECT_EQ(testutil::Mismatches(*a), 0u);
  // The write was logged on its parity member.
  const int p = geo_->ParityDisk(4);
  std::vector<uint8_t> hdr(kPplHeaderBytes);
  ASSERT_TRUE(members_[p]->Read(hdr.data(), hdr.size(), kPplArea).ok());
  absl::StatusOr<PplHeader> h = DecodePplHeader(hdr, PplSignature(uuid));
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->entries.size(), 1u);
  EXPECT_EQ(h->entries[0].data_sector, (4 * sd + kChunk + 8192) / 512);
  a.reset();
  // Reassembled: still ppl, clean, same data.
  a = Open();
  EXPECT_TRUE(a->Info().ppl);
  EXPECT_TRUE(a->Info().clean);
  ExpectModel(*a);
}

// kill -9 after the switch: a partial write's data is out, its parity is
// not, and a member nobody wrote is lost. The switched array starts
// degraded without force and reads every byte right, as a created one.
TEST_F(PplSwitchTest, CrashAfterSwitchToPplIsRecoveredFromTheLog) {
  Make(/*ppl=*/false);
  const uint64_t stripe = 3;
  std::vector<Image> before, now;
  {
    std::unique_ptr<Array> a = Open();
    ASSERT_TRUE(a->SetConsistencyPolicy(ConsistencyPolicy::kPpl).ok());
    for (auto& m : members_) before.push_back(Snapshot(*m));
    PartialWrite(*a, stripe * geo_->stripe_data_bytes() + kChunk, kChunk + 4096,
                 11);
    for (auto& m : members_) now.push_back(Snapshot(*m));  // still dirty
  }
  std::vector<std::shared_ptr<Member>> torn =
      TornAndDegraded(before, now, stripe);
  AssembleOptions opts;
  opts.run = true;  // the lost slot is not given
  absl::StatusOr<std::unique_ptr<Array>> a =
      Array::Assemble(Handles(torn), opts);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE((*a)->Info().degraded);
  EXPECT_TRUE((*a)->Info().clean);
  EXPECT_TRUE((*a)->Info().ppl);
  ExpectModel(**a);
}

// Back to resync: the superblocks drop the PPL, so the same crash is the
// ordinary dirty degraded case again, refused without force, and a dirty
// array resyncs however valid its old log.
TEST_F(PplSwitchTest, PplToResyncStopsTrustingTheLog) {
  Make(/*ppl=*/true);
  const uint64_t stripe = 5;
  std::vector<Image> before, now;
  {
    std::unique_ptr<Array> a = Open();
    PartialWrite(*a, stripe * geo_->stripe_data_bytes() + 4096, 8192, 12);
    ASSERT_TRUE(a->SetConsistencyPolicy(ConsistencyPolicy::kResync).ok());
    EXPECT_FALSE(a->Info().ppl);
    for (auto& m : members_) {
      const Superblock sb = SuperOf(*m);
      EXPECT_FALSE(sb.has_ppl());
      EXPECT_EQ(sb.bitmap_offset, 0);
    }
    for (auto& m : members_) before.push_back(Snapshot(*m));
    PartialWrite(*a, stripe * geo_->stripe_data_bytes() + kChunk, 4096, 13);
    ExpectModel(*a);
    // On the members, not in the write cache: the write continues the one
    // before (it starts 52 KiB past its end), so it may be gathered.
    ASSERT_TRUE(a->Flush().ok());
    for (auto& m : members_) now.push_back(Snapshot(*m));
  }
  {
    std::vector<std::shared_ptr<Member>> torn =
        TornAndDegraded(before, now, stripe);
    AssembleOptions opts;
    opts.run = true;
    absl::StatusOr<std::unique_ptr<Array>> a =
        Array::Assemble(Handles(torn), opts);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(a.status().message(), HasSubstr("dirty"));
  }
  std::vector<std::shared_ptr<Member>> all;
  for (int s = 0; s < 4; ++s) all.push_back(FromImage(now[s], s));
  absl::StatusOr<std::unique_ptr<Array>> a =
      Array::Assemble(Handles(all), AssembleOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE((*a)->Info().ppl);
  EXPECT_FALSE((*a)->Info().clean);
  EXPECT_TRUE((*a)->Info().resyncing);
  ASSERT_TRUE((*a)->Resync().ok());
  ExpectModel(**a);
  EXPECT_EQ(testutil::Mismatches(**a), 0u);
}

// Writers keep going while the policy goes back and forth: every write
// acknowledged reads back, parity stays consistent, and the last policy
// is what the superblocks say at the next assembly.
TEST_F(PplSwitchTest, WritesDuringSwitchesAreKept) {
  Make(/*ppl=*/false);
  std::unique_ptr<Array> a = Open();
  const uint64_t region = model_.size() / 4;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::atomic<uint64_t> writes{0};
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      uint32_t seed = 1000 * (t + 1);
      // Each writer owns a quarter of the array: the model needs no lock.
      while (!stop.load() || writes.load() < 64) {
        const size_t n = 4096 * (1 + rng() % 8);
        const uint64_t off =
            t * region + (rng() % ((region - n) / 4096)) * 4096;
        const std::vector<uint8_t> w = Pattern(n, ++seed);
        if (!a->Write(w.data(), n, off).ok()) {
          failures.fetch_add(1);
          return;
        }
        std::memcpy(model_.data() + off, w.data(), n);
        writes.fetch_add(1);
      }
    });
  }
  for (int i = 0; i < 6; ++i) {
    const ConsistencyPolicy to =
        i % 2 == 0 ? ConsistencyPolicy::kPpl : ConsistencyPolicy::kResync;
    absl::Status st = a->SetConsistencyPolicy(to);
    EXPECT_TRUE(st.ok()) << i << ": " << st;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(a->SetConsistencyPolicy(ConsistencyPolicy::kPpl).ok());
  stop.store(true);
  for (auto& w : writers) w.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(writes.load(), 64u);
  ExpectModel(*a);
  EXPECT_EQ(testutil::Mismatches(*a), 0u);
  a.reset();
  a = Open();
  EXPECT_TRUE(a->Info().ppl);
  ExpectModel(*a);
}

TEST_F(PplSwitchTest, RefusesWhatMdRefuses) {
  Make(/*ppl=*/true);
  {
    std::unique_ptr<Array> a = Open();
    absl::Status st = a->SetConsistencyPolicy(ConsistencyPolicy::kPpl);
    EXPECT_EQ(st.code(), absl::StatusCode::kAlreadyExists) << st;
    st = a->SetConsistencyPolicy(ConsistencyPolicy::kBitmap);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("--grow --bitmap"));
    // A reshape is still refused with a log.
    GrowOptions g;
    g.layout = Layout::kRightSymmetric;
    st = a->Grow(std::move(g));
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(st.message(), HasSubstr("consistency-policy resync"));
  }
  {
    AssembleOptions ro;
    ro.read_only = true;
    std::unique_ptr<Array> a = *Array::Assemble(Handles(members_), ro);
    absl::Status st = a->SetConsistencyPolicy(ConsistencyPolicy::kResync);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_TRUE(SuperOf(*members_[0]).has_ppl());
  }
  // A bitmap array: md changes only between resync and ppl.
  {
    std::vector<std::shared_ptr<Member>> m = MakeMembers(4, kMemberBytes, "b");
    CreateOptions o = Options(false);
    o.bitmap = BitmapMode::kInternal;
    std::unique_ptr<Array> a = MustCreate(m, o);
    absl::Status st = a->SetConsistencyPolicy(ConsistencyPolicy::kPpl);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("bitmap"));
    st = a->SetConsistencyPolicy(ConsistencyPolicy::kResync);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_FALSE(SuperOf(*m[0]).has_ppl());
  }
  // RAID4: PPL is md's RAID5 feature.
  {
    std::vector<std::shared_ptr<Member>> m = MakeMembers(4, kMemberBytes, "f");
    CreateOptions o = Options(false);
    o.level = 4;
    o.layout = Layout::kParityLast;
    std::unique_ptr<Array> a = MustCreate(m, o);
    absl::Status st = a->SetConsistencyPolicy(ConsistencyPolicy::kPpl);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("level 5"));
  }
  // Parity not yet consistent: a replay would mark it clean.
  {
    std::vector<std::shared_ptr<Member>> m = MakeMembers(4, kMemberBytes, "r");
    CreateOptions o = Options(false);
    o.assume_clean = false;
    o.defer_resync = true;
    std::unique_ptr<Array> a = MustCreate(m, o);
    absl::Status st = a->SetConsistencyPolicy(ConsistencyPolicy::kPpl);
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
    EXPECT_THAT(st.message(), HasSubstr("resync"));
    ASSERT_TRUE(a->Resync().ok());
    EXPECT_TRUE(a->SetConsistencyPolicy(ConsistencyPolicy::kPpl).ok());
  }
  // No room between the superblock and the data for a log.
  {
    std::vector<std::shared_ptr<Member>> m = MakeMembers(4, kMemberBytes, "s");
    CreateOptions o = Options(false);
    o.data_offset_bytes = 12 * 1024;  // 24 sectors: 8 past the superblock
    std::unique_ptr<Array> a = MustCreate(m, o);
    absl::Status st = a->SetConsistencyPolicy(ConsistencyPolicy::kPpl);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("not enough space to add ppl"));
    EXPECT_FALSE(SuperOf(*m[0]).has_ppl());
    EXPECT_FALSE(a->Info().ppl);
  }
}

TEST(PplSwitch, ResyncToPplStopsAtTheBadBlockLog) {
  // mdadm's update=ppl stops the area at the bad-block log. Without a
  // bitmap, a member under 8 GiB has its log 8 + 8 sectors past the
  // superblock (choose_bm_space's 4 KiB): 8 sectors, no room for a log,
  // refused as mdadm refuses it.
  {
    std::vector<std::shared_ptr<Member>> m = MakeMembers(4, kMemberBytes, "l");
    CreateOptions o = Options(false);
    o.bad_block_log = true;
    std::unique_ptr<Array> a = MustCreate(m, o);
    ASSERT_EQ(SuperOf(*m[0]).bblog_offset, 16);
    absl::Status st = a->SetConsistencyPolicy(ConsistencyPolicy::kPpl);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(st.message(), HasSubstr("not enough space to add ppl"));
    EXPECT_THAT(st.message(), HasSubstr("bad-block log"));
    EXPECT_FALSE(SuperOf(*m[0]).has_ppl());
    EXPECT_EQ(SuperOf(*m[0]).bblog_offset, 16);
  }
  // Created with ppl, the log follows md's 1 MiB area: back to resync and
  // to ppl again gets the whole area, up to the log.
  {
    std::vector<std::shared_ptr<Member>> m = MakeMembers(4, kMemberBytes, "q");
    CreateOptions o = Options(true);
    o.bad_block_log = true;
    std::unique_ptr<Array> a = MustCreate(m, o);
    ASSERT_EQ(SuperOf(*m[0]).bblog_offset, 2056);
    ASSERT_TRUE(a->SetConsistencyPolicy(ConsistencyPolicy::kResync).ok());
    ASSERT_TRUE(a->SetConsistencyPolicy(ConsistencyPolicy::kPpl).ok());
    for (auto& x : m) {
      SCOPED_TRACE(x->Name());
      const Superblock sb = SuperOf(*x);
      EXPECT_EQ(sb.ppl_offset(), 8);
      EXPECT_EQ(sb.ppl_size(), 2048);
      EXPECT_EQ(sb.bblog_offset, 2056);
      EXPECT_EQ(sb.bblog_size, 8);
    }
  }
}

TEST(ConsistencyPolicyName, RoundTripsAndRefusesOtherWords) {
  for (ConsistencyPolicy p :
       {ConsistencyPolicy::kResync, ConsistencyPolicy::kBitmap,
        ConsistencyPolicy::kPpl}) {
    absl::StatusOr<ConsistencyPolicy> back =
        ParseConsistencyPolicy(ConsistencyPolicyName(p));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, p);
  }
  absl::StatusOr<ConsistencyPolicy> bad = ParseConsistencyPolicy("journal");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"journal\""));
}

TEST(ControlGrowPolicy, ParsesAloneAndRefusesCombinations) {
  absl::StatusOr<control::Request> r =
      control::ParseRequest(R"({"cmd":"grow","consistency_policy":"ppl"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->cmd, control::Cmd::kGrow);
  EXPECT_EQ(r->consistency_policy, ConsistencyPolicy::kPpl);
  std::string line = control::RequestLine(*r);
  line.pop_back();  // the newline
  absl::StatusOr<control::Request> again = control::ParseRequest(line);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *r);

  r = control::ParseRequest(
      R"({"cmd":"grow","consistency_policy":"ppl","level":4})");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cannot be combined"));
  r = control::ParseRequest(R"({"cmd":"grow","consistency_policy":"journal"})");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("\"journal\""));
  r = control::ParseRequest(R"({"cmd":"grow","consistency_policy":5})");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("must be a string"));
}

}  // namespace
}  // namespace uraid
