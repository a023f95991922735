// SPDX-License-Identifier: MIT
// Unit tests of uraid::Array: creation and assembly (and every refusal,
// with nothing written), the write-path choice between full-stripe, RMW and
// RCW by exact member-I/O counts, degraded operation and the clean/active
// state kept in the superblocks.

#include "uraid/array.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/clock.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 32 * kChunk;

using Shared = std::shared_ptr<Member>;

using testutil::Handles;
using testutil::Pattern;
using testutil::StepClock;
using testutil::WaitUntil;

std::vector<Shared> MakeMembers(int n, uint64_t size = kOffset + kMemberBytes) {
  return testutil::MakeMembers(n, size);
}

std::vector<uint8_t> Bytes(Member& m) {
  std::vector<uint8_t> b(m.Size());
  EXPECT_TRUE(m.Read(b.data(), b.size(), 0).ok());
  return b;
}

// A copy of a member's current bytes: a snapshot, as after a crash.
Shared Snapshot(Member& m, uint64_t size = 0) {
  std::vector<uint8_t> b = Bytes(m);
  if (size == 0) size = b.size();
  Shared copy(NewMemoryMember(m.Name() + "-copy", size));
  EXPECT_TRUE(
      copy->Write(b.data(), std::min<uint64_t>(size, b.size()), 0).ok());
  return copy;
}

CreateOptions Opts(Layout l = Layout::kLeftSymmetric) {
  CreateOptions o;
  o.layout = l;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.member_bytes = kMemberBytes;
  return o;
}

std::unique_ptr<Array> MustCreate(const std::vector<Shared>& m,
                                  CreateOptions o = Opts()) {
  return testutil::MustCreate(m, o);
}

absl::Status AssembleStatus(const std::vector<Shared>& m,
                            AssembleOptions o = {}) {
  return Array::Assemble(Handles(m), o).status();
}

// A clean array on `clock`, its writeback thread running: the cache tests'
// start.
std::unique_ptr<Array> MustCreateOnClock(const std::vector<Shared>& m,
                                         std::shared_ptr<Clock> clock) {
  CreateOptions o = Opts();
  o.assume_clean = true;
  o.clock = std::move(clock);
  auto a = MustCreate(m, o);
  if (a != nullptr) a->StartBackground();
  return a;
}

// The array assembled (run) from copies of the members `slots` of `m`
// hold now: what reached them, without any array's cache.
absl::StatusOr<std::unique_ptr<Array>> AssembleImages(
    const std::vector<Shared>& m, std::initializer_list<int> slots) {
  std::vector<Shared> images;
  for (int i : slots) images.push_back(Snapshot(*m[i]));
  AssembleOptions ao;
  ao.run = true;
  return Array::Assemble(Handles(images), ao);
}

// ------------------------------------------------------------- creation

TEST(ArrayCreate, SuperblocksDescribeTheArray) {
  auto m = MakeMembers(4);
  auto a = MustCreate(m);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->size(), 3 * kMemberBytes);
  ArrayInfo info = a->Info();
  EXPECT_TRUE(info.clean);
  EXPECT_FALSE(info.degraded);
  EXPECT_EQ(info.data_offset_bytes, kOffset);
  a.reset();
  for (int i = 0; i < 4; ++i) {
    std::vector<uint8_t> b = Bytes(*m[i]);
    auto sb = DecodeSuperblock(std::span<const uint8_t>(b).subspan(4096));
    ASSERT_TRUE(sb.ok()) << sb.status();
    EXPECT_EQ(sb->level, 5);
    EXPECT_EQ(sb->layout, 2u);
    EXPECT_EQ(sb->chunksize, kChunk / 512);
    EXPECT_EQ(sb->raid_disks, 4u);
    EXPECT_EQ(sb->size, kMemberBytes / 512);
    EXPECT_EQ(sb->data_offset, kOffset / 512);
    EXPECT_EQ(sb->role(), i);
    EXPECT_TRUE(sb->clean());
  }
}

TEST(ArrayCreate, NonZeroMembersGetConsistentParity) {
  auto m = MakeMembers(4);
  for (auto& mem : m) {
    auto junk = Pattern(kMemberBytes, 7 + mem->Name()[1]);
    ASSERT_TRUE(mem->Write(junk.data(), junk.size(), kOffset).ok());
  }
  auto a = MustCreate(m);
  std::vector<uint64_t> bad;
  auto n = a->CheckParity(&bad);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  EXPECT_GT(a->Info().counters.resync_repairs, 0u);
}

TEST(ArrayCreate, AssumeCleanSkipsTheSync) {
  auto m = MakeMembers(4);
  auto junk = Pattern(kMemberBytes, 3);
  ASSERT_TRUE(m[0]->Write(junk.data(), junk.size(), kOffset).ok());
  CreateOptions o = Opts();
  o.assume_clean = true;
  auto a = MustCreate(m, o);
  auto n = a->CheckParity(nullptr);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 32u);  // md shows mismatches after --assume-clean too
}

struct RefusalCase {
  std::string what;
  std::function<std::vector<Shared>()> members;
  CreateOptions options;
  std::string error;
};

TEST(ArrayCreate, RefusesAndWritesNothing) {
  std::vector<RefusalCase> cases = {
      {"two missing",
       [] {
         auto v = MakeMembers(4);
         v[1] = v[2] = nullptr;
         return v;
       },
       Opts(), "2 members given as missing"},
      {"member too small",
       [] {
         auto v = MakeMembers(3);
         v.push_back(Shared(NewMemoryMember("tiny", kOffset + 1000)));
         return v;
       },
       [] {
         CreateOptions o = Opts();
         o.member_bytes = 0;
         return o;
       }(),
       "tiny is too small"},
      {"chunk not power of two", [] { return MakeMembers(4); },
       [] {
         CreateOptions o = Opts();
         o.chunk_bytes = 48 * 1024;
         return o;
       }(),
       "not a power of two"},
      {"two disks", [] { return MakeMembers(2); }, Opts(), "raid disks"},
      {"level 4 with a RAID5 layout", [] { return MakeMembers(4); },
       [] {
         CreateOptions o = Opts();
         o.level = 4;
         return o;
       }(),
       "parity-last"},
      {"level 6 on three members (md's minimum is four)",
       [] { return MakeMembers(3); },
       [] {
         CreateOptions o = Opts();
         o.level = 6;
         return o;
       }(),
       "raid disks 3 out of range 4..64"},
      {"size beyond members", [] { return MakeMembers(4); },
       [] {
         CreateOptions o = Opts();
         o.member_bytes = 2 * kMemberBytes;
         return o;
       }(),
       "exceeds"},
  };
  for (const RefusalCase& c : cases) {
    SCOPED_TRACE(c.what);
    auto m = c.members();
    std::vector<std::vector<uint8_t>> before;
    for (auto& x : m) before.push_back(x ? Bytes(*x) : std::vector<uint8_t>{});
    auto a = Array::Create(Handles(m), c.options);
    ASSERT_FALSE(a.ok());
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(c.error));
    for (size_t i = 0; i < m.size(); ++i) {
      if (m[i]) {
        EXPECT_EQ(Bytes(*m[i]), before[i]) << "member " << i << " was written";
      }
    }
  }
}

