// SPDX-License-Identifier: MIT
// Tests for the partial parity log on a live array (meta/ppl_log.h and its
// hooks in the write path and the assembly), on in-memory members: what a
// partial write leaves in the parity member's log, and the write hole it
// closes: a crash between a stripe's data and parity writes, then the loss
// of a member that nobody was writing, assembled degraded without force,
// must read back the lost member's data exactly.

#include "meta/ppl_log.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "format/ppl_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plan/stripe_plan.h"
#include "test_util.h"
#include "uraid/array.h"

namespace uraid {
namespace {

using testutil::FromImage;
using testutil::Handles;
using testutil::Image;
using testutil::MakeMembers;
using testutil::MustCreate;
using testutil::Pattern;
using testutil::Snapshot;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kMemberBytes = 3 << 20;  // 2 MiB metadata + 1 MiB data
constexpr uint64_t kPplArea = (8 + 8) * 512;

CreateOptions PplOptions() {
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.bitmap = BitmapMode::kNone;
  o.ppl = true;
  o.assume_clean = true;  // zeroed members are consistent
  return o;
}

class PplArrayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    members_ = MakeMembers(4, kMemberBytes);
    std::unique_ptr<Array> a = MustCreate(members_, PplOptions());
    ASSERT_NE(a, nullptr);
    info_ = a->Info();
    ASSERT_TRUE(info_->ppl);
    data_ = Pattern(info_->geometry.array_bytes(), 7);
    // Full stripes: each logged without partial parity.
    ASSERT_TRUE(a->Write(data_.data(), data_.size(), 0).ok());
  }

  // The first `bytes` of slot `p`'s PPL area into *area, and its header.
  absl::StatusOr<PplHeader> ReadLog(int p, size_t bytes,
                                    std::vector<uint8_t>* area) {
    area->resize(bytes);
    if (absl::Status st = members_[p]->Read(area->data(), bytes, kPplArea);
        !st.ok()) {
      return st;
    }
    return DecodePplHeader(*area, PplSignature(info_->uuid));
  }

  std::vector<std::shared_ptr<Member>> members_;
  std::optional<ArrayInfo> info_;
  std::vector<uint8_t> data_;
};

TEST_F(PplArrayTest, PartialWriteLeavesItsPartialParityInTheLog) {
  const Geometry& g = info_->geometry;
  std::unique_ptr<Array> a =
      *Array::Assemble(Handles(members_), AssembleOptions{});
  const uint64_t stripe = 5;
  // 4 KiB of data index 1, rows 8K..12K.
  const uint64_t off = stripe * g.stripe_data_bytes() + kChunk + 8192;
  const std::vector<uint8_t> w = Pattern(4096, 9);
  ASSERT_TRUE(a->Write(w.data(), w.size(), off).ok());
  const int p = g.ParityDisk(stripe);
  std::vector<uint8_t> area;
  absl::StatusOr<PplHeader> h = ReadLog(p, kPplHeaderBytes + 4096, &area);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->entries.size(), 1u);
  const PplEntry& e = h->entries[0];
  EXPECT_EQ(e.data_sector, off / 512);
  EXPECT_EQ(e.pp_size, 4096u);
  EXPECT_EQ(e.data_size, 4096u);
  EXPECT_EQ(e.parity_disk, static_cast<uint32_t>(p));
  // The XOR of the rows the write left alone: data indexes 0 and 2.
  std::vector<uint8_t> want(4096, 0);
  for (int k : {0, 2}) {
    const uint64_t src = stripe * g.stripe_data_bytes() + k * kChunk + 8192;
    for (int i = 0; i < 4096; ++i) want[i] ^= data_[src + i];
  }
  EXPECT_TRUE(std::memcmp(area.data() + kPplHeaderBytes, want.data(), 4096) ==
              0);
  EXPECT_EQ(e.checksum, Crc32c(want));
}

