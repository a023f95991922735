// SPDX-License-Identifier: MIT
// A member's failure and the superblock updates that record it: the one
// fail-a-slot decision (FailSlot), the hand-over to a replacement, and the
// fan-out of superblocks to every member (WriteSuperblocksOnce).
#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"
#include "parity/parity.h"

namespace uraid {
namespace {

uint64_t NowSeconds() { return static_cast<uint64_t>(std::time(nullptr)); }

}  // namespace

uint64_t ArrayImpl::HandOverToReplacement(Slot& s,
                                          const std::shared_ptr<Member>& r) {
  uint64_t from = 0;
  // sb_mu_ is held; the analysis cannot see into the lambda ChangeSlot runs.
  ChangeSlot(s, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    retired_devs_.push_back(s.id.dev_number);
    s.id = s.repl_id;
    from = s.repl_front.load();
    s.front.store(from);
    s.durable_front.store(0);  // not flushed yet: claim nothing
    s.partial.store(false);
    s.member.store(r);
    s.replacement.store(nullptr);
    TakeReplacementBadBlocks(s);
    s.state.store(SlotState::kRebuilding);
  });
  return from;
}

void ArrayImpl::ReportMemberFailed(const std::string& name, int slot,
                                   const std::string& why) const {
  {
    Event e = MakeEvent("Fail", name, slot);
    e.details.emplace_back("error", why);
    Report(LogLevel::kError, std::move(e),
           absl::StrFormat("member %s (slot %d) failed: %s", name, slot, why));
  }
  std::vector<uint64_t> gone;
  for (int i = 0; i < SlotCount(); ++i) {
    if (slots_[i]->state.load() != SlotState::kActive) gone.push_back(i);
  }
  if (failed_.load()) {
    Event e = MakeEvent("ArrayFailed", name, slot);
    e.details.emplace_back("gone_slots", gone);
    Report(LogLevel::kCritical, std::move(e),
           absl::StrFormat("array has FAILED (%d members gone, the last %s); "
                           "requests that need them return EIO",
                           gone.size(), name));
    return;
  }
  Event e = MakeEvent("DegradedArray");
  e.details.emplace_back("gone_slots", gone);
  Report(LogLevel::kWarning, std::move(e),
         absl::StrFormat("array continues degraded without slot %d", slot));
}

void ArrayImpl::ReportReplacementFailed(const std::string& name, int slot,
                                        const absl::Status& why) const {
  Event e = MakeEvent("FailSpare", name, slot);
  e.details.emplace_back("error", std::string(why.message()));
  e.details.emplace_back("kind", std::string("replace"));
  Report(LogLevel::kError, std::move(e),
         absl::StrFormat(
             "replacement %s for slot %d failed: %s; replace abandoned", name,
             slot, why.message()));
}

ArrayImpl::SlotFailure ArrayImpl::DecideSlotFailureLocked(
    Slot& sl, const Member* only_if) {
  SlotFailure f;
  f.old = sl.member.load();
  f.replacement = sl.replacement.load();
  SlotState st = sl.state.load();
  if (only_if != nullptr && f.old.get() != only_if) {
    f.outcome = SlotFailure::kNotHolder;
  } else if (f.replacement != nullptr && st == SlotState::kActive) {
    // A member being replaced fails: its replacement takes over.
    f.outcome = SlotFailure::kHandedOver;
    f.from = HandOverToReplacement(sl, f.replacement);
  } else {
    // A rebuild may finish (kRebuilding -> kActive) while we look: the
    // exchange retries with what it found.
    while ((st == SlotState::kActive || st == SlotState::kRebuilding) &&
           !sl.state.compare_exchange_weak(st, SlotState::kFaulty)) {
    }
    if (st == SlotState::kActive) {
      f.outcome = SlotFailure::kFailed;
      if (slots_.Gone() > 1) failed_.store(true);
    }
    if (st == SlotState::kRebuilding) f.outcome = SlotFailure::kTargetFailed;
  }
  return f;
}

