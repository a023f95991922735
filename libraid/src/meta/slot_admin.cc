// SPDX-License-Identifier: MIT
// Member management on a live array (md's --fail, --remove, --add,
// --replace) and promotion of a spare into a gone slot. Every change of
// roles is written to the superblocks before the call returns.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "array/member_superblock.h"
#include "base/status_macros.h"

namespace uraid {

std::shared_ptr<Member> ArrayImpl::FindByName(const std::string& name,
                                              int* slot, int* spare) const {
  *slot = -1;
  *spare = -1;
  for (int i = 0; i < SlotCount(); ++i) {
    std::shared_ptr<Member> m = slots_[i]->member.load();
    if (m != nullptr && m->Name() == name) {
      *slot = i;
      return m;
    }
  }
  MutexLock lock(&sb_mu_);
  for (size_t i = 0; i < spares_.size(); ++i) {
    if (spares_[i].member->Name() == name) {
      *spare = static_cast<int>(i);
      return spares_[i].member;
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

absl::Status ArrayImpl::FailMember(const std::string& name) {
  RETURN_IF_ERROR(CheckUsable(true));
  for (int i = 0; i < SlotCount(); ++i) {
    std::shared_ptr<Member> r = slots_[i]->replacement.load();
    if (r != nullptr && r->Name() == name) {
      // Failing a replace target just ends the replace.
      if (slots_[i]->replacement.compare_exchange_strong(r, nullptr)) {
        ReportReplacementFailed(name, i,
                                absl::CancelledError("failed by request"));
      }
      return WriteSuperblocks(std::nullopt);
    }
  }
  int slot, spare;
  std::shared_ptr<Member> m = FindByName(name, &slot, &spare);
  if (m == nullptr) return NotAMember(name);
  if (spare >= 0) {
    // A failed spare is no use to anyone: it leaves the array.
    return RemoveMember(name);
  }
  const SlotState st = slots_[slot]->state.load();
  if (st == SlotState::kFaulty) return absl::OkStatus();
  if (st == SlotState::kActive && slots_.Gone() > 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "refusing to fail %s (slot %d): the array is already degraded and "
        "would fail (md refuses this too)",
        name, slot));
  }
  return FailSlot(slot, "failed by request", m.get());
}

absl::Status ArrayImpl::RemoveMember(const std::string& name) {
  RETURN_IF_ERROR(CheckUsable(true));
  for (int i = 0; i < SlotCount(); ++i) {
    std::shared_ptr<Member> r = slots_[i]->replacement.load();
    if (r != nullptr && r->Name() == name) {
      slots_[i]->replacement.compare_exchange_strong(r, nullptr);
      Report(
          LogLevel::kNotice, MakeEvent("MemberRemoved", name, i),
          absl::StrFormat("replace of slot %d cancelled: %s removed", i, name));
      return WriteSuperblocks(std::nullopt);
    }
  }
  int slot, spare;
  std::shared_ptr<Member> m = FindByName(name, &slot, &spare);
  if (m == nullptr) return NotAMember(name);
  if (spare >= 0) {
    {
      MutexLock lock(&sb_mu_);
      std::erase_if(spares_, [&](const Spare& sp) { return sp.member == m; });
    }
    Report(LogLevel::kNotice, MakeEvent("MemberRemoved", name, -1),
           absl::StrFormat("spare %s removed", name));
    absl::Status st = WriteSuperblocks(std::nullopt);
    CheckSpares();
    return st;
  }
  Slot& s = *slots_[slot];
  const SlotState st = s.state.load();
  if (st != SlotState::kFaulty) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is %s in slot %d: fail it first (uraid fail), then remove it", name,
        st == SlotState::kRebuilding ? "rebuilding" : "active", slot));
  }
  {
    // Under sb_mu_, like every hand-over: a spare may have stepped into
    // the slot since the look above.
    MutexLock lock(&sb_mu_);
    if (s.member.load() != m || s.state.load() != SlotState::kFaulty) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s no longer holds slot %d (a spare took over); nothing removed",
          name, slot));
    }
    retired_devs_.push_back(s.id.dev_number);
    // In-flight I/O keeps its own reference; the member closes after it.
    ChangeSlot(s, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      s.member.store(nullptr);
      s.bad.Reset({});
      s.want_replacement.store(false);
      s.partial.store(false);
      s.state.store(SlotState::kMissing);
    });
  }
  Report(LogLevel::kNotice, MakeEvent("MemberRemoved", name, slot),
         absl::StrFormat("faulty member %s removed from slot %d", name, slot));
  return WriteSuperblocks(std::nullopt);
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