// The log header of a read-modify-write, which read the parity member just
// before, is a Member::Rewrite there (a file member skips its size probe,
// as for the data and parity written back); a write that did not read the
// parity member (RCW) writes its header with a checked Write.
TEST_F(PplArrayTest, AReadModifyWritesHeaderIsARewriteOnTheParityMember) {
  const Geometry& g = info_->geometry;
  std::vector<std::shared_ptr<FaultyMember>> f;
  std::vector<std::shared_ptr<Member>> m;
  for (const auto& b : members_) {
    f.push_back(std::make_shared<FaultyMember>(b));
    m.push_back(f.back());
  }
  AssembleOptions o;
  o.cache.bytes = 0;  // write-through: each write is planned on its own
  std::unique_ptr<Array> a = *Array::Assemble(Handles(m), o);
  const uint64_t stripe = 5;
  const int p = g.ParityDisk(stripe);
  const uint64_t base = stripe * g.stripe_data_bytes();
  const std::vector<uint8_t> w = Pattern(2 * kChunk, 9);
  // The first write also marks the array active on every member.
  ASSERT_TRUE(a->Write(w.data(), 4096, 0).ok());
  FaultCounters before = f[p]->counters();
  ASSERT_TRUE(a->Write(w.data(), 4096, base + kChunk + 8192).ok());
  FaultCounters after = f[p]->counters();
  EXPECT_EQ(a->Info().counters.rmw_writes, 2u);
  EXPECT_EQ(after.writes - before.writes, 2u) << "header and parity";
  EXPECT_EQ(after.rewrites - before.rewrites, 2u) << "both over a read";
  before = after;
  ASSERT_TRUE(a->Write(w.data(), 2 * kChunk, base).ok());
  after = f[p]->counters();
  EXPECT_EQ(a->Info().counters.rcw_writes, 1u);
  EXPECT_EQ(after.writes - before.writes, 2u) << "header and parity";
  EXPECT_EQ(after.rewrites - before.rewrites, 0u) << "parity not read";
  std::vector<uint8_t> area;
  absl::StatusOr<PplHeader> h = ReadLog(p, kPplHeaderBytes, &area);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->entries.size(), 1u);
  EXPECT_EQ(h->entries[0].data_sector, base / 512);
}

// A discard drops every chunk of its stripes, parity included; md logs it
// as a full-stripe write (an entry without partial parity) so that a crash
// in the middle, which leaves some chunks zero and others not, is replayed
// to consistent parity instead of being left wrong on an array that does
// not resync.
TEST_F(PplArrayTest, TrimIsLoggedAsAFullStripeWrite) {
  const Geometry& g = info_->geometry;
  std::unique_ptr<Array> a =
      *Array::Assemble(Handles(members_), AssembleOptions{});
  const uint64_t stripe = 6;
  const uint64_t sd = g.stripe_data_bytes();
  ASSERT_TRUE(a->Trim(sd, stripe * sd).ok());
  const int p = g.ParityDisk(stripe);
  std::vector<uint8_t> area;
  absl::StatusOr<PplHeader> h = ReadLog(p, kPplHeaderBytes, &area);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->entries.size(), 1u);
  const PplEntry& e = h->entries[0];
  EXPECT_EQ(e.data_sector, stripe * sd / 512);
  EXPECT_EQ(e.pp_size, 0u);
  EXPECT_EQ(e.data_size, sd);
  EXPECT_EQ(e.parity_disk, static_cast<uint32_t>(p));
  // The stripe reads as zeros, its neighbours as written.
  std::vector<uint8_t> got(3 * sd);
  ASSERT_TRUE(a->Read(got.data(), got.size(), (stripe - 1) * sd).ok());
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + sd,
                         data_.begin() + (stripe - 1) * sd));
  EXPECT_TRUE(std::all_of(got.begin() + sd, got.begin() + 2 * sd,
                          [](uint8_t b) { return b == 0; }));
  EXPECT_TRUE(std::equal(got.begin() + 2 * sd, got.end(),
                         data_.begin() + (stripe + 1) * sd));
}

