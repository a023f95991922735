// SPDX-License-Identifier: MIT
// A member's failure and the superblock updates that record it, as the
// array sees them: FailSlot and WriteSuperblocks apply the roster's edits
// (roster/roster.h decides, persists and reports) and then let a spare step
// in; AbsorbFailures turns failed member I/O into those edits; the array as
// the roster's host.
#include <memory>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"

namespace uraid {

Applied ArrayImpl::ApplyEdit(const RosterEdit& edit) {
  Applied a = roster_.Apply(edit);
  bitmap_.HandOverFailures();  // a member that failed the bitmap header
  if (a.member_failed) {
    // What FailSlot does after its own superblock write (it cannot be
    // called from inside one): a spare steps in.
    UpdateBitmapDegraded();
    MaybeStartRecovery();
  }
  return a;
}

absl::Status ArrayImpl::FailSlot(int slot, const std::string& why,
                                 const Member* only_if) {
  // The check of who holds the slot and the change it decides are one step
  // under the roster's mutex (every hand-over of a slot happens under it):
  // two requests that hit the same dying member must not both act on it,
  // or the second would fail the replacement the first handed the slot to.
  const Applied a = ApplyEdit(edit::Fail{slot, only_if, why});
  switch (a.outcome) {
    case Applied::kFailed:
      if (!roster_.failed() &&
          resync_stripe_.load() < CurrentShape().geo.stripe_count()) {
        Log(LogLevel::kWarning,
            "a member failed before resync finished; stripes not yet "
            "resynced may reconstruct stale data");
      }
      // md records the failure that fails the array too (the superblocks
      // were written all the same): the survivors' superblocks then list
      // both slots faulty, so that a restart with the same members refuses
      // (detail --test says failed), and a forced assembly knows which
      // member failed last (assemble.cc). Nothing else runs on a failed
      // array.
      if (!roster_.failed() && !read_only_) MaybeStartRecovery();
      return a.status;
    case Applied::kTargetFailed:
      if (!read_only_) MaybeStartRecovery();
      return a.status;
    default:
      // kHandedOver: the replacement goes on as a rebuild; kNotHolder
      // (a late error), kGone: nothing to do; kRefused: a bad slot.
      return a.status;
  }
}

absl::Status ArrayImpl::WriteSuperblocks(std::optional<bool> clean) {
  if (clean.has_value()) return ApplyEdit(edit::SetClean{*clean}).status;
  return ApplyEdit(edit::Persist{}).status;
}

uint64_t ArrayImpl::DirtyResyncSectors() const {
  // Writes since assembly may have torn stripes anywhere: dirty from the
  // start. Else only resync has written: stripes below its front are in
  // sync.
  if (state_.wrote_since_open()) return 0;
  return resync_stripe_.load() * CurrentShape().geo.chunk_bytes() / 512;
}

void ArrayImpl::WriteBitmapEvents(uint64_t events) {
  if (bitmap_.intent() == nullptr) return;
  absl::Status bs = bitmap_.intent()->SetEvents(events);
  if (!bs.ok()) {
    Log(LogLevel::kError,
        absl::StrFormat("bitmap: writing events %d: %s", events, bs.message()));
  }
}

std::optional<BitmapSuper> ArrayImpl::BitmapHeader() const {
  if (bitmap_.intent() == nullptr) return std::nullopt;
  return bitmap_.intent()->super();
}

absl::Status ArrayImpl::AbsorbFailures(std::vector<MemberIo>& ios,
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