void ArrayImpl::ReportSlotFailure(int slot, const SlotFailure& f,
                                  const std::string& why) const {
  const std::string name = f.old ? f.old->Name() : "";
  switch (f.outcome) {
    case SlotFailure::kNotHolder:
    case SlotFailure::kGone:
      return;
    case SlotFailure::kHandedOver: {
      Event e = MakeEvent("Fail", name, slot);
      e.details.emplace_back("error", why);
      e.details.emplace_back("replacement", f.replacement->Name());
      Report(LogLevel::kWarning, std::move(e),
             absl::StrFormat(
                 "member %s (slot %d) failed during replace: %s; "
                 "replacement %s continues as a rebuild from stripe %d",
                 name, slot, why, f.replacement->Name(), f.from));
      return;
    }
    case SlotFailure::kTargetFailed: {
      // The rebuild target failed: the slot is as degraded as before.
      Event e = MakeEvent("FailSpare", name, slot);
      e.details.emplace_back("error", why);
      Report(LogLevel::kError, std::move(e),
             absl::StrFormat("rebuild target %s (slot %d) failed: %s", name,
                             slot, why));
      return;
    }
    case SlotFailure::kFailed:
      ReportMemberFailed(name, slot, why);
      return;
  }
}

absl::Status ArrayImpl::FailSlot(int slot, const std::string& why,
                                 const Member* only_if) {
  if (slot < 0 || slot >= SlotCount()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("slot %d out of range 0..%d", slot, SlotCount() - 1));
  }
  // The check of who holds the slot and the change it decides are one step
  // under sb_mu_ (every hand-over of a slot happens under it): two requests
  // that hit the same dying member must not both act on it, or the second
  // would fail the replacement the first handed the slot to.
  SlotFailure f;
  {
    MutexLock lock(&sb_mu_);
    f = DecideSlotFailureLocked(*slots_[slot], only_if);
  }
  switch (f.outcome) {
    case SlotFailure::kNotHolder:
      Log(LogLevel::kDebug,
          absl::StrFormat("slot %d: ignoring a late error from %s, which no "
                          "longer holds the slot: %s",
                          slot, only_if->Name(), why));
      return absl::OkStatus();
    case SlotFailure::kGone:
      return absl::OkStatus();  // already gone
    case SlotFailure::kHandedOver:
      ReportSlotFailure(slot, f, why);
      return read_only_ ? absl::OkStatus() : WriteSuperblocks(std::nullopt);
    case SlotFailure::kTargetFailed: {
      ReportSlotFailure(slot, f, why);
      absl::Status st =
          read_only_ ? absl::OkStatus() : WriteSuperblocks(std::nullopt);
      MaybeStartRecovery();
      return st;
    }
    case SlotFailure::kFailed:
      break;
  }
  UpdateBitmapDegraded();
  ReportSlotFailure(slot, f, why);
  if (failed_.load()) {
    // md records the failure that fails the array too: the survivors'
    // superblocks then list both slots faulty, so that a restart with the
    // same members refuses (detail --test says failed), and a forced
    // assembly knows which member failed last (assemble.cc). Nothing else
    // runs on a failed array.
    return read_only_ ? absl::OkStatus() : WriteSuperblocks(std::nullopt);
  }
  if (resync_stripe_.load() < CurrentShape().geo.stripe_count()) {
    Log(LogLevel::kWarning,
        "a member failed before resync finished; stripes not yet "
        "resynced may reconstruct stale data");
  }
  if (read_only_) return absl::OkStatus();
  absl::Status st = WriteSuperblocks(std::nullopt);
  MaybeStartRecovery();
  return st;
}

