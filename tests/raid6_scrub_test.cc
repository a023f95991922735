// SPDX-License-Identifier: MIT
// RAID6 check and repair that name the disk (issue 33, point 5), through
// uraid::Array over memory members: chunks corrupted behind the array's
// back (one data chunk at every data index, P, Q, and two data chunks in
// one stripe), then check must name exactly the corrupted member where one
// chunk is bad and nothing where two are, and repair must restore every
// byte of the located chunks and fall back to recomputing P and Q for the
// rest. Layouts where the Q slot differs from the data index (asymmetric,
// DDF) are among them: a slot-order mistake names the wrong disk there.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <variant>

#include "absl/strings/str_format.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/events.h"

namespace uraid {
namespace {

constexpr uint64_t kOffset = 1 << 20;

using Shared = std::shared_ptr<Member>;

// A RAID6 array over `disks` fresh memory members, P and Q made by the
// initial resync, filled with a pattern and flushed.
struct Fixture {
  std::vector<Shared> m;
  std::unique_ptr<Array> a;
  std::vector<uint8_t> data;
  testutil::LogLines log;  // for the end-of-job messages

  Fixture(Layout layout, int disks, uint64_t chunk, uint64_t stripes) {
    m = testutil::MakeMembers(disks, kOffset + stripes * chunk);
    CreateOptions o;
    o.level = 6;
    o.layout = layout;
    o.chunk_bytes = chunk;
    o.data_offset_bytes = kOffset;
    o.member_bytes = stripes * chunk;
    o.cache.bytes = 0;
    a = testutil::MustCreate(m, o, log.logger());
    if (a == nullptr) return;
    EXPECT_TRUE(a->Resync().ok());
    data = testutil::Pattern(a->size(), 33);
    EXPECT_TRUE(a->Write(data.data(), data.size(), 0).ok());
    EXPECT_TRUE(a->Flush().ok());
  }
  const Geometry& geo() const { return a->geometry(); }
  uint64_t chunk() const { return geo().chunk_bytes(); }