// A stripe gathered in the write cache from two pieces goes out, when the
// second completes it, as one full-stripe write: logged as md logs a whole
// stripe (one entry, no partial parity; the log reads none of its data),
// and on the members as written.
TEST_F(PplArrayTest, AStripeCompletedInTheCacheIsLoggedAsAFullStripeWrite) {
  const Geometry& g = info_->geometry;
  AssembleOptions o;
  o.clock = std::make_shared<testutil::StepClock>();  // nothing ages out
  o.cache.bypass_flush_interval_ms = 0;
  std::unique_ptr<Array> a = *Array::Assemble(Handles(members_), o);
  const uint64_t stripe = 4;
  const uint64_t sd = g.stripe_data_bytes();
  const std::vector<uint8_t> w = Pattern(sd, 11);
  const uint64_t split = kChunk + kChunk / 2;  // inside data index 1
  ASSERT_TRUE(a->Write(w.data(), split, stripe * sd).ok());
  ASSERT_TRUE(a->Write(w.data() + split, sd - split, stripe * sd + split).ok());
  const Counters c = a->Info().counters;
  EXPECT_EQ(c.cached_writes, 2u);
  EXPECT_EQ(c.full_stripe_writes, 1u);
  EXPECT_EQ(c.rmw_writes + c.rcw_writes, 0u);
  const int p = g.ParityDisk(stripe);
  std::vector<uint8_t> area;
  absl::StatusOr<PplHeader> h = ReadLog(p, kPplHeaderBytes, &area);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->entries.size(), 1u);
  EXPECT_EQ(h->entries[0].data_sector, stripe * sd / 512);
  EXPECT_EQ(h->entries[0].pp_size, 0u);
  EXPECT_EQ(h->entries[0].data_size, sd);
  std::vector<uint8_t> got(sd);
  ASSERT_TRUE(a->Read(got.data(), sd, stripe * sd).ok());
  EXPECT_EQ(got, w);
  // Parity on its member is the XOR of the data written.
  std::vector<uint8_t> parity(kChunk), want(kChunk, 0);
  const uint64_t data_offset = info_->data_offset_bytes;
  ASSERT_TRUE(members_[p]
                  ->Read(parity.data(), kChunk, data_offset + stripe * kChunk)
                  .ok());
  for (int k = 0; k < g.data_disks(); ++k) {
    for (uint64_t i = 0; i < kChunk; ++i) want[i] ^= w[k * kChunk + i];
  }
  EXPECT_EQ(parity, want);
}

// The write hole: the data of a partial write reached its member, the
// parity did not, and then a member nobody wrote is lost.
TEST_F(PplArrayTest, WriteHoleClosedDegradedWithoutForce) {
  const Geometry& g = info_->geometry;
  const uint64_t stripe = 3;
  const int p = g.ParityDisk(stripe);
  const int lost = g.DataDisk(stripe, 0);  // not written
  std::vector<Image> old, now;
  for (auto& m : members_) old.push_back(Snapshot(*m));
  {
    std::unique_ptr<Array> a =
        *Array::Assemble(Handles(members_), AssembleOptions{});
    // Data index 1, rows 0..16K, and index 2, rows 0..4K: two entries.
    const uint64_t off = stripe * g.stripe_data_bytes() + kChunk;
    const std::vector<uint8_t> w = Pattern(kChunk + 4096, 11);
    ASSERT_TRUE(a->Write(w.data(), w.size(), off).ok());
    for (auto& m : members_) now.push_back(Snapshot(*m));  // still dirty
  }
  // The crash: parity rows of the stripe as before the write; the log and
  // the data as after it.
  Image torn_parity = now[p];
  const uint64_t prow = info_->data_offset_bytes + stripe * kChunk;
  std::memcpy(torn_parity.data() + prow, old[p].data() + prow, kChunk);
  // Without the log, the lost member's rows would rebuild wrong.
  bool stale = false;
  for (uint64_t i = 0; i < kChunk && !stale; ++i) {
    uint8_t x = torn_parity[prow + i];
    for (int k = 1; k < g.data_disks(); ++k) {
      x ^= now[g.DataDisk(stripe, k)][prow + i];
    }
    stale = x != old[lost][prow + i];
  }
  ASSERT_TRUE(stale) << "the crash left nothing to protect";

  std::vector<std::shared_ptr<Member>> torn;
  for (int s = 0; s < 4; ++s) {
    if (s == lost) continue;
    torn.push_back(FromImage(s == p ? torn_parity : now[s], s));
  }
  AssembleOptions opts;
  opts.run = true;  // the lost slot is not given
  absl::StatusOr<std::unique_ptr<Array>> a =
      Array::Assemble(Handles(torn), opts);
  ASSERT_TRUE(a.ok()) << a.status();
  const ArrayInfo info = (*a)->Info();
  EXPECT_TRUE(info.degraded);
  EXPECT_TRUE(info.clean);
  EXPECT_FALSE(info.resyncing);
  // Every byte of the lost member's chunk in this stripe reads back.
  std::vector<uint8_t> got(kChunk);
  const uint64_t at = stripe * g.stripe_data_bytes();
  ASSERT_TRUE((*a)->Read(got.data(), got.size(), at).ok());
  EXPECT_TRUE(std::memcmp(got.data(), data_.data() + at, kChunk) == 0);
}

