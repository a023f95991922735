// SPDX-License-Identifier: MIT
// Tests of the metadata owner (roster/roster.h) over memory members and a
// fake host: a table of every edit against every slot state (what Apply
// decides, what it leaves in the slot, whether the superblocks were
// written and what they say), a superblock write that fails a member
// mid-update, and a failure racing a hand-over.

#include "roster/roster.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "array/member_superblock.h"
#include "uraid/geometry.h"
#include "uraid/member.h"

namespace uraid {
namespace {

constexpr int kDisks = 4;
constexpr uint64_t kMemberBytes = 2 << 20;
// Sectors: the data area starts 1 MiB in, past the superblock.
constexpr uint64_t kDataOffset = 2048;
constexpr uint64_t kDataSize = kMemberBytes / 512 - kDataOffset;
constexpr uint64_t kChunk = 64 * 1024;

class FakeHost : public RosterHost {
 public:
  uint64_t CurrentChunkBytes() const override { return kChunk; }
  uint64_t DirtyResyncSectors() const override { return 0; }
  void WriteBitmapEvents(uint64_t events) override {
    bitmap_events.push_back(events);
  }
  std::optional<BitmapSuper> BitmapHeader() const override { return bitmap; }
  void SlotHealthChanged() override { ++health_changes; }
  void Log(LogLevel, const std::string& line) const override {
    std::lock_guard<std::mutex> l(mu);
    lines.push_back(line);
  }
  void Report(LogLevel, Event e, const std::string&) const override {
    std::lock_guard<std::mutex> l(mu);
    events.push_back(e.name);
  }

  std::optional<BitmapSuper> bitmap;
  std::vector<uint64_t> bitmap_events;
  std::atomic<int> health_changes{0};
  mutable std::mutex mu;
  mutable std::vector<std::string> lines;
  mutable std::vector<std::string> events;
};

std::shared_ptr<FaultyMember> NewMember(const std::string& name) {
  return std::make_shared<FaultyMember>(NewMemoryMember(name, kMemberBytes));
}

// What a slot looks like before an edit.
enum class Start {
  kActive,
  kReplacing,  // active, with a replace target
  kRebuilding,
  kFaulty,
  kMissing,
};

const char* StartName(Start s) {
  switch (s) {
    case Start::kActive:
      return "active";
    case Start::kReplacing:
      return "replacing";
    case Start::kRebuilding:
      return "rebuilding";
    case Start::kFaulty:
      return "faulty";
    case Start::kMissing:
      return "missing";
  }
  return "?";
}

// Four slots, slot 1 in state `start`, one spare. Members are devices 0..3
// (slot i holds device i), the spare device 4, a replace target device 5.
class Fixture {
 public:
  explicit Fixture(Start start) {
    std::vector<std::unique_ptr<Slot>> slots;
    for (int i = 0; i < kDisks; ++i) {
      members.push_back(NewMember("m" + std::to_string(i)));
      auto s = std::make_unique<Slot>();
      const DeviceId id{static_cast<uint32_t>(i), {}, kDataSize};
      SlotState st = SlotState::kActive;
      if (i == 1 && start == Start::kRebuilding) st = SlotState::kRebuilding;
      if (i == 1 && start == Start::kFaulty) st = SlotState::kFaulty;
      std::shared_ptr<Member> m = members.back();
      if (i == 1 && start == Start::kMissing) {
        st = SlotState::kMissing;
        m = nullptr;
      }
      Roster::Seat(*s, m, id, st, /*front=*/3);
      if (i == 1 && start == Start::kReplacing) {
        target = NewMember("r1");
        s->replacement.store(target);
        s->repl_id = DeviceId{5, {}, kDataSize};
        s->repl_front.store(7);
      }
      slots.push_back(std::move(s));
    }
    spare = NewMember("s0");
    std::vector<Spare> spares{Spare{spare, DeviceId{4, {}, kDataSize}}};
    Superblock sb;
    sb.raid_disks = kDisks;
    sb.chunksize = kChunk / 512;
    sb.size = kDataSize;
    sb.data_offset = kDataOffset;
    sb.events = 10;
    roster = std::make_unique<Roster>(host, std::move(slots), sb,
                                      std::move(spares), /*read_only=*/false);
  }

  Slot& slot(int i) { return *roster->slots()[i]; }
  // The events count on `m`'s superblock, or 0 when it has none.
  static uint64_t EventsOn(Member& m) {
    absl::StatusOr<Superblock> sb = ReadSuperblock(m);
    return sb.ok() ? sb->events : 0;
  }
  static int RoleOn(Member& m) {
    absl::StatusOr<Superblock> sb = ReadSuperblock(m);
    return sb.ok() ? sb->role() : -1;
  }

