// SPDX-License-Identifier: MIT
// The tests' own GF(2^8), md's RAID6 field: polynomial x^8 + x^4 + x^3 +
// x^2 + 1 (0x11d), generator g = {02}. Written from the field's definition
// by shift-and-add, slowly and obviously right, with nothing taken from md
// or ISA-L: the reference the RAID6 codec (raid6_test) and the planner's
// P+Q results (stripe_plan6_test) are checked against.

#ifndef URAID_TESTS_GF256_REFERENCE_H_
#define URAID_TESTS_GF256_REFERENCE_H_

#include <cstdint>
#include <vector>

namespace uraid::gf256 {

// a * b: shift-and-add, reducing by 0x11d whenever x^8 appears.
inline uint8_t Mul(uint8_t a, uint8_t b) {
  unsigned r = 0, x = a;
  for (int bit = 0; bit < 8; ++bit) {
    if (b & (1u << bit)) r ^= x;
    x <<= 1;
    if (x & 0x100) x ^= 0x11d;
  }
  return static_cast<uint8_t>(r);
}

// Mul through a 64 KiB table of it, built on first use: for the tests
// that multiply every byte of many chunks.
inline uint8_t TabledMul(uint8_t a, uint8_t b) {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(256 * 256);
    for (int x = 0; x < 256; ++x) {
      for (int y = 0; y < 256; ++y) {
        t[x * 256 + y] = Mul(static_cast<uint8_t>(x), static_cast<uint8_t>(y));
      }
    }
    return t;
  }();
  return table[a * 256 + b];
}

// g^e (md's Q coefficient of slot e), by e multiplications by {02}.
inline uint8_t Pow2(int e) {
  uint8_t r = 1;
  for (int i = 0; i < e; ++i) r = Mul(r, 2);
  return r;
}

}  // namespace uraid::gf256

#endif  // URAID_TESTS_GF256_REFERENCE_H_