// The hole a trim left before it was logged: a crash in the middle of a
// trim zeroed one chunk of the stripe and none of the others, parity
// included. A PPL array does not resync; unless the replay fixes that
// stripe's parity, a later read-modify-write there carries the error
// into the parity of data written after the crash, and the loss of a
// member then rebuilds it wrong.
TEST_F(PplArrayTest, TrimTornByACrashIsReplayedBeforeLaterWrites) {
  const Geometry& g = info_->geometry;
  const uint64_t stripe = 4;
  const uint64_t sd = g.stripe_data_bytes();
  const int zeroed = g.DataDisk(stripe, 0);  // the one chunk the trim hit
  const int lost = g.DataDisk(stripe, 2);    // lost after the crash
  std::vector<Image> old, now;
  for (auto& m : members_) old.push_back(Snapshot(*m));
  {
    std::unique_ptr<Array> a =
        *Array::Assemble(Handles(members_), AssembleOptions{});
    ASSERT_TRUE(a->Trim(sd, stripe * sd).ok());
    for (auto& m : members_) now.push_back(Snapshot(*m));  // still dirty
  }
  // The crash: every member's metadata (the log included) as after the
  // trim, the stripe's chunks as before it except the zeroed one.
  const uint64_t row = info_->data_offset_bytes + stripe * kChunk;
  std::vector<std::shared_ptr<Member>> torn;
  for (int s = 0; s < 4; ++s) {
    Image im = now[s];
    if (s != zeroed) std::memcpy(im.data() + row, old[s].data() + row, kChunk);
    torn.push_back(FromImage(im, s));
  }
  // Assembled whole: the replay recomputes the stripe's parity from the
  // data as the crash left it. Then a partial write into data index 1
  // (read-modify-write: it folds the parity on disk forward).
  const uint64_t off = stripe * sd + kChunk + 8192;
  const std::vector<uint8_t> w = Pattern(4096, 13);
  {
    absl::StatusOr<std::unique_ptr<Array>> a =
        Array::Assemble(Handles(torn), AssembleOptions{});
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_FALSE((*a)->Info().resyncing);
    ASSERT_TRUE((*a)->Write(w.data(), w.size(), off).ok());
  }
  // The member of data index 2 is lost: its chunk, which the trim never
  // reached, rebuilds from the others.
  std::vector<std::shared_ptr<Member>> survivors;
  for (int s = 0; s < 4; ++s) {
    if (s != lost) survivors.push_back(torn[s]);
  }
  AssembleOptions opts;
  opts.run = true;
  absl::StatusOr<std::unique_ptr<Array>> a =
      Array::Assemble(Handles(survivors), opts);
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<uint8_t> got(kChunk);
  const uint64_t at = stripe * sd + 2 * kChunk;
  ASSERT_TRUE((*a)->Read(got.data(), got.size(), at).ok());
  EXPECT_TRUE(std::memcmp(got.data(), data_.data() + at, kChunk) == 0)
      << "data index 2 of stripe " << stripe << " rebuilt wrong";
  ASSERT_TRUE((*a)->Read(got.data(), 4096, off).ok());
  EXPECT_TRUE(std::memcmp(got.data(), w.data(), 4096) == 0);
}

