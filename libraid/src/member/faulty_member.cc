// SPDX-License-Identifier: MIT
// FaultyMember: a member decorator that injects I/O errors, lost writes and
// torn writes for tests (see FaultPlan in uraid/member.h).

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "base/sync.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

constexpr uint64_t kForever = UINT64_MAX;

// The k-th (from 0) output of SplitMix64 seeded with `seed`: a fixed,
// platform-independent sequence, so a seed always fails the same calls.
uint64_t SplitMix64(uint64_t seed, uint64_t k) {
  uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// [offset, offset+len) and [r.offset, r.offset+r.len) share a byte.
bool Overlaps(const FaultRule& r, size_t len, uint64_t offset) {
  if (len == 0) return false;
  uint64_t r_end =
      r.len > UINT64_MAX - r.offset ? UINT64_MAX : r.offset + r.len;
  uint64_t end = len > UINT64_MAX - offset ? UINT64_MAX : offset + len;
  return offset < r_end && r.offset < end;
}

bool PlanIsEmpty(const FaultPlan& p) {
  return p.rules.empty() && !p.fail_after_ios.has_value() &&
         p.fail_flushes == 0 && !(p.fail_rate > 0);
}

}  // namespace

// Everything FaultyMember keeps besides its target: the plan under its
// mutex, and the counters.
struct FaultyMember::Impl {
  enum class Kind { kRead, kWrite, kDiscard, kFlush };
  static const char* OpName(Kind kind) {
    return kind == Kind::kRead    ? "read"
           : kind == Kind::kWrite ? "write"
           : kind == Kind::kFlush ? "flush"
                                  : "discard";
  }
  // What to do with one call.
  struct Decision {
    absl::Status error;   // non-OK: fail the call with it
    bool lose = false;    // write: skip it, return OK
    bool tear = false;    // write: write `torn_len` bytes, then
    size_t torn_len = 0;  //   return `error` (OK if torn_ok)
  };

  explicit Impl(std::shared_ptr<Member> target) : target_(std::move(target)) {}

  absl::Status Check(const char* op, uint64_t offset);
  Decision Decide(Kind kind, size_t len, uint64_t offset);
  // A data call's entry: counts it in `calls`, then fails it if the member
  // is failed (Check; the plan is not consulted) or else asks the plan.
  Decision Enter(std::atomic<uint64_t>& calls, Kind kind, size_t len,
                 uint64_t offset);

  const std::shared_ptr<Member> target_;
  std::atomic<bool> failed_{false};
  // Fast path: false while the plan is empty.
  std::atomic<bool> planned_{false};
  mutable Mutex mu_;
  FaultPlan plan_ ABSL_GUARDED_BY(mu_);
  uint64_t data_ios_ ABSL_GUARDED_BY(mu_) = 0;    // since SetPlan
  uint64_t rate_calls_ ABSL_GUARDED_BY(mu_) = 0;  // since SetPlan
  std::atomic<uint64_t> reads_{0}, writes_{0}, rewrites_{0}, discards_{0},
      flushes_{0}, errors_{0}, lost_{0}, torn_{0};
};

FaultyMember::FaultyMember(std::shared_ptr<Member> target)
    : impl_(std::make_unique<Impl>(std::move(target))) {}

FaultyMember::~FaultyMember() = default;

void FaultyMember::SetFailed(bool failed) { impl_->failed_.store(failed); }
bool FaultyMember::failed() const { return impl_->failed_.load(); }

void FaultyMember::SetPlan(FaultPlan plan) {
  Impl& m = *impl_;
  MutexLock lock(&m.mu_);
  m.planned_.store(!PlanIsEmpty(plan));
  m.plan_ = std::move(plan);
  m.data_ios_ = 0;
  m.rate_calls_ = 0;
}

FaultPlan FaultyMember::plan() const {
  const Impl& m = *impl_;
  MutexLock lock(&m.mu_);
  return m.plan_;
}

FaultCounters FaultyMember::counters() const {
  const Impl& m = *impl_;
  FaultCounters c;
  c.reads = m.reads_.load();
  c.writes = m.writes_.load();
  c.rewrites = m.rewrites_.load();
  c.discards = m.discards_.load();
  c.flushes = m.flushes_.load();
  c.errors = m.errors_.load();
  c.lost_writes = m.lost_.load();
  c.torn_writes = m.torn_.load();
  return c;
}

void FaultyMember::ResetCounters() {
  Impl& m = *impl_;
  for (auto* c : {&m.reads_, &m.writes_, &m.rewrites_, &m.discards_,
                  &m.flushes_, &m.errors_, &m.lost_, &m.torn_}) {
    c->store(0);
  }
}

absl::Status FaultyMember::Impl::Check(const char* op, uint64_t offset) {
  if (failed_.load()) {
    errors_.fetch_add(1);
    return absl::UnavailableError(absl::StrFormat(
        "%s: %s at %d: injected I/O error", target_->Name(), op, offset));
  }
  return absl::OkStatus();
}

