// SPDX-License-Identifier: MIT
// Which spare goes where, for the jobs: a spare promoted into a gone slot
// before recovery (every gone slot at RAID6, where two rebuild in one
// pass), or made the replace target of a member that wants replacement.
// Each is a roster edit (roster/roster_edit.h) the roster decides again
// under its mutex: the slot may have changed since the look here.

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array/array_jobs.h"
#include "base/status_macros.h"

namespace uraid {

namespace {

// Neither active nor rebuilding: the slot needs a spare.
bool Gone(const Slot& s) {
  const SlotState st = s.state.load();
  return st != SlotState::kActive && st != SlotState::kRebuilding;
}

}  // namespace

int ArrayJobs::GoneSlotOtherThan(int except) const {
  for (int i = 0; i < CurrentShape().geo.raid_disks(); ++i) {
    if (i != except && Gone(*slots_[i])) return i;
  }
  return -1;
}

void ArrayJobs::PromoteSparesIntoGoneSlots(int except) {
  for (int i = 0; i < CurrentShape().geo.raid_disks(); ++i) {
    // None left, or refused: the slot stays gone.
    if (i != except && Gone(*slots_[i])) (void)PromoteSpare(i);
  }
}

absl::StatusOr<std::shared_ptr<Member>> ArrayJobs::ReadySpare() {
  std::shared_ptr<Member> m = roster_.FirstSpare();
  if (m == nullptr) return absl::FailedPreconditionError("no spare");
  // Its copy of the bitmap dates from when it joined. A spare that cannot
  // take it is dropped (it would not survive the rebuild either).
  if (absl::Status st = bitmap_.CopyTo(*m); !st.ok()) {
    {
      Event e = MakeEvent("FailSpare", m->Name(), -1);
      e.details.emplace_back("error", std::string(st.message()));
      Report(LogLevel::kError, std::move(e),
             absl::StrFormat("spare %s dropped: %s", m->Name(), st.message()));
    }
    host_.RecordBackgroundError(
        recovery_host_.ApplyEdit(edit::RemoveSpare{m}).status,
        absl::StrCat("dropping spare ", m->Name()));
    return st;
  }
  return m;
}

absl::Status ArrayJobs::PromoteSpare(int slot) {
  Slot& s = *slots_[slot];
  if (s.state.load() == SlotState::kActive ||
      s.state.load() == SlotState::kRebuilding) {
    return absl::FailedPreconditionError("slot not gone");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Member> m, ReadySpare());
  const Applied a = recovery_host_.ApplyEdit(edit::PromoteSpare{slot, m});
  if (a.outcome == Applied::kRefused) return a.status;
  roster_.CheckSpares();
  return a.status;
}

int ArrayJobs::SlotWantingReplacement() const {
  for (int i = 0; i < CurrentShape().geo.raid_disks(); ++i) {
    const Slot& s = *slots_[i];
    if (s.want_replacement.load() && s.state.load() == SlotState::kActive &&
        s.replacement.load() == nullptr) {
      return i;
    }
  }
  return -1;
}

absl::Status ArrayJobs::SpareAsReplacement(int slot) {
  Slot& s = *slots_[slot];
  ASSIGN_OR_RETURN(std::shared_ptr<Member> m, ReadySpare());
  // As in MemberAdmin::Replace: the old member may have failed (a spare then
  // recovers the slot instead) or been replaced since the look.
  const Applied a = recovery_host_.ApplyEdit(
      edit::StartReplace{slot, m, /*from_spare=*/true});
  RETURN_IF_ERROR(a.status);
  const std::string old_name = a.old->Name();
  if (s.replacement.load() != m) {
    return absl::UnavailableError(absl::StrFormat(
        "%s: writing its superblock failed; replace not started", m->Name()));
  }
  Log(LogLevel::kNotice,
      absl::StrFormat("replace: slot %d (%s) wants replacement after a write "
                      "error; copying it onto spare %s",
                      slot, old_name, m->Name()));
  roster_.CheckSpares();
  return absl::OkStatus();
}

}  // namespace uraid