uint32_t ArrayImpl::NextDevNumber() const {
  uint32_t next = 0;
  for (const auto& s : slots_) {
    next = std::max(next, s->id.dev_number + 1);
    if (s->replacement.load() != nullptr) {
      next = std::max(next, s->repl_id.dev_number + 1);
    }
  }
  for (const Spare& sp : spares_) next = std::max(next, sp.id.dev_number + 1);
  for (uint32_t d : retired_devs_) next = std::max(next, d + 1);
  return next;
}

absl::StatusOr<DeviceId> ArrayImpl::PrepareNewMember(Member& member) {
  RETURN_IF_ERROR(CheckUsable(true));
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
  std::array<uint8_t, 16> set_uuid;
  {
    MutexLock lock(&sb_mu_);
    set_uuid = sb_.set_uuid;
  }
  const Shape& sh = CurrentShape();
  RETURN_IF_ERROR(
      CheckNewMember(member, sh.data_offset + sh.geo.member_bytes(), set_uuid));
  DeviceId id;  // dev_number is given under sb_mu_ when it joins
  id.device_uuid = RandomUuid();
  id.data_size_sectors = (member.Size() - sh.data_offset) / 512;
  return id;
}

std::string ArrayImpl::ReAddRefusal(const Superblock& old) {
  const int slot = old.role();
  const SlotState st = slots_[slot]->state.load();
  const BitmapSuper bs = bitmap_.intent()->super();
  // What it holds is the slot's data as of its last event: usable only if
  // the bitmap has kept a bit for every region written since, which it
  // does while the array stays degraded (bits are not cleared then).
  if (st == SlotState::kActive || st == SlotState::kRebuilding ||
      slots_[slot]->replacement.load() != nullptr) {
    return "its slot is taken";
  }
  if (old.feature_map & (kFeatureRecoveryOffset | kFeatureReshapeActive)) {
    return "it was not in sync when it left (rebuilding or reshaping)";
  }
  if (old.level != sb_.level || old.layout != sb_.layout ||
      old.chunksize != sb_.chunksize || old.raid_disks != sb_.raid_disks ||
      old.data_offset != sb_.data_offset || old.size != sb_.size) {
    return "the array's shape has changed since it left";
  }
  if (old.feature_map & kFeatureBadBlocks) {
    // Its rows outside the bitmap's bits would be trusted, including ones
    // its log says it cannot hold: rebuild it all (every row is written).
    return "its bad-block log lists entries";
  }
  if (bs.stale()) return "the bitmap is stale";
  if (old.events < bs.events_cleared || old.events > sb_.events) {
    return absl::StrFormat(
        "its events (%d) are outside what the bitmap covers (%d..%d): bits "
        "were cleared after it left",
        old.events, bs.events_cleared, sb_.events);
  }
  return "";
}