TEST_F(PplArrayTest, DirtyArrayReplaysAndNeedsNoResync) {
  const Geometry& g = info_->geometry;
  const uint64_t stripe = 9;
  const int p = g.ParityDisk(stripe);
  std::vector<Image> old, now;
  for (auto& m : members_) old.push_back(Snapshot(*m));
  {
    std::unique_ptr<Array> a =
        *Array::Assemble(Handles(members_), AssembleOptions{});
    const std::vector<uint8_t> w = Pattern(8192, 13);
    ASSERT_TRUE(
        a->Write(w.data(), w.size(), stripe * g.stripe_data_bytes() + 4096)
            .ok());
    for (auto& m : members_) now.push_back(Snapshot(*m));
  }
  const uint64_t prow = info_->data_offset_bytes + stripe * kChunk;
  std::memcpy(now[p].data() + prow, old[p].data() + prow, kChunk);
  std::vector<std::shared_ptr<Member>> torn;
  for (int s = 0; s < 4; ++s) torn.push_back(FromImage(now[s], s));
  absl::StatusOr<std::unique_ptr<Array>> a =
      Array::Assemble(Handles(torn), AssembleOptions{});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE((*a)->Info().clean);
  EXPECT_FALSE((*a)->Info().resyncing);
  EXPECT_EQ(testutil::Mismatches(**a), 0u);
}

// A log md would not trust (corrupt header, foreign signature, an entry
// whose partial parity fails its CRC) is not replayed: the array is left
// dirty and resyncs, as md does on a mismatch.
TEST_F(PplArrayTest, UntrustedLogsAreNotReplayedAndTheArrayResyncs) {
  const Geometry& g = info_->geometry;
  const uint64_t stripe = 2;
  const int p = g.ParityDisk(stripe);
  std::vector<Image> now;
  {
    std::unique_ptr<Array> a =
        *Array::Assemble(Handles(members_), AssembleOptions{});
    // Not at a stripe's start, which the stripe cache would gather.
    const std::vector<uint8_t> w = Pattern(4096, 17);
    ASSERT_TRUE(
        a->Write(w.data(), w.size(), stripe * g.stripe_data_bytes() + 8192)
            .ok());
    for (auto& m : members_) now.push_back(Snapshot(*m));
  }
  struct Case {
    const char* what;
    size_t offset;  // from the start of the PPL area
  };
  const Case cases[] = {
      {"header byte (checksum)", 600},
      {"signature (foreign log)", 512},
      {"partial parity (entry checksum)", kPplHeaderBytes + 100},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<Image> bad = now;
    bad[p][kPplArea + c.offset] ^= 0x40;
    if (c.offset == 512) {
      // A valid header of another array: re-encode with its signature.
      std::vector<uint8_t> hdr(bad[p].begin() + kPplArea,
                               bad[p].begin() + kPplArea + kPplHeaderBytes);
      hdr[512] ^= 0x40;  // undo, then decode as ours and re-sign
      absl::StatusOr<PplHeader> h =
          DecodePplHeader(hdr, PplSignature(info_->uuid));
      ASSERT_TRUE(h.ok()) << h.status();
      h->signature ^= 1;
      const std::vector<uint8_t> foreign = EncodePplHeader(*h);
      std::copy(foreign.begin(), foreign.end(), bad[p].begin() + kPplArea);
    }
    std::vector<std::shared_ptr<Member>> torn;
    for (int s = 0; s < 4; ++s) torn.push_back(FromImage(bad[s], s));
    std::vector<std::string> lines;
    absl::StatusOr<std::unique_ptr<Array>> a =
        Array::Assemble(Handles(torn), AssembleOptions{},
                        [&](const std::string& l) { lines.push_back(l); });
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_FALSE((*a)->Info().clean);
    EXPECT_TRUE((*a)->Info().resyncing);
    std::string all;
    for (const std::string& l : lines) all += l + "\n";
    EXPECT_THAT(all, ::testing::HasSubstr("1 mismatches"));
  }
}

