// SPDX-License-Identifier: MIT
// What a member's vectored read (Member::ReadVector) needs to know of its
// buffers before it picks a path: their length in all, and whether each
// meets the member's alignment rule where it lands.
#ifndef URAID_SRC_MEMBER_VECTOR_BYTES_H_
#define URAID_SRC_MEMBER_VECTOR_BYTES_H_

#include <sys/uio.h>

#include <cstdint>
#include <span>

namespace uraid {

// The bytes `iov` holds in all. Sets *all_aligned to whether
// `aligned(buffer, at)` holds for every buffer, `at` being the member
// offset the buffer starts at when the vector is laid from `offset` on
// (the rule is the member's: a file under O_DIRECT checks the address,
// length and offset, an NBD export its minimum block).
template <typename AlignedFn>
uint64_t VectorBytes(std::span<const iovec> iov, uint64_t offset,
                     AlignedFn aligned, bool* all_aligned) {
  uint64_t len = 0;
  bool all = true;
  for (const iovec& v : iov) {
    all = all && aligned(v, offset + len);
    len += v.iov_len;
  }
  *all_aligned = all;
  return len;
}

}  // namespace uraid

#endif  // URAID_SRC_MEMBER_VECTOR_BYTES_H_
