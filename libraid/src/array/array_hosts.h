// SPDX-License-Identifier: MIT
// Internal: the hosts of md's array_state (ArrayState, array_state.h) and
// of the reshape job (ReshapeJob, jobs/reshape_job.h), as forwards to the
// parts that answer each question. Neither holds state of its own.
//
// Thread-safety: as the parts they forward to.

#ifndef URAID_SRC_ARRAY_ARRAY_HOSTS_H_
#define URAID_SRC_ARRAY_ARRAY_HOSTS_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "array/array_jobs.h"
#include "array/array_state.h"
#include "array/member_faults.h"
#include "base/write_epochs.h"
#include "engine/shape_set.h"
#include "engine/stripe_engine.h"
#include "jobs/reshape_job.h"
#include "meta/array_bitmap.h"
#include "report/array_reporter.h"
#include "roster/roster.h"

namespace uraid {

// Writes the superblock (with the current roles, events+1) to every member
// through `edits` (edit::SetClean or edit::Persist, with the array's
// after-effects). `clean`: persist clean (true), dirty (false) or keep
// what the superblocks say now (nullopt, for role changes and a reshape's
// checkpoints).
inline absl::Status WriteSuperblocks(RecoveryHost& edits,
                                     std::optional<bool> clean) {
  if (clean.has_value()) return edits.ApplyEdit(edit::SetClean{*clean}).status;
  return edits.ApplyEdit(edit::Persist{}).status;
}

// What ArrayState (array_state.h) and a reshape (ReshapeJob: its
// superblock checkpoints, the client requests it must wait out before it
// starts, the engine told of the new shape at its end) need of the array.
// References to parts that outlive it; `engine` and `jobs` may be built
// after it (used only once I/O runs).
class HostForwards final : public ArrayStateHost, public ReshapeHost {
 public:
  HostForwards(MemberFaults& faults, StripeEngine& engine, ArrayJobs& jobs,
               ArrayBitmap& bitmap, const Roster& roster,
               const ShapeSet& shapes, WriteEpochs& plain_epochs,
               std::atomic<uint64_t>& resync_front,
               const ArrayReporter& reporter)
      : faults_(faults),
        engine_(engine),
        jobs_(jobs),
        bitmap_(bitmap),
        roster_(roster),
        shapes_(shapes),
        plain_epochs_(plain_epochs),
        resync_front_(resync_front),
        reporter_(reporter) {}

  // --- ArrayStateHost ---
  absl::Status WriteSuperblocks(std::optional<bool> clean) override {
    return uraid::WriteSuperblocks(faults_, clean);
  }
  absl::Status Flush() override { return engine_.writer().Flush(); }
  absl::Status FlushMembers(bool writeback) override {
    return engine_.writer().FlushAll(writeback);
  }
  bool Failed() const override { return roster_.failed(); }
  bool ResyncPending() const override {
    return resync_front_.load() < shapes_.current().geo.stripe_count();
  }
  absl::Status CheckUsable(bool write) const override {
    return faults_.CheckUsable(write);
  }
  void FreezeJobs(bool frozen) override { jobs_.runner().Freeze(frozen); }
  void FreezeBitmap(bool frozen) override { bitmap_.Freeze(frozen); }
  void WritesResumed() override { jobs_.MaybeStartRecovery(); }
  // --- ReshapeHost ---
  absl::Status UpdateSuperblocks() override {
    return uraid::WriteSuperblocks(faults_, std::nullopt);
  }
  void DrainPlainRequests() override { plain_epochs_.Drain(); }
  // The cache's stripes take the new shape's size; the new shape is in
  // sync (the reshape resynced what it moved).
  void ShapeChanged(const Shape& to) override {
    engine_.cache().ResetStripeBytes(to.geo.stripe_data_bytes());
    resync_front_.store(to.geo.stripe_count());
  }
  // --- both ---
  void Log(LogLevel level, const std::string& line) const override {
    reporter_.Log(level, line);
  }

 private:
  MemberFaults& faults_;
  StripeEngine& engine_;
  ArrayJobs& jobs_;
  ArrayBitmap& bitmap_;
  const Roster& roster_;
  const ShapeSet& shapes_;
  WriteEpochs& plain_epochs_;
  std::atomic<uint64_t>& resync_front_;
  const ArrayReporter& reporter_;
};

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_ARRAY_HOSTS_H_