TEST(ArrayCreate, RefusesToOverwriteAnArrayWithoutForce) {
  auto m = MakeMembers(3);
  MustCreate(m).reset();
  auto before = Bytes(*m[0]);
  auto again = Array::Create(Handles(m), Opts());
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(std::string(again.status().message()),
              HasSubstr("already holds an md superblock"));
  EXPECT_EQ(Bytes(*m[0]), before);
  CreateOptions o = Opts();
  o.force = true;
  EXPECT_TRUE(Array::Create(Handles(m), o).ok());
}

// ------------------------------------------------------------- assembly

TEST(ArrayAssemble, AnyOrderAndDataSurvives) {
  auto m = MakeMembers(5);
  auto data = Pattern(3 * kChunk + 777, 1);
  {
    auto a = MustCreate(m, Opts(Layout::kRightAsymmetric));
    ASSERT_TRUE(a->Write(data.data(), data.size(), 12345).ok());
  }
  std::vector<Shared> shuffled = {m[3], m[0], m[4], m[2], m[1]};
  auto a = Array::Assemble(Handles(shuffled), {});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->geometry().layout(), Layout::kRightAsymmetric);
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE((*a)->Read(got.data(), got.size(), 12345).ok());
  EXPECT_EQ(got, data);
}

TEST(ArrayAssemble, RefusalsNameTheMemberAndWriteNothing) {
  auto m = MakeMembers(4);
  auto other = MakeMembers(4);
  MustCreate(m).reset();
  MustCreate(other).reset();
  // A stale copy of m[2]: taken now, then the array moves on.
  Shared stale = Snapshot(*m[2]);
  {
    auto a = Array::Assemble(Handles(m), {});
    ASSERT_TRUE(a.ok());
    auto d = Pattern(8192, 2);
    ASSERT_TRUE((*a)->Write(d.data(), d.size(), 0).ok());
  }
  Shared blank(NewMemoryMember("blank", kOffset + kMemberBytes));
  Shared corrupt = Snapshot(*m[1]);
  {
    uint8_t b;
    ASSERT_TRUE(corrupt->Read(&b, 1, 4096 + 40).ok());  // inside set_name
    b ^= 0x55;
    ASSERT_TRUE(corrupt->Write(&b, 1, 4096 + 40).ok());
  }
  Shared truncated = Snapshot(*m[3], kOffset + kMemberBytes / 2);

  struct Case {
    std::string what;
    std::vector<Shared> members;
    std::string error;
  };
  std::vector<Case> cases = {
      {"no superblock", {m[0], m[1], m[2], blank}, "blank"},
      {"bad checksum", {m[0], corrupt, m[2], m[3]}, "checksum"},
      {"foreign member", {m[0], m[1], m[2], other[3]}, "different array"},
      {"same member twice", {m[0], m[1], m[2], m[2]}, "same device"},
      {"stale member", {m[0], m[1], stale, m[3]}, "is stale"},
      {"too many missing", {m[0], m[1]}, "2 of 4 members are missing"},
      {"truncated member", {m[0], m[1], m[2], truncated}, "too small"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<std::vector<uint8_t>> before;
    for (auto& x : c.members) before.push_back(Bytes(*x));
    absl::Status st = AssembleStatus(c.members);
    ASSERT_FALSE(st.ok());
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.error));
    for (size_t i = 0; i < c.members.size(); ++i) {
      EXPECT_EQ(Bytes(*c.members[i]), before[i]);
    }
  }
}

TEST(ArrayAssemble, FaultyMemberIsRefusedAndArrayRunsDegraded) {
  auto m = MakeMembers(4);
  auto data = Pattern(5 * kChunk, 9);
  {
    auto a = MustCreate(m);
    ASSERT_TRUE(a->Write(data.data(), data.size(), 0).ok());
    ASSERT_TRUE(a->FailSlot(1).ok());
    EXPECT_TRUE(a->Info().degraded);
  }
  absl::Status st = AssembleStatus(m);
  EXPECT_THAT(std::string(st.message()), HasSubstr("marked faulty"));
  auto a = Array::Assemble(Handles({m[0], m[2], m[3]}), {});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE((*a)->Info().degraded);
  std::vector<uint8_t> got(data.size());
  ASSERT_TRUE((*a)->Read(got.data(), got.size(), 0).ok());
  EXPECT_EQ(got, data);
  EXPECT_GT((*a)->Info().counters.reconstructions, 0u);
}

// md's --run rule: a member the superblocks list as active that is not
// given is refused by name, writing nothing; run=true starts degraded, and
// the superblocks written then record the slot as empty, so the next
// assembly without the member needs no run.
TEST(ArrayAssemble, ForgottenActiveMemberNeedsRun) {
  auto m = MakeMembers(4);
  auto data = Pattern(5 * kChunk, 13);
  {
    auto a = MustCreate(m);
    ASSERT_TRUE(a->Write(data.data(), data.size(), 0).ok());
  }
  std::vector<std::vector<uint8_t>> before;
  for (auto& x : m) before.push_back(Bytes(*x));
  absl::Status st = AssembleStatus({m[0], m[1], m[3]});
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()),
              HasSubstr("slot 2 (device 2) not given"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("--run"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("run=true"));
  // Read-only assembly is held to the same rule (md's --readonly too).
  AssembleOptions ro;
  ro.read_only = true;
  EXPECT_FALSE(AssembleStatus({m[0], m[1], m[3]}, ro).ok());
  for (size_t i = 0; i < m.size(); ++i) EXPECT_EQ(Bytes(*m[i]), before[i]);

  AssembleOptions run;
  run.run = true;
  std::vector<uint8_t> more = Pattern(kChunk, 14);
  {
    auto a = Array::Assemble(Handles({m[0], m[1], m[3]}), run);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_TRUE((*a)->Info().degraded);
    std::vector<uint8_t> got(data.size());
    ASSERT_TRUE((*a)->Read(got.data(), got.size(), 0).ok());
    EXPECT_EQ(got, data);
    ASSERT_TRUE((*a)->Write(more.data(), more.size(), 0).ok());
  }
  // The forgotten member is now stale, and the array stopped degraded.
  EXPECT_THAT(std::string(AssembleStatus(m).message()), HasSubstr("is stale"));
  auto b = Array::Assemble(Handles({m[0], m[1], m[3]}), {});
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<uint8_t> got(more.size());
  ASSERT_TRUE((*b)->Read(got.data(), got.size(), 0).ok());
  EXPECT_EQ(got, more);
}

