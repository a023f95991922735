// SPDX-License-Identifier: MIT
// md's health verdict on an array, as `mdadm --detail --test` returns it
// in its exit code, for `uraid detail --test`: from an assembled (or live)
// ArrayInfo, or, when the library refuses to assemble, from the members'
// superblocks alone.

#ifndef URAID_TOOLS_ARRAY_HEALTH_H_
#define URAID_TOOLS_ARRAY_HEALTH_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "uraid/array.h"

namespace uraid::tool {

// mdadm --detail --test's exit codes.
enum class Health : int {
  kHealthy = 0,     // every slot working (a running rebuild is not a fault)
  kDegraded = 1,    // one slot failed or missing: no redundancy left
  kFailed = 2,      // two or more slots gone: the array is unusable
  kUnreadable = 4,  // no array could be read at all
};

// The verdict on an array the library assembled or a server described.
Health HealthOf(const ArrayInfo& info);

// What the members' superblocks say when assembly was refused: the freshest
// superblock (highest events) of the array the first readable member
// belongs to names the raid_disks slots; a slot counts as working when a
// given member with a readable superblock of that array holds it and the
// freshest superblock does not mark that member faulty. Members that cannot
// be opened or read (missing, truncated) hold nothing. Returns how many
// slots are gone; NotFound when no member has a readable superblock.
struct SuperblockCensus {
  int raid_disks = 0;
  int gone = 0;
  // Of those, the slots the freshest superblock itself holds no working
  // device for: failures the array recorded (md records the one that
  // fails the array too), not members merely left out of the command.
  int recorded_gone = 0;
  std::string uuid;  // mdadm's format
};
absl::StatusOr<SuperblockCensus> CountGoneSlots(
    const std::vector<std::string>& members);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_ARRAY_HEALTH_H_
