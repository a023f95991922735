// SPDX-License-Identifier: MIT
#include "array/array_state.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "uraid/status_errno.h"

namespace uraid {
namespace {

// md's safemode delay: the array is marked clean this long (on the
// array's clock) after the last write completes.
constexpr int64_t kDefaultSafemodeDelayNs = 200'000'000;
// How often (real time) the safemode thread looks at the clock.
constexpr int kSafemodePollMs = 100;

}  // namespace

absl::Status SwitchedReadOnlyError() {
  return WithErrno(absl::FailedPreconditionError(
                       "array is read-only (switched by `uraid readonly`); "
                       "`uraid readwrite` makes it writable again"),
                   EROFS);
}

ArrayState::ArrayState(ArrayStateHost& host, bool clean, uint64_t resync_offset,
                       bool read_only, Clock& clock)
    : host_(host), read_only_(read_only), clock_(clock) {
  MutexLock lock(&mu_);
  clean_ = clean;
  resync_front_claimed_ = !clean && resync_offset != 0;
  last_write_ns_ = clock_.NowNs();
  safemode_delay_ns_ = kDefaultSafemodeDelayNs;
}

void ArrayState::SetSafemodeDelayMs(uint32_t ms) {
  MutexLock lock(&mu_);
  safemode_delay_ns_ = int64_t{ms} * 1'000'000;
}

ArrayState::~ArrayState() { Stop(); }

absl::Status ArrayState::BeginWrite() {
  MutexLock lock(&mu_);
  // The read-only switch's gate: once closed, no new write starts (those
  // already counted finish, and SetReadOnly waits for them).
  if (gate_closed_) return SwitchedReadOnlyError();
  RETURN_IF_ERROR(host_.CheckUsable(true));
  ++writes_in_flight_;
  wrote_since_open_.store(true);
  if (clean_ || resync_front_claimed_) {
    // A dirty array whose superblocks hold a resync checkpoint is written
    // too: this write could tear a stripe below it, so the resync must
    // start from 0 after a crash (wrote_since_open_ makes it so).
    absl::Status st = host_.WriteSuperblocks(/*clean=*/false);
    if (!st.ok()) {
      --writes_in_flight_;
      return st;
    }
    clean_ = false;
    resync_front_claimed_ = false;
  }
  return absl::OkStatus();
}

void ArrayState::EndWrite() {
  MutexLock lock(&mu_);
  --writes_in_flight_;
  last_write_ns_ = clock_.NowNs();
}

bool ArrayState::clean() const {
  MutexLock lock(&mu_);
  return clean_;
}

bool ArrayState::stopping() const {
  MutexLock lock(&mu_);
  return stop_;
}

absl::Status ArrayState::MarkCleanLocked() {
  if (clean_ || read_only_ || host_.Failed() || host_.ResyncPending()) {
    return absl::OkStatus();
  }
  // Data first, then the claim that it is consistent.
  RETURN_IF_ERROR(host_.FlushMembers(/*writeback=*/true));
  RETURN_IF_ERROR(host_.WriteSuperblocks(/*clean=*/true));
  clean_ = true;
  resync_front_claimed_ = false;
  return absl::OkStatus();
}

absl::Status ArrayState::CheckpointResync() {
  {
    MutexLock lock(&mu_);
    // Only the resync has written since assembly: the superblocks may
    // claim its front (a client write could have torn stripes anywhere).
    if (clean_ || read_only_ || host_.Failed() || wrote_since_open_.load()) {
      return absl::OkStatus();
    }
  }
  // The parity repaired below the front is durable before a superblock
  // says it is in sync. The front cannot move meanwhile: only the resync
  // (the caller) moves it.
  RETURN_IF_ERROR(host_.FlushMembers(/*writeback=*/false));
  // mu_ across the superblock write: a client write (BeginWrite) either
  // came first, and the offset written is 0, or waits and then rewrites it
  // to 0 before its first member write.
  MutexLock lock(&mu_);
  if (clean_) return absl::OkStatus();
  RETURN_IF_ERROR(host_.WriteSuperblocks(/*clean=*/false));
  if (!wrote_since_open_.load()) resync_front_claimed_ = true;
  return absl::OkStatus();
}

void ArrayState::MarkCleanOrLogLocked() {
  absl::Status st = MarkCleanLocked();
  if (!st.ok()) {
    host_.Log(LogLevel::kError,
              absl::StrFormat("marking clean failed: %s", st.message()));
  }
}

absl::Status ArrayState::MarkCleanIfIdle() {
  MutexLock lock(&mu_);
  if (writes_in_flight_ == 0 && !clean_) return MarkCleanLocked();
  return absl::OkStatus();
}

absl::Status ArrayState::SetReadOnly(bool read_only) {
  MutexLock serial(&switch_mu_);
  if (read_only_) {
    if (read_only) return absl::OkStatus();
    return absl::FailedPreconditionError(
        "array was opened read-only (serve --readonly, readonly=true): it "
        "cannot be made writable while served; serve it again without "
        "--readonly");
  }
  RETURN_IF_ERROR(host_.CheckUsable(false));  // a failed array: neither
  if (read_only == switched_ro_.load()) return absl::OkStatus();
  if (!read_only) {
    {
      MutexLock lock(&mu_);
      switched_ro_.store(false, std::memory_order_release);
      gate_closed_ = false;
    }
    host_.FreezeBitmap(false);
    host_.FreezeJobs(false);
    host_.Log(LogLevel::kNotice,
              "switched to read-write: writes accepted, jobs resume");
    host_.WritesResumed();
    return absl::OkStatus();
  }
  {
    MutexLock lock(&mu_);
    gate_closed_ = true;
    // Writes that passed BeginWrite finish (a write cache entry they made
    // is written back below).
    mu_.Await(Condition(this, &ArrayState::NoWritesInFlight));
  }
  absl::Status st = SwitchToReadOnly();
  if (!st.ok()) {
    host_.FreezeBitmap(false);
    host_.FreezeJobs(false);
    MutexLock lock(&mu_);
    gate_closed_ = false;
    host_.Log(LogLevel::kError,
              absl::StrCat("switching to read-only failed: ", st.message(),
                           "; the array stays writable"));
    return st;
  }
  return absl::OkStatus();
}

absl::Status ArrayState::SwitchToReadOnly() {
  // Jobs first, without mu_ (a job's end takes it): from here no job
  // writes. Then the data and the claim that it is consistent.
  host_.FreezeJobs(true);
  {
    MutexLock lock(&mu_);
    RETURN_IF_ERROR(host_.Flush());
    RETURN_IF_ERROR(MarkCleanLocked());
  }
  // The bitmap's last write (outside mu_: a carrier failing it fails a
  // slot, which writes superblocks). From here nothing writes the members
  // (md clears its bitmap when it goes read-only, then writes nothing);
  // left to the lazy clear, the bits would be cleared later, on members
  // that a user may be copying because the array is read-only.
  host_.FreezeBitmap(true);
  MutexLock lock(&mu_);
  switched_ro_.store(true, std::memory_order_release);
  host_.Log(
      LogLevel::kNotice,
      clean_ ? std::string("switched to read-only: writes refused, jobs "
                           "frozen, superblocks clean")
             : absl::StrCat(
                   "switched to read-only: writes refused, "
                   "jobs frozen; superblocks stay dirty",
                   host_.ResyncPending() ? " (the resync is unfinished)" : ""));
  return absl::OkStatus();
}

void ArrayState::Start() {
  if (read_only_ || safemode_thread_.joinable()) return;
  safemode_thread_ = std::thread([this] { SafemodeLoop(); });
}

bool ArrayState::WaitForStop(int ms) {
  MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(Condition(&stop_), absl::Milliseconds(ms));
  return stop_;
}

void ArrayState::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  if (safemode_thread_.joinable()) safemode_thread_.join();
}

bool ArrayState::MarkCleanAtStop() {
  MutexLock lock(&mu_);
  MarkCleanOrLogLocked();
  return clean_;
}

void ArrayState::SafemodeLoop() {
  MutexLock lock(&mu_);
  while (!stop_) {
    mu_.AwaitWithTimeout(Condition(&stop_),
                         absl::Milliseconds(kSafemodePollMs));
    if (stop_) break;
    if (!clean_ && writes_in_flight_ == 0 && safemode_delay_ns_ > 0 &&
        clock_.NowNs() - last_write_ns_ >= safemode_delay_ns_) {
      MarkCleanOrLogLocked();
    }
  }
}

}  // namespace uraid