TEST(ArrayAssemble, DirtyArrayResyncsAndDirtyDegradedNeedsForce) {
  auto m = MakeMembers(4);
  auto a = MustCreate(m);
  auto d = Pattern(3 * kChunk, 4);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 0).ok());
  EXPECT_FALSE(a->Info().clean);
  // "Crash": copy the members while the array is active.
  std::vector<Shared> crashed;
  for (auto& x : m) crashed.push_back(Snapshot(*x));
  a.reset();
  // Tear parity of stripe 0 in the crashed image, as an interrupted write
  // would.
  auto junk = Pattern(4096, 5);
  ASSERT_TRUE(crashed[3]->Write(junk.data(), junk.size(), kOffset).ok());

  absl::Status st = AssembleStatus({crashed[0], crashed[1], crashed[2]});
  EXPECT_THAT(std::string(st.message()), HasSubstr("dirty"));
  EXPECT_THAT(std::string(st.message()), HasSubstr("degraded"));
  AssembleOptions force;
  force.force = true;
  EXPECT_TRUE(
      Array::Assemble(Handles({Snapshot(*crashed[0]), Snapshot(*crashed[1]),
                               Snapshot(*crashed[2])}),
                      force)
          .ok());

  auto b = Array::Assemble(Handles(crashed), {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*b)->Info().resyncing);
  ASSERT_TRUE((*b)->Resync().ok());
  EXPECT_FALSE((*b)->Info().resyncing);
  EXPECT_TRUE((*b)->Info().clean);
  EXPECT_GE((*b)->Info().counters.resync_repairs, 1u);
  auto n = (*b)->CheckParity(nullptr);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

// The threads of this process, from /proc/self/task.
size_t ThreadsOfThisProcess() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++n;
  }
  return n;
}

// nbdkit assembles before it forks, and with -f reopens stdin and stdout
// right after: a thread started by assembly dies at the fork or, opening a
// file at that moment, makes nbdkit exit ("open: Invalid argument", a CI
// run of the reshape crash test). Members one event apart are the case
// that writes: every superblock is rewritten, one member after another,
// and with them the internal bitmap's header, which goes to every member
// at once through the executor (RunTogether): before any I/O is timed,
// on its pool.
TEST(ArrayAssemble, StartsNoThreadEvenWhenItBringsMembersLevel) {
  auto m = MakeMembers(4);
  {
    CreateOptions o = Opts();
    o.bitmap = BitmapMode::kInternal;
    auto a = MustCreate(m, o);
    ASSERT_NE(a, nullptr);
  }
  Superblock behind = testutil::SuperOf(*m[3]);
  ASSERT_GT(behind.events, 0u);
  const uint64_t events = behind.events;
  behind.events -= 1;
  const std::vector<uint8_t> sb = EncodeSuperblock(behind);
  ASSERT_TRUE(m[3]->Write(sb.data(), sb.size(), kSb12OffsetBytes).ok());

  const size_t before = ThreadsOfThisProcess();
  auto a = Array::Assemble(Handles(m), {});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(ThreadsOfThisProcess(), before);
  // It did write: every member now holds the freshest events, plus one.
  for (const auto& x : m) EXPECT_EQ(testutil::SuperOf(*x).events, events + 1);
  // After assembly the array's I/O may use threads again, and works.
  auto d = Pattern(3 * kChunk, 9);
  ASSERT_TRUE((*a)->Write(d.data(), d.size(), 0).ok());
  std::vector<uint8_t> got(d.size());
  ASSERT_TRUE((*a)->Read(got.data(), got.size(), 0).ok());
  EXPECT_EQ(got, d);
}

// ----------------------------------------------- write plans by I/O count

struct IoCount {
  uint64_t reads, writes;
};
IoCount Delta(const Counters& a, const Counters& b) {
  return {b.member_reads - a.member_reads, b.member_writes - a.member_writes};
}

// A read across stripes reads each member's pieces of consecutive stripes
// in one call: 4 disks, left-symmetric, stripes 0-2 have parity on disks 3,
// 2 and 1, so disks 0, 1 and 3 each hold adjacent pieces (one call each)
// and disk 2 two pieces with parity between them (two calls): 5 calls for
// 9 pieces.
TEST(ArrayRead, AMembersPiecesOfConsecutiveStripesAreOneRead) {
  auto m = MakeMembers(4);
  auto a = MustCreate(m);
  const uint64_t total = 3 * 3 * kChunk;
  auto data = Pattern(total, 31);
  ASSERT_TRUE(a->Write(data.data(), total, 0).ok());
  ASSERT_TRUE(a->Flush().ok());
  const Counters before = a->Info().counters;
  std::vector<uint8_t> got(total);
  ASSERT_TRUE(a->Read(got.data(), total, 0).ok());
  EXPECT_EQ(got, data);
  const IoCount io = Delta(before, a->Info().counters);
  EXPECT_EQ(io.reads, 5u);
  EXPECT_EQ(io.writes, 0u);
}

