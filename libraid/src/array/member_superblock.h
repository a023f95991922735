// SPDX-License-Identifier: MIT
// Internal: what create.cc, assemble.cc and member_admin.cc need of one
// member's superblock and identity (defined in create.cc).

#ifndef URAID_SRC_ARRAY_MEMBER_SUPERBLOCK_H_
#define URAID_SRC_ARRAY_MEMBER_SUPERBLOCK_H_

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {

// Reads and decodes the 1.2 superblock of `member`; the error names it.
absl::StatusOr<Superblock> ReadSuperblock(Member& member);
// A fresh random uuid (device and array uuids), from /dev/urandom.
std::array<uint8_t, 16> RandomUuid();

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_MEMBER_SUPERBLOCK_H_
