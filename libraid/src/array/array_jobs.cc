// SPDX-License-Identifier: MIT
// ArrayJobs' construction and entry points: the checks of the array's
// state a request needs before a job is queued or run (check/repair:
// jobs/scrub_job.h; resync: jobs/resync_job.h), and what assembly left to
// do, queued in md's order.

#include "array/array_jobs.h"

#include <optional>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace uraid {

ArrayJobs::ArrayJobs(const JobParts& parts, Clock& clock)
    : host_(parts.engine.host),
      roster_(parts.roster),
      slots_(parts.engine.slots),
      shapes_(parts.shapes),
      bitmap_(parts.bitmap),
      state_(parts.state),
      reporter_(parts.reporter),
      resync_front_(parts.resync_front),
      recovery_host_(parts.recovery_host),
      read_only_(parts.read_only),
      runner_(this, clock),
      scanner_(parts.engine, parts.writer, pool_),
      scrub_(scanner_, runner_, parts.engine.counters),
      resync_(*this, scanner_, bitmap_, runner_, parts.engine.counters),
      rebuilder_(parts.engine, parts.reader, pool_, bitmap_, roster_),
      recovery_(recovery_host_, roster_, rebuilder_, parts.writer, bitmap_,
                runner_),
      reshape_(parts.reshape_host, roster_, shapes_, slots_, parts.reader,
               parts.writer, scanner_, bitmap_, runner_, parts.engine.counters,
               pool_) {}

absl::StatusOr<uint64_t> ArrayJobs::CheckParity(
    std::vector<uint64_t>* first_bad) {
  if (reshape_.running()) {
    return absl::FailedPreconditionError(
        "a reshape is in progress: check parity after it ends");
  }
  return scrub_.CheckParity(CurrentShape(), first_bad);
}

absl::StatusOr<JobInfo> ArrayJobs::CheckParityReport() {
  if (reshape_.running()) {
    return absl::FailedPreconditionError(
        "a reshape is in progress: check parity after it ends");
  }
  return scrub_.CheckParityReport(CurrentShape());
}

absl::Status ArrayJobs::StartScrub(bool repair) {
  RETURN_IF_ERROR(host_.CheckUsable(repair));
  if (state_.switched_read_only()) {
    // md runs no sync action on a read-only array; a queued check would
    // only wait for the thaw.
    return absl::FailedPreconditionError(
        "array is read-only (switched by `uraid readonly`): check and "
        "repair wait for `uraid readwrite`");
  }
  // RAID6 checks beside one lost member (P and Q still agree or not).
  if (!slots_.CanLoseOne(CurrentShape().geo.parity_disks())) {
    return absl::FailedPreconditionError(
        "array is degraded: parity cannot be checked until it is rebuilt");
  }
  if (resync_.running() || runner_.RunsOrQueued(JobKind::kResync)) {
    return absl::FailedPreconditionError(
        "a resync is running; it checks and repairs parity itself");
  }
  if (std::optional<JobKind> busy = runner_.Busy()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("a %s job is running; stop it first or wait for it",
                        JobKindName(*busy)));
  }
  return runner_.Request(
      JobRequest{repair ? JobKind::kRepair : JobKind::kCheck, -1});
}

absl::Status ArrayJobs::Resync(bool as_job) {
  if (reshape_.running()) {
    return absl::FailedPreconditionError(
        "a reshape is in progress: it resyncs what it has moved itself");
  }
  // Resync works in the current shape (the only one: no reshape runs), in
  // which the resync front counts.
  const Shape& sh = CurrentShape();
  if (read_only_ || resync_front_.load() >= sh.geo.stripe_count()) {
    return absl::OkStatus();
  }
  return resync_.Run(sh, as_job);
}

void ArrayJobs::StartQueued() {
  // The resync an unclean shutdown (or a deferred create) left goes first:
  // a recovery asked for below queues behind it, as md recovers only
  // once its resync has ended (a degraded stripe ends it).
  if (resync_front_.load() < CurrentShape().geo.stripe_count() &&
      !roster_.failed() && !reshape_.running()) {
    absl::Status st = runner_.Request(JobRequest{JobKind::kResync, -1});
    if (!st.ok()) {
      Log(LogLevel::kError,
          absl::StrFormat("resync not started: %s", st.message()));
    }
  }
  // A reshape found by assembly resumes before any recovery (which runs
  // after it, in the new shape).
  if (reshape_.running() && !roster_.failed() && !reshape_.queued()) {
    absl::Status st = runner_.Request(JobRequest{JobKind::kReshape, -1});
    if (!st.ok()) {
      Log(LogLevel::kError,
          absl::StrFormat("reshape not resumed: %s", st.message()));
    }
  }
  MaybeStartRecovery();
}

}  // namespace uraid