TEST(ArrayWrite, PlanChoiceByMemberIoCounts) {
  auto m = MakeMembers(5);  // 4 data chunks per stripe
  CreateOptions o = Opts();
  o.cache.bytes = 0;  // write-through: each write is planned on its own
  auto a = MustCreate(m, o);
  auto data = Pattern(4 * kChunk, 11);
  struct Case {
    std::string what;
    uint64_t offset, len;
    IoCount want;
    uint64_t Counters::*kind;
  };
  std::vector<Case> cases = {
      {"full stripe: no reads",
       0,
       4 * kChunk,
       {0, 5},
       &Counters::full_stripe_writes},
      {"4K in one chunk: RMW reads data+parity",
       4096,
       4096,
       {2, 2},
       &Counters::rmw_writes},
      {"3 of 4 chunks: RCW reads the 4th",
       4 * kChunk,
       3 * kChunk,
       {1, 4},
       &Counters::rcw_writes},
      {"2 of 4 chunks: RCW (2 reads) beats RMW (3)",
       8 * kChunk,
       2 * kChunk,
       {2, 3},
       &Counters::rcw_writes},
      {"sub-sector write: RMW",
       12 * kChunk + 100,
       10,
       {2, 2},
       &Counters::rmw_writes},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Counters before = a->Info().counters;
    ASSERT_TRUE(a->Write(data.data(), c.len, c.offset).ok());
    Counters after = a->Info().counters;
    IoCount d = Delta(before, after);
    EXPECT_EQ(d.reads, c.want.reads);
    EXPECT_EQ(d.writes, c.want.writes);
    EXPECT_EQ(after.*c.kind - before.*c.kind, 1u);
  }
  auto n = a->CheckParity(nullptr);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

// A read-modify-write writes back over exactly what it read, on the same
// members: those writes are Rewrites (a file member then skips its size
// probe), and on 4 members a 4K write is one (a tie goes to RMW). Writes
// over what was not read (a full stripe, RCW) stay Writes.
TEST(ArrayWrite, ReadModifyWriteWritesBackAsRewrites) {
  std::vector<std::shared_ptr<FaultyMember>> f;
  std::vector<Shared> m;
  for (auto& b : MakeMembers(4)) {
    f.push_back(std::make_shared<FaultyMember>(b));
    m.push_back(f.back());
  }
  CreateOptions o = Opts();
  o.cache.bytes = 0;  // write-through: each write is planned on its own
  auto a = MustCreate(m, o);
  ASSERT_NE(a, nullptr);
  const auto totals = [&] {
    FaultCounters t;
    for (const auto& x : f) {
      t.writes += x->counters().writes;
      t.rewrites += x->counters().rewrites;
    }
    return t;
  };
  auto data = Pattern(3 * kChunk, 13);
  // The first write also marks the array active and sets bitmap bits.
  ASSERT_TRUE(a->Write(data.data(), 3 * kChunk, 0).ok());
  FaultCounters before = totals();
  ASSERT_TRUE(a->Write(data.data(), 3 * kChunk, 3 * kChunk).ok());
  FaultCounters after = totals();
  EXPECT_EQ(after.writes - before.writes, 4u) << "full stripe";
  EXPECT_EQ(after.rewrites - before.rewrites, 0u) << "full stripe";
  before = after;
  ASSERT_TRUE(a->Write(data.data(), 4096, 8192).ok());
  after = totals();
  EXPECT_EQ(after.writes - before.writes, 2u) << "4K: data and parity";
  EXPECT_EQ(after.rewrites - before.rewrites, 2u) << "4K: both read first";
  EXPECT_EQ(a->Info().counters.rmw_writes, 1u);
  before = after;
  ASSERT_TRUE(a->Write(data.data(), 2 * kChunk, 6 * kChunk).ok());
  after = totals();
  EXPECT_EQ(after.writes - before.writes, 3u) << "2 of 3 chunks: RCW";
  EXPECT_EQ(after.rewrites - before.rewrites, 0u) << "RCW reads the third";
  std::vector<uint8_t> got(4096);
  ASSERT_TRUE(a->Read(got.data(), got.size(), 8192).ok());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), data.begin()));
  auto n = a->CheckParity(nullptr);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST(ArrayWrite, MemberFailureDuringWriteIsAbsorbed) {
  auto base = MakeMembers(4);
  std::vector<std::shared_ptr<FaultyMember>> f;
  std::vector<Shared> m;
  for (auto& b : base) {
    f.push_back(std::make_shared<FaultyMember>(b));
    m.push_back(f.back());
  }
  auto a = MustCreate(m);
  auto data = Pattern(7 * kChunk + 5000, 12);
  f[2]->SetFailed(true);
  ASSERT_TRUE(a->Write(data.data(), data.size(), 3000).ok());
  ASSERT_TRUE(a->Flush().ok());  // durable before the second failure
  EXPECT_TRUE(a->Info().degraded);
  // A second failure fails the array and names the cause.
  f[0]->SetFailed(true);
  std::vector<uint8_t> got(data.size());
  absl::Status st = a->Read(got.data(), got.size(), 3000);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(a->Info().failed);
  EXPECT_THAT(std::string(st.message()), HasSubstr("fail"));
  f[0]->SetFailed(false);
  a.reset();
  // The array died active, so it is dirty and degraded: refused as md
  // would, and with force the members that were never failed still hold
  // every acknowledged write.
  EXPECT_THAT(std::string(AssembleStatus({m[0], m[1], m[3]}).message()),
              HasSubstr("dirty"));
  AssembleOptions force;
  force.force = true;
  auto b = Array::Assemble(Handles({m[0], m[1], m[3]}), force);
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE((*b)->Read(got.data(), got.size(), 3000).ok());
  EXPECT_EQ(got, data);
}

// An array without the stripe cache over `m`, filled with Pattern(seed)
// (returned in *data) and flushed, with slot 1 failed; null on a failure.
std::unique_ptr<Array> FilledThenDegraded(const std::vector<Shared>& m,
                                          uint32_t seed,
                                          std::vector<uint8_t>* data) {
  CreateOptions o = Opts();
  o.cache.bytes = 0;
  return testutil::FilledThenDegraded(m, o, seed, data);
}

// Reads the whole array into *got in requests of `step` bytes.
void ReadAllInSteps(Array& a, uint64_t step, std::vector<uint8_t>* got) {
  got->assign(a.size(), 0);
  for (uint64_t at = 0; at < got->size(); at += step) {
    const size_t n = std::min<uint64_t>(step, got->size() - at);
    ASSERT_TRUE(a.Read(got->data() + at, n, at).ok()) << at;
  }
}

// A degraded read plans each stripe once: the surviving chunks the client
// reads are also the rebuild's sources, so a whole-array read costs one
// member byte per byte (md and this engine before it read 1.5 on 4 disks:
// the client's chunks, then all survivors again for the lost one).
TEST(ArrayRead, DegradedSequentialReadReadsEachSurvivingByteOnce) {
  auto m = MakeMembers(4);
  std::vector<uint8_t> data;
  auto a = FilledThenDegraded(m, 21, &data);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->Info().degraded);
  const Counters before = a->Info().counters;
  // Requests of whole stripes.
  std::vector<uint8_t> got;
  ReadAllInSteps(*a, 5 * a->geometry().stripe_data_bytes(), &got);
  const Counters after = a->Info().counters;
  EXPECT_EQ(got, data);
  EXPECT_EQ(after.member_read_bytes - before.member_read_bytes, a->size());
  // Slot 1 holds parity in one stripe of four: the other three rebuild.
  const uint64_t stripes = kMemberBytes / kChunk;
  EXPECT_EQ(after.reconstructions - before.reconstructions, stripes * 3 / 4);
  // A read that starts and ends inside chunks still gets the right bytes.
  std::vector<uint8_t> part(3 * kChunk + 12288);
  const uint64_t at = 5 * kChunk + 4096;
  ASSERT_TRUE(a->Read(part.data(), part.size(), at).ok());
  EXPECT_TRUE(std::equal(part.begin(), part.end(), data.begin() + at));
}

// Requests that end inside stripes (two thirds of a stripe each): the
// survivor rows one request's rebuild fetched serve the next request, so
// each surviving byte is still read once; and a write in between makes
// them stale (the next read goes to the members and sees the write).
TEST(ArrayRead, DegradedReadsEndingInsideStripesReadEachSurvivorOnce) {
  auto m = MakeMembers(4);
  std::vector<uint8_t> data;
  auto a = FilledThenDegraded(m, 22, &data);
  ASSERT_NE(a, nullptr);
  const Counters before = a->Info().counters;
  std::vector<uint8_t> got;
  ReadAllInSteps(*a, 2 * kChunk, &got);  // a stripe holds 3 chunks
  const Counters after = a->Info().counters;
  EXPECT_EQ(got, data);
  EXPECT_EQ(after.member_read_bytes - before.member_read_bytes, a->size());

  // A read of no bytes has no pieces (and so no tail to keep).
  EXPECT_TRUE(a->Read(got.data(), 0, 0).ok());

  // Stripe 0 (parity on slot 3; slot 1 lost): the first two chunks read
  // (slot 1 rebuilt, which fetches slot 2's rows too) ...
  std::vector<uint8_t> buf(kChunk);
  ASSERT_TRUE(a->Read(got.data(), 2 * kChunk, 0).ok());
  // ... then slot 2's chunk changes behind the read ...
  auto fresh = Pattern(kChunk, 99);
  ASSERT_TRUE(a->Write(fresh.data(), kChunk, 2 * kChunk).ok());
  // ... and reading it again returns the write, not the rows kept.
  ASSERT_TRUE(a->Read(buf.data(), kChunk, 2 * kChunk).ok());
  EXPECT_EQ(buf, fresh);
  ASSERT_TRUE(a->Read(got.data(), 2 * kChunk, 0).ok());
  EXPECT_TRUE(std::equal(got.begin(), got.begin() + 2 * kChunk, data.begin()));
}

