// SPDX-License-Identifier: MIT
// The metadata owner's decisions: Apply and one Decide per edit kind, the
// one fail-a-slot decision, and the events they report. The superblock
// fan-out they persist through is in superblock_fanout.cc.

#include "roster/roster.h"

#include <algorithm>
#include <utility>
#include <variant>

#include "absl/strings/str_format.h"
#include "format/reshape_math.h"
#include "report/array_reporter.h"

namespace uraid {

Roster::Roster(RosterHost& host, std::vector<std::unique_ptr<Slot>> slots,
               Superblock sb, std::vector<Spare> spares, bool read_only)
    : host_(host),
      read_only_(read_only),
      slots_(std::move(slots)),
      sb_(std::move(sb)),
      spares_(std::move(spares)) {
  // Members the array may lose and still serve every byte: RAID6 two.
  if (slots_.Gone() > (sb_.level == 6 ? 2 : 1)) failed_.store(true);
}

Applied Roster::Apply(const RosterEdit& edit) {
  Applied a;
  MutexLock lock(&mu_);
  const bool persist = std::visit(
      [&](const auto& e)
          ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return DecideLocked(e, &a); },
      edit);
  if (!persist || read_only_) return a;
  std::optional<bool> clean;
  if (const auto* c = std::get_if<edit::SetClean>(&edit)) clean = c->clean;
  absl::Status st = PersistLocked(clean, &a.member_failed);
  if (a.status.ok()) a.status = st;
  return a;
}

void Roster::Seat(Slot& slot, std::shared_ptr<Member> member,
                  const DeviceId& id, SlotState state, uint64_t front) {
  slot.id = id;
  slot.member.store(std::move(member));
  if (state == SlotState::kRebuilding) {
    slot.front.store(front);
    slot.durable_front.store(front);
  }
  slot.state.store(state);
}

void Roster::AppendSlotLocked(std::shared_ptr<Member> member, DeviceId id) {
  auto slot = std::make_unique<Slot>();
  id.dev_number = NextDevNumberLocked();
  Seat(*slot, std::move(member), id, SlotState::kActive);
  slots_.Append(std::move(slot));
}

void Roster::SetReshapeLocked(const Geometry& from, uint64_t from_offset,
                              const Geometry& to, uint64_t to_offset,
                              uint64_t front_bytes) {
  sb_.feature_map |= kFeatureReshapeActive | kFeatureNewOffset;
  sb_.level = from.level();
  sb_.layout = MdLayout(from);
  sb_.chunksize = static_cast<uint32_t>(from.chunk_bytes() / 512);
  sb_.raid_disks = static_cast<uint32_t>(to.raid_disks());
  sb_.delta_disks = to.raid_disks() - from.raid_disks();
  sb_.new_level = static_cast<uint32_t>(to.level());
  sb_.new_layout = MdLayout(to);
  sb_.new_chunk = static_cast<uint32_t>(to.chunk_bytes() / 512);
  sb_.new_offset = static_cast<int32_t>(
      (static_cast<int64_t>(to_offset) - static_cast<int64_t>(from_offset)) /
      512);
  sb_.reshape_position = front_bytes / 512;
}

void Roster::EndReshapeLocked(const Geometry& to, uint64_t to_offset,
                              uint64_t grown_sectors) {
  sb_.feature_map &= ~(kFeatureReshapeActive | kFeatureNewOffset);
  sb_.level = to.level();
  sb_.layout = MdLayout(to);
  sb_.chunksize = static_cast<uint32_t>(to.chunk_bytes() / 512);
  sb_.raid_disks = static_cast<uint32_t>(to.raid_disks());
  sb_.data_offset = to_offset / 512;
  sb_.delta_disks = 0;
  sb_.new_level = 0;
  sb_.new_layout = 0;
  sb_.new_chunk = 0;
  sb_.new_offset = 0;
  sb_.reshape_position = 0;
  for (const auto& s : slots_) s->id.data_size_sectors += grown_sectors;
}

void Roster::SetLevelLocked(const Geometry& to) {
  sb_.level = to.level();
  sb_.layout = MdLayout(to);
}

