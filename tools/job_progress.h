// SPDX-License-Identifier: MIT
// Background jobs (resync, rebuild, check, repair) as `uraid` shows them:
// percent, speed, ETA, mdadm's status labels, a one-line progress bar, and
// waiting for a served array's jobs to end over the control channel.

#ifndef URAID_TOOLS_JOB_PROGRESS_H_
#define URAID_TOOLS_JOB_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "control_client.h"
#include "uraid/array.h"

namespace uraid::tool {

// 0..100 (0 when the job has no size yet).
double JobPercent(const JobInfo& job);
// Seconds left at the recent rate; -1 when unknown (no rate yet).
int64_t JobEtaSeconds(const JobInfo& job);
// "0:01:23" (h:mm:ss), or "-" when unknown.
std::string FormatEta(int64_t seconds);
// Bytes per second as "45.2 MB/s" (decimal megabytes).
std::string FormatRate(double bytes_per_s);
// mdadm's word for the job in "<Label> Status : 37% complete": "Resync",
// "Rebuild" (recover and replace), "Check", "Repair".
const char* JobStatusLabel(JobKind kind);
// A finished job in one line: "check completed, 3 mismatched stripes".
std::string JobOutcome(const JobInfo& last_job);
// True when no job ever ran or the last one completed.
bool JobSucceeded(const JobInfo& last_job);
// "[=======>          ]  37.2% recover  45.2 MB/s  ETA 0:01:23"
std::string ProgressLine(const JobInfo& job);

// Draws ProgressLine for a job being followed on `out`: redrawn in place on
// a terminal, otherwise a new line per whole percent (or job change).
// Not thread-safe; `out` outlives it.
class ProgressDrawer {
 public:
  explicit ProgressDrawer(FILE* out);
  void Draw(const JobInfo& job);
  // Ends a line drawn in place, if any.
  void Finish();

 private:
  FILE* out_;
  bool tty_;
  bool drew_ = false;
  int last_pct_ = -1;
  JobKind last_kind_ = JobKind::kNone;
};

// Polls `client` until no job runs, and returns the array's state then:
// after every event on the socket's event stream (a job's end is one, so
// the wait ends with the job, not up to a poll later) and at least every
// 0.5 s (only that, where the stream cannot be opened).
// With `watch`, draws ProgressLine on stdout: redrawn in place on a
// terminal, a new line per whole percent otherwise; then the outcome.
// `started_after`: the last_job seen before this tool started a job; while
// no job shows and last_job is still that one, the new job has not been
// picked up yet and waiting goes on (for up to 5 s).
absl::StatusOr<ArrayInfo> WaitForJobs(ControlClient& client, bool watch,
                                      const JobInfo* started_after = nullptr);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_JOB_PROGRESS_H_