// Sequential writes smaller than a stripe are gathered into full-stripe
// writes: no member reads at all, whatever the write size.
TEST(ArrayWrite, SequentialSmallWritesCoalesceIntoFullStripes) {
  for (uint64_t bs :
       {uint64_t{4096}, uint64_t{65536}, uint64_t{100000}, 3 * kChunk / 2}) {
    SCOPED_TRACE(bs);
    auto m = MakeMembers(4);
    auto a = MustCreate(m);
    const uint64_t total = 6 * 3 * kChunk;  // six stripes
    auto data = Pattern(total, 21);
    Counters before = a->Info().counters;
    for (uint64_t off = 0; off < total; off += bs) {
      uint64_t n = std::min(bs, total - off);
      ASSERT_TRUE(a->Write(data.data() + off, n, off).ok());
    }
    ASSERT_TRUE(a->Flush().ok());
    Counters after = a->Info().counters;
    EXPECT_EQ(after.member_reads - before.member_reads, 0u);
    EXPECT_EQ(after.full_stripe_writes - before.full_stripe_writes, 6u);
    EXPECT_EQ(after.rmw_writes + after.rcw_writes, 0u);
    std::vector<uint8_t> got(total);
    ASSERT_TRUE(a->Read(got.data(), total, 0).ok());
    EXPECT_EQ(got, data);
    auto n = a->CheckParity(nullptr);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 0u);
  }
}

// Cached data is visible to reads before it is written back, and a flush
// writes it back. A write that starts a stripe is gathered; a random one in
// the middle of a stripe is written through.
TEST(ArrayWrite, CachedWritesAreReadBackAndFlushed) {
  auto m = MakeMembers(4);
  auto a = MustCreate(m);
  auto d = Pattern(5000, 8);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 0).ok());
  ASSERT_TRUE(a->Write(d.data(), d.size(), 10 * 3 * kChunk + 777).ok());
  std::vector<uint8_t> got(d.size());
  ASSERT_TRUE(a->Read(got.data(), got.size(), 0).ok());
  EXPECT_EQ(got, d);
  Counters c0 = a->Info().counters;
  EXPECT_EQ(c0.cached_writes, 1u);
  EXPECT_EQ(c0.rmw_writes + c0.rcw_writes, 1u);  // written through
  ASSERT_TRUE(a->Flush().ok());
  Counters c1 = a->Info().counters;
  EXPECT_EQ(c1.cache_writebacks, 1u);
  EXPECT_GT(c1.member_writes, c0.member_writes);
}

// Random small writes do not feed the cache: a write in the middle of a
// stripe beside a gathered one, that continues no recent write, is written
// through (the rule was "beside a gathered stripe", which let random 4K
// writes fill the cache, 8% of them gathered).
TEST(ArrayWrite, ARandomWriteBesideAGatheredStripeIsWrittenThrough) {
  auto m = MakeMembers(4);
  auto a = MustCreate(m);
  const uint64_t sd = 3 * kChunk;
  auto d = Pattern(4096, 3);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 10 * sd).ok());  // starts 10
  ASSERT_EQ(a->Info().counters.cached_writes, 1u);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 11 * sd + kChunk + 4096).ok());
  ASSERT_TRUE(a->Write(d.data(), d.size(), 9 * sd + 2 * kChunk).ok());
  const Counters c = a->Info().counters;
  EXPECT_EQ(c.cached_writes, 1u);
  EXPECT_EQ(c.rmw_writes + c.rcw_writes, 2u);
  std::vector<uint8_t> got(d.size());
  for (uint64_t at : {10 * sd, 11 * sd + kChunk + 4096, 9 * sd + 2 * kChunk}) {
    ASSERT_TRUE(a->Read(got.data(), got.size(), at).ok());
    EXPECT_EQ(got, d) << at;
  }
}

// A stream reordered by a deep queue: a piece in the middle of a stripe
// arrives before the piece that starts the stripe. It continues a recent
// write, so it is gathered, and the stripe still reaches the members as
// one full-stripe write with nothing read.
TEST(ArrayWrite, AReorderedStreamStillWritesWholeStripes) {
  auto m = MakeMembers(4);
  auto a = MustCreate(m);
  const uint64_t sd = 3 * kChunk, piece = kChunk / 2;
  auto d = Pattern(2 * sd, 4);  // stripes 10 and 11
  const uint64_t base = 10 * sd;
  const auto write = [&](uint64_t from, uint64_t len) {
    ASSERT_TRUE(a->Write(d.data() + from, len, base + from).ok()) << from;
  };
  const uint64_t reads_before = a->Info().counters.member_reads;
  write(sd - piece, piece);               // ends stripe 10
  write(sd + piece, piece);               // stripe 11's second piece, first
  write(sd, piece);                       // stripe 11's first
  write(sd + 2 * piece, sd - 2 * piece);  // the rest of stripe 11
  const Counters c = a->Info().counters;
  EXPECT_EQ(c.cached_writes, 4u);
  EXPECT_EQ(c.full_stripe_writes, 1u);
  EXPECT_EQ(c.rmw_writes + c.rcw_writes, 0u);
  EXPECT_EQ(c.member_reads, reads_before);
  std::vector<uint8_t> got(sd);
  ASSERT_TRUE(a->Read(got.data(), sd, base + sd).ok());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), d.begin() + sd));
}

