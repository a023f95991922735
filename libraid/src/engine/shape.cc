// SPDX-License-Identifier: MIT
#include "engine/shape.h"

#include "absl/strings/str_format.h"

namespace uraid {

absl::Status CheckRange(const Shape& sh, const char* op, size_t len,
                        uint64_t offset) {
  const uint64_t size = sh.geo.array_bytes();
  if (offset > size || len > size - offset) {
    return absl::OutOfRangeError(absl::StrFormat(
        "%s of %d bytes at %d is past the end of the array (%d bytes)", op, len,
        offset, size));
  }
  return absl::OkStatus();
}

}  // namespace uraid