absl::Status ArrayImpl::AddMember(std::unique_ptr<Member> member) {
  if (member == nullptr) return absl::InvalidArgumentError("no member given");
  ASSIGN_OR_RETURN(DeviceId id, PrepareNewMember(*member));
  // A member that held a slot of this array may return to it (md's
  // re-add) with only the regions written since it left rebuilt.
  absl::StatusOr<Superblock> old = ReadSuperblock(*member);
  bool returning = false;
  if (old.ok() && bitmap_.intent() != nullptr && !reshaping_.load()) {
    MutexLock lock(&sb_mu_);
    returning = old->set_uuid == sb_.set_uuid && old->role() < sb_.raid_disks;
  }
  RETURN_IF_ERROR(bitmap_.CopyTo(*member));
  std::shared_ptr<Member> m(std::move(member));
  if (returning) {
    const int slot = old->role();
    Slot& s = *slots_[slot];
    std::string why;
    {
      // The decision and the change in one step: no rebuild can finish
      // (and clear bits) or take the slot in between.
      MutexLock lock(&sb_mu_);
      why = ReAddRefusal(*old);
      if (why.empty()) {
        id.dev_number = NextDevNumber();
        if (id.dev_number >= kSbMaxDevLimit) {
          return absl::ResourceExhaustedError(
              "no free device numbers left in the superblock's role table");
        }
        StartRebuildLocked(s, m, id, /*partial=*/true);
      }
    }
    if (why.empty()) {
      UpdateBitmapDegraded();
      Log(LogLevel::kNotice, absl::StrFormat("%s re-added to slot %d: only the "
                                             "bitmap regions written since it "
                                             "left are rebuilt",
                                             m->Name(), slot));
      RETURN_IF_ERROR(WriteSuperblocks(std::nullopt));
      MaybeStartRecovery();
      return absl::OkStatus();
    }
    Log(LogLevel::kNotice,
        absl::StrFormat("%s was slot %d of this array; %s, so it joins as a "
                        "spare and is rebuilt in full",
                        m->Name(), slot, why));
  }
  {
    MutexLock lock(&sb_mu_);
    id.dev_number = NextDevNumber();
    if (id.dev_number >= kSbMaxDevLimit) {
      return absl::ResourceExhaustedError(
          "no free device numbers left in the superblock's role table");
    }
    spares_.push_back(Spare{m, id});
  }
  RETURN_IF_ERROR(WriteSuperblocks(std::nullopt));
  {
    MutexLock lock(&sb_mu_);
    if (std::none_of(spares_.begin(), spares_.end(),
                     [&](const Spare& sp) { return sp.member == m; })) {
      return absl::UnavailableError(absl::StrFormat(
          "%s: writing its superblock failed; not added", m->Name()));
    }
  }
  Report(LogLevel::kNotice, MakeEvent("SpareAdded", m->Name(), -1),
         absl::StrFormat("%s added as a spare (device %d)", m->Name(),
                         id.dev_number));
  MaybeStartRecovery();
  return absl::OkStatus();
}

void ArrayImpl::StartRebuildLocked(Slot& s, const std::shared_ptr<Member>& m,
                                   const DeviceId& id, bool partial) {
  // The faulty member (if still there) leaves with its role kept faulty.
  if (s.member.load() != nullptr) retired_devs_.push_back(s.id.dev_number);
  s.id = id;
  ChangeSlot(s, [&] {
    s.front.store(0);
    s.durable_front.store(0);
    s.read_errors.store(0);
    s.partial.store(partial);
    // A new member's list starts empty: it gets entries only for rows the
    // rebuild cannot make (never the old member's). A re-added member with
    // entries of its own is not rebuilt partially (ReAddRefusal).
    s.bad.Reset({});
    s.bad.flag_durable.store(false);
    s.want_replacement.store(false);
    s.member.store(m);
    s.state.store(SlotState::kRebuilding);
  });
}

absl::StatusOr<std::shared_ptr<Member>> ArrayImpl::ReadySpare() {
  std::shared_ptr<Member> m;
  {
    MutexLock lock(&sb_mu_);
    if (spares_.empty()) return absl::FailedPreconditionError("no spare");
    m = spares_.front().member;
  }
  // Its copy of the bitmap dates from when it joined. A spare that cannot
  // take it is dropped (it would not survive the rebuild either).
  if (absl::Status st = bitmap_.CopyTo(*m); !st.ok()) {
    {
      Event e = MakeEvent("FailSpare", m->Name(), -1);
      e.details.emplace_back("error", std::string(st.message()));
      Report(LogLevel::kError, std::move(e),
             absl::StrFormat("spare %s dropped: %s", m->Name(), st.message()));
    }
    {
      MutexLock lock(&sb_mu_);
      std::erase_if(spares_, [&](const Spare& sp) { return sp.member == m; });
    }
    RecordBackgroundError(WriteSuperblocks(std::nullopt),
                          absl::StrCat("dropping spare ", m->Name()));
    return st;
  }
  return m;
}

