// SPDX-License-Identifier: MIT
// The array's entry points to jobs that are objects of their own: the
// checks of the array's state a request needs before the job is queued or
// run (check/repair: jobs/scrub_job.h).

#include <optional>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"

namespace uraid {

absl::StatusOr<uint64_t> ArrayImpl::CheckParity(
    std::vector<uint64_t>* first_bad) {
  if (reshaping_.load()) {
    return absl::FailedPreconditionError(
        "a reshape is in progress: check parity after it ends");
  }
  return scrub_.CheckParity(CurrentShape(), first_bad);
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
