// SPDX-License-Identifier: MIT
// Internal: the external write-intent bitmap file (md's --bitmap FILE, md
// reference §3.5). The file holds md's bitmap area as is: the 256-byte
// bitmap_super_t at byte 0 and the bits right after it, 256 + ceil(bits/8)
// bytes in all. It is opened as a Member so that the array reads and
// writes it through the same calls as a member's internal area.
//
// Only regular files are accepted (the kernel refuses anything else, and
// `mdadm -X` reads a device as a member, not as a bitmap file). A file that
// is one of the array's members (by device and inode, whatever the name)
// is refused before anything is written to it.

#ifndef URAID_SRC_BITMAP_FILE_H_
#define URAID_SRC_BITMAP_FILE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "uraid/member.h"

namespace uraid {

// Opens an existing bitmap file. Writable: O_RDWR and an exclusive,
// non-blocking flock (a second server of the same array is refused, as for
// members). read_only: O_RDONLY, no lock (looking at a served array).
// `member_names` are the array's members (Member::Name(): paths, or URIs,
// which are skipped). Errors name the file: NotFound and the other errno
// codes of open; InvalidArgument for something that is not a regular file
// or is one of the members; FailedPrecondition when another process holds
// the lock.
absl::StatusOr<std::unique_ptr<Member>> OpenBitmapFile(
    const std::string& path, bool read_only,
    const std::vector<std::string>& member_names);

// Creates the bitmap file holding `area` (header and bits, nothing more)
// and makes it durable: the data (fdatasync) and the directory entry
// (fsync of the directory), so that a crash right after create cannot lose
// the file the superblocks rely on. A missing file is created (0644 before
// umask); an existing empty regular file is used; an existing non-empty
// one is refused (FailedPrecondition, naming it) unless `force`. The lock
// is taken before anything is truncated, so the bitmap of a running array
// is never overwritten. Returns the file open and locked, as
// OpenBitmapFile does. NotFound when the directory does not exist.
absl::StatusOr<std::unique_ptr<Member>> CreateBitmapFile(
    const std::string& path, std::span<const uint8_t> area, bool force,
    const std::vector<std::string>& member_names);

}  // namespace uraid

#endif  // URAID_SRC_BITMAP_FILE_H_
