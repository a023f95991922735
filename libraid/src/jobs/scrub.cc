// SPDX-License-Identifier: MIT
// The check/repair job (RunScrub, on the job thread; StartScrub queues it)
// and the offline CheckParity, over the jobs' parity scan
// (stripe_scanner.h).

#include <algorithm>
#include <memory>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"
#include "parity/parity.h"

namespace uraid {
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
    RETURN_IF_ERROR(scanner_.ScanStripe(sh, s, /*repair=*/false, &mismatch));
    if (!mismatch) continue;
    if (first_bad != nullptr && first_bad->size() < 16) {
      first_bad->push_back(s);
    }
    ++bad;
  }
  return bad;
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
  pass.skip = [&](uint64_t at) { return scanner_.SkipHoles(sh, at); };
  pass.work = [&](uint64_t at, uint64_t count, absl::Status* error) {
    std::vector<uint64_t> mismatched;
    std::vector<uint64_t> skipped;
    uint64_t skipped_bytes = 0;
    const uint64_t done = scanner_.ScanWindow(
        sh, at, count, repair, &mismatched, error, &skipped, &skipped_bytes);
    counters_.scrubbed_stripes.fetch_add(done, std::memory_order_relaxed);
    if (!mismatched.empty()) jobs_.AddMismatches(mismatched);
    if (skipped_bytes > 0) jobs_.AddUnchecked(skipped_bytes, skipped);
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
