// SPDX-License-Identifier: MIT
// MemberAdmin (member_admin.h): md's --fail, --remove, --add and
// --replace on a live array. Which spare a job takes is ArrayJobs'
// (spare_use.cc).

#include "array/member_admin.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array/member_superblock.h"
#include "base/status_macros.h"

namespace uraid {

std::shared_ptr<Member> MemberAdmin::FindByName(const std::string& name,
                                                int* slot, int* spare) const {
  *slot = -1;
  *spare = -1;
  for (int i = 0; i < roster_.SlotCount(); ++i) {
    std::shared_ptr<Member> m = slots_[i]->member.load();
    if (m != nullptr && m->Name() == name) {
      *slot = i;
      return m;
    }
  }
  const std::vector<Spare> spares = roster_.Spares();
  for (size_t i = 0; i < spares.size(); ++i) {
    if (spares[i].member->Name() == name) {
      *spare = static_cast<int>(i);
      return spares[i].member;
    }
  }
  return nullptr;
}

namespace {

absl::Status NotAMember(const std::string& name) {
  return absl::NotFoundError(absl::StrFormat(
      "%s is not a member of this array (names are as the members were "
      "given: see detail)",
      name));
}

}  // namespace

absl::Status MemberAdmin::Fail(const std::string& name) {
  RETURN_IF_ERROR(host_.CheckUsable(true));
  for (int i = 0; i < roster_.SlotCount(); ++i) {
    std::shared_ptr<Member> r = slots_[i]->replacement.load();
    if (r != nullptr && r->Name() == name) {
      // Failing a replace target just ends the replace.
      return Apply(edit::DropReplacement{
                       i, r, absl::CancelledError("failed by request"),
                       /*report=*/true, edit::DropReplacement::kAlways})
          .status;
    }
  }
  int slot, spare;
  std::shared_ptr<Member> m = FindByName(name, &slot, &spare);
  if (m == nullptr) return NotAMember(name);
  if (spare >= 0) {
    // A failed spare is no use to anyone: it leaves the array.
    return Remove(name);
  }
  const SlotState st = slots_[slot]->state.load();
  if (st == SlotState::kFaulty) return absl::OkStatus();
  if (st == SlotState::kActive &&
      !slots_.CanLoseOne(shapes_.current().geo.parity_disks())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "refusing to fail %s (slot %d): the array is already degraded (%d "
        "gone, all its parity covers) and would fail (md refuses this too)",
        name, slot, slots_.Gone()));
  }
  return host_.FailSlot(slot, "failed by request", m.get());
}

absl::Status MemberAdmin::Remove(const std::string& name) {
  RETURN_IF_ERROR(host_.CheckUsable(true));
  for (int i = 0; i < roster_.SlotCount(); ++i) {
    std::shared_ptr<Member> r = slots_[i]->replacement.load();
    if (r != nullptr && r->Name() == name) {
      roster_.Apply(edit::DropReplacement{i, r, absl::OkStatus(),
                                          /*report=*/false,
                                          edit::DropReplacement::kNever});
      reporter_.Report(
          LogLevel::kNotice, MakeEvent("MemberRemoved", name, i),
          absl::StrFormat("replace of slot %d cancelled: %s removed", i, name));
      return Apply(edit::Persist{}).status;
    }
  }
  int slot, spare;
  std::shared_ptr<Member> m = FindByName(name, &slot, &spare);
  if (m == nullptr) return NotAMember(name);
  if (spare >= 0) {
    absl::Status st =
        Apply(edit::RemoveSpare{m, /*report_removed=*/true}).status;
    roster_.CheckSpares();
    return st;
  }
  Slot& s = *slots_[slot];
  const SlotState st = s.state.load();
  if (st != SlotState::kFaulty) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is %s in slot %d: fail it first (uraid fail), then remove it", name,
        st == SlotState::kRebuilding ? "rebuilding" : "active", slot));
  }
  // The roster checks again under its mutex, like every hand-over: a spare
  // may have stepped into the slot since the look above.
  return Apply(edit::Remove{slot, m}).status;
}

namespace {

// A member joining the array must be big enough and must not already
// belong to another md array (its superblock would be overwritten).
absl::Status CheckNewMember(Member& member, uint64_t need,
                            const std::array<uint8_t, 16>& set_uuid) {
  if (member.Size() < need) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is too small: %d bytes, the array needs %d per member",
        member.Name(), member.Size(), need));
  }
  absl::StatusOr<Superblock> sb = ReadSuperblock(member);
  if (sb.ok() && sb->set_uuid != set_uuid) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s holds the superblock of another md array (uuid %s, name '%s'); "
        "wipe it first (uraid zero-superblock %s) if it is really free",
        member.Name(), FormatUuid(sb->set_uuid), sb->set_name, member.Name()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DeviceId> MemberAdmin::PrepareNewMember(Member& member) {
  RETURN_IF_ERROR(host_.CheckUsable(true));
  int slot, spare;
  if (FindByName(member.Name(), &slot, &spare) != nullptr) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is already a member of this array (%s)", member.Name(),
        slot >= 0 ? absl::StrFormat("slot %d", slot) : "spare"));
  }
  for (const auto& s : slots_) {
    std::shared_ptr<Member> r = s->replacement.load();
    if (r != nullptr && r->Name() == member.Name()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s is already a replace target in this array", member.Name()));
    }
  }
  const std::array<uint8_t, 16> set_uuid = roster_.Template().set_uuid;
  const Shape& sh = shapes_.current();
  RETURN_IF_ERROR(
      CheckNewMember(member, sh.data_offset + sh.geo.member_bytes(), set_uuid));
  DeviceId id;  // dev_number is given by the roster when it joins
  id.device_uuid = RandomUuid();
  id.data_size_sectors = (member.Size() - sh.data_offset) / 512;
  return id;
}