// A stripe alone in its log batch writes its data and parity with FUA, so
// the next batch has nothing of it to flush: one durable write per member,
// as md's flush of the batch would be, with no flush on the log's path.
// (A batch of several stripes leaves its members to the next batch's
// flush: PplBatchTest below.)
TEST_F(PplArrayTest, AStripeLoggedAloneWritesThroughWithFua) {
  const Geometry& g = info_->geometry;
  std::unique_ptr<Array> a =
      *Array::Assemble(Handles(members_), AssembleOptions{});
  const std::vector<uint8_t> w = Pattern(4096, 5);
  const uint64_t off = 2 * g.stripe_data_bytes() + 4096;
  auto counters = [&] { return a->Info().counters; };
  // md's safemode timer (a clean mark 200 ms after the last write) flushes
  // every member too: an attempt it fell into (the superblocks' events
  // moved) says nothing, and is made again.
  for (int attempt = 0;; ++attempt) {
    ASSERT_LT(attempt, 5) << "the safemode timer fell into every attempt";
    ASSERT_TRUE(a->Write(w.data(), w.size(), off).ok());
    const uint64_t events = a->Info().events;
    const Counters before = counters();
    // Same stripe, same parity slot, nothing else writing: logged alone.
    ASSERT_TRUE(a->Write(w.data(), w.size(), off).ok());
    const Counters after = counters();
    if (a->Info().events != events) continue;
    EXPECT_EQ(after.member_fua_writes - before.member_fua_writes, 2u)
        << "data and parity, with FUA";
    EXPECT_EQ(after.member_writes - before.member_writes, 2u);
    EXPECT_EQ(after.member_flushes, before.member_flushes)
        << "the first write left nothing to flush";
    break;
  }
  std::vector<uint8_t> got(w.size());
  ASSERT_TRUE(a->Read(got.data(), got.size(), off).ok());
  EXPECT_EQ(got, w);
}

// Stripes logged straight through a PplLog: each writes 4 KiB of data
// index 0, so its log is one entry with 4 KiB of partial parity.
class PplBatchTest : public PplArrayTest {
 protected:
  void SetUp() override {
    PplArrayTest::SetUp();
    geo_.emplace(info_->geometry);
    sb_ = testutil::SuperOf(*members_[0]);
    absl::StatusOr<std::shared_ptr<PplLog>> log = PplLog::Make(*geo_, sb_);
    ASSERT_TRUE(log.ok()) << log.status();
    log_ = *log;
    parity_ = std::make_unique<FaultyMember>(members_[0]);
  }

  // The k-th stripe whose parity is on slot 0.
  uint64_t StripeOnSlot0(int k) const {
    int seen = 0;
    for (uint64_t s = 0;; ++s) {
      if (geo_->ParityDisk(s) == 0 && seen++ == k) return s;
    }
  }

  struct Logged {
    absl::StatusOr<PplLog::Hold> hold;
    PplStripeLog want;  // what this stripe's entries and parity must be
  };

  Logged Log(uint64_t stripe, uint8_t seed, bool parity_read = false) {
    const WritePlan plan = PlanWrite(*geo_, stripe, 0, 4096, StripeHealth{});
    std::vector<uint8_t> scratch(plan.scratch_bytes, seed);
    const std::vector<uint8_t> client = Pattern(4096, seed);
    ComputeWrite(plan, scratch.data(), client.data());
    Logged out{absl::UnknownError("not logged"), {}};
    out.want = *BuildPplStripeLog(*geo_, stripe, 0, 4096, plan, scratch.data(),
                                  client.data());
    out.hold = log_->LogStripe(stripe, 0, 4096, plan, scratch.data(),
                               client.data(), *parity_, parity_read,
                               [this](const std::vector<bool>& which) {
                                 std::lock_guard<std::mutex> lock(flush_mu_);
                                 flushes_.push_back(which);
                                 return flush_status_;
                               });
    return out;
  }

  absl::StatusOr<PplHeader> HeaderOnSlot0(std::vector<uint8_t>* area) {
    area->resize(kPplHeaderBytes + 8 * 4096);
    EXPECT_TRUE(members_[0]->Read(area->data(), area->size(), kPplArea).ok());
    return DecodePplHeader(*area, PplSignature(info_->uuid));
  }

