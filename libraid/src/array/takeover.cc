// SPDX-License-Identifier: MIT
// md's takeovers between RAID5 and RAID6 (mdadm --grow --level 6 / 5):
// the level changes in place and no data moves (format/takeover.h).
//
// RAID5 -> RAID6: the array becomes a RAID6 of one more slot in the "-6"
// layout twin of its RAID5 layout (Q on the new, last slot), degraded by
// that slot; the member given joins as a spare and the recovery job
// rebuilds Q onto it, as md does after its takeover. Reads and writes go
// on throughout: until Q is rebuilt the array has RAID5's redundancy.
// RAID6 -> RAID5: only from the layouts with Q on the last slot; the
// last slot is dropped and its member becomes a spare (as md leaves it).
// A RAID6 in another layout restripes first (a level-6 reshape).
//
// Both are one superblock update; a crash during it leaves members one
// event apart on either side of the change, which assembly accepts (the
// freshest superblock's shape wins, as at a reshape's edges).

#include "format/takeover.h"

#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"

namespace uraid {

absl::Status ArrayImpl::Takeover(const Shape& from, int level,
                                 GrowOptions options) {
  const Geometry& g = from.geo;
  const int n = g.raid_disks();
  const bool to6 = level == 6;
  if (!to6 && level != 5) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a RAID6 converts to RAID5 only (level %d asked; from RAID5 a "
        "parity-last array can then become RAID4)",
        level));
  }
  const int want_disks = to6 ? n + 1 : n - 1;
  const char* what = to6 ? "RAID5 -> RAID6" : "RAID6 -> RAID5";
  if (options.raid_devices != 0 && options.raid_devices != want_disks) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s keeps the data in place: the array goes from %d to %d raid "
        "devices (%d asked)%s",
        what, n, want_disks, options.raid_devices,
        to6 ? "; to add more members, grow the RAID6 afterwards" : ""));
  }
  if (options.chunk_bytes != 0 && options.chunk_bytes != g.chunk_bytes()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s keeps the chunk size (%d bytes): change it in a reshape of its "
        "own, before or after",
        what, g.chunk_bytes()));
  }
  Layout layout;
  if (to6) {
    layout = Raid6TakeoverLayout(g);
  } else {
    ASSIGN_OR_RETURN(layout, Raid5TakeoverLayout(g));
  }
  if (options.layout.has_value() && *options.layout != layout) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s takes layout %s, which keeps every block where it is (md's "
        "takeover); restripe to %s in a reshape of its own, %s",
        what, std::string(LayoutName(layout)),
        std::string(LayoutName(*options.layout)),
        to6 ? "once the new member is rebuilt" : "before the level change"));
  }
  if (options.add.size() != (to6 ? 1u : 0u)) {
    return absl::InvalidArgumentError(
        to6 ? absl::StrFormat("RAID5 -> RAID6 needs one new member, for Q "
                              "(%d given)",
                              options.add.size())
            : std::string("RAID6 -> RAID5 adds no member: the last one "
                          "becomes a spare"));
  }
  ASSIGN_OR_RETURN(Geometry to, Geometry::Make(level, layout, g.chunk_bytes(),
                                               want_disks, g.member_bytes()));
  if (to6) {
    // Checked before anything is written; AddMember below checks it again.
    RETURN_IF_ERROR(members_.PrepareNewMember(*options.add[0]).status());
  }
  std::string dropped;
  {
    MutexLock lock(roster_.mu());
    if (!to6) {
      std::shared_ptr<Member> q = slots_[n - 1]->member.load();
      if (q != nullptr) dropped = q->Name();
    }
    // Requests that hold the old shape finish in it: the placement of data
    // and P is the same, and the slot that goes stays allocated.
    shapes_.MakeCurrent(shapes_.Add(to, from.data_offset, /*lock_tag=*/0));
    roster_.TakeoverLocked(to);
  }
  // No request runs in the old shape past here (a RAID5 write would leave
  // Q stale behind the rebuild; a RAID6 one could write the old Q member
  // once it is a spare), and none waits in the cache for it.
  plain_epochs_.Drain();
  RETURN_IF_ERROR(engine_.writer().WritebackAll());
  RETURN_IF_ERROR(WriteSuperblocks(std::nullopt));
  Report(LogLevel::kNotice,
         MakeEvent("LevelChanged", to6 ? options.add[0]->Name() : dropped,
                   to6 ? n : n - 1),
         absl::StrFormat(
             "level changed to %d: %d devices, %s (md's takeover: no data "
             "moves)%s",
             level, want_disks, std::string(LayoutName(layout)),
             to6 ? absl::StrFormat("; Q is rebuilt onto %s in slot %d",
                                   options.add[0]->Name(), n)
             : dropped.empty()
                 ? std::string()
                 : absl::StrFormat("; %s, which held Q, is a spare now",
                                   dropped)));
  if (!to6) return absl::OkStatus();
  const std::string name = options.add[0]->Name();
  if (absl::Status st = members_.Add(std::move(options.add[0])); !st.ok()) {
    return absl::Status(
        st.code(),
        absl::StrFormat("the array is a RAID6 now, degraded by its Q slot, "
                        "but adding %s failed: %s; add a member to rebuild Q",
                        name, st.message()));
  }
  return absl::OkStatus();
}

}  // namespace uraid