absl::Status ArrayImpl::PromoteSpare(int slot) {
  Slot& s = *slots_[slot];
  if (s.state.load() == SlotState::kActive ||
      s.state.load() == SlotState::kRebuilding) {
    return absl::FailedPreconditionError("slot not gone");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Member> m, ReadySpare());
  {
    MutexLock lock(&sb_mu_);
    auto it = std::find_if(spares_.begin(), spares_.end(),
                           [&](const Spare& sp) { return sp.member == m; });
    if (it == spares_.end()) {
      return absl::FailedPreconditionError("the spare was removed");
    }
    const SlotState st = s.state.load();
    if (st == SlotState::kActive || st == SlotState::kRebuilding) {
      return absl::FailedPreconditionError("slot no longer gone");
    }
    const DeviceId id = it->id;
    spares_.erase(it);
    StartRebuildLocked(s, m, id, /*partial=*/false);
  }
  absl::Status st = WriteSuperblocks(std::nullopt);
  CheckSpares();
  return st;
}

int ArrayImpl::SlotWantingReplacement() const {
  for (int i = 0; i < CurrentShape().geo.raid_disks(); ++i) {
    const Slot& s = *slots_[i];
    if (s.want_replacement.load() && s.state.load() == SlotState::kActive &&
        s.replacement.load() == nullptr) {
      return i;
    }
  }
  return -1;
}

absl::Status ArrayImpl::SpareAsReplacement(int slot) {
  Slot& s = *slots_[slot];
  ASSIGN_OR_RETURN(std::shared_ptr<Member> m, ReadySpare());
  std::string old_name;
  {
    MutexLock lock(&sb_mu_);
    auto it = std::find_if(spares_.begin(), spares_.end(),
                           [&](const Spare& sp) { return sp.member == m; });
    if (it == spares_.end()) {
      return absl::FailedPreconditionError("the spare was removed");
    }
    // As in ReplaceMember: the old member may have failed (a spare then
    // recovers the slot instead) or been replaced since the look.
    if (s.state.load() != SlotState::kActive ||
        s.replacement.load() != nullptr || !s.want_replacement.load()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("slot %d no longer wants a replacement", slot));
    }
    old_name = s.member.load()->Name();
    s.repl_id = it->id;
    s.repl_front.store(0);
    s.repl_bad.Reset({});
    s.repl_bad.flag_durable.store(false);
    s.replacement.store(m);
    spares_.erase(it);
  }
  RETURN_IF_ERROR(WriteSuperblocks(std::nullopt));
  if (s.replacement.load() != m) {
    return absl::UnavailableError(absl::StrFormat(
        "%s: writing its superblock failed; replace not started", m->Name()));
  }
  Log(LogLevel::kNotice,
      absl::StrFormat("replace: slot %d (%s) wants replacement after a write "
                      "error; copying it onto spare %s",
                      slot, old_name, m->Name()));
  CheckSpares();
  return absl::OkStatus();
}

absl::Status ArrayImpl::ReplaceMember(const std::string& old_name,
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
  if (std::optional<JobKind> busy = jobs_.Busy()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("a %s job is running; replace when it has finished",
                        JobKindName(*busy)));
  }
  ASSIGN_OR_RETURN(DeviceId id, PrepareNewMember(*replacement));
  RETURN_IF_ERROR(bitmap_.CopyTo(*replacement));
  std::shared_ptr<Member> r(std::move(replacement));
  {
    MutexLock lock(&sb_mu_);
    id.dev_number = NextDevNumber();
    if (id.dev_number >= kSbMaxDevLimit) {
      return absl::ResourceExhaustedError(
          "no free device numbers left in the superblock's role table");
    }
    // The old member may have failed since the look above: a replace
    // needs it active (FailSlot hands the slot to the replacement only
    // from there).
    if (s.state.load() != SlotState::kActive ||
        s.member.load()->Name() != old_name) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s failed or left its slot before the replace began", old_name));
    }
    s.repl_id = id;
    s.repl_front.store(0);
    s.repl_bad.Reset({});
    s.repl_bad.flag_durable.store(false);
    s.replacement.store(r);
  }
  RETURN_IF_ERROR(WriteSuperblocks(std::nullopt));
  if (s.replacement.load() != r) {
    return absl::UnavailableError(absl::StrFormat(
        "%s: writing its superblock failed; replace not started", r->Name()));
  }
  Log(LogLevel::kNotice,
      absl::StrFormat("replace: copying slot %d (%s) onto %s", slot, old_name,
                      r->Name()));
  return jobs_.Request(JobRequest{JobKind::kReplace, slot});
}

}  // namespace uraid