  // Waits (up to 10 s) until `n` stripes wait for slot 0's next batch.
  bool WaitForQueue(size_t n) {
    for (int i = 0; i < 10000 && log_->Waiting(0) < n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return log_->Waiting(0) == n;
  }

  // Writes the parity member (slot 0) has been asked for, failed or not.
  int parity_writes() const {
    return static_cast<int>(parity_->counters().writes);
  }

  std::optional<Geometry> geo_;  // Geometry has no default
  Superblock sb_;
  std::shared_ptr<PplLog> log_;
  std::unique_ptr<FaultyMember> parity_;  // counts writes, fails them
  std::mutex flush_mu_;
  std::vector<std::vector<bool>> flushes_;  // each flush's slots
  absl::Status flush_status_;
};

TEST_F(PplBatchTest, StripesWaitingOnAHeldSlotGoOutInOneHeader) {
  Logged first = Log(StripeOnSlot0(0), 1);
  ASSERT_TRUE(first.hold.ok()) << first.hold.status();
  EXPECT_EQ(parity_writes(), 1);
  constexpr int kWaiters = 5;
  std::vector<Logged> logged(kWaiters);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back(
        [&, i] { logged[i] = Log(StripeOnSlot0(i + 1), 10 + i); });
  }
  ASSERT_TRUE(WaitForQueue(kWaiters));
  // Held: the slot logs nothing new, whatever waits.
  EXPECT_EQ(parity_writes(), 1);
  EXPECT_TRUE(flushes_.empty()) << "nothing was written before the first";
  first.hold->Wrote(1);
  first.hold->Wrote(0);
  first.hold->Release();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(parity_writes(), 2) << "one batch for the five waiters";
  // Before its header replaced the first's, the batch flushed what the
  // first stripe wrote, once.
  ASSERT_EQ(flushes_.size(), 1u);
  EXPECT_THAT(flushes_[0], ::testing::ElementsAre(true, true));
  std::vector<uint8_t> area;
  absl::StatusOr<PplHeader> h = HeaderOnSlot0(&area);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->generation, 2u);
  ASSERT_EQ(h->entries.size(), static_cast<size_t>(kWaiters));
  // In arrival order, which the threads do not fix: match by data_sector.
  uint64_t pp_at = kPplHeaderBytes;
  for (const PplEntry& e : h->entries) {
    const Logged* mine = nullptr;
    for (const Logged& l : logged) {
      ASSERT_TRUE(l.hold.ok()) << l.hold.status();
      if (l.want.entries[0].data_sector == e.data_sector) mine = &l;
    }
    ASSERT_NE(mine, nullptr) << "entry for sector " << e.data_sector;
    EXPECT_EQ(e, mine->want.entries[0]);
    EXPECT_TRUE(std::memcmp(area.data() + pp_at,
                            mine->want.partial_parity.data(), e.pp_size) == 0);
    pp_at += e.pp_size;
  }
  // The batch holds the slot until its last stripe lets go.
  Logged next;
  std::thread late([&] { next = Log(StripeOnSlot0(9), 30); });
  ASSERT_TRUE(WaitForQueue(1));
  for (int i = 0; i + 1 < kWaiters; ++i) {
    logged[i].hold->Wrote(3);
    logged[i].hold->Release();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(parity_writes(), 2);
  logged[kWaiters - 1].hold->Wrote(2);
  logged[kWaiters - 1].hold->Release();
  late.join();
  ASSERT_TRUE(next.hold.ok()) << next.hold.status();
  EXPECT_EQ(parity_writes(), 3);
  ASSERT_EQ(flushes_.size(), 2u);
  EXPECT_THAT(flushes_[1], ::testing::ElementsAre(false, false, true, true));
}

// The header is a Member::Rewrite (no file member size check) only when a
// stripe of its batch has just read the parity member past the area: a
// read-modify-write's old parity. Otherwise it is a checked write.
TEST_F(PplBatchTest, AHeaderIsARewriteOnlyWhenItsBatchReadTheParityMember) {
  Logged unread = Log(StripeOnSlot0(0), 1);
  ASSERT_TRUE(unread.hold.ok()) << unread.hold.status();
  EXPECT_EQ(parity_writes(), 1);
  EXPECT_EQ(parity_->counters().rewrites, 0u);
  unread.hold->Release();
  Logged read = Log(StripeOnSlot0(1), 2, /*parity_read=*/true);
  ASSERT_TRUE(read.hold.ok()) << read.hold.status();
  EXPECT_EQ(parity_writes(), 2);
  EXPECT_EQ(parity_->counters().rewrites, 1u);
  read.hold->Release();
  // Either way the header and partial parity are on the member.
  std::vector<uint8_t> area;
  absl::StatusOr<PplHeader> h = HeaderOnSlot0(&area);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->generation, 2u);
  ASSERT_EQ(h->entries.size(), 1u);
  EXPECT_EQ(h->entries[0], read.want.entries[0]);
  EXPECT_TRUE(std::memcmp(area.data() + kPplHeaderBytes,
                          read.want.partial_parity.data(),
                          h->entries[0].pp_size) == 0);
}