void Roster::TakeoverLocked(const Geometry& to) {
  const int n = SlotCount();
  if (to.raid_disks() == n + 1) {
    slots_.Append(std::make_unique<Slot>());  // kMissing, no member
  } else if (to.raid_disks() == n - 1) {
    Slot& s = *slots_[n - 1];
    std::shared_ptr<Member> m;
    ChangeSlot(s, [&] {
      m = s.member.exchange(nullptr);
      s.state.store(SlotState::kMissing);
    });
    if (m != nullptr) spares_.push_back(Spare{m, s.id});
    slots_.PopBack();
  }
  sb_.level = to.level();
  sb_.layout = MdLayout(to);
  sb_.raid_disks = static_cast<uint32_t>(to.raid_disks());
  host_.SlotHealthChanged();
}

void Roster::SetPolicyFieldsLocked(uint32_t feature_map,
                                   int32_t bitmap_offset) {
  sb_.feature_map = feature_map;
  sb_.bitmap_offset = bitmap_offset;
}

bool Roster::SkipFront(int slot, const Member* target, uint64_t from,
                       uint64_t to, bool need_partial) {
  MutexLock lock(&mu_);
  Slot& s = *slots_[slot];
  const bool ok = s.state.load() == SlotState::kRebuilding &&
                  s.member.load().get() == target && s.front.load() == from &&
                  (!need_partial || s.partial.load());
  if (ok) s.front.store(to);
  return ok;
}

Superblock Roster::Template() const {
  MutexLock lock(&mu_);
  return sb_;
}

std::vector<Spare> Roster::Spares() const {
  MutexLock lock(&mu_);
  return spares_;
}

std::shared_ptr<Member> Roster::FirstSpare() const {
  MutexLock lock(&mu_);
  return spares_.empty() ? nullptr : spares_.front().member;
}