absl::Status ArrayImpl::WriteSuperblocks(std::optional<bool> clean) {
  bool member_failed = false;
  absl::Status st = WriteSuperblocksOnce(clean, &member_failed);
  bitmap_.HandOverFailures();  // a member that failed the bitmap header
  if (member_failed) {
    // What FailSlot does after its own superblock write (it cannot be
    // called from inside one): a spare steps in.
    UpdateBitmapDegraded();
    MaybeStartRecovery();
  }
  return st;
}

absl::Status ArrayImpl::WriteSuperblocksOnce(std::optional<bool> clean,
                                             bool* member_failed) {
  // Positions in the superblock (resync and recovery offsets) are in the
  // current shape's stripes, whichever shape the caller was working in.
  const uint64_t C = CurrentShape().geo.chunk_bytes();
  MutexLock lock(&sb_mu_);
  absl::Status array_failed;
  for (int attempt = 0; attempt < 64; ++attempt) {
    sb_.events += 1;
    sb_.utime = NowSeconds();
    if (clean.has_value()) {
      if (*clean) {
        sb_.resync_offset = kMaxSector;
      } else if (wrote_since_open_.load()) {
        // Writes since assembly may have torn stripes anywhere: dirty from
        // the start.
        sb_.resync_offset = 0;
      } else {
        // Only resync has written: stripes below its front are in sync.
        sb_.resync_offset = resync_stripe_.load() * C / 512;
      }
    }
    std::fill(sb_.dev_roles.begin(), sb_.dev_roles.end(), kRoleSpare);
    auto set_role = [&](uint32_t dev, uint16_t role)
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(sb_mu_) {
                          if (dev >= sb_.dev_roles.size()) {
                            sb_.dev_roles.resize(dev + 1, kRoleSpare);
                          }
                          sb_.dev_roles[dev] = role;
                        };
    for (uint32_t dev : retired_devs_) set_role(dev, kRoleFaulty);
    // Every device that gets this superblock: slot members (active or
    // recovering), a replace target, spares.
    struct Target {
      std::shared_ptr<Member> member;
      DeviceId id;
      int slot = -1;  // -1: a spare
      bool replacement = false;
      std::optional<uint64_t> recovery_sectors;
      // The member's bad-block list (null for a spare, which has none in
      // use): its BAD_BLOCKS bit.
      BadBlockList* bad = nullptr;
    };
    // Highest slots first: at a reshape's start the new members get their
    // superblocks before the old ones, so a crash in between leaves either
    // the old array intact (new members without a superblock) or the
    // reshape's superblock on the freshest members (see assemble.cc).
    std::vector<Target> targets;
    for (int i = SlotCount() - 1; i >= 0; --i) {
      const Slot& s = *slots_[i];
      std::shared_ptr<Member> m = s.member.load();
      const SlotState st = s.state.load();
      if (m != nullptr) {
        if (st == SlotState::kActive || st == SlotState::kRebuilding) {
          set_role(s.id.dev_number, static_cast<uint16_t>(i));
          Target t{m, s.id, i, false, std::nullopt, &slots_[i]->bad};
          if (st == SlotState::kRebuilding) {
            t.recovery_sectors = s.durable_front.load() * C / 512;
          }
          targets.push_back(std::move(t));
        } else {
          set_role(s.id.dev_number, kRoleFaulty);
        }
      }
      if (std::shared_ptr<Member> r = s.replacement.load(); r != nullptr) {
        // Not resumable across restarts (see ReplaceMember): a spare on disk.
        set_role(s.repl_id.dev_number, kRoleSpare);
        targets.push_back(
            Target{r, s.repl_id, i, true, std::nullopt, &slots_[i]->repl_bad});
      }
    }
    for (const Spare& sp : spares_) {
      set_role(sp.id.dev_number, kRoleSpare);
      targets.push_back(Target{sp.member, sp.id, -1, false, std::nullopt});
    }
    // md writes the bitmap header (with the new events) before the
    // superblocks: a crash in between leaves the bitmap one event ahead,
    // which assembly accepts, never behind (which would mean stale).
    if (bitmap_.intent() != nullptr) {
      absl::Status bs = bitmap_.intent()->SetEvents(sb_.events);
      if (!bs.ok()) {
        Log(LogLevel::kError, absl::StrFormat("bitmap: writing events %d: %s",
                                              sb_.events, bs.message()));
      }
    }
    // One member after another, in the order above, each write and flush
    // retried once as data I/O is. Not fanned out: the order is part of
    // the contract. At a reshape's start the new members must have the
    // reshape's superblock before the old ones (assembly relies on it), and
    // integration_crash's test_two_crashes_in_superblock_writes pins the
    // order a crash mid-update leaves behind (highest slots updated first).
    // The first failure is handled and the update made again with a new
    // event count.
    bool retry = false;
    for (const Target& t : targets) {
      Superblock mine = sb_;
      mine.dev_number = t.id.dev_number;
      mine.device_uuid = t.id.device_uuid;
      mine.data_size = t.id.data_size_sectors;
      mine.feature_map &= ~kFeatureRecoveryOffset;
      mine.recovery_offset = 0;
      if (t.recovery_sectors.has_value()) {
        mine.feature_map |= kFeatureRecoveryOffset;
        mine.recovery_offset = *t.recovery_sectors;
      }
      // md's BAD_BLOCKS: the member's log holds entries (the log itself
      // was written before: RecordBadBlocks).
      const bool bad = t.bad != nullptr && !t.bad->empty();
      mine.feature_map &= ~kFeatureBadBlocks;
      if (bad) mine.feature_map |= kFeatureBadBlocks;
      const std::vector<uint8_t> bytes = EncodeSuperblock(mine);
      const absl::Status st =
          WriteDurably(*t.member, bytes.data(), bytes.size(), kSb12OffsetBytes);
      if (st.ok()) {
        if (t.bad != nullptr) t.bad->flag_durable.store(bad);
        continue;
      }
      {
        Event e = MakeEvent("MetadataWriteFailed", t.member->Name(), t.slot);
        e.details.emplace_back("error", std::string(st.message()));
        Report(LogLevel::kError, std::move(e),
               absl::StrFormat("member %s failed writing its superblock: %s",
                               t.member->Name(), st.message()));
      }
      retry = true;
      if (t.slot < 0) {
        std::erase_if(spares_,
                      [&](const Spare& sp) { return sp.member == t.member; });
        break;
      }
      Slot& s = *slots_[t.slot];
      if (t.replacement) {
        std::shared_ptr<Member> expected = t.member;
        s.replacement.compare_exchange_strong(expected, nullptr);
        break;
      }
      // Hand-overs happen under sb_mu_, which is held: the member still
      // holds its slot unless the slot changed hands before this write.
      const SlotFailure f = DecideSlotFailureLocked(s, t.member.get());
      if (f.outcome == SlotFailure::kNotHolder) break;
      *member_failed = true;
      ReportSlotFailure(
          t.slot, f, absl::StrCat("superblock write failed: ", st.message()));
      if (f.outcome == SlotFailure::kFailed && failed_.load() &&
          array_failed.ok()) {
        // The update goes on (with this failure in it) to the members
        // left, as md's does: they must agree on which slots failed, or a
        // restart would take a member written before it for current.
        array_failed = absl::UnavailableError(absl::StrFormat(
            "array has failed: superblock write to %s failed: %s",
            t.member->Name(), st.message()));
      }
      break;
    }
    if (!retry) return array_failed;
  }
  return absl::InternalError("superblock update did not settle");
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
      std::shared_ptr<Member> r = slots_[io.slot]->replacement.load();
      if (r != nullptr &&
          slots_[io.slot]->replacement.compare_exchange_strong(r, nullptr)) {
        ReportReplacementFailed(r->Name(), io.slot, io.status);
      }
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