// md acknowledges a write once its stripe is on the members; the cache
// acknowledges it when gathered. That is safe while the array can lose one
// more member and still write back what the cache holds, and not once a
// member is gone: a degraded RAID5 array writes through, and what it held
// when the member failed goes out at once, not when it ages. (A second
// failure lost the writes gathered after the first: the forced-assembly
// test of nbd_members_test read zeros where they were acknowledged.)
// Once the array cannot spare a member, what the cache held goes out at
// once, and a gathered write is acknowledged only once its stripe is on the
// members: here nothing fills stripe 12, so its writer puts it out itself
// after the hold (a partial-stripe write) before Write returns.
TEST(ArrayWrite, ADegradedArrayHoldsGatheredWritesAndDrainsTheCache) {
  auto m = MakeMembers(4);
  // Nothing ages out.
  auto a = MustCreateOnClock(m, std::make_shared<StepClock>());
  ASSERT_NE(a, nullptr);
  const uint64_t sd = 3 * kChunk;
  auto d = Pattern(4096, 21);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 10 * sd).ok());  // starts 10
  ASSERT_EQ(a->Info().counters.cached_writes, 1u);
  ASSERT_EQ(a->Info().counters.cache_held_writes, 0u);
  ASSERT_TRUE(a->FailSlot(3).ok());
  ASSERT_TRUE(
      WaitUntil([&] { return a->Info().counters.cache_writebacks == 1; }, 10))
      << "the cache was not drained when the member failed";
  ASSERT_TRUE(a->Write(d.data(), d.size(), 12 * sd).ok());  // starts 12
  const Counters c = a->Info().counters;
  EXPECT_EQ(c.cached_writes, 2u);
  EXPECT_EQ(c.cache_held_writes, 1u);
  EXPECT_EQ(c.cache_hold_timeouts, 1u);
  EXPECT_EQ(c.degraded_writes + c.rmw_writes + c.rcw_writes, 2u);
  EXPECT_EQ(c.cache_writebacks, 2u);
  // Both are on the members: assembled from their images, without this
  // array's cache, they read back.
  a.reset();
  auto b = AssembleImages(m, {0, 1, 2});
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<uint8_t> got(d.size());
  for (uint64_t at : {10 * sd, 12 * sd}) {
    ASSERT_TRUE((*b)->Read(got.data(), got.size(), at).ok());
    EXPECT_EQ(got, d) << at;
  }
}

// Writes stripes 4, 6, ... in two halves from two threads, the first half
// first (held: the array holds gathered writes now) and `between()` before
// the second, until an attempt fills its stripe from the held half: a piece
// was held and no hold ran out, and `filled(before, after)` checks that
// attempt's counters. The hold is 10 ms of real time, so a writer thread
// that starts later than that on a loaded machine makes that attempt a
// partial write (then holding pauses, 20 ms doubling while it keeps timing
// out); one attempt in five must fill. Attempts skip a stripe because a
// write that continues one whose hold ran out is not held (the unfilled
// rule): on the next stripe neither half would be held, and no timeout
// would be counted either. Then every half written must read back from copies
// of the members `slots` of `m` alone, without the array's cache (`a` is
// closed). Halves hold Pattern(half, seed + stripe) and Pattern(half, seed +
// 100 + stripe).
void ExpectAHeldHalfFilled(
    const std::vector<Shared>& m, std::unique_ptr<Array>& a,
    std::initializer_list<int> slots, uint64_t seed,
    const std::function<void(const Counters& before)>& between,
    const std::function<void(const Counters& before, const Counters& c)>&
        filled) {
  const uint64_t sd = 3 * kChunk;
  const uint64_t half = sd / 2;
  bool was_filled = false;
  int pause_ms = 110;
  std::vector<uint64_t> written;
  for (uint64_t stripe = 4; stripe < 14 && !was_filled; stripe += 2) {
    const Counters before = a->Info().counters;
    auto first = Pattern(half, seed + stripe);
    auto second = Pattern(half, seed + 100 + stripe);
    absl::Status first_st;
    std::thread t(
        [&] { first_st = a->Write(first.data(), half, stripe * sd); });
    between(before);
    ASSERT_TRUE(a->Write(second.data(), half, stripe * sd + half).ok());
    t.join();
    ASSERT_TRUE(first_st.ok()) << first_st;
    written.push_back(stripe);
    const Counters c = a->Info().counters;
    if (c.cache_hold_timeouts == before.cache_hold_timeouts &&
        c.cache_held_writes != before.cache_held_writes) {
      was_filled = true;
      EXPECT_EQ(c.cache_held_writes - before.cache_held_writes, 1u);
      EXPECT_EQ(c.rmw_writes + c.rcw_writes,
                before.rmw_writes + before.rcw_writes);
      EXPECT_EQ(c.member_reads, before.member_reads);
      filled(before, c);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      pause_ms *= 2;
    }
  }
  EXPECT_TRUE(was_filled) << "no attempt filled its stripe from a held write";
  a.reset();
  auto b = AssembleImages(m, slots);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<uint8_t> got(half);
  for (uint64_t stripe : written) {
    ASSERT_TRUE((*b)->Read(got.data(), half, stripe * sd).ok());
    EXPECT_EQ(got, Pattern(half, seed + stripe)) << stripe;
    ASSERT_TRUE((*b)->Read(got.data(), half, stripe * sd + half).ok());
    EXPECT_EQ(got, Pattern(half, seed + 100 + stripe)) << stripe;
  }
}

// A degraded array still gathers a stream whose requests in flight span a
// stripe: the first half of a stripe waits (held, unacknowledged) until
// the second half fills it, and the stripe goes out as one write around
// the missing member, no member read. Both writers return only once it is
// on the members.
TEST(ArrayWrite, ADegradedArrayFillsAStripeFromHeldWrites) {
  auto m = MakeMembers(4);
  auto a = MustCreateOnClock(m, std::make_shared<StepClock>());
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->FailSlot(1).ok());
  ExpectAHeldHalfFilled(
      m, a, {0, 2, 3}, 100,
      [](const Counters&) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      },
      [](const Counters& before, const Counters& c) {
        // One stripe written around the missing member, from its data.
        EXPECT_EQ(c.degraded_writes - before.degraded_writes, 1u);
      });
}

// An array that has seen a client flush often: 100 flushes on a clock
// that stands still, each 0 ns after the last. Null on failure.
std::unique_ptr<Array> MustCreateFlushedOften(const std::vector<Shared>& m) {
  auto a = MustCreateOnClock(m, std::make_shared<StepClock>());
  for (int i = 0; a != nullptr && i < 100; ++i) {
    if (!a->Flush().ok()) return nullptr;
  }
  return a;
}