uint32_t Roster::NextDevNumberLocked() const {
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

bool Roster::NumberDeviceLocked(DeviceId* id, Applied* a) const {
  const uint32_t next = NextDevNumberLocked();
  if (next >= kSbMaxDevLimit) {
    a->outcome = Applied::kRefused;
    a->status = absl::ResourceExhaustedError(
        "no free device numbers left in the superblock's role table");
    return false;
  }
  id->dev_number = a->dev_number = next;
  return true;
}

// ------------------------------------------------------------- transitions

uint64_t Roster::HandOverLocked(Slot& s) {
  SlotChange change(s);
  retired_devs_.push_back(s.id.dev_number);
  s.id = s.repl_id;
  const uint64_t from = s.repl_front.load();
  s.front.store(from);
  s.durable_front.store(0);  // not flushed yet: claim nothing
  s.partial.store(false);
  s.member.store(s.replacement.load());
  s.replacement.store(nullptr);
  TakeReplacementBadBlocks(s);
  s.state.store(SlotState::kRebuilding);
  return from;
}

void Roster::StartRebuildLocked(Slot& s, const std::shared_ptr<Member>& m,
                                const DeviceId& id, bool partial) {
  // The faulty member (if still there) leaves with its role kept faulty.
  if (s.member.load() != nullptr) retired_devs_.push_back(s.id.dev_number);
  s.id = id;
  SlotChange change(s);
  s.front.store(0);
  s.durable_front.store(0);
  s.read_errors.store(0);
  s.stats.Reset();
  s.partial.store(partial);
  // A new member's list starts empty: it gets entries only for rows the
  // rebuild cannot make (never the old member's). A re-added member with
  // entries of its own is not rebuilt partially (ReAddRefusalLocked).
  s.bad.Reset({});
  s.bad.flag_durable.store(false);
  s.want_replacement.store(false);
  s.member.store(m);
  s.state.store(SlotState::kRebuilding);
}

Applied Roster::FailLocked(int slot, const Member* only_if) {
  Slot& sl = *slots_[slot];
  Applied f;
  f.old = sl.member.load();
  f.replacement = sl.replacement.load();
  SlotState st = sl.state.load();
  if (only_if != nullptr && f.old.get() != only_if) {
    f.outcome = Applied::kNotHolder;
  } else if (f.replacement != nullptr && st == SlotState::kActive) {
    // A member being replaced fails: its replacement takes over.
    f.outcome = Applied::kHandedOver;
    f.from = HandOverLocked(sl);
  } else {
    f.outcome = Applied::kGone;
    // A rebuild may finish (kRebuilding -> kActive) while we look: the
    // exchange retries with what it found.
    while ((st == SlotState::kActive || st == SlotState::kRebuilding) &&
           !sl.state.compare_exchange_weak(st, SlotState::kFaulty)) {
    }
    if (st == SlotState::kActive) {
      f.outcome = Applied::kFailed;
      if (slots_.Gone() > (sb_.level == 6 ? 2 : 1)) failed_.store(true);
    }
    if (st == SlotState::kRebuilding) f.outcome = Applied::kTargetFailed;
  }
  return f;
}

// ------------------------------------------------------------------ edits

bool Roster::DecideLocked(const edit::Fail& e, Applied* a) {
  if (e.slot < 0 || e.slot >= SlotCount()) {
    a->outcome = Applied::kRefused;
    a->status = absl::InvalidArgumentError(
        absl::StrFormat("slot %d out of range 0..%d", e.slot, SlotCount() - 1));
    return false;
  }
  *a = FailLocked(e.slot, e.only_if);
  switch (a->outcome) {
    case Applied::kNotHolder:
      host_.Log(LogLevel::kDebug,
                absl::StrFormat("slot %d: ignoring a late error from %s, which "
                                "no longer holds the slot: %s",
                                e.slot, e.only_if->Name(), e.why));
      return false;
    case Applied::kFailed:
      host_.SlotHealthChanged();
      break;
    case Applied::kHandedOver:
    case Applied::kTargetFailed:
      break;
    default:
      return false;  // already gone
  }
  ReportSlotFailure(e.slot, *a, e.why);
  return true;
}

bool Roster::DecideLocked(const edit::DropReplacement& e, Applied* a) {
  const bool dropped = DropReplacementIf(*slots_[e.slot], e.target);
  if (dropped && e.report) {
    ReportReplacementFailed(e.target->Name(), e.slot, e.why);
  }
  if (!dropped) a->outcome = Applied::kRefused;
  return e.persist == edit::DropReplacement::kAlways ||
         (dropped && e.persist == edit::DropReplacement::kIfDropped);
}

bool Roster::DecideLocked(const edit::PromoteSpare& e, Applied* a) {
  Slot& s = *slots_[e.slot];
  auto it = std::find_if(spares_.begin(), spares_.end(),
                         [&](const Spare& sp) { return sp.member == e.spare; });
  a->outcome = Applied::kRefused;
  if (it == spares_.end()) {
    a->status = absl::FailedPreconditionError("the spare was removed");
    return false;
  }
  const SlotState st = s.state.load();
  if (st == SlotState::kActive || st == SlotState::kRebuilding) {
    a->status = absl::FailedPreconditionError("slot no longer gone");
    return false;
  }
  a->outcome = Applied::kDone;
  const DeviceId id = it->id;
  spares_.erase(it);
  StartRebuildLocked(s, e.spare, id, /*partial=*/false);
  return true;
}

std::string Roster::ReAddRefusalLocked(const Superblock& old) const {
  const int slot = old.role();
  const SlotState st = slots_[slot]->state.load();
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
  const std::optional<BitmapSuper> bs = host_.BitmapHeader();
  if (!bs.has_value()) return "the array has no bitmap";
  if (bs->stale()) return "the bitmap is stale";
  if (old.events < bs->events_cleared || old.events > sb_.events) {
    return absl::StrFormat(
        "its events (%d) are outside what the bitmap covers (%d..%d): bits "
        "were cleared after it left",
        old.events, bs->events_cleared, sb_.events);
  }
  return "";
}

bool Roster::DecideLocked(const edit::ReAdd& e, Applied* a) {
  // The decision and the change in one step: no rebuild can finish (and
  // clear bits) or take the slot in between.
  a->refusal = ReAddRefusalLocked(e.old);
  if (!a->refusal.empty()) {
    a->outcome = Applied::kRefused;
    return false;
  }
  DeviceId id = e.id;
  if (!NumberDeviceLocked(&id, a)) return false;
  StartRebuildLocked(*slots_[e.slot], e.member, id, /*partial=*/true);
  host_.SlotHealthChanged();
  host_.Log(LogLevel::kNotice,
            absl::StrFormat("%s re-added to slot %d: only the bitmap regions "
                            "written since it left are rebuilt",
                            e.member->Name(), e.slot));
  return true;
}

bool Roster::DecideLocked(const edit::StartReplace& e, Applied* a) {
  Slot& s = *slots_[e.slot];
  a->outcome = Applied::kRefused;
  DeviceId id = e.id;
  if (e.from_spare) {
    auto it =
        std::find_if(spares_.begin(), spares_.end(),
                     [&](const Spare& sp) { return sp.member == e.target; });
    if (it == spares_.end()) {
      a->status = absl::FailedPreconditionError("the spare was removed");
      return false;
    }
    // The old member may have failed (a spare then recovers the slot
    // instead) or been replaced since the caller looked.
    if (s.state.load() != SlotState::kActive ||
        s.replacement.load() != nullptr || !s.want_replacement.load()) {
      a->status = absl::FailedPreconditionError(
          absl::StrFormat("slot %d no longer wants a replacement", e.slot));
      return false;
    }
    id = it->id;
    spares_.erase(it);
  } else {
    if (!NumberDeviceLocked(&id, a)) return false;
    // The old member may have failed since the look: a replace needs it
    // active (Fail hands the slot to the replacement only from there).
    if (s.state.load() != SlotState::kActive ||
        s.member.load()->Name() != e.old_name) {
      a->status = absl::FailedPreconditionError(absl::StrFormat(
          "%s failed or left its slot before the replace began", e.old_name));
      return false;
    }
  }
  a->outcome = Applied::kDone;
  a->old = s.member.load();
  a->dev_number = id.dev_number;
  s.repl_id = id;
  s.repl_front.store(0);
  s.repl_bad.Reset({});
  s.repl_bad.flag_durable.store(false);
  s.replacement.store(e.target);
  return true;
}

bool Roster::DecideLocked(const edit::CheckpointRebuild& e, Applied* a) {
  bool any = false;
  for (const auto& [slot, front] :
       {std::pair{e.slot, e.front}, std::pair{e.other_slot, e.other_front}}) {
    if (slot < 0) continue;
    Slot& s = *slots_[slot];
    if (s.state.load() != SlotState::kRebuilding) continue;
    s.durable_front.store(front);
    any = true;
  }
  if (!any) a->outcome = Applied::kRefused;
  return any;
}

bool Roster::DecideLocked(const edit::FinishRebuild& e, Applied* a) {
  Slot& s = *slots_[e.slot];
  SlotState expected = SlotState::kRebuilding;
  if (!s.state.compare_exchange_strong(expected, SlotState::kActive)) {
    a->outcome = Applied::kRefused;
    a->status = absl::AbortedError("the recovery target failed at the end");
    return false;
  }
  s.durable_front.store(e.stripes);
  s.partial.store(false);
  host_.SlotHealthChanged();
  return e.persist;
}

bool Roster::DecideLocked(const edit::SwapInReplacement& e, Applied* a) {
  // The old member failing now (edit::Fail) either happened before, and
  // the replacement is already the slot's rebuilding member, or waits
  // until the swap is done.
  Slot& s = *slots_[e.slot];
  std::shared_ptr<Member> r = s.replacement.load();
  if (r == nullptr || s.state.load() != SlotState::kActive) {
    // A replacement that took over its failed old member finishes as a
    // rebuild (front at the end): the next recovery run completes it.
    a->outcome = Applied::kRefused;
    a->status = absl::AbortedError("the replacement failed at the end");
    return false;
  }
  a->old = s.member.load();
  a->replacement = r;
  {
    // Writes in flight to the old member are refused (stale) and redone on
    // the new one: see Slot::gen.
    SlotChange change(s);
    retired_devs_.push_back(s.id.dev_number);
    s.id = s.repl_id;
    s.member.store(r);
    s.replacement.store(nullptr);
    TakeReplacementBadBlocks(s);
  }
  s.read_errors.store(0);
  s.stats.Reset();
  host_.Log(LogLevel::kNotice,
            absl::StrFormat("replace: %s now holds slot %d; %s is released",
                            r->Name(), e.slot, a->old ? a->old->Name() : "?"));
  return true;
}

bool Roster::DecideLocked(const edit::Remove& e, Applied* a) {
  Slot& s = *slots_[e.slot];
  // A spare may have stepped into the slot since the caller looked.
  if (s.member.load() != e.member || s.state.load() != SlotState::kFaulty) {
    a->outcome = Applied::kRefused;
    a->status = absl::FailedPreconditionError(absl::StrFormat(
        "%s no longer holds slot %d (a spare took over); nothing removed",
        e.member->Name(), e.slot));
    return false;
  }
  retired_devs_.push_back(s.id.dev_number);
  {
    // In-flight I/O keeps its own reference; the member closes after it.
    SlotChange change(s);
    s.member.store(nullptr);
    s.bad.Reset({});
    s.want_replacement.store(false);
    s.stats.Reset();
    s.partial.store(false);
    s.state.store(SlotState::kMissing);
  }
  host_.Report(LogLevel::kNotice,
               MakeEvent("MemberRemoved", e.member->Name(), e.slot),
               absl::StrFormat("faulty member %s removed from slot %d",
                               e.member->Name(), e.slot));
  return true;
}

bool Roster::DecideLocked(const edit::AddSpare& e, Applied* a) {
  DeviceId id = e.id;
  if (!NumberDeviceLocked(&id, a)) return false;
  spares_.push_back(Spare{e.member, id});
  return true;
}

bool Roster::DecideLocked(const edit::RemoveSpare& e, Applied* a) {
  std::erase_if(spares_,
                [&](const Spare& sp) { return sp.member == e.member; });
  if (e.report_removed) {
    host_.Report(LogLevel::kNotice,
                 MakeEvent("MemberRemoved", e.member->Name(), -1),
                 absl::StrFormat("spare %s removed", e.member->Name()));
  }
  return true;
}

bool Roster::DecideLocked(const edit::SetClean&, Applied*) { return true; }

bool Roster::DecideLocked(const edit::Persist&, Applied*) { return true; }

// ----------------------------------------------------------------- reports

void Roster::ReportMemberFailed(const std::string& name, int slot,
                                const std::string& why) const {
  {
    Event e = MakeEvent("Fail", name, slot);
    e.details.emplace_back("error", why);
    host_.Report(
        LogLevel::kError, std::move(e),
        absl::StrFormat("member %s (slot %d) failed: %s", name, slot, why));
  }
  std::vector<uint64_t> gone;
  for (int i = 0; i < SlotCount(); ++i) {
    if (slots_[i]->state.load() != SlotState::kActive) gone.push_back(i);
  }
  if (failed_.load()) {
    Event e = MakeEvent("ArrayFailed", name, slot);
    e.details.emplace_back("gone_slots", gone);
    host_.Report(
        LogLevel::kCritical, std::move(e),
        absl::StrFormat("array has FAILED (%d members gone, the last %s); "
                        "requests that need them return EIO",
                        gone.size(), name));
    return;
  }
  Event e = MakeEvent("DegradedArray");
  e.details.emplace_back("gone_slots", gone);
  host_.Report(
      LogLevel::kWarning, std::move(e),
      absl::StrFormat("array continues degraded without slot %d", slot));
}

void Roster::CheckSpares() const {
  const int expected = expected_spares_.load();
  if (expected <= 0) return;
  const int have = static_cast<int>(Spares().size());
  if (have >= expected) return;
  host_.Report(LogLevel::kWarning, SparesMissing(have, expected),
               absl::StrFormat("%d spare(s), %d expected", have, expected));
}

void Roster::ReportReplacementFailed(const std::string& name, int slot,
                                     const absl::Status& why) const {
  Event e = MakeEvent("FailSpare", name, slot);
  e.details.emplace_back("error", std::string(why.message()));
  e.details.emplace_back("kind", std::string("replace"));
  host_.Report(LogLevel::kError, std::move(e),
               absl::StrFormat(
                   "replacement %s for slot %d failed: %s; replace abandoned",
                   name, slot, why.message()));
}

void Roster::ReportSlotFailure(int slot, const Applied& f,
                               const std::string& why) const {
  const std::string name = f.old ? f.old->Name() : "";
  switch (f.outcome) {
    case Applied::kHandedOver: {
      Event e = MakeEvent("Fail", name, slot);
      e.details.emplace_back("error", why);
      e.details.emplace_back("replacement", f.replacement->Name());
      host_.Report(LogLevel::kWarning, std::move(e),
                   absl::StrFormat(
                       "member %s (slot %d) failed during replace: %s; "
                       "replacement %s continues as a rebuild from stripe %d",
                       name, slot, why, f.replacement->Name(), f.from));
      return;
    }
    case Applied::kTargetFailed: {
      // The rebuild target failed: the slot is as degraded as before.
      Event e = MakeEvent("FailSpare", name, slot);
      e.details.emplace_back("error", why);
      host_.Report(LogLevel::kError, std::move(e),
                   absl::StrFormat("rebuild target %s (slot %d) failed: %s",
                                   name, slot, why));
      return;
    }
    case Applied::kFailed:
      ReportMemberFailed(name, slot, why);
      return;
    default:
      return;
  }
}

}  // namespace uraid
