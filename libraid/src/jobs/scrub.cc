// SPDX-License-Identifier: MIT
// Parity scans: one stripe (ScanStripe, under its lock), a window of them
// at once (ScanWindow, shared with resync.cc), the check/repair job
// (RunScrub, on the job thread; StartScrub queues it), the offline
// CheckParity, and SkipHoles, which lets scans pass stripes that are holes
// on every member.

#include <algorithm>
#include <memory>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"
#include "parity/parity.h"

namespace uraid {
namespace {

// Resync and parity check work on row windows of at most this many bytes
// per member, so memory stays bounded for any chunk size.
constexpr uint64_t kScanWindow = 1 << 20;

}  // namespace

absl::Status ArrayImpl::ScanStripe(const Shape& sh, uint64_t stripe,
                                   bool repair, bool* mismatch) {
  *mismatch = false;
  const int n = sh.geo.raid_disks();
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t win = std::min(C, kScanWindow);
  const int pd = sh.geo.ParityDisk(stripe);
  ScratchOrOwned bufs(ScratchUser::kScan, win * n);
  StripeLock lock(&locks_, LockKey(sh, stripe));
  RETURN_IF_ERROR(CheckUsable(false));
  if (slots_.MissingAt(sh.geo.raid_disks(), stripe) >= 0) {
    return absl::FailedPreconditionError(
        "array is degraded: parity cannot be checked");
  }
  for (uint64_t w = 0; w < C; w += win) {
    std::vector<MemberIo> ios;
    for (int i = 0; i < n; ++i) {
      ios.push_back(MemberIo{
          MemberIo::kRead, i, bufs.data() + win * i, win, stripe * C + w, {}});
    }
    const SlotGens gens = slots_.CaptureGens();
    io_.Submit(sh, ios, &gens);
    // A read error met by the scrub is corrected like any other (md does
    // the same); only an uncorrectable one stops it.
    RETURN_IF_ERROR(writer_.CorrectPreReads(sh, stripe, ios));
    bool slot_failed;
    RETURN_IF_ERROR(AbsorbFailures(ios, &slot_failed));
    std::vector<const void*> all;
    for (int i = 0; i < n; ++i) all.push_back(bufs.data() + win * i);
    if (XorIsZero(all, win)) continue;
    *mismatch = true;
    if (!repair) return absl::OkStatus();
    std::vector<const void*> data;
    for (int i = 0; i < n; ++i) {
      if (i != pd) data.push_back(bufs.data() + win * i);
    }
    uint8_t* p = bufs.data() + win * pd;
    Xor(p, data, win);
    std::vector<MemberIo> w_io{
        MemberIo{MemberIo::kWrite, pd, p, win, stripe * C + w, {}}};
    io_.Submit(sh, w_io);
    RETURN_IF_ERROR(AbsorbFailures(w_io, &slot_failed));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ArrayImpl::CheckParity(
    std::vector<uint64_t>* first_bad) {
  if (reshaping_.load()) {
    return absl::FailedPreconditionError(
        "a reshape is in progress: check parity after it ends");
  }
  const Shape& sh = CurrentShape();
  uint64_t bad = 0;
  for (uint64_t s = 0; s < sh.geo.stripe_count(); ++s) {
    bool mismatch;
    RETURN_IF_ERROR(ScanStripe(sh, s, /*repair=*/false, &mismatch));
    if (!mismatch) continue;
    if (first_bad != nullptr && first_bad->size() < 16) {
      first_bad->push_back(s);
    }
    ++bad;
  }
  return bad;
}

uint64_t ArrayImpl::SkipHoles(const Shape& sh, uint64_t stripe) {
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t base = sh.data_offset;
  uint64_t next = sh.geo.member_bytes();
  for (int i = 0; i < sh.geo.raid_disks(); ++i) {
    if (!slots_.Usable(i)) return stripe;
    absl::StatusOr<uint64_t> d =
        slots_[i]->member.load()->NextDataOffset(base + stripe * C);
    if (!d.ok() || *d < base) return stripe;
    next = std::min(next, *d - base);
  }
  return std::max(stripe, std::min(next / C, sh.geo.stripe_count()));
}

uint64_t ArrayImpl::ScanWindow(const Shape& sh, uint64_t from, uint64_t count,
                               bool repair, std::vector<uint64_t>* mismatched,
                               absl::Status* error) {
  *error = absl::OkStatus();
  std::vector<absl::Status> status(count);
  std::unique_ptr<bool[]> mismatch(new bool[count]());
  RunWindow(count, [&](uint64_t i) {
    status[i] = ScanStripe(sh, from + i, repair, &mismatch[i]);
  });
  uint64_t done = 0;
  for (; done < count && status[done].ok(); ++done) {
    if (mismatch[done]) mismatched->push_back(from + done);
  }
  if (done < count) *error = status[done];
  return done;
}

absl::Status ArrayImpl::RunScrub(bool repair) {
  // A job works in one shape: the current one when it starts (no scrub
  // runs during a reshape: both are jobs).
  const Shape& sh = CurrentShape();
  const uint64_t C = sh.geo.chunk_bytes();
  StripePass pass;
  pass.stripe_work = C;  // the limits count stripes scanned, not skipped
  pass.max_window = kScanWindowStripes;
  // Stripes that are holes on every member are zeros with zero parity.
  pass.skip = [&](uint64_t at) { return SkipHoles(sh, at); };
  pass.work = [&](uint64_t at, uint64_t count, absl::Status* error) {
    std::vector<uint64_t> mismatched;
    const uint64_t done = ScanWindow(sh, at, count, repair, &mismatched, error);
    counters_.scrubbed_stripes.fetch_add(done, std::memory_order_relaxed);
    if (!mismatched.empty()) jobs_.AddMismatches(mismatched);
    return done;
  };
  pass.moved = [&](uint64_t at) {
    jobs_.Progress(at * C);
    return absl::OkStatus();
  };
  uint64_t stripe = 0;
  return jobs_.RunStripePass(pass, sh.geo.stripe_count(), &stripe);
}

absl::Status ArrayImpl::StartScrub(bool repair) {
  RETURN_IF_ERROR(CheckUsable(repair));
  if (slots_.Gone() > 0) {
    return absl::FailedPreconditionError(
        "array is degraded: parity cannot be checked until it is rebuilt");
  }
  if (resync_running_.load() || jobs_.RunsOrQueued(JobKind::kResync)) {
    return absl::FailedPreconditionError(
        "a resync is running; it checks and repairs parity itself");
  }
  if (std::optional<JobKind> busy = jobs_.Busy()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("a %s job is running; stop it first or wait for it",
                        JobKindName(*busy)));
  }
  return jobs_.Request(
      JobRequest{repair ? JobKind::kRepair : JobKind::kCheck, -1});
}

}  // namespace uraid