FaultyMember::Impl::Decision FaultyMember::Impl::Decide(Kind kind, size_t len,
                                                        uint64_t offset) {
  Decision d;
  if (!planned_.load()) return d;
  const char* op = OpName(kind);
  MutexLock lock(&mu_);
  auto error = [&](absl::StatusCode code, const std::string& why) {
    return absl::Status(code,
                        absl::StrFormat("%s: %s at %d: injected I/O error (%s)",
                                        target_->Name(), op, offset, why));
  };

  if (kind == Kind::kFlush) {
    if (plan_.fail_flushes > 0) {
      --plan_.fail_flushes;
      errors_.fetch_add(1);
      d.error = error(plan_.error_code, "fail_flushes");
    }
    return d;  // rules and fail_rate cover data I/O only
  }

  const uint64_t n = data_ios_++;
  if (plan_.fail_after_ios.has_value() && n >= *plan_.fail_after_ios) {
    plan_.fail_after_ios.reset();
    failed_.store(true);
    errors_.fetch_add(1);
    d.error = error(absl::StatusCode::kUnavailable,
                    absl::StrFormat("failed after %d data I/Os", n));
    return d;
  }

  const bool is_write = kind == Kind::kWrite || kind == Kind::kDiscard;
  auto matches = [&](FaultOp fop) {
    return fop == FaultOp::kAny || (fop == FaultOp::kRead) != is_write;
  };
  for (FaultRule& r : plan_.rules) {
    if (r.times == 0) continue;
    if (r.action == FaultRule::Action::kError) {
      if (!matches(r.op)) continue;
    } else if (kind != Kind::kWrite) {
      continue;
    }
    if (!Overlaps(r, len, offset)) continue;
    if (r.times != kForever) --r.times;
    switch (r.action) {
      case FaultRule::Action::kError:
        errors_.fetch_add(1);
        d.error = error(plan_.error_code,
                        absl::StrFormat("bad range %d+%d", r.offset, r.len));
        break;
      case FaultRule::Action::kLose:
        lost_.fetch_add(1);
        d.lose = true;
        break;
      case FaultRule::Action::kTear:
        torn_.fetch_add(1);
        d.tear = true;
        d.torn_len = static_cast<size_t>(std::min<uint64_t>(
            r.torn_bytes / kSectorBytes * kSectorBytes, len));
        if (!r.torn_ok) {
          d.error = error(plan_.error_code,
                          absl::StrFormat("torn write: %d of %d bytes written",
                                          d.torn_len, len));
        }
        break;
    }
    return d;
  }

  if (plan_.fail_rate > 0 && matches(plan_.fail_rate_op)) {
    const uint64_t k = rate_calls_++;
    // 53 random bits as a double in [0, 1).
    const double u =
        static_cast<double>(SplitMix64(plan_.seed, k) >> 11) * 0x1.0p-53;
    if (u < plan_.fail_rate) {
      errors_.fetch_add(1);
      d.error = error(plan_.error_code,
                      absl::StrFormat("rate %g, seed %d, call %d",
                                      plan_.fail_rate, plan_.seed, k));
    }
  }
  return d;
}

FaultyMember::Impl::Decision FaultyMember::Impl::Enter(
    std::atomic<uint64_t>& calls, Kind kind, size_t len, uint64_t offset) {
  calls.fetch_add(1);
  if (absl::Status s = Check(OpName(kind), offset); !s.ok()) {
    return {.error = std::move(s)};
  }
  return Decide(kind, len, offset);
}

absl::Status FaultyMember::Read(void* buf, size_t len, uint64_t offset) {
  Impl& m = *impl_;
  Impl::Decision d = m.Enter(m.reads_, Impl::Kind::kRead, len, offset);
  if (!d.error.ok()) return d.error;
  return m.target_->Read(buf, len, offset);
}

absl::Status FaultyMember::Write(const void* buf, size_t len, uint64_t offset) {
  return WriteThrough(buf, len, offset, false);
}

absl::Status FaultyMember::Rewrite(const void* buf, size_t len,
                                   uint64_t offset) {
  return WriteThrough(buf, len, offset, true);
}

absl::Status FaultyMember::WriteThrough(const void* buf, size_t len,
                                        uint64_t offset, bool rewrite) {
  Impl& m = *impl_;
  if (rewrite) m.rewrites_.fetch_add(1);
  Impl::Decision d = m.Enter(m.writes_, Impl::Kind::kWrite, len, offset);
  const auto write = [&](size_t n) {
    return rewrite ? m.target_->Rewrite(buf, n, offset)
                   : m.target_->Write(buf, n, offset);
  };
  if (d.lose) return absl::OkStatus();
  if (d.tear) {
    if (d.torn_len > 0) {
      absl::Status s = write(d.torn_len);
      if (!s.ok()) return s;
    }
    return d.error;
  }
  if (!d.error.ok()) return d.error;
  return write(len);
}

absl::Status FaultyMember::Flush() {
  Impl& m = *impl_;
  Impl::Decision d = m.Enter(m.flushes_, Impl::Kind::kFlush, 0, 0);
  if (!d.error.ok()) return d.error;
  return m.target_->Flush();
}

absl::Status FaultyMember::Discard(size_t len, uint64_t offset) {
  Impl& m = *impl_;
  Impl::Decision d = m.Enter(m.discards_, Impl::Kind::kDiscard, len, offset);
  if (!d.error.ok()) return d.error;
  return m.target_->Discard(len, offset);
}

absl::StatusOr<uint64_t> FaultyMember::NextDataOffset(uint64_t offset) {
  absl::Status s = impl_->Check("seek", offset);
  if (!s.ok()) return s;
  return impl_->target_->NextDataOffset(offset);
}

bool FaultyMember::DiscardZeroes() const {
  return impl_->target_->DiscardZeroes();
}
bool FaultyMember::ReadVectorIsOneCall() const {
  return impl_->target_->ReadVectorIsOneCall();
}
uint64_t FaultyMember::Size() const { return impl_->target_->Size(); }
const std::string& FaultyMember::Name() const { return impl_->target_->Name(); }

}  // namespace uraid
