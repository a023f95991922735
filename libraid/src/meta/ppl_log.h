// SPDX-License-Identifier: MIT
// File: meta/ppl_log.h
//
// The partial parity log (md's consistency policy "ppl") on the members:
// where a member's PPL area is and how it is initialised. The on-disk
// format is format/ppl_format.h; this file does the member I/O.
//
// Not built yet (issue 18, steps 3 and 4): logging partial parity before a
// partial-row write, and the replay at assembly. Until then assembly
// refuses PPL arrays (array/assemble.cc).
//
// Thread-compatible: the functions take the member they write and hold no
// state of their own.

#ifndef URAID_SRC_META_PPL_LOG_H_
#define URAID_SRC_META_PPL_LOG_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {

// Byte offset of the member's PPL area and its length, from the superblock
// (super_offset + ppl.offset sectors, ppl.size sectors). InvalidArgument
// naming ppl.offset or ppl.size when the superblock has no PPL feature, the
// area is smaller than one header plus one 4 KiB row (the kernel's
// ppl_validate_rdev), or it overlaps the superblock's 4 KiB or the data.
struct PplArea {
  uint64_t offset_bytes = 0;
  uint64_t size_bytes = 0;
};
absl::StatusOr<PplArea> PplAreaOf(const Superblock& sb);

// Makes `member`'s PPL area what mdadm's create and the kernel's
// ppl_write_empty_header leave: zero, then an empty header (0xFF reserved,
// the array's signature, generation 0, no entries) at its start, flushed.
// Errors name the member.
absl::Status InitPplArea(Member& member, const Superblock& sb);

}  // namespace uraid

#endif  // URAID_SRC_META_PPL_LOG_H_
