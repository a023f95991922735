// SPDX-License-Identifier: MIT
// The roster's persist step: the superblock written to every member of the
// array (slot members, replace targets, spares), one after another, highest
// slot first, with the bitmap header before them.

#include <algorithm>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/io_executor.h"
#include "report/array_reporter.h"
#include "roster/roster.h"

namespace uraid {
namespace {

uint64_t NowSeconds() { return static_cast<uint64_t>(std::time(nullptr)); }

}  // namespace

absl::Status Roster::PersistLocked(std::optional<bool> clean,
                                   bool* member_failed) {
  // Positions in the superblock (resync and recovery offsets) are in the
  // current shape's stripes, whichever shape the caller was working in.
  const uint64_t C = host_.CurrentChunkBytes();
  absl::Status array_failed;
  for (int attempt = 0; attempt < 64; ++attempt) {
    sb_.events += 1;
    sb_.utime = NowSeconds();
    if (clean.has_value()) {
      // Dirty: writes since assembly may have torn stripes anywhere (0), or
      // only resync has written and stripes below its front are in sync.
      sb_.resync_offset = *clean ? kMaxSector : host_.DirtyResyncSectors();
    }
    std::fill(sb_.dev_roles.begin(), sb_.dev_roles.end(), kRoleSpare);
    auto set_role = [&](uint32_t dev, uint16_t role)
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
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
    host_.WriteBitmapEvents(sb_.events);
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
        host_.Report(
            LogLevel::kError, std::move(e),
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
        DropReplacementIf(s, t.member);
        break;
      }
      // Every change of a slot's holder happens under mu_, which is held:
      // the member still holds its slot unless it changed hands before
      // this write.
      const Applied f = FailLocked(t.slot, t.member.get());
      if (f.outcome == Applied::kNotHolder) break;
      *member_failed = true;
      // The slot's health changed here, whichever edit was persisting: the
      // bitmap must know the array is degraded before any of its bits can
      // be cleared (a later re-add needs them), as for edit::Fail.
      if (f.outcome == Applied::kFailed) host_.SlotHealthChanged();
      ReportSlotFailure(
          t.slot, f, absl::StrCat("superblock write failed: ", st.message()));
      if (f.outcome == Applied::kFailed && failed_.load() &&
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

}  // namespace uraid
