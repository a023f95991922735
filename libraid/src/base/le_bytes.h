// SPDX-License-Identifier: MIT
// Internal: little-endian field access for md's on-disk codecs (superblock,
// bitmap). md stores every multi-byte field little-endian whatever the
// host; these read and write them byte by byte, so they work at any
// alignment and on any host. Pure functions; REQUIRES the span or vector
// to hold the field (callers check sizes before decoding).

#ifndef URAID_SRC_LE_BYTES_H_
#define URAID_SRC_LE_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace uraid::le {

inline uint16_t Get16(std::span<const uint8_t> b, size_t off) {
  return static_cast<uint16_t>(b[off] | (b[off + 1] << 8));
}

inline uint32_t Get32(std::span<const uint8_t> b, size_t off) {
  return static_cast<uint32_t>(b[off]) |
         (static_cast<uint32_t>(b[off + 1]) << 8) |
         (static_cast<uint32_t>(b[off + 2]) << 16) |
         (static_cast<uint32_t>(b[off + 3]) << 24);
}

inline uint64_t Get64(std::span<const uint8_t> b, size_t off) {
  return static_cast<uint64_t>(Get32(b, off)) |
         (static_cast<uint64_t>(Get32(b, off + 4)) << 32);
}

inline void Put16(std::vector<uint8_t>& b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v);
  b[off + 1] = static_cast<uint8_t>(v >> 8);
}

inline void Put32(std::vector<uint8_t>& b, size_t off, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) {
    b[off + i] = static_cast<uint8_t>(v >> (8 * i));
  }
}

inline void Put64(std::vector<uint8_t>& b, size_t off, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) {
    b[off + i] = static_cast<uint8_t>(v >> (8 * i));
  }
}

}  // namespace uraid::le

#endif  // URAID_SRC_LE_BYTES_H_
