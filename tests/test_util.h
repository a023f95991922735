// SPDX-License-Identifier: MIT
// Helpers shared by the unit tests: arrays on in-memory members (making
// members and handles to them, creating an array, reference data and
// checking an array against it; each test keeps its own constants and
// passes them in), and running the external tools (mdadm, blkid) the
// interop tests compare with.

#ifndef URAID_TESTS_TEST_UTIL_H_
#define URAID_TESTS_TEST_UTIL_H_

#include <stdio.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <shared_mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "uraid/array.h"
#include "uraid/clock.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid::testutil {

// `n` in-memory members of `size` bytes each, named <prefix>0, <prefix>1...
inline std::vector<std::shared_ptr<Member>> MakeMembers(
    int n, uint64_t size, const std::string& prefix = "m") {
  std::vector<std::shared_ptr<Member>> v;
  for (int i = 0; i < n; ++i) {
    v.push_back(std::shared_ptr<Member>(
        NewMemoryMember(absl::StrFormat("%s%d", prefix, i), size)));
  }
  return v;
}

// Handles an array can own while the test keeps the members; a null member
// (a missing slot) stays null.
inline std::vector<std::unique_ptr<Member>> Handles(
    const std::vector<std::shared_ptr<Member>>& v) {
  std::vector<std::unique_ptr<Member>> out;
  for (const auto& m : v) out.push_back(m ? ShareMember(m) : nullptr);
  return out;
}

// A member that forwards every call to `target`: tests derive from it to
// delay, hold or count the calls they care about.
class ForwardingMember : public Member {
 public:
  explicit ForwardingMember(std::shared_ptr<Member> target)
      : target_(std::move(target)) {}
  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    return target_->Read(buf, len, offset);
  }
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
    return target_->Write(buf, len, offset);
  }
  absl::Status Flush() override { return target_->Flush(); }
  absl::Status Discard(size_t len, uint64_t offset) override {
    return target_->Discard(len, offset);
  }
  bool DiscardZeroes() const override { return target_->DiscardZeroes(); }
  uint64_t Size() const override { return target_->Size(); }
  const std::string& Name() const override { return target_->Name(); }

 private:
  std::shared_ptr<Member> target_;
};

// Every byte of `m` (a crash image: what the member holds now).
using Image = std::vector<uint8_t>;
inline Image Snapshot(Member& m) {
  Image img(m.Size());
  EXPECT_TRUE(m.Read(img.data(), img.size(), 0).ok());
  return img;
}

// Members whose I/O can be held all at once, so their images are taken at
// one instant, as kill -9 leaves them: imaged one by one under a live
// array, a checkpoint written between two copies gives images no crash can
// leave (and, on a loaded machine, a pass further on than the test saw).
// Thread-safe.
class MemberGate {
 public:
  // `raw` wrapped: every call passes the gate.
  std::shared_ptr<Member> Wrap(std::shared_ptr<Member> raw) {
    raw_.push_back(raw);
    return std::make_shared<Gated>(std::move(raw), mu_);
  }
  // Images of every wrapped member (in Wrap order) with no call in flight.
  std::vector<Image> SnapshotAll() {
    std::unique_lock hold(mu_);
    std::vector<Image> out;
    for (const auto& m : raw_) out.push_back(Snapshot(*m));
    return out;
  }

 private:
  class Gated : public ForwardingMember {
   public:
    Gated(std::shared_ptr<Member> t, std::shared_mutex& mu)
        : ForwardingMember(std::move(t)), mu_(mu) {}
    absl::Status Read(void* buf, size_t len, uint64_t offset) override {
      std::shared_lock pass(mu_);
      return ForwardingMember::Read(buf, len, offset);
    }
    absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
      std::shared_lock pass(mu_);
      return ForwardingMember::Write(buf, len, offset);
    }
    absl::Status Flush() override {
      std::shared_lock pass(mu_);
      return ForwardingMember::Flush();
    }
    absl::Status Discard(size_t len, uint64_t offset) override {
      std::shared_lock pass(mu_);
      return ForwardingMember::Discard(len, offset);
    }

   private:
    std::shared_mutex& mu_;
  };
  std::shared_mutex mu_;
  std::vector<std::shared_ptr<Member>> raw_;
};

// A new in-memory member named t<i> holding `img`.
inline std::shared_ptr<Member> FromImage(const Image& img, int i) {
  std::shared_ptr<Member> m(
      NewMemoryMember(absl::StrFormat("t%d", i), img.size()));
  EXPECT_TRUE(m->Write(img.data(), img.size(), 0).ok());
  return m;
}

