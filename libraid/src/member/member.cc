// SPDX-License-Identifier: MIT
// Member's default vectored read (uraid/member.h).
#include "uraid/member.h"

#include <sys/uio.h>

#include "absl/status/status.h"

namespace uraid {

absl::Status Member::ReadVector(std::span<const iovec> iov, uint64_t offset) {
  for (const iovec& v : iov) {
    if (absl::Status st = Read(v.iov_base, v.iov_len, offset); !st.ok()) {
      return st;
    }
    offset += v.iov_len;
  }
  return absl::OkStatus();
}

}  // namespace uraid
