// SPDX-License-Identifier: MIT
// md's forced assembly, uraid's safer choice (forced_assembly.h).
#include "array/forced_assembly.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace uraid {

namespace {

// Slots other than `own` that no device holds in `sb`'s role table: gone
// when that superblock was written.
std::vector<int> SlotsGoneIn(const Superblock& sb, int raid_disks, int own) {
  std::vector<bool> held(raid_disks, false);
  for (const uint16_t role : sb.dev_roles) {
    if (role < raid_disks) held[role] = true;
  }
  std::vector<int> gone;
  for (int s = 0; s < raid_disks; ++s) {
    if (s != own && !held[s]) gone.push_back(s);
  }
  return gone;
}

}  // namespace

int OwnSlot(const Superblock& sb, int raid_disks) {
  if (sb.feature_map & kFeatureRecoveryOffset) return -1;
  if (sb.dev_number >= sb.dev_roles.size()) return -1;
  const uint16_t role = sb.dev_roles[sb.dev_number];
  return role < raid_disks ? role : -1;
}

absl::StatusOr<ForcedChoice> ChooseForcedMembers(
    int raid_disks, uint64_t top_events,
    const std::vector<ForceCandidate>& candidates,
    const std::vector<int>& gone) {
  std::vector<const ForceCandidate*> usable;
  for (const ForceCandidate& c : candidates) {
    if (std::find(gone.begin(), gone.end(), c.slot) != gone.end()) {
      usable.push_back(&c);
    }
  }
  if (usable.empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "slots %s have no member to force: give the members that held them "
        "(only one whose own superblock names its slot, not a spare or a "
        "partly rebuilt member, can be taken back)",
        absl::StrJoin(gone, ", ")));
  }
  // mdadm's order: the highest event count first (the last to leave).
  std::stable_sort(usable.begin(), usable.end(),
                   [](const ForceCandidate* a, const ForceCandidate* b) {
                     return a->sb->events > b->sb->events;
                   });
  const ForceCandidate& first = *usable[0];
  ForcedChoice choice;
  std::vector<int> taken{first.slot};
  choice.members.push_back(first.member);
  // Members of other gone slots that left in the same update.
  std::vector<const ForceCandidate*> together;
  for (size_t k = 1; k < usable.size(); ++k) {
    const ForceCandidate& c = *usable[k];
    if (c.sb->events != first.sb->events ||
        std::find(taken.begin(), taken.end(), c.slot) != taken.end()) {
      continue;
    }
    taken.push_back(c.slot);
    choice.members.push_back(c.member);
    together.push_back(&c);
  }
  const std::vector<int> gone_before =
      SlotsGoneIn(*first.sb, raid_disks, first.slot);
  if (!gone_before.empty()) {
    choice.why = absl::StrFormat(
        "%s (slot %d, events %d; the array is at %d) failed last: its own "
        "superblock already lists slot%s %s gone, so its failure failed the "
        "array and nothing was written without it",
        first.name, first.slot, first.sb->events, top_events,
        gone_before.size() == 1 ? "" : "s", absl::StrJoin(gone_before, ", "));
  } else if (!together.empty()) {
    std::vector<std::string> names;
    for (const ForceCandidate* c : together) {
      names.push_back(absl::StrFormat("%s (slot %d)", c->name, c->slot));
    }
    choice.why = absl::StrFormat(
        "%s (slot %d) and %s left in the same update (events %d each; the "
        "array is at %d): nothing was written with one and without the "
        "other",
        first.name, first.slot, absl::StrJoin(names, ", "), first.sb->events,
        top_events);
  } else {
    std::vector<int> others;
    for (int s : gone) {
      if (s != first.slot) others.push_back(s);
    }
    return absl::FailedPreconditionError(absl::StrFormat(
        "will not force %s (slot %d, events %d; the array is at %d): its "
        "superblock shows every member active, so it may have failed first "
        "and the array may have run on without it, and its blocks would be "
        "served stale; give the member that last held slot %s (if both left "
        "together their event counts match), or start without force and "
        "rebuild from a backup",
        first.name, first.slot, first.sb->events, top_events,
        absl::StrJoin(others, ", ")));
  }
  return choice;
}

}  // namespace uraid
