// SPDX-License-Identifier: MIT
// Internal: recovery onto a spare (or a re-added member) and replace, as a
// job object over the parts it uses: the metadata owner (Roster: the
// slot's fronts, its end and the replace's swap are edits), the rebuild's
// stripe work (StripeRebuilder), the writer's flushes, the bitmap (a
// re-added member's regions, the bits cleared once whole) and the job
// runner. It reaches the array only through RecoveryHost.

#ifndef URAID_SRC_JOBS_RECOVERY_JOB_H_
#define URAID_SRC_JOBS_RECOVERY_JOB_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "engine/shape.h"
#include "engine/stripe_writer.h"
#include "jobs/job_runner.h"
#include "jobs/stripe_rebuilder.h"
#include "meta/array_bitmap.h"
#include "roster/roster.h"
#include "uraid/events.h"

namespace uraid {

// What a recovery needs of its array.
class RecoveryHost {
 public:
  virtual ~RecoveryHost() = default;
  // Applies `edit` as the array does (Roster::Apply, then what follows any
  // superblock update: the bitmap's deferred failures, a spare for a member
  // that failed its superblock write).
  virtual Applied ApplyEdit(const RosterEdit& edit) = 0;
  virtual void Log(LogLevel level, const std::string& line) const = 0;
};

// Thread-compatible: Run is called on the runner's job thread, one job at
// a time. Holds references to parts that outlive it.
class RecoveryJob {
 public:
  RecoveryJob(RecoveryHost& host, Roster& roster, StripeRebuilder& rebuilder,
              StripeWriter& writer, ArrayBitmap& bitmap, JobRunner& runner)
      : host_(host),
        roster_(roster),
        rebuilder_(rebuilder),
        writer_(writer),
        bitmap_(bitmap),
        runner_(runner) {}

  // Rebuilds `slot` onto its rebuilding member from its front (or, with
  // `replace`, copies it onto its replace target from the copy front), in
  // shape `sh` (fronts and checkpoints are in its stripes), as the
  // runner's current job. Checkpoints the front every second of the
  // runner's clock and when stopped; at the end the slot turns active (or
  // the target takes the slot) and the superblocks say so. Aborted when
  // the target failed or was removed.
  //
  // With `pair_ready` (RAID6, a rebuild onto a spare or a replace's
  // copy): asked before each window; true stops the pass there, the
  // front checkpointed as for a stop (a replace's copy front is kept in
  // memory only, as always), and sets *paired: the caller goes on with
  // RunPair, whose pass rebuilds both slots from this front on and the
  // other one below it too (md restarts its recovery with both devices).
  absl::Status Run(const Shape& sh, int slot, bool replace,
                   const std::function<bool()>& pair_ready = nullptr,
                   bool* paired = nullptr);
  // RAID6: slots `a` and `b` rebuilt in one pass, each stripe's survivors
  // read once and both targets written (md recovers both at once). Each is
  // either rebuilding onto its member (a spare) or, active, being copied
  // onto its replace target (whose rows are then rebuilt from the others
  // rather than copied). The pass starts at the lower front; a target
  // whose front is further on is left alone below it. Both fronts are
  // checkpointed together (one superblock update carrying each member's
  // recovery_offset, after a flush of both); at the end a rebuilt slot
  // turns active and a replace target takes its slot, as in Run. Aborted
  // when either target failed or was removed: the array then recovers
  // again (the survivor from its front, a new spare from 0).
  absl::Status RunPair(const Shape& sh, int a, int b);

 private:
  // Flushes the rebuilding member of `slot`, then records its front as
  // durable in the superblocks (md's recovery_offset).
  absl::Status Checkpoint(int slot);
  // Checkpoint for both slots of a pair (those still rebuilding), one
  // flush and one superblock update.
  absl::Status CheckpointPair(int a, int b);
  // Hands what the rebuilder could not rebuild (recorded bad on a target)
  // to the job's info.
  void TakeUnrecovered();

  RecoveryHost& host_;
  Roster& roster_;
  StripeRebuilder& rebuilder_;
  StripeWriter& writer_;
  ArrayBitmap& bitmap_;
  JobRunner& runner_;
};

}  // namespace uraid

#endif  // URAID_SRC_JOBS_RECOVERY_JOB_H_
