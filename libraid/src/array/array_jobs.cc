// SPDX-License-Identifier: MIT
// The array's entry points to jobs that are objects of their own: the
// checks of the array's state a request needs before the job is queued or
// run (check/repair: jobs/scrub_job.h; resync: jobs/resync_job.h), and the
// array as the resync's host.

#include <optional>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"

namespace uraid {

absl::StatusOr<uint64_t> ArrayImpl::CheckParity(
    std::vector<uint64_t>* first_bad) {
  if (reshape_.running()) {
    return absl::FailedPreconditionError(
        "a reshape is in progress: check parity after it ends");
  }
  return scrub_.CheckParity(CurrentShape(), first_bad);
}

absl::StatusOr<JobInfo> ArrayImpl::CheckParityReport() {
  if (reshape_.running()) {
    return absl::FailedPreconditionError(
        "a reshape is in progress: check parity after it ends");
  }
  return scrub_.CheckParityReport(CurrentShape());
}

absl::Status ArrayImpl::StartScrub(bool repair) {
  RETURN_IF_ERROR(CheckUsable(repair));
  if (state_.switched_read_only()) {
    // md runs no sync action on a read-only array; a queued check would
    // only wait for the thaw.
    return absl::FailedPreconditionError(
        "array is read-only (switched by `uraid readonly`): check and "
        "repair wait for `uraid readwrite`");
  }
  // RAID6 checks beside one lost member (P and Q still agree or not).
  if (slots_.Gone() > geometry().parity_disks() - 1) {
    return absl::FailedPreconditionError(
        "array is degraded: parity cannot be checked until it is rebuilt");
  }
  if (resync_.running() || jobs_.RunsOrQueued(JobKind::kResync)) {
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

absl::Status ArrayImpl::Resync(bool as_job) {
  if (reshape_.running()) {
    return absl::FailedPreconditionError(
        "a reshape is in progress: it resyncs what it has moved itself");
  }
  // Resync works in the current shape (the only one: no reshape runs), in
  // which resync_stripe_ counts.
  const Shape& sh = CurrentShape();
  if (read_only_ || resync_stripe_.load() >= sh.geo.stripe_count()) {
    return absl::OkStatus();
  }
  return resync_.Run(sh, as_job);
}

}  // namespace uraid
