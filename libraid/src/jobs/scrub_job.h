// SPDX-License-Identifier: MIT
// Internal: the check/repair job (md's "check" and "repair" sync actions)
// as an object over the parts it uses: the jobs' parity scan
// (StripeScanner), the job runner (its window loop, progress and the job's
// listed counts) and the counters. It knows nothing of the array's state:
// the array decides whether a scrub may start (ArrayJobs::StartScrub) and
// runs it as the runner's job.

#ifndef URAID_SRC_JOBS_SCRUB_JOB_H_
#define URAID_SRC_JOBS_SCRUB_JOB_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/atomic_counters.h"
#include "engine/shape.h"
#include "jobs/job_runner.h"
#include "jobs/stripe_scanner.h"

namespace uraid {

// Thread-compatible: Run is called on the runner's job thread, one job at
// a time; CheckParity on the caller's. Holds references to parts that
// outlive it.
class ScrubJob {
 public:
  ScrubJob(StripeScanner& scanner, JobRunner& runner, AtomicCounters& counters)
      : scanner_(scanner), runner_(runner), counters_(counters) {}

  // Checks (with `repair`, also rewrites) the parity of every stripe of
  // `sh` as the runner's current job: windows of kScanWindowStripes on the
  // runner's loop (speed limits, progress, stop), stripes that are holes on
  // every member skipped; mismatches and rows skipped for bad blocks are
  // added to the job's info.
  absl::Status Run(const Shape& sh, bool repair);

  // Checks every stripe of `sh` on the caller's thread, without the runner
  // (offline check): returns the number of mismatched stripes, the first 16
  // of them in `first_bad` (optional).
  absl::StatusOr<uint64_t> CheckParity(const Shape& sh,
                                       std::vector<uint64_t>* first_bad);
  // The same as a check job's outcome (kind kCheck, result "completed"),
  // with the chunks RAID6's P and Q locate.
  absl::StatusOr<JobInfo> CheckParityReport(const Shape& sh);

 private:
  StripeScanner& scanner_;
  JobRunner& runner_;
  AtomicCounters& counters_;
};

}  // namespace uraid

#endif  // URAID_SRC_JOBS_SCRUB_JOB_H_
