// SPDX-License-Identifier: MIT
// Internal: the array's rules for member errors, as the stripe engine and
// the jobs meet them. MemberFaults is the engine's host (engine_host.h):
// whether the array may be used, failed member I/O turned into roster
// edits (FailSlot, AbsorbFailures), md's bad-block log (RecordBadBlocks,
// ClearBadBlocks, WantReplacement: bad_block_records.cc), and the sticky
// background error. It is also every job's RecoveryHost: ApplyEdit is a
// roster edit followed by what the array does after any metadata change
// (a member that failed the bitmap header handed over, the bitmap told
// whether the array is degraded, a spare let in).
//
// Thread-safety: every method may be called from any thread (client
// requests, jobs, the bitmap's writer). Lock order: the roster's mutex is
// taken inside its calls only, never held across FailSlot or ApplyEdit.

#ifndef URAID_SRC_ARRAY_MEMBER_FAULTS_H_
#define URAID_SRC_ARRAY_MEMBER_FAULTS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "array/array_state.h"
#include "base/sync.h"
#include "engine/engine_host.h"
#include "engine/shape_set.h"
#include "jobs/recovery_job.h"
#include "meta/array_bitmap.h"
#include "report/array_reporter.h"
#include "roster/roster.h"

namespace uraid {

class MemberFaults final : public EngineHost, public RecoveryHost {
 public:
  // After a slot fails (or a member fails its superblock write, or wants
  // replacing): queue a recovery if a spare can take a gone slot, or the
  // replace of a member that wants it (ArrayJobs::MaybeStartRecovery). The
  // one thing the failure rules ask of the jobs, as a callback so that
  // this part does not depend on the jobs that depend on it.
  using StartRecoveryFn = std::function<void()>;

  // References to parts that outlive it; `state` may be constructed after
  // it, and `start_recovery` may call parts that are (both are used only
  // once I/O runs). `resync_front`: the first stripe whose parity is not
  // yet trusted.
  MemberFaults(Roster& roster, const ShapeSet& shapes, ArrayState& state,
               ArrayBitmap& bitmap, StartRecoveryFn start_recovery,
               const ArrayReporter& reporter,
               const std::atomic<uint64_t>& resync_front, bool read_only)
      : roster_(roster),
        slots_(roster.slots()),
        shapes_(shapes),
        state_(state),
        bitmap_(bitmap),
        start_recovery_(std::move(start_recovery)),
        reporter_(reporter),
        resync_front_(resync_front),
        read_only_(read_only) {}
  MemberFaults(const MemberFaults&) = delete;
  MemberFaults& operator=(const MemberFaults&) = delete;

  // --- EngineHost (member_faults.cc) ---
  // The first background error stays (see bg_error_).
  absl::Status CheckUsable(bool write) const override;
  // Marks `slot` faulty (the roster's edit::Fail: with `only_if`, only
  // while that member still holds the slot; an active member with a
  // replace target hands the slot over to it), then lets a spare step in.
  absl::Status FailSlot(int slot, const std::string& why,
                        const Member* only_if = nullptr) override;
  absl::Status AbsorbFailures(std::vector<MemberIo>& ios,
                              bool* slot_failed) override;
  absl::Status BeginWrite() override { return state_.BeginWrite(); }
  void EndWrite() override { state_.EndWrite(); }
  void RecordBackgroundError(const absl::Status& st,
                             absl::string_view what) override;
  // --- bad-block lists (bad_block_records.cc) ---
  absl::Status RecordBadBlocks(int slot, bool replacement,
                               const Member* only_if, uint64_t at, uint64_t len,
                               const std::string& why) override;
  absl::Status ClearBadBlocks(int slot, const Member* only_if, uint64_t at,
                              uint64_t len) override;
  void WantReplacement(int slot, const Member* only_if,
                       const std::string& why) override;

  // --- RecoveryHost ---
  // Applies `edit` to the metadata (Roster::Apply), then what the array
  // does after any superblock update: the members that failed the bitmap
  // header are handed over, and a member that failed its superblock write
  // lets a spare step in. Returns what Apply did.
  Applied ApplyEdit(const RosterEdit& edit) override;
  void Log(LogLevel level, const std::string& line) const override {
    reporter_.Log(level, line);
  }

  // Tells the bitmap whether the array is degraded (bits are kept then).
  void UpdateBitmapDegraded() { bitmap_.SetDegraded(slots_.Gone() > 0); }

 private:
  // Writes `list` to member `m`'s log area, durably. Fails when the array
  // has no log or the list does not fit.
  absl::Status WriteBadBlockLogLocked(Member& m, const BadBlockList& list)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(roster_.mu());
  // What member bytes [at, at + len) of `slot` hold in the current shape,
  // for log lines: array byte ranges, or the parity of some.
  std::string DescribeMemberRange(int slot, uint64_t at, uint64_t len) const;

  Roster& roster_;
  const SlotTable& slots_;
  const ShapeSet& shapes_;
  ArrayState& state_;
  ArrayBitmap& bitmap_;
  const StartRecoveryFn start_recovery_;
  const ArrayReporter& reporter_;
  const std::atomic<uint64_t>& resync_front_;
  const bool read_only_;

  // The sticky background error: a metadata update that had to record a
  // member's failure (or a spare's or replacement's loss) did not make it
  // to the members. From then on writes fail with it (reads go on), so
  // nothing is acknowledged that the superblocks may contradict after a
  // restart. Set once; never cleared while the array is open.
  mutable Mutex bg_mu_;
  absl::Status bg_error_ ABSL_GUARDED_BY(bg_mu_);
  std::atomic<bool> has_bg_error_{false};
};

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_MEMBER_FAULTS_H_
