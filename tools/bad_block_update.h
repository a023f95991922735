// SPDX-License-Identifier: MIT
// `uraid grow --update=bbl|no-bbl|force-no-bbl MEMBER...` (offline): adds a
// bad-block log to members that have none, or removes it, as mdadm's
// `--assemble --update=` of the same names does.

#ifndef URAID_TOOLS_BAD_BLOCK_UPDATE_H_
#define URAID_TOOLS_BAD_BLOCK_UPDATE_H_

#include <string>
#include <vector>

namespace uraid::tool {

// Whether `what` is one of the three updates.
bool IsBadBlockUpdate(const std::string& what);

// Runs update `what` on every member of one array (opened writable and
// locked, so never a served array's): all are checked first, then written.
//   bbl          reserve an empty 8-sector log after the bitmap or PPL area
//                (or the superblock), where it fits before the data;
//   no-bbl       drop the log, refused while it lists entries (mdadm's rule);
//   force-no-bbl drop the log and its entries (after the disk was replaced
//                or tested: the listed ranges are trusted again).
// Returns the exit code (0 done, 1 refused or failed), messages printed.
int RunBadBlockUpdate(const std::string& what,
                      const std::vector<std::string>& members);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_BAD_BLOCK_UPDATE_H_
