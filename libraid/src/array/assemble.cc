// SPDX-License-Identifier: MIT
// Array::Assemble: form an array from members' superblocks, in any order,
// refusing (and writing nothing) when the members cannot safely form it.

#include <algorithm>
#include <map>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "array/array_impl.h"
#include "array/forced_assembly.h"
#include "array/member_superblock.h"
#include "base/status_macros.h"
#include "format/reshape_math.h"
#include "meta/ppl_log.h"
#include "uraid/bad_blocks.h"

namespace uraid {
namespace {

// The member's bad-block log, as its superblock places it.
absl::StatusOr<std::vector<BadBlock>> ReadBadBlocks(Member& m,
                                                    const Superblock& sb) {
  const std::optional<BadBlockLogArea> area = BadBlockLogAreaOf(sb);
  if (!area.has_value()) {
    return absl::DataLossError(absl::StrFormat(
        "member %s: superblock says BAD_BLOCKS but reserves no bad-block log "
        "(bblog_offset %d, bblog_size %d)",
        m.Name(), sb.bblog_offset, sb.bblog_size));
  }
  std::vector<uint8_t> bytes(area->size_bytes);
  if (absl::Status st = m.Read(bytes.data(), bytes.size(), area->offset_bytes);
      !st.ok()) {
    return absl::Status(
        st.code(), absl::StrFormat("member %s: reading its bad-block log at "
                                   "byte %d: %s",
                                   m.Name(), area->offset_bytes, st.message()));
  }
  absl::StatusOr<std::vector<BadBlock>> bad =
      DecodeBadBlockLog(bytes, area->shift);
  if (!bad.ok()) {
    return absl::DataLossError(
        absl::StrFormat("member %s: corrupt bad-block log at byte %d: %s",
                        m.Name(), area->offset_bytes, bad.status().message()));
  }
  return bad;
}

}  // namespace

namespace {

// Geometry fields every member must agree on.
absl::Status CompareShape(const Member& a, const Superblock& sa,
                          const Member& b, const Superblock& sb) {
  auto differ = [&](const char* field, uint64_t va,
                    uint64_t vb) -> absl::Status {
    return absl::FailedPreconditionError(
        absl::StrFormat("members %s and %s disagree on %s (%d vs %d)", a.Name(),
                        b.Name(), field, va, vb));
  };
  if (sa.level != sb.level) return differ("level", sa.level, sb.level);
  if (sa.layout != sb.layout) return differ("layout", sa.layout, sb.layout);
  if (sa.chunksize != sb.chunksize) {
    return differ("chunk size", sa.chunksize, sb.chunksize);
  }
  if (sa.raid_disks != sb.raid_disks) {
    return differ("raid disks", sa.raid_disks, sb.raid_disks);
  }
  if (sa.size != sb.size) return differ("component size", sa.size, sb.size);
  if (sa.data_offset != sb.data_offset) {
    return differ("data offset", sa.data_offset, sb.data_offset);
  }
  return absl::OkStatus();
}

// md's --run rule: a slot the newest superblock lists as held by a device
// (dev_roles) and that no given member fills was active when the array
// last stopped, so its member was forgotten or could not be opened.
// Starting without it would make it stale at the first write. Slots the
// superblock already records as failed or empty started degraded before
// and pass.
absl::Status CheckNoActiveSlotForgotten(
    const Superblock& top, const std::vector<int>& member_in_slot) {
  std::vector<std::string> forgotten;
  for (size_t d = 0; d < top.dev_roles.size(); ++d) {
    const uint16_t role = top.dev_roles[d];
    if (role < member_in_slot.size() && member_in_slot[role] < 0) {
      forgotten.push_back(absl::StrFormat("slot %d (device %d)", role, d));
    }
  }
  if (forgotten.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s not given: the array's newest superblock (events %d) lists %s as "
      "active when the array last stopped; give %s, or start the array "
      "degraded with --run (plugin key run=true; md's rule: the member "
      "left out becomes stale at the first write)",
      absl::StrJoin(forgotten, ", "), top.events,
      forgotten.size() == 1 ? "it" : "them",
      forgotten.size() == 1 ? "that member" : "those members"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Array>> Array::Assemble(
    std::vector<std::unique_ptr<Member>> members,
    const AssembleOptions& options, Logger logger) {
  if (members.empty()) return absl::InvalidArgumentError("no members given");
  const size_t m = members.size();
  std::vector<Superblock> sbs;
  for (const auto& member : members) {
    if (member == nullptr) {
      return absl::InvalidArgumentError(
          "'missing' is only meaningful for create; leave the member out");
    }
    ASSIGN_OR_RETURN(Superblock sb, ReadSuperblock(*member));
    sbs.push_back(std::move(sb));
  }
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = i + 1; j < m; ++j) {
      if (sbs[i].device_uuid == sbs[j].device_uuid) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "members %s and %s are the same device (device uuid %s, "
            "dev_number %d): give each member once",
            members[i]->Name(), members[j]->Name(),
            FormatUuid(sbs[i].device_uuid), sbs[i].dev_number));
      }
    }
  }
  for (size_t i = 1; i < m; ++i) {
    if (sbs[i].set_uuid != sbs[0].set_uuid) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "member %s belongs to a different array (uuid %s) than %s (uuid "
          "%s)",
          members[i]->Name(), FormatUuid(sbs[i].set_uuid), members[0]->Name(),
          FormatUuid(sbs[0].set_uuid)));
    }
  }
  size_t fresh = 0;
  for (size_t i = 1; i < m; ++i) {
    if (sbs[i].events > sbs[fresh].events) fresh = i;
  }
  const Superblock& top = sbs[fresh];
  if (top.level != 4 && top.level != 5 && top.level != 6) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: level %d arrays are not supported (uraid handles RAID4, RAID5 "
        "and RAID6)",
        members[fresh]->Name(), top.level));
  }
  const bool reshaping = top.feature_map & kFeatureReshapeActive;
  if (reshaping && static_cast<uint32_t>(top.level) != top.new_level &&
      (top.level == 6 || top.new_level == 6)) {
    // md converts between RAID5 and RAID6 by takeover (no reshape) and
    // restripes at level 6; a reshape that changes the level to or from 6
    // is none of uraid's and not one mdadm starts either.
    return absl::UnimplementedError(absl::StrFormat(
        "%s: a reshape from level %d to %d is in progress; uraid resumes "
        "RAID6 reshapes that stay at level 6 only: let md finish it",
        members[fresh]->Name(), top.level, top.new_level));
  }
  // Members the array may lose and still serve every byte.
  const size_t max_lost = top.level == 6 ? 2 : 1;
  for (size_t i = 0; i < m; ++i) {
    // A member one event behind that took part in a reshape's start or end
    // (a crash between two superblock writes) has the other shape in its
    // superblock; the freshest superblock's shape is the one the data is
    // in (no data moves before every member has the reshape's first
    // superblock, nor after the last window), so it is not compared.
    // Likewise a takeover (RAID4 <-> RAID5 parity-last, RAID5 <-> RAID6):
    // one superblock update changes the level, and no data moves.
    const bool reshape_edge =
        sbs[i].events + 1 == top.events &&
        (reshaping || (sbs[i].feature_map & kFeatureReshapeActive) ||
         sbs[i].level != top.level);
    if (i != fresh && !reshape_edge) {
      RETURN_IF_ERROR(CompareShape(*members[fresh], top, *members[i], sbs[i]));
    }
    const uint32_t fm = sbs[i].feature_map;
    if (fm & (kFeatureJournal | kFeatureClustered)) {
      return absl::UnimplementedError(
          absl::StrFormat("%s: journal and clustered arrays are not supported "
                          "(feature map 0x%x)",
                          members[i]->Name(), fm));
    }
    if (absl::Status st = CheckFeatureCombination(sbs[i]); !st.ok()) {
      return absl::Status(
          st.code(),
          absl::StrFormat("%s: %s", members[i]->Name(), st.message()));
    }
    if (fm & kFeatureReplacement) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: the member is an md replacement device being copied; uraid "
          "does not resume md's replace, leave it out",
          members[i]->Name()));
    }
  }
  const int n = static_cast<int>(top.raid_disks);
  const uint64_t chunk = uint64_t{top.chunksize} * 512;
  // RAID4 has no layouts: md stores 0 and always puts parity last.
  const Layout layout =
      top.level == 4 ? Layout::kParityLast : static_cast<Layout>(top.layout);
  if (top.level == 5 && top.layout > 5) {
    return absl::DataLossError(
        absl::StrFormat("%s: superblock describes an invalid array: layout %d",
                        members[fresh]->Name(), top.layout));
  }
  // During a reshape raid_disks is the new count and level, layout and
  // chunk the old shape's; the new_* fields and delta_disks give the new.
  if (reshaping && top.delta_disks < 0) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: a shrinking reshape (delta_disks %d) is in progress; uraid only "
        "resumes reshapes that grow or keep the device count",
        members[fresh]->Name(), top.delta_disks));
  }
  const int old_n = reshaping ? n - top.delta_disks : n;
  absl::StatusOr<Geometry> geo =
      Geometry::Make(top.level, layout, chunk, old_n, top.size * 512);
  if (!geo.ok()) {
    return absl::DataLossError(
        absl::StrFormat("%s: superblock describes an invalid array: %s",
                        members[fresh]->Name(), geo.status().message()));
  }
  std::optional<Geometry> new_geo;
  uint64_t new_offset_bytes = 0;
  if (reshaping) {
    const int new_level = static_cast<int>(top.new_level);
    const Layout new_layout = new_level == 4
                                  ? Layout::kParityLast
                                  : static_cast<Layout>(top.new_layout);
    absl::StatusOr<Geometry> g =
        top.new_layout > 5 && new_level != 6
            ? absl::InvalidArgumentError("new layout > 5")
            : Geometry::Make(new_level, new_layout,
                             uint64_t{top.new_chunk} * 512, n, top.size * 512);
    const int64_t off =
        (static_cast<int64_t>(top.data_offset) +
         ((top.feature_map & kFeatureNewOffset) ? int64_t{top.new_offset}
                                                : 0)) *
        512;
    if (!g.ok() || off <= 0) {
      return absl::DataLossError(
          absl::StrFormat("%s: superblock describes an invalid reshape: %s",
                          members[fresh]->Name(),
                          g.ok() ? absl::StrFormat("new data offset %d", off)
                                 : std::string(g.status().message())));
    }
    new_geo = *g;
    new_offset_bytes = static_cast<uint64_t>(off);
  }

  std::vector<int> slot_of(m, -1);
  std::vector<int> member_in_slot(n, -1);
  std::vector<size_t> spare_members;
  // Members the newest superblock does not accept (faulty, stale): refused,
  // unless force takes one back (forced_assembly.h) or leaves them out.
  std::vector<bool> left_out(m, false);
  std::vector<ForceCandidate> candidates;
  absl::Status first_refusal;
  for (size_t i = 0; i < m; ++i) {
    const std::string& name = members[i]->Name();
    uint16_t role = sbs[i].dev_number < top.dev_roles.size()
                        ? top.dev_roles[sbs[i].dev_number]
                        : kRoleSpare;
    absl::Status refusal;
    if (role == kRoleFaulty) {
      refusal = absl::FailedPreconditionError(absl::StrFormat(
          "%s is marked faulty in the array's newest superblock (events %d): "
          "leave it out",
          name, top.events));
    } else if (sbs[i].events + 1 < top.events) {
      refusal = absl::FailedPreconditionError(absl::StrFormat(
          "%s is stale: events %d, the array is at %d; leave it out (and "
          "start the array degraded with --run), then add it to the "
          "running array (with "
          "a bitmap only the regions written since it left are rebuilt)",
          name, sbs[i].events, top.events));
    }
    if (!refusal.ok()) {
      if (first_refusal.ok()) first_refusal = refusal;
      left_out[i] = true;
      if (const int own = OwnSlot(sbs[i], n); own >= 0) {
        candidates.push_back(ForceCandidate{i, name, own, &sbs[i]});
      }
      continue;
    }
    if (role == kRoleJournal) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s is a journal device; uraid does not support md's journal", name));
    }
    const uint64_t need = (top.data_offset + top.size) * 512;
    if (role == kRoleSpare) {
      if (members[i]->Size() < need) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "spare %s is too small: %d bytes, the array needs %d", name,
            members[i]->Size(), need));
      }
      spare_members.push_back(i);
      continue;
    }
    if (role >= n) {
      return absl::DataLossError(absl::StrFormat(
          "%s has role %d but the array has %d raid devices", name, role, n));
    }
    if (member_in_slot[role] >= 0) {
      return absl::FailedPreconditionError(
          absl::StrFormat("members %s and %s both claim slot %d",
                          members[member_in_slot[role]]->Name(), name, role));
    }
    if (members[i]->Size() < need) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s is too small: %d bytes, the array needs %d (truncated?)", name,
          members[i]->Size(), need));
    }
    member_in_slot[role] = static_cast<int>(i);
    slot_of[i] = role;
  }
  // Slots with no in-sync member: in words, and the empty ones.
  std::vector<std::string> gone;
  std::vector<int> empty;
  const auto find_gone = [&] {
    gone.clear();
    empty.clear();
    for (int s = 0; s < n; ++s) {
      if (member_in_slot[s] < 0) {
        gone.push_back(absl::StrCat(s));
        empty.push_back(s);
      } else if (sbs[member_in_slot[s]].feature_map & kFeatureRecoveryOffset) {
        // Partly rebuilt: holds data only below its recovery offset.
        gone.push_back(absl::StrCat(s, " (rebuilding)"));
      }
    }
  };
  find_gone();
  std::string forced_why;
  if (!first_refusal.ok()) {
    absl::StatusOr<ForcedChoice> choice =
        gone.size() > max_lost
            ? ChooseForcedMembers(n, top.events, candidates, empty)
            : absl::FailedPreconditionError("the array can start without it");
    if (!options.force) {
      // md's rule: such a member stays out unless forced. Where force
      // would start an array that cannot start otherwise, say so.
      if (!choice.ok()) return first_refusal;
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s; the array has lost %d members (slots %s) and cannot start "
          "without one of them. If they failed together (a cable, a "
          "controller), start it by force (uraid serve --force, plugin key "
          "force=true): %s%s",
          first_refusal.message(), gone.size(), absl::StrJoin(gone, ", "),
          choice->why,
          top.clean() ? ""
                      : ". The array is dirty too (it failed while being "
                        "written): parity of stripes written then may be "
                        "stale"));
    }
    if (choice.ok()) {
      for (const size_t i : choice->members) {
        const int own = OwnSlot(sbs[i], n);
        member_in_slot[own] = static_cast<int>(i);
        slot_of[i] = own;
        left_out[i] = false;
      }
      forced_why = choice->why;
      find_gone();
    } else if (gone.size() > max_lost) {
      return choice.status();
    }
  }
  if (gone.size() > max_lost) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%d of %d members are missing (slots %s); RAID%d survives only %s",
        gone.size(), n, absl::StrJoin(gone, ", "), top.level,
        max_lost == 2 ? "two" : "one"));
  }
  const bool dirty = !top.clean();
  // md starts a dirty degraded array with a PPL: the log's replay makes
  // every stripe that was being written consistent first (below). Not
  // read-only, where nothing may be replayed.
  const bool ppl = top.has_ppl();
  if (ppl && (top.level != 5 || reshaping)) {
    return absl::UnimplementedError(absl::StrFormat(
        "%s: a partial parity log on a level %d array%s is not supported "
        "(md allows it on RAID5 without a reshape only)",
        members[fresh]->Name(), top.level, reshaping ? " mid-reshape" : ""));
  }
  if (dirty && !gone.empty() && !options.force &&
      !(ppl && !options.read_only)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "array is dirty (unclean shutdown) and degraded (slot %s missing): "
        "stripes being written at the crash may have stale parity, so slot "
        "%s cannot be trusted to reconstruct; md refuses this too (\"cannot "
        "start dirty degraded array\"). Force it to start anyway (plugin "
        "key force=true, uraid --force)",
        gone[0], gone[0]));
  }

  // After the dirty check, whose refusal is the graver one. force implies
  // run, as mdadm's --force starts a partial array.
  if (!options.run && !options.force) {
    RETURN_IF_ERROR(CheckNoActiveSlotForgotten(top, member_in_slot));
  }

  std::vector<std::unique_ptr<Slot>> slots;
  for (int s = 0; s < n; ++s) slots.push_back(std::make_unique<Slot>());
  std::vector<Spare> spares;
  // The bitmap is read from the freshest in-sync member.
  std::shared_ptr<Member> bitmap_source;
  uint64_t bitmap_source_events = 0;
  std::vector<std::string> left_out_names;
  for (size_t i = 0; i < m; ++i) {
    DeviceId id{sbs[i].dev_number, sbs[i].device_uuid, sbs[i].data_size};
    if (left_out[i]) {
      left_out_names.push_back(members[i]->Name());
      continue;  // closed when `members` goes
    }
    if (slot_of[i] < 0) {
      spares.push_back(
          Spare{std::shared_ptr<Member>(std::move(members[i])), id});
      continue;
    }
    Slot& slot = *slots[slot_of[i]];
    std::shared_ptr<Member> member(std::move(members[i]));
    if (!(sbs[i].feature_map & kFeatureRecoveryOffset) &&
        (bitmap_source == nullptr || sbs[i].events > bitmap_source_events)) {
      bitmap_source = member;
      bitmap_source_events = sbs[i].events;
    }
    // md's bad-block log: ranges of this member never to be read.
    if (sbs[i].feature_map & kFeatureBadBlocks) {
      ASSIGN_OR_RETURN(std::vector<BadBlock> bad,
                       ReadBadBlocks(*member, sbs[i]));
      slot.bad.Reset(std::move(bad));
      slot.bad.flag_durable.store(true);
    }
    if (sbs[i].feature_map & kFeatureRecoveryOffset) {
      Roster::Seat(
          slot, member, id, SlotState::kRebuilding,
          std::min(sbs[i].recovery_offset * 512 / chunk, geo->stripe_count()));
    } else {
      Roster::Seat(slot, member, id, SlotState::kActive);
    }
  }
  Superblock tmpl = top;
  // PPL hook (meta/ppl_log.h): replay a dirty array's logs before anything
  // else touches the members; with no mismatch it is clean, as in md.
  std::shared_ptr<PplLog> ppl_log;
  bool ppl_recovered = false;
  std::string ppl_message;
  if (ppl) {
    ASSIGN_OR_RETURN(ppl_log, PplLog::Make(*geo, top));
    if (dirty && !options.read_only) {
      std::vector<std::shared_ptr<Member>> by_slot(n);
      for (int s = 0; s < n; ++s) {
        if (slots[s]->state.load() == SlotState::kActive) {
          by_slot[s] = slots[s]->member.load();
        }
      }
      ASSIGN_OR_RETURN(PplRecovery r,
                       RecoverPpl(*geo, top, top.data_offset * 512, by_slot));
      if (r.mismatches == 0) {
        tmpl.resync_offset = kMaxSector;
        ppl_recovered = true;
      }
      ppl_message = absl::StrFormat(
          "ppl: replayed %d log entries (%d skipped: a data member "
          "missing), %d mismatches%s%s",
          r.recovered_entries, r.skipped_entries, r.mismatches,
          r.problems.empty() ? "" : ": ", absl::StrJoin(r.problems, "; "));
    } else if (!options.read_only) {
      // md zeroes the area and writes an empty header at every start
      // (ppl_write_empty_header): no older unit may outlive this run's.
      for (int s = 0; s < n; ++s) {
        if (slots[s]->state.load() != SlotState::kActive) continue;
        if (std::shared_ptr<Member> m = slots[s]->member.load()) {
          RETURN_IF_ERROR(InitPplArea(*m, top));
        }
      }
    }
  }
  auto impl = std::make_unique<ArrayImpl>(
      *geo, top.data_offset * 512, tmpl, std::move(slots), std::move(spares),
      options.read_only, options.cache, logger, options.clock);
  // Assembly starts no thread: nbdkit assembles in config_complete, before
  // it forks (threads do not survive that) and, with -f, before it reopens
  // stdin and stdout on /dev/null (a thread that opens a file in between
  // takes their place and nbdkit exits). What assembly writes (superblocks
  // one event behind brought level, the bitmap's pages with them, which
  // would otherwise go to the members at once) goes member after member.
  impl->SetIoThreadsAllowed(false);
  if (ppl_log != nullptr) impl->AttachPpl(std::move(ppl_log));
  if (!ppl_message.empty()) {
    impl->Log(ppl_recovered ? LogLevel::kInfo : LogLevel::kWarning,
              ppl_message);
  }
  if (ppl_recovered) RETURN_IF_ERROR(impl->WriteSuperblocks(true));
  if (!left_out_names.empty()) {
    impl->Log(LogLevel::kWarning,
              absl::StrFormat("forced assembly leaves out %s (faulty or stale "
                              "in the newest superblock); add %s back to "
                              "rebuild from it",
                              absl::StrJoin(left_out_names, ", "),
                              left_out_names.size() == 1 ? "it" : "them"));
  }
  // The internal bitmap, or the external file the caller named.
  RETURN_IF_ERROR(impl->bitmap().Attach(bitmap_source.get(), top,
                                        options.bitmap_file,
                                        impl->CurrentShape().data_offset));
  impl->UpdateBitmapDegraded();
  if (impl->bitmap().stale_at_load()) impl->SetResyncStart(0);
  if (!forced_why.empty()) {
    // What may be stale: blocks of stripes being written when the array
    // failed (a write that failed there was never acknowledged, but it may
    // have reached some members).
    std::string where = "any stripe being written when the array failed";
    if (const WriteIntentBitmap* b = impl->bitmap().intent(); b != nullptr) {
      where = absl::StrFormat(
          "the %d regions of %d bytes its write-intent bitmap marks dirty",
          b->DirtyChunks(), b->chunk_bytes());
    }
    impl->Log(
        LogLevel::kWarning,
        absl::StrFormat(
            "forced assembly: %s. Blocks of %s may be stale: %s", forced_why,
            where,
            gone.empty()
                ? "their parity is resynced from the data"
                : absl::StrFormat("slot %s is still gone and rebuilds from "
                                  "parity that may be wrong there; run check "
                                  "after the rebuild",
                                  gone[0])));
  }
  if (reshaping) {
    const uint64_t position = top.reshape_position * 512;
    absl::Status rs =
        ValidateReshapeResume(*geo, top.data_offset * 512, *new_geo,
                              new_offset_bytes, position, impl->MetadataEnd());
    if (!rs.ok()) {
      return absl::Status(
          rs.code(),
          absl::StrFormat("%s: %s", members[fresh]->Name(), rs.message()));
    }
    impl->ResumeReshape(*new_geo, new_offset_bytes, position,
                        dirty && gone.empty());
  }
  // Members one event apart (a crash in the middle of a superblock update)
  // are brought level now, as mdadm does when it starts an array: left as
  // they are, a second such crash could leave two members two events
  // behind, and the array could not be started at all.
  if (!options.read_only &&
      std::any_of(sbs.begin(), sbs.end(), [&](const Superblock& sb) {
        return sb.events != top.events;
      })) {
    RETURN_IF_ERROR(impl->WriteSuperblocks(std::nullopt));
  }
  if (dirty && !ppl_recovered) {
    if (!gone.empty()) {
      impl->Log(LogLevel::kWarning,
                "starting a dirty degraded array by force; stripes "
                "written at the crash may reconstruct wrong data");
    } else if (reshaping) {
      // The reshape job resyncs the moved part first (ResumeReshape); the
      // rest gets fresh parity as it is copied.
    } else {
      // With a bitmap, the regions with bits set are what may be torn,
      // wherever the resync checkpoint was.
      uint64_t from = impl->has_bitmap() ? 0 : top.resync_offset * 512 / chunk;
      impl->SetResyncStart(std::min(from, geo->stripe_count()));
      impl->Log(
          LogLevel::kWarning,
          absl::StrFormat(
              "array was not shut down cleanly: parity of stripes %d..%d will "
              "be resynced",
              from, geo->stripe_count() - 1));
    }
  }
  impl->SetExpectedSpares(options.expected_spares);
  impl->SetSafemodeDelayMs(options.safe_mode_delay_ms);
  impl->SetIoThreadsAllowed(true);
  return std::unique_ptr<Array>(new Array(std::move(impl)));
}

}  // namespace uraid