// The decoded 1.2 superblock of `m` (a test failure and a default one when
// it does not decode).
inline Superblock SuperOf(Member& m) {
  std::vector<uint8_t> b(kSbBlockBytes);
  EXPECT_TRUE(m.Read(b.data(), b.size(), kSb12OffsetBytes).ok());
  absl::StatusOr<Superblock> sb = DecodeSuperblock(b);
  EXPECT_TRUE(sb.ok()) << sb.status();
  return sb.ok() ? *sb : Superblock{};
}

// Array::Create over handles to `m`; a failure is a test failure, and
// nullptr.
inline std::unique_ptr<Array> MustCreate(
    const std::vector<std::shared_ptr<Member>>& m, const CreateOptions& o,
    Logger log = nullptr) {
  auto a = Array::Create(Handles(m), o, std::move(log));
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? std::move(*a) : nullptr;
}

// How many random steps (operations, rounds) a randomized test runs: `n`
// scaled by URAID_RANDOM_STEPS_PERCENT (1 to 100; default and otherwise
// 100), at least 1. scripts/test.sh's ASan+UBSan and TSan passes set 50:
// there the same tests, configurations and assertions run on code several
// times slower, looking for memory errors and data races (which TSan
// reports whichever order the two accesses ran in) rather than for the
// rare interleaving the full count is there to find (the plain ctest run
// keeps the full count). CI time.
inline int RandomSteps(int n) {
  const char* s = std::getenv("URAID_RANDOM_STEPS_PERCENT");
  const int percent = s == nullptr ? 100 : std::atoi(s);
  if (percent < 1 || percent >= 100) return n;
  return std::max(1, n * percent / 100);
}

// `n` pseudo-random bytes, the same for the same `seed`.
inline std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// An array made with `o` over `m`, filled with Pattern(seed) (returned in
// *data) and flushed, with slot 1 failed; a failure is a test failure, and
// nullptr.
inline std::unique_ptr<Array> FilledThenDegraded(
    const std::vector<std::shared_ptr<Member>>& m, const CreateOptions& o,
    uint32_t seed, std::vector<uint8_t>* data) {
  auto a = MustCreate(m, o);
  if (a == nullptr) return nullptr;
  *data = Pattern(a->size(), seed);
  if (!a->Write(data->data(), data->size(), 0).ok() || !a->Flush().ok() ||
      !a->FailSlot(1).ok()) {
    ADD_FAILURE() << "could not fill and degrade the array";
    return nullptr;
  }
  return a;
}

// The array's first want.size() bytes are `want`.
inline void ExpectContents(Array& a, const std::vector<uint8_t>& want) {
  std::vector<uint8_t> got(want.size());
  ASSERT_TRUE(a.Read(got.data(), got.size(), 0).ok());
  EXPECT_TRUE(got == want) << "array contents differ from the reference";
}

// Stripes whose parity does not match; ~0 (and a test failure) when the
// check fails.
inline uint64_t Mismatches(Array& a) {
  auto r = a.CheckParity(nullptr);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ~0ull;
}

// Polls `done` every 25 ms for up to `seconds` of real time; true once it
// holds.
template <typename F>
bool WaitUntil(F done, double seconds) {
  for (int t = 0; t < seconds * 40; ++t) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  return done();
}

// An array's clock (CreateOptions::clock) that moves only when the test
// moves it: sleepers on it return at once (and move it).
class StepClock final : public Clock {
 public:
  int64_t NowNs() override { return now_.load(); }
  void SleepForNs(int64_t ns) override { now_.fetch_add(ns); }
  void Advance(int64_t ns) { now_.fetch_add(ns); }

 private:
  std::atomic<int64_t> now_{1'000'000'000'000};
};

