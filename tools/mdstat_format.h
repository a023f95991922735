// SPDX-License-Identifier: MIT
// One served array as a block of /proc/mdstat (`uraid status`):
//
//   NAME : active raid5 m0.img[0] m1.img[1] m2.img[2](F) s.img[4](S)
//         3145728 blocks super 1.2 level 5, 512k chunk, algorithm 2 [4/2]
//         [UU__]
//         [==>..................]  recovery = 12.6% (1536/12288) finish=0.3min
//         speed=1024K/sec bitmap: 3/240 chunks dirty, 65536KB chunk state:
//         active, degraded, recovering; control /run/uraid/NAME.ctl
//
// md's words and numbers where md has them: "[N]" is the member's role
// (its slot; a spare's device number), (F) faulty, (S) spare, (R) the
// target of a replace; blocks are KiB of the array; the job line counts
// KiB of each member, its bar has md's 20 steps. The bitmap line counts
// chunks rather than md's in-memory pages (uraid has no such pages), and
// the last line is uraid's own: mdadm --detail's state and the socket.
// Pure: no I/O.

#ifndef URAID_TOOLS_MDSTAT_FORMAT_H_
#define URAID_TOOLS_MDSTAT_FORMAT_H_

#include <string>

#include "uraid/array.h"

namespace uraid::tool {

// The block for `info` served as `name` on `control`, each line ending in
// '\n'.
std::string MdstatBlock(const std::string& name, const std::string& control,
                        const ArrayInfo& info);

// md's job line without its indent: "[==>....]  recovery = 12.6%
// (1536/12288) finish=0.3min speed=1024K/sec"; "resync=PENDING" for a
// resync that waits; "" when no job runs or waits.
std::string MdstatJobLine(const ArrayInfo& info);

// "[UU_U]" and its "[4/3]": one letter per slot, U for a working member.
std::string MdstatSlotMap(const ArrayInfo& info);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_MDSTAT_FORMAT_H_