// While a client flushes every few milliseconds, a gathered piece would go
// out at the next flush as a partial-stripe write (reads of old data or
// parity), so a stream's piece is held instead: acknowledged once its
// stripe is on the members. A flush meanwhile leaves it alone (it is not
// acknowledged, so not the flush's to make durable), and the second half
// fills the stripe: one full-stripe write, no member read.
TEST(ArrayWrite, AStreamBesideFrequentFlushesIsHeldNotWrittenThrough) {
  auto m = MakeMembers(4);
  auto a = MustCreateFlushedOften(m);
  ASSERT_NE(a, nullptr);
  ExpectAHeldHalfFilled(
      m, a, {0, 1, 2, 3}, 300,
      [&](const Counters& before) {
        // The flush comes while the first half is held (or after its hold
        // ran out, and then this attempt does not count).
        for (int i = 0; i < 50 && a->Info().counters.cache_held_writes ==
                                      before.cache_held_writes;
             ++i) {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
        ASSERT_TRUE(a->Flush().ok());
      },
      [](const Counters& before, const Counters& c) {
        EXPECT_EQ(c.full_stripe_writes - before.full_stripe_writes, 1u);
      });
}

// A writer that waits for each write before the next (queue depth 1, here
// beside a client flushing often) never fills a stripe: once its hold has
// run out, the writes that continue it in sequence are not held again,
// though holding resumed for the array (another writer's new stream is
// held).
TEST(ArrayWrite, AWriterWhoseHoldRanOutIsNotHeldAgainInSequence) {
  auto m = MakeMembers(4);
  auto a = MustCreateFlushedOften(m);
  ASSERT_NE(a, nullptr);
  const uint64_t sd = 3 * kChunk;
  const uint64_t half = sd / 2;
  auto d = Pattern(sd, 24);
  ASSERT_TRUE(a->Write(d.data(), half, 4 * sd).ok());
  Counters c = a->Info().counters;
  ASSERT_EQ(c.cache_held_writes, 1u);
  ASSERT_EQ(c.cache_hold_timeouts, 1u);
  // Past the array's pause after a timeout (20 ms).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The rest of stripe 4 and the first half of stripe 5, which would be
  // held otherwise.
  ASSERT_TRUE(a->Write(d.data(), sd, 4 * sd + half).ok());
  c = a->Info().counters;
  EXPECT_EQ(c.cache_held_writes, 1u);
  EXPECT_EQ(c.cache_hold_timeouts, 1u);
  ASSERT_TRUE(a->Write(d.data(), half, 8 * sd).ok());
  c = a->Info().counters;
  EXPECT_EQ(c.cache_held_writes, 2u);
  EXPECT_EQ(c.cache_hold_timeouts, 2u);
  std::vector<uint8_t> got(sd);
  ASSERT_TRUE(a->Read(got.data(), sd, 4 * sd + half).ok());
  EXPECT_EQ(got, d);
}

// While a client flushes often, a piece of a write smaller than half a
// stripe is written through, not held: a client that writes a few blocks
// before each flush (a journal) would never fill the stripe, and would wait
// out each hold.
TEST(ArrayWrite, ASmallWriteBesideFrequentFlushesIsWrittenThrough) {
  auto m = MakeMembers(4);
  auto a = MustCreateFlushedOften(m);
  ASSERT_NE(a, nullptr);
  const uint64_t sd = 3 * kChunk;
  auto d = Pattern(64 * 1024, 23);
  const Counters before = a->Info().counters;
  // It starts a stripe, and continues the one before: gathered otherwise.
  ASSERT_TRUE(a->Write(d.data(), d.size(), 6 * sd - d.size()).ok());
  ASSERT_TRUE(a->Write(d.data(), d.size(), 6 * sd).ok());
  const Counters c = a->Info().counters;
  EXPECT_EQ(c.cached_writes, before.cached_writes);
  EXPECT_EQ(c.cache_held_writes, before.cache_held_writes);
  EXPECT_EQ(c.rmw_writes + c.rcw_writes - before.rmw_writes - before.rcw_writes,
            2u);
  std::vector<uint8_t> got(d.size());
  ASSERT_TRUE(a->Read(got.data(), got.size(), 6 * sd).ok());
  EXPECT_EQ(got, d);
}

// The cache's age limit runs on the array's clock: a gathered write stays
// in the cache while real time runs past max_age_ms and the clock does
// not, and goes out at the writeback thread's next look (every 10 ms of
// real time) once the clock has passed it. Clock times stay under md's
// 200 ms safemode delay, whose clean mark would write the cache back too.
TEST(ArrayWrite, CacheAgeLimitRunsOnTheArraysClock) {
  auto m = MakeMembers(4);
  auto clock = std::make_shared<StepClock>();
  auto a = MustCreateOnClock(m, clock);  // cache.max_age_ms: 100 by default
  ASSERT_NE(a, nullptr);
  auto d = Pattern(4096, 9);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 0).ok());  // starts stripe 0
  ASSERT_EQ(a->Info().counters.cached_writes, 1u);
  // Chunk 0 of stripe 0 (left-symmetric, 4 disks) is on m[0].
  auto on_member = [&] {
    std::vector<uint8_t> b(d.size());
    EXPECT_TRUE(m[0]->Read(b.data(), b.size(), kOffset).ok());
    return b == d;
  };
  // 300 ms of real time (30 looks), 90 ms on the clock: still cached.
  clock->Advance(90'000'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(a->Info().counters.cache_writebacks, 0u);
  EXPECT_FALSE(on_member());
  // 110 ms on the clock: written back.
  clock->Advance(20'000'000);
  EXPECT_TRUE(
      WaitUntil([&] { return a->Info().counters.cache_writebacks == 1; }, 10));
  EXPECT_TRUE(on_member());
  EXPECT_FALSE(a->Info().clean);  // the age limit did it, not safemode
}

TEST(ArrayWrite, PastTheEndIsRefused) {
  auto m = MakeMembers(3);
  auto a = MustCreate(m);
  std::vector<uint8_t> buf(8192);
  absl::Status st = a->Write(buf.data(), buf.size(), a->size() - 4096);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(st.message()), HasSubstr("past the end"));
  EXPECT_FALSE(a->Read(buf.data(), 1, a->size()).ok());
}

// On a clock that moves only when the test moves it (a loaded machine's
// stall would otherwise pass md's 200 ms safemode delay before the first
// look, and the array would already be clean).
TEST(ArrayState, ActiveWhileWritingCleanAfterIdle) {
  auto clock = std::make_shared<testutil::StepClock>();
  auto m = MakeMembers(3);
  CreateOptions o = Opts();
  o.clock = clock;
  auto a = MustCreate(m, o);
  a->StartBackground();
  auto d = Pattern(4096, 1);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 0).ok());
  auto on_disk_clean = [&] {
    auto b = Bytes(*m[0]);
    auto sb = DecodeSuperblock(std::span<const uint8_t>(b).subspan(4096));
    return sb.ok() && sb->clean();
  };
  // Several of the safemode thread's polls, the clock standing still.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(a->Info().clean);
  EXPECT_FALSE(on_disk_clean());
  clock->Advance(200'000'000);  // md's safemode delay
  EXPECT_TRUE(WaitUntil([&] { return a->Info().clean; }, 10));
  EXPECT_TRUE(on_disk_clean());
}

}  // namespace
}  // namespace uraid

