// SPDX-License-Identifier: MIT
// MemberFaults (member_faults.h): a member's failure as the array meets it.
// FailSlot and ApplyEdit apply the roster's edits (roster/roster.h decides,
// persists and reports) and then let a spare step in; AbsorbFailures turns
// failed member I/O into those edits; CheckUsable and the sticky background
// error say what the array still accepts.
#include "array/member_faults.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "uraid/status_errno.h"

namespace uraid {

Applied MemberFaults::ApplyEdit(const RosterEdit& edit) {
  Applied a = roster_.Apply(edit);
  bitmap_.HandOverFailures();  // a member that failed the bitmap header
  if (a.member_failed) {
    // What FailSlot does after its own superblock write (it cannot be
    // called from inside one): a spare steps in. (The bitmap has already
    // heard that the array is degraded: the roster's fan-out calls
    // SlotHealthChanged when a superblock write fails a member.)
    start_recovery_();
  }
  return a;
}

absl::Status MemberFaults::FailSlot(int slot, const std::string& why,
                                    const Member* only_if) {
  // The check of who holds the slot and the change it decides are one step
  // under the roster's mutex (every hand-over of a slot happens under it):
  // two requests that hit the same dying member must not both act on it,
  // or the second would fail the replacement the first handed the slot to.
  const Applied a = ApplyEdit(edit::Fail{slot, only_if, why});
  switch (a.outcome) {
    case Applied::kFailed:
      if (!roster_.failed() &&
          resync_front_.load() < shapes_.current().geo.stripe_count()) {
        reporter_.Log(LogLevel::kWarning,
                      "a member failed before resync finished; stripes not yet "
                      "resynced may reconstruct stale data");
      }
      // md records the failure that fails the array too (the superblocks
      // were written all the same): the survivors' superblocks then list
      // both slots faulty, so that a restart with the same members refuses
      // (detail --test says failed), and a forced assembly knows which
      // member failed last (assemble.cc). Nothing else runs on a failed
      // array.
      if (!roster_.failed() && !read_only_) start_recovery_();
      return a.status;
    case Applied::kTargetFailed:
      if (!read_only_) start_recovery_();
      return a.status;
    default:
      // kHandedOver: the replacement goes on as a rebuild; kNotHolder
      // (a late error), kGone: nothing to do; kRefused: a bad slot.
      return a.status;
  }
}

absl::Status MemberFaults::CheckUsable(bool write) const {
  if (roster_.failed()) {
    return absl::UnavailableError(
        "array has failed: more than one member is missing or faulty");
  }
  if (write && read_only_) {
    return absl::FailedPreconditionError("array is read-only");
  }
  if (write && state_.switched_read_only()) {
    return SwitchedReadOnlyError();
  }
  if (write && has_bg_error_.load(std::memory_order_acquire)) {
    MutexLock lock(&bg_mu_);
    return bg_error_;
  }
  return absl::OkStatus();
}

void MemberFaults::RecordBackgroundError(const absl::Status& st,
                                         absl::string_view what) {
  if (st.ok()) return;
  {
    MutexLock lock(&bg_mu_);
    if (!bg_error_.ok()) return;
    bg_error_ = absl::Status(
        st.code(),
        absl::StrCat(what, " could not be recorded in the superblocks (",
                     st.message(), "); writes are refused until restart"));
    has_bg_error_.store(true, std::memory_order_release);
  }
  reporter_.Log(LogLevel::kError,
                absl::StrCat("background error: ", what, ": ", st.message(),
                             "; the array refuses writes from now on"));
}

absl::Status MemberFaults::AbsorbFailures(std::vector<MemberIo>& ios,
                                          bool* slot_failed) {
  *slot_failed = false;
  absl::Status first;
  for (MemberIo& io : ios) {
    if (io.status.ok()) continue;
    if (io.stale) {
      // Not the member's fault: the caller replans with the new members.
      *slot_failed = true;
      if (first.ok()) first = io.status;
      continue;
    }
    if (io.to_replacement) {
      // The copy target failed: the replace ends, the slot is unharmed.
      roster_.Apply(edit::DropReplacement{
          io.slot, slots_[io.slot]->replacement.load(), io.status,
          /*report=*/true, edit::DropReplacement::kNever});
      if (first.ok()) first = io.status;
      continue;
    }
    if (first.ok()) {
      std::shared_ptr<Member> m = slots_[io.slot]->member.load();
      first = absl::Status(
          io.status.code(),
          absl::StrFormat("member %s (slot %d) at member offset %d: %s",
                          m ? m->Name() : "?", io.slot, io.base + io.offset,
                          io.status.message()));
    }
    if (slots_.Present(io.slot)) {
      RecordBackgroundError(
          FailSlot(io.slot, std::string(io.status.message()), io.used),
          absl::StrFormat("the failure of slot %d", io.slot));
    }
    // Failed by us or, racing us, by another request that hit the same
    // dying member: either way the caller should redo its plan around it.
    *slot_failed = true;
  }
  return first;
}

}  // namespace uraid
