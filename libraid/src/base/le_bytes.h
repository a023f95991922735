// SPDX-License-Identifier: MIT
// Internal: little-endian field access for md's on-disk codecs (superblock,
// bitmap, PPL). md stores every multi-byte field little-endian whatever the
// host; these read and write them byte by byte, so they work at any
// alignment and on any host. Pure functions; REQUIRES the span or vector
// to hold the field (callers check sizes before decoding).
//
// A codec lists its fields once, in a function template over the direction,
// and calls it with a Writer to encode and with a Reader to decode, so the
// two directions cannot drift apart:
//
//   template <typename Io, typename S>  // S is const when Io is Writer
//   void Fields(Io& io, S& s) {
//     io.U32(4, s.version);
//     io.Text(72, 64, s.name);
//   }

#ifndef URAID_SRC_LE_BYTES_H_
#define URAID_SRC_LE_BYTES_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
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

inline void Put16(std::span<uint8_t> b, size_t off, uint16_t v) {
  b[off] = static_cast<uint8_t>(v);
  b[off + 1] = static_cast<uint8_t>(v >> 8);
}

inline void Put32(std::span<uint8_t> b, size_t off, uint32_t v) {
  for (size_t i = 0; i < 4; ++i) {
    b[off + i] = static_cast<uint8_t>(v >> (8 * i));
  }
}

inline void Put64(std::span<uint8_t> b, size_t off, uint64_t v) {
  for (size_t i = 0; i < 8; ++i) {
    b[off + i] = static_cast<uint8_t>(v >> (8 * i));
  }
}

// Encodes fields into a buffer the caller zero-filled: bytes no field covers
// (padding, the rest of a text field) stay 0.
class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& b) : b_(b) {}

  void U8(size_t off, uint8_t v) { b_[off] = v; }
  void U16(size_t off, uint16_t v) { Put16(b_, off, v); }
  void U32(size_t off, uint32_t v) { Put32(b_, off, v); }
  // Two's complement, as md stores its signed __le32 fields.
  void S32(size_t off, int32_t v) { Put32(b_, off, static_cast<uint32_t>(v)); }
  void U64(size_t off, uint64_t v) { Put64(b_, off, v); }
  template <size_t N>
  void Bytes(size_t off, const std::array<uint8_t, N>& v) {
    std::copy(v.begin(), v.end(), b_.begin() + off);
  }
  // A NUL-padded text field of `width` bytes; text beyond it is cut (codecs
  // assert that it fits).
  void Text(size_t off, size_t width, const std::string& v) {
    std::copy_n(v.begin(), std::min(v.size(), width), b_.begin() + off);
  }

 private:
  std::vector<uint8_t>& b_;
};

// Decodes fields; the out-parameters' exact types make a field list that
// disagrees with its struct fail to compile.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}

  void U8(size_t off, uint8_t& v) const { v = b_[off]; }
  void U16(size_t off, uint16_t& v) const { v = Get16(b_, off); }
  void U32(size_t off, uint32_t& v) const { v = Get32(b_, off); }
  // Two's-complement reinterpretation, well defined since C++20.
  void S32(size_t off, int32_t& v) const {
    v = static_cast<int32_t>(Get32(b_, off));
  }
  void U64(size_t off, uint64_t& v) const { v = Get64(b_, off); }
  template <size_t N>
  void Bytes(size_t off, std::array<uint8_t, N>& v) const {
    std::copy_n(b_.begin() + off, N, v.begin());
  }
  // The text of a NUL-padded field of `width` bytes, trailing NULs stripped.
  void Text(size_t off, size_t width, std::string& v) const {
    size_t len = width;
    while (len > 0 && b_[off + len - 1] == 0) --len;
    v.assign(reinterpret_cast<const char*>(b_.data() + off), len);
  }

 private:
  std::span<const uint8_t> b_;
};

}  // namespace uraid::le

#endif  // URAID_SRC_LE_BYTES_H_