namespace uraid {
namespace {

// Sparse file members: resync skips stripes that are holes everywhere and
// still fixes the one stripe that holds junk.
TEST(ArrayCreate, SparseFilesSkipHolesButFixJunk) {
  char tmpl[] = "uraid-sparse-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::vector<std::unique_ptr<Member>> members;
  std::vector<std::string> paths;
  for (int i = 0; i < 4; ++i) {
    paths.push_back(absl::StrFormat("%s/m%d.img", dir, i));
    FILE* f = fopen(paths.back().c_str(), "w");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(ftruncate(fileno(f), kOffset + kMemberBytes), 0);
    if (i == 2) {  // junk in stripe 7 of one member
      auto junk = Pattern(4096, 77);
      ASSERT_EQ(fseek(f, kOffset + 7 * kChunk + 8192, SEEK_SET), 0);
      ASSERT_EQ(fwrite(junk.data(), 1, junk.size(), f), junk.size());
    }
    fclose(f);
    auto m = OpenFileMember(paths.back());
    ASSERT_TRUE(m.ok()) << m.status();
    members.push_back(std::move(*m));
  }
  auto a = Array::Create(std::move(members), Opts());
  ASSERT_TRUE(a.ok()) << a.status();
  Counters c = (*a)->Info().counters;
  EXPECT_EQ(c.resync_repairs, 1u);
  EXPECT_LT(c.resynced_stripes, 32u);  // holes were skipped
  auto n = (*a)->CheckParity(nullptr);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
  a->reset();
  for (auto& p : paths) unlink(p.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace uraid

namespace uraid {
namespace {

// A member that takes `delay` per I/O (like a disk) and records how many
// I/Os were in flight at once across all members sharing `inflight`.
// While `*gather` is above 0, an I/O first waits (up to 2 s) until that
// many are in flight: an executor that issues them at once passes straight
// through, one that issues them in turn waits out every timeout and shows
// a lower peak. Without it the test timed thread wake-ups against a 5 ms
// I/O, and a loaded machine under ASan woke a pool thread too late.
class SlowMember : public testutil::ForwardingMember {
 public:
  SlowMember(Shared target, std::chrono::milliseconds delay,
             std::atomic<int>* inflight, std::atomic<int>* peak,
             std::atomic<int>* gather)
      : ForwardingMember(std::move(target)),
        delay_(delay),
        inflight_(inflight),
        peak_(peak),
        gather_(gather) {}
  absl::Status Read(void* b, size_t l, uint64_t o) override {
    Slow();
    return ForwardingMember::Read(b, l, o);
  }
  absl::Status Write(const void* b, size_t l, uint64_t o) override {
    Slow();
    return ForwardingMember::Write(b, l, o);
  }

 private:
  void Slow() {
    int now = inflight_->fetch_add(1) + 1;
    int p = peak_->load();
    while (now > p && !peak_->compare_exchange_weak(p, now)) {
    }
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (inflight_->load() < gather_->load() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    std::this_thread::sleep_for(delay_);
    inflight_->fetch_sub(1);
  }
  std::chrono::milliseconds delay_;
  std::atomic<int>* inflight_;
  std::atomic<int>* peak_;
  std::atomic<int>* gather_;
};

// With members that take milliseconds per I/O, every member I/O of a stripe
// write is in flight at once: a stripe costs one member latency, not N.
TEST(ArrayWrite, SlowMembersGetTheWholePlanInFlightAtOnce) {
  std::atomic<int> inflight{0}, peak{0}, gather{0};
  auto base = MakeMembers(5);
  std::vector<Shared> m;
  for (auto& b : base) {
    m.push_back(std::make_shared<SlowMember>(b, std::chrono::milliseconds(5),
                                             &inflight, &peak, &gather));
  }
  CreateOptions o = Opts();
  o.assume_clean = true;
  auto a = MustCreate(m, o);
  auto data = Pattern(4 * kChunk, 3);
  // The first writes teach the array that its members are slow.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(a->Write(data.data(), data.size(), i * 4 * kChunk).ok());
  }
  peak = 0;
  gather = 5;
  ASSERT_TRUE(a->Write(data.data(), data.size(), 3 * 4 * kChunk).ok());
  EXPECT_EQ(peak.load(), 5) << "a full-stripe write on 5 members should "
                               "have all 5 member writes in flight";
  // RMW: the 2 reads together, then the 2 writes together.
  peak = 0;
  gather = 2;
  ASSERT_TRUE(a->Write(data.data(), 4096, 8192, /*fua=*/true).ok());
  EXPECT_EQ(peak.load(), 2);
  gather = 0;
}

TEST(ArrayState, SafemodeDelayRunsOnTheArraysClock) {
  auto m = MakeMembers(3);
  auto clock = std::make_shared<StepClock>();
  CreateOptions o = Opts();
  o.clock = clock;
  auto a = MustCreate(m, o);
  a->StartBackground();
  auto d = Pattern(4096, 1);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 0).ok());
  // Past md's 200 ms in real time, none on the array's clock: still active.
  std::this_thread::sleep_for(std::chrono::milliseconds(600));
  EXPECT_FALSE(a->Info().clean);
  clock->Advance(150'000'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(a->Info().clean);
  // 200 ms on the clock since the write: clean at the next look (every
  // 100 ms of real time).
  clock->Advance(60'000'000);
  for (int i = 0; i < 40 && !a->Info().clean; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(a->Info().clean);
}

// AssembleOptions::safe_mode_delay_ms: another delay is kept on the
// array's clock, and 0 keeps the array active until its stop (md's "0
// disables safemode"), which still marks it clean.
TEST(ArrayState, SafemodeDelayIsAnAssembleOption) {
  auto m = MakeMembers(3);
  MustCreate(m, Opts()).reset();
  auto on_disk_clean = [&] {
    auto b = Bytes(*m[0]);
    auto sb = DecodeSuperblock(std::span<const uint8_t>(b).subspan(4096));
    return sb.ok() && sb->clean();
  };
  auto d = Pattern(4096, 1);
  auto clock = std::make_shared<StepClock>();
  // Assembled with `delay_ms`, started, and written once.
  auto assemble_and_write = [&](uint32_t delay_ms) {
    AssembleOptions o;
    o.clock = clock;
    o.safe_mode_delay_ms = delay_ms;
    absl::StatusOr<std::unique_ptr<Array>> a = Array::Assemble(Handles(m), o);
    EXPECT_TRUE(a.ok()) << a.status();
    if (!a.ok()) return std::unique_ptr<Array>();
    (*a)->StartBackground();
    EXPECT_TRUE((*a)->Write(d.data(), d.size(), 0).ok());
    return std::move(*a);
  };
  {
    std::unique_ptr<Array> a = assemble_and_write(1000);
    ASSERT_NE(a, nullptr);
    clock->Advance(600'000'000);  // past md's 200 ms, short of this one
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(a->Info().clean);
    EXPECT_FALSE(on_disk_clean());
    clock->Advance(400'000'000);
    EXPECT_TRUE(WaitUntil([&] { return a->Info().clean; }, 10));
    EXPECT_TRUE(on_disk_clean());
  }
  {
    std::unique_ptr<Array> a = assemble_and_write(0);
    ASSERT_NE(a, nullptr);
    clock->Advance(int64_t{3600} * 1'000'000'000);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(a->Info().clean);
    EXPECT_FALSE(on_disk_clean());
    a.reset();  // the stop marks it clean
    EXPECT_TRUE(on_disk_clean());
  }
}

}  // namespace
}  // namespace uraid
