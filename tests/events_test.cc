// SPDX-License-Identifier: MIT
// The array's events and log severities (uraid/events.h): which events a
// member failure, a rebuild, a second failure, a scrub and member
// management produce, with which fields; the current state a new
// subscriber sees; routine lines never at warning or worse; old line
// loggers still work.

#include "uraid/events.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "absl/strings/str_join.h"
#include "base/sync.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/member.h"

namespace uraid {
namespace {

using testutil::Handles;
using testutil::MakeMembers;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kMemberBytes = 4ull << 20;

// Everything an array reported, kept for the test to look at.
class Recorder {
 public:
  EventListener listener() {
    return [this](const Event& e) {
      MutexLock lock(&mu_);
      events_.push_back(e);
    };
  }
  Logger logger() {
    return [this](const LogRecord& r) {
      MutexLock lock(&mu_);
      records_.push_back(
          {r.level, r.message, r.event != nullptr ? r.event->name : ""});
    };
  }
  std::vector<Event> events() const {
    MutexLock lock(&mu_);
    return events_;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Event& e : events()) out.push_back(e.name);
    return out;
  }
  // The first event named `name`, waiting up to 10 s for it.
  std::optional<Event> WaitFor(const std::string& name) const {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      for (const Event& e : events()) {
        if (e.name == name) return e;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return std::nullopt;
  }
  struct Line {
    LogLevel level;
    std::string message;
    std::string event;
  };
  std::vector<Line> records() const {
    MutexLock lock(&mu_);
    return records_;
  }

 private:
  mutable Mutex mu_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  std::vector<Line> records_ ABSL_GUARDED_BY(mu_);
};

std::string Text(const Event::Value* v) {
  if (v == nullptr) return "<missing>";
  if (const auto* s = std::get_if<std::string>(v)) return *s;
  return "<not a string>";
}
int64_t Number(const Event::Value* v) {
  if (v == nullptr) return -1;
  if (const auto* n = std::get_if<int64_t>(v)) return *n;
  return -2;
}

struct Fixture {
  std::vector<std::shared_ptr<Member>> mem;
  std::vector<std::shared_ptr<FaultyMember>> faulty;
  Recorder rec;
  std::unique_ptr<Array> array;