// Two client threads writing and reading `a` while `run()` goes on (a
// reshape, a takeover): each writes 4 KiB to `max_blocks` * 4 KiB of
// random bytes at a random 4 KiB-aligned offset, updating `ref`, then reads
// a random range back against `ref`. Returns the failed requests and wrong
// reads. The writers are seeded `seed` and `seed` + 1, so a test's
// sequence is the same every run. A write and its `ref` update are one
// step against the reads (std::mutex, which TSan sees; Debian's
// absl::Mutex is not instrumented).
template <typename F>
int UnderWriters(Array& a, std::vector<uint8_t>& ref, F run, int max_blocks,
                 uint32_t seed) {
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::atomic<int> errors{0};
  const uint64_t bytes = ref.size();
  auto writer = [&](uint32_t s) {
    std::mt19937_64 rng(s);
    std::vector<uint8_t> buf(uint64_t{4096} * max_blocks);
    std::vector<uint8_t> got(buf.size());
    while (!stop.load()) {
      const uint64_t len = 4096 * (1 + rng() % max_blocks);
      const uint64_t off = (rng() % ((bytes - len) / 4096)) * 4096;
      for (uint64_t i = 0; i < len; ++i) buf[i] = static_cast<uint8_t>(rng());
      {
        std::lock_guard<std::mutex> lock(mu);
        if (!a.Write(buf.data(), len, off).ok()) ++errors;
        std::memcpy(ref.data() + off, buf.data(), len);
      }
      const uint64_t roff = (rng() % ((bytes - len) / 4096)) * 4096;
      std::lock_guard<std::mutex> lock(mu);
      if (!a.Read(got.data(), len, roff).ok() ||
          std::memcmp(got.data(), ref.data() + roff, len) != 0) {
        ++errors;
      }
    }
  };
  std::thread w1(writer, seed), w2(writer, seed + 1);
  run();
  stop.store(true);
  w1.join();
  w2.join();
  return errors.load();
}

// The lines an array logs (its Logger), for tests that look for one.
struct LogLines {
  std::mutex mu;
  std::vector<std::string> lines;
  Logger logger() {
    return [this](const std::string& l) {
      std::lock_guard<std::mutex> lock(mu);
      lines.push_back(l);
    };
  }
  // Whether a line logged so far contains `s`.
  bool Has(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& l : lines) {
      if (l.find(s) != std::string::npos) return true;
    }
    return false;
  }
};

// A member whose writes stop reaching it once a budget shared by all the
// array's members runs out: a power cut at one point of the write order.
// Everything before it is on the member, nothing after.
class CutMember : public Member {
 public:
  CutMember(std::shared_ptr<Member> target,
            std::shared_ptr<std::atomic<int64_t>> budget)
      : t_(std::move(target)), budget_(std::move(budget)) {}
  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    if (budget_->load() <= 0) return absl::DataLossError("power cut");
    return t_->Read(buf, len, offset);
  }
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
    if (budget_->fetch_sub(1) <= 0) return absl::DataLossError("power cut");
    return t_->Write(buf, len, offset);
  }
  absl::Status Flush() override {
    if (budget_->load() <= 0) return absl::DataLossError("power cut");
    return t_->Flush();
  }
  absl::Status Discard(size_t len, uint64_t offset) override {
    if (budget_->fetch_sub(1) <= 0) return absl::DataLossError("power cut");
    return t_->Discard(len, offset);
  }
  bool DiscardZeroes() const override { return t_->DiscardZeroes(); }
  uint64_t Size() const override { return t_->Size(); }
  const std::string& Name() const override { return t_->Name(); }

 private:
  std::shared_ptr<Member> t_;
  std::shared_ptr<std::atomic<int64_t>> budget_;
};

inline std::vector<std::unique_ptr<Member>> CutHandles(
    const std::vector<std::shared_ptr<Member>>& v,
    const std::shared_ptr<std::atomic<int64_t>>& budget) {
  std::vector<std::unique_ptr<Member>> out;
  for (const auto& m : v) out.push_back(std::make_unique<CutMember>(m, budget));
  return out;
}

// Runs a shell command and returns its stdout (its exit status in
// `*status`), or nullopt if it could not run.
inline std::optional<std::string> RunCommand(const std::string& cmd,
                                             int* status) {
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *status = pclose(p);
  return out;
}

// Whether `name` is a command on PATH.
inline bool HaveTool(const std::string& name) {
  int status = 0;
  std::optional<std::string> out =
      RunCommand("command -v " + name + " 2>/dev/null", &status);
  return out.has_value() && status == 0 && !out->empty();
}

// "   Key : value" lines of mdadm --examine (or --examine-bitmap), keyed by
// the trimmed key.
inline std::map<std::string, std::string> ParseExamine(
    const std::string& text) {
  std::map<std::string, std::string> kv;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    const size_t sep = line.find(" : ");
    if (sep == absl::string_view::npos) continue;
    kv[std::string(absl::StripAsciiWhitespace(line.substr(0, sep)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(sep + 3)));
  }
  return kv;
}

}  // namespace uraid::testutil

#endif  // URAID_TESTS_TEST_UTIL_H_
