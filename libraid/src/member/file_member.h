// SPDX-License-Identifier: MIT
// Internal: wrapping a descriptor the caller has already opened (and, if it
// needs one, locked) as a file Member, for files that are opened their own
// way, such as the external bitmap file (bitmap_file.cc).

#ifndef URAID_SRC_FILE_MEMBER_H_
#define URAID_SRC_FILE_MEMBER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "uraid/member.h"

namespace uraid {

// A buffered file member on `fd` (owned: closed when the member goes) of
// `size` bytes, named `name` in messages; what OpenFileMember returns for
// a regular file. REQUIRES: fd is open on a regular file, read-write
// unless `read_only`.
std::unique_ptr<Member> AdoptFileMember(std::string name, int fd, uint64_t size,
                                        bool read_only);

}  // namespace uraid

#endif  // URAID_SRC_FILE_MEMBER_H_