  explicit Fixture(int n = 4) {
    mem = MakeMembers(n, kMemberBytes);
    std::vector<std::shared_ptr<Member>> wrapped;
    for (auto& m : mem) {
      faulty.push_back(std::make_shared<FaultyMember>(m));
      wrapped.push_back(faulty.back());
    }
    CreateOptions o;
    o.chunk_bytes = kChunk;
    o.assume_clean = true;
    o.name = "evt";
    array = testutil::MustCreate(wrapped, o, rec.logger());
    array->AddEventListener(rec.listener());
    array->StartBackground();
  }
  void WriteAll() {
    std::vector<uint8_t> data = testutil::Pattern(array->size(), 7);
    ASSERT_TRUE(array->Write(data.data(), data.size(), 0).ok());
  }
};

TEST(Events, MemberFailingByItselfGivesFailThenDegradedArray) {
  Fixture f;
  f.faulty[2]->SetFailed(true);
  std::vector<uint8_t> buf(f.array->size());
  // The read goes on from parity; the failure is reported.
  ASSERT_TRUE(f.array->Read(buf.data(), buf.size(), 0).ok());
  std::optional<Event> fail = f.rec.WaitFor("Fail");
  ASSERT_TRUE(fail.has_value()) << absl::StrJoin(f.rec.names(), ",");
  EXPECT_EQ(fail->member, "m2");
  EXPECT_EQ(fail->slot, 2);
  EXPECT_EQ(fail->array_name, "evt");
  EXPECT_EQ(fail->array, FormatUuid(f.array->Info().uuid));
  EXPECT_GT(fail->time, 1.7e9) << "seconds since the epoch";
  EXPECT_NE(Text(fail->Find("error")), "<missing>");
  std::optional<Event> deg = f.rec.WaitFor("DegradedArray");
  ASSERT_TRUE(deg.has_value());
  const auto* gone =
      std::get_if<std::vector<uint64_t>>(deg->Find("gone_slots"));
  ASSERT_NE(gone, nullptr);
  EXPECT_EQ(*gone, std::vector<uint64_t>{2});
  const std::vector<std::string> names = f.rec.names();
  EXPECT_LT(std::find(names.begin(), names.end(), "Fail"),
            std::find(names.begin(), names.end(), "DegradedArray"));
  // The log carries the failure at error with its event, never routine.
  bool logged = false;
  for (const auto& r : f.rec.records()) {
    if (r.event == "Fail") {
      logged = true;
      EXPECT_EQ(r.level, LogLevel::kError) << r.message;
    }
  }
  EXPECT_TRUE(logged);
}

TEST(Events, SpareRebuildReportsStartMilestonesFinishAndSpareActive) {
  Fixture f;
  f.WriteAll();
  ASSERT_TRUE(f.array->FailMember("m1").ok());
  ASSERT_TRUE(f.rec.WaitFor("DegradedArray").has_value());
  ASSERT_TRUE(f.array->AddMember(NewMemoryMember("spare", kMemberBytes)).ok());
  ASSERT_TRUE(f.array->WaitForJob().ok());
  std::optional<Event> start = f.rec.WaitFor("RebuildStarted");
  ASSERT_TRUE(start.has_value()) << absl::StrJoin(f.rec.names(), ",");
  EXPECT_EQ(start->member, "spare");
  EXPECT_EQ(start->slot, 1);
  EXPECT_EQ(Text(start->Find("kind")), "recover");
  std::optional<Event> done = f.rec.WaitFor("SpareActive");
  ASSERT_TRUE(done.has_value()) << absl::StrJoin(f.rec.names(), ",");
  EXPECT_EQ(done->member, "spare");
  EXPECT_EQ(done->slot, 1);
  std::optional<Event> fin = f.rec.WaitFor("RebuildFinished");
  ASSERT_TRUE(fin.has_value());
  EXPECT_EQ(Text(fin->Find("result")), "completed");
  // md's milestones, each once and in order, between start and finish.
  std::vector<std::string> seq;
  for (const std::string& n : f.rec.names()) {
    if (n.rfind("Rebuild", 0) == 0 || n == "SpareActive" || n == "SpareAdded")
      seq.push_back(n);
  }
  EXPECT_EQ(absl::StrJoin(seq, ","),
            "SpareAdded,RebuildStarted,Rebuild20,Rebuild40,Rebuild60,"
            "Rebuild80,RebuildFinished,SpareActive");
}

TEST(Events, SecondFailureGivesArrayFailedAtCritical) {
  Fixture f;
  f.faulty[0]->SetFailed(true);
  f.faulty[3]->SetFailed(true);
  std::vector<uint8_t> buf(f.array->size());
  (void)f.array->Read(buf.data(), buf.size(), 0);
  std::optional<Event> failed = f.rec.WaitFor("ArrayFailed");
  ASSERT_TRUE(failed.has_value()) << absl::StrJoin(f.rec.names(), ",");
  const auto* gone =
      std::get_if<std::vector<uint64_t>>(failed->Find("gone_slots"));
  ASSERT_NE(gone, nullptr);
  EXPECT_EQ(*gone, (std::vector<uint64_t>{0, 3}));
  for (const auto& r : f.rec.records()) {
    if (r.event == "ArrayFailed") {
      EXPECT_EQ(r.level, LogLevel::kCritical);
    }
  }
  // A new subscriber sees the failed state first thing.
  std::vector<Event> state = f.array->StateEvents();
  ASSERT_GE(state.size(), 2u);
  EXPECT_EQ(state[0].name, "NewArray");
  EXPECT_NE(Text(state[0].Find("state")).find("failed"), std::string::npos);
  EXPECT_EQ(state[1].name, "ArrayFailed");
}

TEST(Events, StateEventsOfAHealthyAndADegradedArray) {
  Fixture f;
  std::vector<Event> state = f.array->StateEvents();
  ASSERT_EQ(state.size(), 1u) << "healthy: only NewArray";
  EXPECT_EQ(state[0].name, "NewArray");
  EXPECT_EQ(Text(state[0].Find("state")), "clean");
  EXPECT_EQ(Number(state[0].Find("raid_devices")), 4);
  ASSERT_TRUE(f.array->FailMember("m3").ok());
  state = f.array->StateEvents();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[1].name, "DegradedArray");
}

TEST(Events, CheckFinishedCarriesTheMismatches) {
  Fixture f;
  f.WriteAll();
  ASSERT_TRUE(f.array->Flush().ok());
  // Corrupt one data chunk of stripe 3 behind the array's back.
  std::vector<uint8_t> junk(512, 0xA5);
  auto info = f.array->Info();
  ASSERT_TRUE(
      f.mem[0]
          ->Write(junk.data(), junk.size(), info.data_offset_bytes + 3 * kChunk)
          .ok());
  ASSERT_TRUE(f.array->StartScrub(/*repair=*/false).ok());
  ASSERT_TRUE(f.array->WaitForJob().ok());
  std::optional<Event> e = f.rec.WaitFor("CheckFinished");
  ASSERT_TRUE(e.has_value()) << absl::StrJoin(f.rec.names(), ",");
  EXPECT_EQ(Number(e->Find("mismatches")), 1);
  const auto* first =
      std::get_if<std::vector<uint64_t>>(e->Find("first_mismatches"));
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(*first, std::vector<uint64_t>{3});
  EXPECT_EQ(Text(e->Find("result")), "completed");
  for (const auto& r : f.rec.records()) {
    if (r.event == "CheckFinished") {
      EXPECT_EQ(r.level, LogLevel::kWarning);
    }
  }
}

TEST(Events, RemovingASpareAndExpectedSparesGiveMemberRemovedAndSparesMissing) {
  auto mem = MakeMembers(3, kMemberBytes);
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.assume_clean = true;
  testutil::MustCreate(mem, o).reset();
  AssembleOptions ao;
  ao.expected_spares = 1;
  Recorder rec;
  auto a = Array::Assemble(Handles(mem), ao, rec.logger());
  ASSERT_TRUE(a.ok()) << a.status();
  std::vector<Event> state = (*a)->StateEvents();
  ASSERT_EQ(state.size(), 2u);
  EXPECT_EQ(state[1].name, "SparesMissing");
  EXPECT_EQ(Number(state[1].Find("expected")), 1);
  (*a)->AddEventListener(rec.listener());
  ASSERT_TRUE((*a)->AddMember(NewMemoryMember("s", kMemberBytes)).ok());
  EXPECT_EQ((*a)->StateEvents().size(), 1u) << "the spare is there now";
  ASSERT_TRUE((*a)->RemoveMember("s").ok());
  std::optional<Event> removed = rec.WaitFor("MemberRemoved");
  ASSERT_TRUE(removed.has_value());
  EXPECT_EQ(removed->member, "s");
  EXPECT_EQ(removed->slot, -1);
  EXPECT_TRUE(rec.WaitFor("SparesMissing").has_value());
}

TEST(Events, RoutineWorkLogsNothingAtWarningOrWorse) {
  auto mem = MakeMembers(4, kMemberBytes);
  Recorder rec;
  CreateOptions o;
  o.chunk_bytes = kChunk;
  auto a = testutil::MustCreate(mem, o, rec.logger());
  ASSERT_NE(a, nullptr);
  a->StartBackground();
  std::vector<uint8_t> data = testutil::Pattern(a->size() / 2, 3);
  ASSERT_TRUE(a->Write(data.data(), data.size(), 0).ok());
  ASSERT_TRUE(a->StartScrub(false).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  ASSERT_TRUE(a->AddMember(NewMemoryMember("s", kMemberBytes)).ok());
  ASSERT_TRUE(a->RemoveMember("s").ok());
  a.reset();
  ASSERT_FALSE(rec.records().empty());
  for (const auto& r : rec.records()) {
    EXPECT_LT(r.level, LogLevel::kWarning) << r.message;
  }
}

TEST(Events, LineLoggersStillWorkAndRemovedListenersHearNothing) {
  auto mem = MakeMembers(3, kMemberBytes);
  std::vector<std::string> lines;
  Mutex mu;
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.assume_clean = true;
  auto a = testutil::MustCreate(mem, o, [&](const std::string& line) {
    MutexLock lock(&mu);
    lines.push_back(line);
  });
  ASSERT_NE(a, nullptr);
  int heard = 0;
  const uint64_t id = a->AddEventListener([&](const Event&) { ++heard; });
  a->RemoveEventListener(id);
  ASSERT_TRUE(a->FailMember("m1").ok());
  EXPECT_EQ(heard, 0);
  MutexLock lock(&mu);
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("m1 (slot 1) failed") != std::string::npos;
  })) << absl::StrJoin(lines, "\n");
}

}  // namespace
}  // namespace uraid