  // XORs a non-zero byte into each of `len` bytes at `off` of the chunk
  // that member `disk` holds in `stripe`.
  void Corrupt(int disk, uint64_t stripe, uint64_t off, uint64_t len,
               std::mt19937_64& rng) {
    std::vector<uint8_t> b(len);
    const uint64_t at = kOffset + stripe * chunk() + off;
    ASSERT_TRUE(m[disk]->Read(b.data(), len, at).ok());
    for (auto& x : b) x ^= static_cast<uint8_t>(1 + rng() % 255);
    ASSERT_TRUE(m[disk]->Write(b.data(), len, at).ok());
  }
  std::vector<uint8_t> Chunk(int disk, uint64_t stripe) {
    std::vector<uint8_t> b(chunk());
    EXPECT_TRUE(
        m[disk]->Read(b.data(), b.size(), kOffset + stripe * chunk()).ok());
    return b;
  }
  // Every chunk of every member, by (disk, stripe).
  std::map<std::pair<int, uint64_t>, std::vector<uint8_t>> Chunks() {
    std::map<std::pair<int, uint64_t>, std::vector<uint8_t>> out;
    for (int d = 0; d < geo().raid_disks(); ++d) {
      for (uint64_t s = 0; s < geo().stripe_count(); ++s) {
        out[{d, s}] = Chunk(d, s);
      }
    }
    return out;
  }
  JobInfo RunScrub(bool repair) {
    EXPECT_TRUE(a->StartScrub(repair).ok());
    EXPECT_TRUE(a->WaitForJob().ok());
    return a->Info().last_job;
  }
};

// What a scrub should report: the mismatched stripes, and of them those
// whose one bad chunk is on a known disk.
struct Expected {
  std::vector<uint64_t> stripes;
  std::vector<uint64_t> located;
  std::vector<uint64_t> slots;
};

void ExpectReport(const JobInfo& j, const Expected& want) {
  EXPECT_EQ(j.mismatches, want.stripes.size());
  EXPECT_EQ(j.first_mismatches, want.stripes);
  EXPECT_EQ(j.located_mismatches, want.located.size());
  EXPECT_EQ(j.first_located, want.located);
  EXPECT_EQ(j.first_located_slots, want.slots);
}

class Raid6Scrub : public testing::TestWithParam<Layout> {};

TEST_P(Raid6Scrub, CheckNamesTheBadChunkAndRepairRestoresIt) {
  constexpr uint64_t kChunk = 16 * 1024;
  std::mt19937_64 rng(static_cast<int>(GetParam()) + 33);
  for (const int disks : {4, 6, 7}) {
    SCOPED_TRACE(testing::Message() << "disks " << disks);
    Fixture f(GetParam(), disks, kChunk, 32);
    ASSERT_NE(f.a, nullptr);
    const Geometry& geo = f.geo();
    auto good = f.Chunks();
    Expected want;
    uint64_t s = 1;
    // Returns a random piece of a chunk: one byte, a few, or all of it.
    auto piece = [&](uint64_t* off) {
      const uint64_t lens[] = {1, 1 + rng() % 4096, kChunk};
      const uint64_t len = lens[rng() % 3];
      *off = rng() % (kChunk - len + 1);
      return len;
    };
    // One data chunk at each data index, then P, then Q, each in its own
    // stripe.
    for (int k = 0; k < geo.data_disks() + 2; ++k, s += 2) {
      const int disk = k < geo.data_disks()    ? geo.DataDisk(s, k)
                       : k == geo.data_disks() ? geo.ParityDisk(s)
                                               : geo.QDisk(s);
      uint64_t off;
      const uint64_t len = piece(&off);
      f.Corrupt(disk, s, off, len, rng);
      want.stripes.push_back(s);
      want.located.push_back(s);
      want.slots.push_back(disk);
    }
    // Two data chunks of one stripe: nothing can be named.
    const uint64_t two = s;
    const int d1 = geo.DataDisk(two, 0), d2 = geo.DataDisk(two, 1);
    f.Corrupt(d1, two, 0, kChunk, rng);
    f.Corrupt(d2, two, 100, 3000, rng);
    want.stripes.push_back(two);
    auto bad = f.Chunks();

    SCOPED_TRACE("check");
    ExpectReport(f.RunScrub(/*repair=*/false), want);
    absl::StatusOr<JobInfo> offline = f.a->CheckParityReport();
    ASSERT_TRUE(offline.ok()) << offline.status();
    ExpectReport(*offline, want);
    EXPECT_TRUE(f.Chunks() == bad) << "check wrote something";
    EXPECT_TRUE(f.log.Has(absl::StrFormat(
        "P and Q name the bad chunk in %d of them: stripe %d slot %d (m%d)",
        want.located.size(), want.located[0], want.slots[0], want.slots[0])));

    SCOPED_TRACE("repair");
    ExpectReport(f.RunScrub(/*repair=*/true), want);
    EXPECT_TRUE(
        f.log.Has("(that chunk rewritten; P and Q recomputed in the "
                  "other 1)"));
    // Every located chunk is back byte for byte; in the stripe with two,
    // the data is left as it was and P and Q were recomputed from it.
    const int pd = geo.ParityDisk(two), qd = geo.QDisk(two);
    for (const auto& [where, bytes] : f.Chunks()) {
      const auto& [disk, stripe] = where;
      if (stripe != two) {
        EXPECT_TRUE(bytes == good[where])
            << "disk " << disk << " stripe " << stripe << " not restored";
      } else if (disk != pd && disk != qd) {
        EXPECT_TRUE(bytes == bad[where]) << "disk " << disk << " changed";
      }
    }
    EXPECT_EQ(testutil::Mismatches(*f.a), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    SlotOrders, Raid6Scrub,
    testing::Values(Layout::kLeftSymmetric, Layout::kLeftAsymmetric,
                    Layout::kRightAsymmetric, Layout::kParityFirst,
                    Layout::kDdfZeroRestart, Layout::kDdfNRestart,
                    Layout::kDdfNContinue, Layout::kParityFirst6));

// A chunk larger than the scan's 1 MiB window: the verdict is the whole
// chunk's. One disk bad in both windows is named; two disks, one in each
// window, are not (and repair falls back); P bad in the second window only
// is named.
TEST(Raid6ScrubWindows, TheVerdictCoversTheWholeChunk) {
  constexpr uint64_t kChunk = 2 << 20;
  constexpr uint64_t kHalf = kChunk / 2;
  std::mt19937_64 rng(7);
  Fixture f(Layout::kLeftAsymmetric, 5, kChunk, 4);
  ASSERT_NE(f.a, nullptr);
  const Geometry& geo = f.geo();
  auto good = f.Chunks();
  const int d0 = geo.DataDisk(0, 2);
  f.Corrupt(d0, 0, 10, 100, rng);
  f.Corrupt(d0, 0, kHalf + 5, 5000, rng);
  f.Corrupt(geo.DataDisk(1, 0), 1, 0, 64, rng);
  f.Corrupt(geo.DataDisk(1, 1), 1, kHalf, 64, rng);
  f.Corrupt(geo.ParityDisk(3), 3, kHalf + 7, 9, rng);
  auto bad = f.Chunks();
  // The end events carry the located slots too.
  std::mutex mu;
  std::vector<Event> ends;
  const uint64_t id = f.a->AddEventListener([&](const Event& e) {
    if (e.name != "CheckFinished" && e.name != "RepairFinished") return;
    std::lock_guard<std::mutex> lock(mu);
    ends.push_back(e);
  });
  const Expected want{
      {0, 1, 3},
      {0, 3},
      {static_cast<uint64_t>(d0), static_cast<uint64_t>(geo.ParityDisk(3))}};
  ExpectReport(f.RunScrub(false), want);
  ExpectReport(f.RunScrub(true), want);
  f.a->RemoveEventListener(id);
  ASSERT_EQ(ends.size(), 2u);
  for (const Event& e : ends) {
    SCOPED_TRACE(e.name);
    const Event::Value* n = e.Find("located_mismatches");
    const Event::Value* at = e.Find("first_located");
    const Event::Value* slots = e.Find("first_located_slots");
    ASSERT_TRUE(n != nullptr && at != nullptr && slots != nullptr);
    EXPECT_EQ(std::get<int64_t>(*n), 2);
    EXPECT_EQ(std::get<std::vector<uint64_t>>(*at), want.located);
    EXPECT_EQ(std::get<std::vector<uint64_t>>(*slots), want.slots);
  }
  const int pd = geo.ParityDisk(1), qd = geo.QDisk(1);
  for (const auto& [where, bytes] : f.Chunks()) {
    const auto& [disk, stripe] = where;
    if (stripe != 1) {
      EXPECT_TRUE(bytes == good[where])
          << "disk " << disk << " stripe " << stripe << " not restored";
    } else if (disk != pd && disk != qd) {
      EXPECT_TRUE(bytes == bad[where]) << "disk " << disk << " changed";
    }
  }
  EXPECT_EQ(testutil::Mismatches(*f.a), 0u);
}

// With a member missing, P and Q cannot locate: the mismatch is counted,
// nothing is named, and repair recomputes (md's repair) as before.
TEST(Raid6ScrubDegraded, NamesNothingWithAMemberMissing) {
  constexpr uint64_t kChunk = 16 * 1024;
  std::mt19937_64 rng(8);
  Fixture f(Layout::kLeftSymmetric, 6, kChunk, 16);
  ASSERT_NE(f.a, nullptr);
  const Geometry& geo = f.geo();
  ASSERT_TRUE(f.a->FailSlot(geo.QDisk(5)).ok());
  f.Corrupt(geo.DataDisk(5, 1), 5, 0, 512, rng);
  const Expected want{{5}, {}, {}};
  ExpectReport(f.RunScrub(false), want);
  ExpectReport(f.RunScrub(true), want);
  EXPECT_EQ(testutil::Mismatches(*f.a), 0u);
}

}  // namespace
}  // namespace uraid
