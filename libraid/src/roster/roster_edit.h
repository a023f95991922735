// SPDX-License-Identifier: MIT
// Internal: the changes the array's metadata owner (roster/roster.h) takes,
// as small values, in the manner of leveldb's VersionEdit: each names what
// should change and the condition under which it still may (a member that
// must still hold its slot, a spare that must still be in the pool).
// Roster::Apply decides it against the slots as they are under its lock,
// persists it (one superblock fan-out) and reports it.

#ifndef URAID_SRC_ROSTER_ROSTER_EDIT_H_
#define URAID_SRC_ROSTER_ROSTER_EDIT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "engine/slot_table.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {
namespace edit {

// Fails `slot`. With `only_if`, only while that member still holds it (a
// late error from a member already replaced must not fail its successor).
// An active member with a replace target hands the slot over to the target,
// which goes on as a rebuild from its copy front; a rebuilding member or an
// active one without a target leaves the slot faulty (the array failed
// when that leaves too few).
struct Fail {
  int slot = -1;
  const Member* only_if = nullptr;
  std::string why;
};

// Ends `slot`'s replace when `target` is still its replace target (the
// compare-and-swap DropReplacementIf). `why` goes into the FailSpare event
// when `report` and this edit dropped it; the superblocks are written
// `persist`.
struct DropReplacement {
  enum When { kNever, kIfDropped, kAlways };
  int slot = -1;
  std::shared_ptr<Member> target;
  absl::Status why;
  bool report = true;
  When persist = kIfDropped;
};

// `spare` (still in the pool) leaves it to rebuild gone `slot` from stripe 0.
struct PromoteSpare {
  int slot = -1;
  std::shared_ptr<Member> spare;
};

// `member` (device `id`, dev_number given here), which held `slot` as of
// superblock `old`, returns to it rebuilding only the bitmap's dirty
// regions (md's re-add), unless the roster finds a reason it cannot
// (Applied::refusal).
struct ReAdd {
  int slot = -1;
  std::shared_ptr<Member> member;
  DeviceId id;
  Superblock old;
};

// `target` becomes active `slot`'s replace target, copied from stripe 0.
// From the spare pool (`from_spare`: the slot must still want replacement)
// or a new member (device `id`, dev_number given here; `old_name` must
// still hold the slot).
struct StartReplace {
  int slot = -1;
  std::shared_ptr<Member> target;
  bool from_spare = false;
  DeviceId id;
  std::string old_name;
};

// A rebuilding `slot` is durable on its member below `front`: the
// superblocks may claim it (recovery_offset). A pass rebuilding two slots
// (RAID6) names the second in `other_slot` (-1: none) with its own front,
// so both recovery_offsets go out in one superblock update; a slot no
// longer rebuilding is left out, and the edit is refused only when
// neither is.
struct CheckpointRebuild {
  int slot = -1;
  uint64_t front = 0;
  int other_slot = -1;
  uint64_t other_front = 0;
};

// A rebuilding `slot` has every one of its `stripes`: it turns active.
// `persist` false: the caller writes the superblocks (after the bitmap).
struct FinishRebuild {
  int slot = -1;
  uint64_t stripes = 0;
  bool persist = true;
};

// A finished replace: the target of active `slot` becomes its member, the
// old member retires.
struct SwapInReplacement {
  int slot = -1;
};

// Faulty `member` leaves `slot` (the slot goes missing; its device stays
// listed faulty so it is refused if presented again).
struct Remove {
  int slot = -1;
  std::shared_ptr<Member> member;
};

// `member` (device `id`, dev_number given here) joins the spare pool.
struct AddSpare {
  std::shared_ptr<Member> member;
  DeviceId id;
};

// `member` leaves the spare pool (removed, or dropped as unusable);
// `report_removed`: reports MemberRemoved before the superblocks go out.
struct RemoveSpare {
  std::shared_ptr<Member> member;
  bool report_removed = false;
};

// The superblocks say clean (resync_offset at the end) or dirty.
struct SetClean {
  bool clean = false;
};

// Nothing changes but the events count: the superblocks are written again
// with the template and roles as they are (a change staged under the lock
// by its owner, such as the reshape fields, or members brought level).
struct Persist {};

}  // namespace edit

using RosterEdit =
    std::variant<edit::Fail, edit::DropReplacement, edit::PromoteSpare,
                 edit::ReAdd, edit::StartReplace, edit::CheckpointRebuild,
                 edit::FinishRebuild, edit::SwapInReplacement, edit::Remove,
                 edit::AddSpare, edit::RemoveSpare, edit::SetClean,
                 edit::Persist>;

// What Apply did.
struct Applied {
  enum Outcome {
    kDone,          // the edit was made (and persisted, when it persists)
    kRefused,       // its condition no longer held: nothing changed (`status`)
    kNotHolder,     // Fail: `only_if` no longer holds the slot
    kGone,          // Fail: already faulty or missing
    kHandedOver,    // Fail: the slot's replace target took over, rebuilding
    kTargetFailed,  // Fail: a rebuild target failed, the slot is faulty
    kFailed,        // Fail: an active member failed, the slot is faulty
  };
  Outcome outcome = kDone;
  // The refusal (kRefused), else the persist's error (a superblock write
  // that failed the array, or no settled update).
  absl::Status status;
  // A member failed while the superblocks were written (handled in the
  // fan-out; the caller may want a spare to step in).
  bool member_failed = false;
  // Fail and SwapInReplacement: who held the slot; kHandedOver: who holds
  // it now and the stripe its rebuild goes on from.
  std::shared_ptr<Member> old;
  std::shared_ptr<Member> replacement;
  uint64_t from = 0;
  // ReAdd: why the member cannot return to its slot (empty when it did).
  std::string refusal;
  // AddSpare, StartReplace, ReAdd: the device number given.
  uint32_t dev_number = 0;
};

}  // namespace uraid

#endif  // URAID_SRC_ROSTER_ROSTER_EDIT_H_
