// SPDX-License-Identifier: MIT
// Internal: md's forced assembly (mdadm --assemble --force), the last resort
// after a transient double failure (a cable, a controller): which members
// that the newest superblock lists as faulty, or that are behind it, may be
// taken back so that a RAID5 that lost two slots starts again. Pure: reads
// superblocks, decides, says why.
//
// mdadm takes the not-current member with the highest event count and
// raises its count, whatever it missed (a member that left a month ago
// included). uraid takes it only when the superblocks show it missed no
// data: its own superblock already lists another slot as gone (it failed
// last: its failure failed the array, so nothing was written without it),
// or a member of another gone slot carries the same event count (both left
// in the same update). Otherwise the array may have run degraded without
// it, and forcing it would serve stale blocks as current ones.

#ifndef URAID_SRC_ARRAY_FORCED_ASSEMBLY_H_
#define URAID_SRC_ARRAY_FORCED_ASSEMBLY_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "uraid/superblock.h"

namespace uraid {

// A given member the newest superblock does not accept (marked faulty, or
// stale), which force may take back into the slot its own superblock gives
// it.
struct ForceCandidate {
  size_t member = 0;  // index into the assembly's members
  std::string name;
  int slot = 0;  // the role in its own superblock
  const Superblock* sb = nullptr;
};

struct ForcedChoice {
  std::vector<size_t> members;  // taken back, into their slots
  std::string why;              // for the log: who, and why it is current
};

// Chooses members among `candidates` for the `gone` slots (no current
// member given) of an array of `raid_disks` whose newest superblock has
// `top_events`; at most one per slot. FailedPrecondition, naming the
// members and what to do, when none may be taken.
absl::StatusOr<ForcedChoice> ChooseForcedMembers(
    int raid_disks, uint64_t top_events,
    const std::vector<ForceCandidate>& candidates,
    const std::vector<int>& gone);

// The slot a member's own superblock gives it, or -1 (spare, faulty,
// journal, or partly rebuilt: never forced).
int OwnSlot(const Superblock& sb, int raid_disks);

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_FORCED_ASSEMBLY_H_