  FakeHost host;
  std::vector<std::shared_ptr<FaultyMember>> members;
  std::shared_ptr<FaultyMember> target;
  std::shared_ptr<FaultyMember> spare;
  std::unique_ptr<Roster> roster;
};

// One row: an edit of slot 1 applied to a slot in state `start`.
struct Row {
  const char* edit;
  Start start;
  Applied::Outcome outcome;
  SlotState after;
  // Who holds slot 1 afterwards: "m1", the target "r1", the spare "s0",
  // or "" for nobody.
  const char* holder;
  bool persisted;
};

RosterEdit MakeEdit(const std::string& name, Fixture& f) {
  const Member* holder = f.members[1].get();
  if (name == "fail") return edit::Fail{1, holder, "test"};
  if (name == "fail-stranger") return edit::Fail{1, f.spare.get(), "test"};
  if (name == "drop") {
    return edit::DropReplacement{1, f.target, absl::InternalError("test")};
  }
  if (name == "promote") return edit::PromoteSpare{1, f.spare};
  if (name == "remove") return edit::Remove{1, f.members[1]};
  if (name == "replace") {
    return edit::StartReplace{1, NewMember("n1"), false,
                              DeviceId{0, {}, kDataSize}, "m1"};
  }
  if (name == "checkpoint") return edit::CheckpointRebuild{1, 5};
  if (name == "finish") return edit::FinishRebuild{1, 16};
  if (name == "swap") return edit::SwapInReplacement{1};
  return edit::Persist{};
}

constexpr Applied::Outcome kDone = Applied::kDone;
constexpr Applied::Outcome kRefused = Applied::kRefused;
constexpr SlotState kA = SlotState::kActive;
constexpr SlotState kR = SlotState::kRebuilding;
constexpr SlotState kF = SlotState::kFaulty;
constexpr SlotState kM = SlotState::kMissing;

const Row kRows[] = {
    // Fail slot 1 if m1 still holds it.
    {"fail", Start::kActive, Applied::kFailed, kF, "m1", true},
    {"fail", Start::kReplacing, Applied::kHandedOver, kR, "r1", true},
    {"fail", Start::kRebuilding, Applied::kTargetFailed, kF, "m1", true},
    {"fail", Start::kFaulty, Applied::kGone, kF, "m1", false},
    {"fail", Start::kMissing, Applied::kNotHolder, kM, "", false},
    // A late error from a member that does not hold the slot.
    {"fail-stranger", Start::kActive, Applied::kNotHolder, kA, "m1", false},
    {"fail-stranger", Start::kReplacing, Applied::kNotHolder, kA, "m1", false},
    // Drop the replace target r1.
    {"drop", Start::kReplacing, kDone, kA, "m1", true},
    {"drop", Start::kActive, kRefused, kA, "m1", false},
    // Promote the spare into slot 1.
    {"promote", Start::kActive, kRefused, kA, "m1", false},
    {"promote", Start::kRebuilding, kRefused, kR, "m1", false},
    {"promote", Start::kFaulty, kDone, kR, "s0", true},
    {"promote", Start::kMissing, kDone, kR, "s0", true},
    // Remove m1.
    {"remove", Start::kActive, kRefused, kA, "m1", false},
    {"remove", Start::kRebuilding, kRefused, kR, "m1", false},
    {"remove", Start::kFaulty, kDone, kM, "", true},
    // Start replacing m1 with a new member.
    {"replace", Start::kActive, kDone, kA, "m1", true},
    {"replace", Start::kRebuilding, kRefused, kR, "m1", false},
    {"replace", Start::kFaulty, kRefused, kF, "m1", false},
    // Rebuild checkpoint and end.
    {"checkpoint", Start::kRebuilding, kDone, kR, "m1", true},
    {"checkpoint", Start::kActive, kRefused, kA, "m1", false},
    {"checkpoint", Start::kFaulty, kRefused, kF, "m1", false},
    {"finish", Start::kRebuilding, kDone, kA, "m1", true},
    {"finish", Start::kActive, kRefused, kA, "m1", false},
    {"finish", Start::kFaulty, kRefused, kF, "m1", false},
    // Swap in the finished replacement.
    {"swap", Start::kReplacing, kDone, kA, "r1", true},
    {"swap", Start::kActive, kRefused, kA, "m1", false},
    {"swap", Start::kRebuilding, kRefused, kR, "m1", false},
};

TEST(RosterTable, EveryEditAgainstEverySlotState) {
  for (const Row& row : kRows) {
    SCOPED_TRACE(std::string(row.edit) + " on a " + StartName(row.start) +
                 " slot");
    Fixture f(row.start);
    const uint64_t gen = f.slot(1).gen.load();
    const Applied a = f.roster->Apply(MakeEdit(row.edit, f));
    EXPECT_EQ(a.outcome, row.outcome);
    if (row.outcome == kDone || row.outcome == Applied::kFailed ||
        row.outcome == Applied::kHandedOver ||
        row.outcome == Applied::kTargetFailed) {
      EXPECT_TRUE(a.status.ok()) << a.status;
    }
    EXPECT_EQ(f.slot(1).state.load(), row.after);
    std::shared_ptr<Member> holder = f.slot(1).member.load();
    EXPECT_EQ(holder ? holder->Name() : "", row.holder);
    // A generation change is always complete (even), never half-done.
    EXPECT_EQ(f.slot(1).gen.load() % 2, 0u);
    if (std::string(row.holder) != "m1" && std::string(row.holder) != "") {
      EXPECT_GT(f.slot(1).gen.load(), gen);  // plans made before must redo
    }
    // Persisted: every member that still belongs got events 11, with the
    // bitmap header first; else nothing was written.
    EXPECT_EQ(Fixture::EventsOn(*f.members[0]), row.persisted ? 11u : 0u);
    EXPECT_EQ(f.host.bitmap_events.size(), row.persisted ? 1u : 0u);
    if (row.persisted && holder != nullptr && row.after != kF) {
      EXPECT_EQ(Fixture::RoleOn(*holder), 1);
    }
  }
}

TEST(RosterTable, HandOverRetiresTheOldDeviceAndRebuildsFromTheCopyFront) {
  Fixture f(Start::kReplacing);
  const Applied a = f.roster->Apply(edit::Fail{1, f.members[1].get(), "x"});
  ASSERT_EQ(a.outcome, Applied::kHandedOver);
  EXPECT_EQ(a.from, 7u);
  EXPECT_EQ(f.slot(1).front.load(), 7u);
  EXPECT_EQ(f.slot(1).durable_front.load(), 0u);  // nothing flushed yet
  EXPECT_EQ(f.slot(1).id.dev_number, 5u);
  EXPECT_EQ(f.slot(1).replacement.load(), nullptr);
  absl::StatusOr<Superblock> sb = ReadSuperblock(*f.target);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(sb->dev_roles[1], kRoleFaulty);  // m1's device, retired
  EXPECT_EQ(sb->role(), 1);
  EXPECT_EQ(sb->recovery_offset, 0u);
}

TEST(RosterTable, SecondFailureFailsTheArray) {
  Fixture f(Start::kFaulty);
  const Applied a = f.roster->Apply(edit::Fail{2, nullptr, "x"});
  EXPECT_EQ(a.outcome, Applied::kFailed);
  EXPECT_TRUE(f.roster->failed());
  // Recorded all the same: the survivors list both slots faulty.
  absl::StatusOr<Superblock> sb = ReadSuperblock(*f.members[0]);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(sb->dev_roles[1], kRoleFaulty);
  EXPECT_EQ(sb->dev_roles[2], kRoleFaulty);
}

TEST(RosterTable, AddSpareGivesTheNextDeviceNumber) {
  Fixture f(Start::kActive);
  const Applied a = f.roster->Apply(
      edit::AddSpare{NewMember("s1"), DeviceId{0, {}, kDataSize}});
  EXPECT_EQ(a.outcome, kDone);
  EXPECT_EQ(a.dev_number, 5u);
  EXPECT_EQ(f.roster->Spares().size(), 2u);
  EXPECT_EQ(f.roster->Apply(edit::RemoveSpare{f.spare}).outcome, kDone);
  EXPECT_EQ(f.roster->Spares().size(), 1u);
}

TEST(RosterTable, SuperblockWriteThatFailsAMemberFailsItsSlot) {
  Fixture f(Start::kActive);
  f.members[2]->SetFailed(true);
  const Applied a = f.roster->Apply(edit::Persist{});
  EXPECT_TRUE(a.status.ok()) << a.status;
  EXPECT_TRUE(a.member_failed);
  EXPECT_EQ(f.slot(2).state.load(), kF);
  // The host hears of it from the roster itself, whichever edit persisted.
  EXPECT_EQ(f.host.health_changes.load(), 1);
  // The update was made again without it: one event more.
  EXPECT_EQ(Fixture::EventsOn(*f.members[0]), 12u);
  absl::StatusOr<Superblock> sb = ReadSuperblock(*f.members[0]);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(sb->dev_roles[2], kRoleFaulty);
}

TEST(RosterTable, SetCleanWritesTheResyncOffset) {
  Fixture f(Start::kActive);
  ASSERT_TRUE(f.roster->Apply(edit::SetClean{false}).status.ok());
  absl::StatusOr<Superblock> sb = ReadSuperblock(*f.members[3]);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(sb->resync_offset, 0u);  // the host's DirtyResyncSectors
  ASSERT_TRUE(f.roster->Apply(edit::SetClean{true}).status.ok());
  sb = ReadSuperblock(*f.members[3]);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_TRUE(sb->clean());
}

TEST(RosterTable, ReshapeFieldsAreStagedThenPersisted) {
  Fixture f(Start::kActive);
  const uint64_t member_bytes = kDataSize * 512;
  absl::StatusOr<Geometry> from = Geometry::Make(
      5, Layout::kLeftSymmetric, kChunk, kDisks, member_bytes - kChunk);
  absl::StatusOr<Geometry> to = Geometry::Make(
      5, Layout::kLeftSymmetric, kChunk, kDisks + 1, member_bytes - kChunk);
  ASSERT_TRUE(from.ok() && to.ok());
  const uint64_t offset = kDataOffset * 512;
  {
    MutexLock lock(f.roster->mu());
    f.roster->SetReshapeLocked(*from, offset, *to, offset - kChunk, 3 * kChunk);
  }
  // Staged only: nothing is written until an edit persists it.
  EXPECT_EQ(Fixture::EventsOn(*f.members[0]), 0u);
  ASSERT_TRUE(f.roster->Apply(edit::Persist{}).status.ok());
  absl::StatusOr<Superblock> sb = ReadSuperblock(*f.members[0]);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_NE(sb->feature_map & kFeatureReshapeActive, 0u);
  EXPECT_EQ(sb->raid_disks, static_cast<uint32_t>(kDisks + 1));
  EXPECT_EQ(sb->delta_disks, 1);
  EXPECT_EQ(sb->new_offset, -static_cast<int32_t>(kChunk / 512));
  EXPECT_EQ(sb->reshape_position, 3 * kChunk / 512);
  {
    MutexLock lock(f.roster->mu());
    f.roster->EndReshapeLocked(*to, offset - kChunk, kChunk / 512);
  }
  ASSERT_TRUE(f.roster->Apply(edit::Persist{}).status.ok());
  sb = ReadSuperblock(*f.members[0]);
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(sb->feature_map & kFeatureReshapeActive, 0u);
  EXPECT_EQ(sb->reshape_position, 0u);
  EXPECT_EQ(sb->data_offset, kDataOffset - kChunk / 512);
  EXPECT_EQ(sb->data_size, kDataSize + kChunk / 512);
}

// Two requests hit the dying member of a slot being replaced while the
// replace finishes: exactly one change of holder happens, and the target
// is never failed by the late error meant for the old member.
TEST(RosterConcurrency, FailureRacingAHandOver) {
  for (int round = 0; round < 50; ++round) {
    SCOPED_TRACE(round);
    Fixture f(Start::kReplacing);
    const Member* old = f.members[1].get();
    std::atomic<bool> go{false};
    Applied fails[2], swap;
    std::thread t0([&] {
      while (!go.load()) std::this_thread::yield();
      fails[0] = f.roster->Apply(edit::Fail{1, old, "a"});
    });
    std::thread t1([&] {
      while (!go.load()) std::this_thread::yield();
      fails[1] = f.roster->Apply(edit::Fail{1, old, "b"});
    });
    std::thread t2([&] {
      while (!go.load()) std::this_thread::yield();
      swap = f.roster->Apply(edit::SwapInReplacement{1});
    });
    go.store(true);
    t0.join();
    t1.join();
    t2.join();
    EXPECT_EQ(f.slot(1).member.load(), f.target);
    EXPECT_EQ(f.slot(1).replacement.load(), nullptr);
    EXPECT_EQ(f.slot(1).gen.load() % 2, 0u);
    int handed = 0;
    for (const Applied& a : fails) {
      EXPECT_TRUE(a.outcome == Applied::kHandedOver ||
                  a.outcome == Applied::kNotHolder)
          << a.outcome;
      handed += a.outcome == Applied::kHandedOver;
    }
    if (swap.outcome == kDone) {
      // The swap came first: the failures were late and did nothing.
      EXPECT_EQ(handed, 0);
      EXPECT_EQ(f.slot(1).state.load(), kA);
    } else {
      // A failure came first: the target goes on as a rebuild.
      EXPECT_EQ(handed, 1);
      EXPECT_EQ(swap.outcome, kRefused);
      EXPECT_EQ(f.slot(1).state.load(), kR);
    }
  }
}

}  // namespace
}  // namespace uraid