// A hold shares ownership of its log: a policy switch drops the array's
// pointer to the log while stripes may still hold it, and their release
// must not touch a freed log.
TEST_F(PplBatchTest, AHoldKeepsItsLogAlive) {
  Logged first = Log(StripeOnSlot0(0), 1);
  ASSERT_TRUE(first.hold.ok()) << first.hold.status();
  const std::weak_ptr<PplLog> weak = log_;
  log_.reset();
  EXPECT_FALSE(weak.expired()) << "the hold owns the log";
  first.hold->Wrote(1);
  first.hold->Release();
  EXPECT_TRUE(weak.expired()) << "released, nothing keeps the log";
}

TEST_F(PplBatchTest, AFailedBatchWriteFailsEveryStripeInItAndHoldsNothing) {
  Logged first = Log(StripeOnSlot0(0), 1);
  ASSERT_TRUE(first.hold.ok()) << first.hold.status();
  std::vector<Logged> logged(3);
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] { logged[i] = Log(StripeOnSlot0(i + 1), 5); });
  }
  ASSERT_TRUE(WaitForQueue(3));
  parity_->SetFailed(true);
  first.hold->Release();
  for (std::thread& t : threads) t.join();
  for (const Logged& l : logged) {
    ASSERT_FALSE(l.hold.ok());
    EXPECT_THAT(l.hold.status().message(),
                ::testing::HasSubstr(absl::StrCat(members_[0]->Name(),
                                                  ": writing the partial")));
    EXPECT_THAT(l.hold.status().message(),
                ::testing::HasSubstr("injected I/O error"));
  }
  // Nothing of the failed batch holds the slot: the next stripe logs.
  parity_->SetFailed(false);
  Logged after = Log(StripeOnSlot0(5), 6);
  ASSERT_TRUE(after.hold.ok()) << after.hold.status();
  // A flush of the last batch's members that fails fails the next batch,
  // writes no header, and is tried again by the batch after.
  after.hold->Wrote(2);
  after.hold->Release();
  flush_status_ = absl::UnavailableError("injected flush error");
  const int writes = parity_writes();
  Logged refused = Log(StripeOnSlot0(6), 7);
  ASSERT_FALSE(refused.hold.ok());
  EXPECT_THAT(refused.hold.status().message(),
              ::testing::HasSubstr("injected flush error"));
  EXPECT_EQ(parity_writes(), writes);
  flush_status_ = absl::OkStatus();
  Logged again = Log(StripeOnSlot0(7), 8);
  ASSERT_TRUE(again.hold.ok()) << again.hold.status();
  EXPECT_THAT(flushes_.back(), ::testing::ElementsAre(false, false, true));
}

TEST(PplArea, RefusesAreasThatDoNotFit) {
  Superblock sb;
  sb.data_offset = 4096;
  sb.data_size = 100000;
  sb.feature_map = kFeaturePpl;
  sb.set_ppl(8, 2048);
  absl::StatusOr<PplArea> ok = PplAreaOf(sb);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->offset_bytes, 16u * 512);
  EXPECT_EQ(ok->size_bytes, 2048u * 512);
  sb.set_ppl(8, 8);
  EXPECT_THAT(PplAreaOf(sb).status().message(),
              ::testing::HasSubstr("ppl.size 8 sectors"));
  sb.set_ppl(4, 2048);
  EXPECT_THAT(PplAreaOf(sb).status().message(),
              ::testing::HasSubstr("ppl.offset 4"));
  sb.set_ppl(8, 8000);  // runs into the data at 4096
  EXPECT_THAT(PplAreaOf(sb).status().message(),
              ::testing::HasSubstr("overlaps"));
  sb.feature_map = 0;
  EXPECT_THAT(PplAreaOf(sb).status().message(),
              ::testing::HasSubstr("has no PPL"));
}

}  // namespace
}  // namespace uraid