absl::Status MemberAdmin::Add(std::unique_ptr<Member> member) {
  if (member == nullptr) return absl::InvalidArgumentError("no member given");
  ASSIGN_OR_RETURN(DeviceId id, PrepareNewMember(*member));
  // A member that held a slot of this array may return to it (md's
  // re-add) with only the regions written since it left rebuilt.
  absl::StatusOr<Superblock> old = ReadSuperblock(*member);
  bool returning = false;
  if (old.ok() && bitmap_.intent() != nullptr && !jobs_.reshape().running()) {
    const Superblock sb = roster_.Template();
    returning = old->set_uuid == sb.set_uuid && old->role() < sb.raid_disks;
  }
  RETURN_IF_ERROR(bitmap_.CopyTo(*member));
  std::shared_ptr<Member> m(std::move(member));
  if (returning) {
    const int slot = old->role();
    // The roster decides (ReAddRefusalLocked) and seats it in one step: no
    // rebuild can finish (and clear bits) or take the slot in between.
    const Applied a = Apply(edit::ReAdd{slot, m, id, *old});
    if (a.refusal.empty()) {
      RETURN_IF_ERROR(a.status);
      jobs_.MaybeStartRecovery();
      return absl::OkStatus();
    }
    reporter_.Log(
        LogLevel::kNotice,
        absl::StrFormat("%s was slot %d of this array; %s, so it joins as a "
                        "spare and is rebuilt in full",
                        m->Name(), slot, a.refusal));
  }
  const Applied a = Apply(edit::AddSpare{m, id});
  RETURN_IF_ERROR(a.status);
  // Joined: a spare, or already promoted into a gone slot by a running
  // recovery (RAID6's hand-over takes a new spare at once; spares are
  // looked at first, as a promotion moves it from there to a slot). Neither:
  // the roster dropped it, its superblock write having failed.
  const std::vector<Spare> spares = roster_.Spares();
  bool joined = std::any_of(spares.begin(), spares.end(),
                            [&](const Spare& sp) { return sp.member == m; });
  for (int i = 0; i < roster_.SlotCount() && !joined; ++i) {
    joined = slots_[i]->member.load() == m;
  }
  if (!joined) {
    return absl::UnavailableError(absl::StrFormat(
        "%s: writing its superblock failed; not added", m->Name()));
  }
  reporter_.Report(LogLevel::kNotice, MakeEvent("SpareAdded", m->Name(), -1),
                   absl::StrFormat("%s added as a spare (device %d)", m->Name(),
                                   a.dev_number));
  jobs_.MaybeStartRecovery();
  return absl::OkStatus();
}

absl::Status MemberAdmin::Replace(const std::string& old_name,
                                  std::unique_ptr<Member> replacement) {
  if (replacement == nullptr) {
    return absl::InvalidArgumentError("no replacement member given");
  }
  int slot, spare;
  if (FindByName(old_name, &slot, &spare) == nullptr) {
    return NotAMember(old_name);
  }
  if (slot < 0 || slots_[slot]->state.load() != SlotState::kActive) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is not an active member; replace copies from an active member "
        "(a gone slot is rebuilt onto a spare: use add)",
        old_name));
  }
  Slot& s = *slots_[slot];
  if (s.replacement.load() != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrFormat("slot %d is already being replaced", slot));
  }
  if (std::optional<JobKind> busy = jobs_.runner().Busy()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("a %s job is running; replace when it has finished",
                        JobKindName(*busy)));
  }
  ASSIGN_OR_RETURN(DeviceId id, PrepareNewMember(*replacement));
  RETURN_IF_ERROR(bitmap_.CopyTo(*replacement));
  std::shared_ptr<Member> r(std::move(replacement));
  // The roster checks again that the old member still holds the slot,
  // active (it may have failed since the look above).
  RETURN_IF_ERROR(
      Apply(edit::StartReplace{slot, r, /*from_spare=*/false, id, old_name})
          .status);
  if (s.replacement.load() != r) {
    return absl::UnavailableError(absl::StrFormat(
        "%s: writing its superblock failed; replace not started", r->Name()));
  }
  reporter_.Log(LogLevel::kNotice,
                absl::StrFormat("replace: copying slot %d (%s) onto %s", slot,
                                old_name, r->Name()));
  return jobs_.runner().Request(JobRequest{JobKind::kReplace, slot});
}

}  // namespace uraid
