// SPDX-License-Identifier: MIT
// RAID6 P+Q: ISA-L for aligned buffers, a portable word loop for the rest.
//
// Generation uses ISA-L's pq_gen: sources in slot order, P and Q last. It
// wants every slot to be a real buffer, so zero slots (DDF's P and Q
// positions) point at a static zero piece and the work then goes in
// kPiece-byte pieces; a stripe without zero slots goes in one call. pq_gen
// was chosen over ec_encode_data with the two rows {1, g^slot} (which would
// skip zero slots for free) by measurement: tools/bench/microbench.cc
// BM_Raid6Pq* (see docs/architecture.md, "RAID6 leaves", for the figures).
//
// Recovery follows md's lib/raid6/recov.c algebra (written here from the
// reference notes, shared/reference/md-raid6-and-journal.md §1): with the
// lost data blocks zeroed, P and Q of the survivors give Pxy and Qxy; then
//   one data block a and P lost:  Da = g^-a (Q ^ Qx)
//   data blocks a < b lost:       Db = A (P ^ Pxy) ^ B (Q ^ Qxy),
//                                 A = 1 / (g^(b-a) ^ 1), B = 1 / (g^a ^ g^b),
//                                 Da = Db ^ P ^ Pxy.
// Each is one syndrome pass plus one or two GF(2^8) vector multiplies
// (ISA-L gf_vect_mul / gf_vect_mad).
//
// State: one process-wide atomic, the test-only portable switch.

#include "parity/raid6.h"

#include <isa-l/erasure_code.h>
#include <isa-l/gf_vect_mul.h>
#include <isa-l/raid.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "parity/parity.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace uraid {
namespace {

// ISA-L's pq_gen and gf_vect_mul: 32-byte aligned pointers, length a
// multiple of 32 (its AVX-512 build is covered by the same rule: the tests
// run 32-but-not-64-aligned buffers through it).
constexpr uintptr_t kIsalAlign = 32;
// gf_vect_mad's minimum length.
constexpr size_t kIsalMinMadLen = 64;
// Piece size when zero slots or a missing output need stand-in buffers.
constexpr size_t kPiece = 16 << 10;

alignas(64) constexpr uint8_t kZeroPiece[kPiece] = {};

std::atomic<bool> g_portable{false};

bool Aligned(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & (kIsalAlign - 1)) == 0;
}

bool IsalUsable(size_t len) {
  return !g_portable.load(std::memory_order_relaxed) && len > 0 &&
         len % kIsalAlign == 0;
}

#if defined(__x86_64__)
// ISA-L's AVX kernels return with the upper vector state dirty (see
// parity.cc): clear it so the caller's SSE code does not pay for it.
__attribute__((target("avx"))) void ZeroUpperAvx() { _mm256_zeroupper(); }
void AfterIsal() {
  static const bool avx = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") != 0;
  }();
  if (avx) ZeroUpperAvx();
}
#else
void AfterIsal() {}
#endif

const uint8_t* AsBytes(const void* p) { return static_cast<const uint8_t*>(p); }
uint8_t* AsBytes(void* p) { return static_cast<uint8_t*>(p); }

// Multiply every byte of a word by g = {02} (0x11d): shift, and fold the
// carried-out top bits back in as 0x1d.
inline uint64_t Mul2Word(uint64_t w) {
  const uint64_t hi = w & 0x8080808080808080ull;
  return ((w & 0x7f7f7f7f7f7f7f7full) << 1) ^ ((hi >> 7) * 0x1d);
}
inline uint8_t Mul2Byte(uint8_t b) {
  return static_cast<uint8_t>((b << 1) ^ ((b & 0x80) ? 0x1d : 0));
}

// The portable syndrome: Horner's rule from the top slot down, 8 bytes at
// a time (memcpy loads: any alignment).
void PortablePQ(std::span<const void* const> slots, uint8_t* p, uint8_t* q,
                size_t len) {
  const int top = static_cast<int>(slots.size()) - 1;
  size_t i = 0;
  for (; i + sizeof(uint64_t) <= len; i += sizeof(uint64_t)) {
    uint64_t pw = 0, qw = 0;
    for (int j = top; j >= 0; --j) {
      qw = Mul2Word(qw);
      if (slots[j] == nullptr) continue;
      uint64_t d;
      std::memcpy(&d, AsBytes(slots[j]) + i, sizeof(d));
      pw ^= d;
      qw ^= d;
    }
    if (p != nullptr) std::memcpy(p + i, &pw, sizeof(pw));
    if (q != nullptr) std::memcpy(q + i, &qw, sizeof(qw));
  }
  for (; i < len; ++i) {
    uint8_t pb = 0, qb = 0;
    for (int j = top; j >= 0; --j) {
      qb = Mul2Byte(qb);
      if (slots[j] == nullptr) continue;
      pb ^= AsBytes(slots[j])[i];
      qb ^= AsBytes(slots[j])[i];
    }
    if (p != nullptr) p[i] = pb;
    if (q != nullptr) q[i] = qb;
  }
}

// ISA-L pq_gen over the whole length, in int-sized calls. REQUIRES every
// slot non-null, both outputs, >= 2 slots, all aligned, len % 32 == 0.
void IsalPQWhole(std::span<const void* const> slots, uint8_t* p, uint8_t* q,
                 size_t len) {
  std::array<void*, kMaxSyndromeSlots + 2> v;
  const size_t n = slots.size();
  for (size_t off = 0; off < len; off += kIsalMaxLen) {
    const size_t piece = std::min(len - off, kIsalMaxLen);
    for (size_t j = 0; j < n; ++j) {
      // ISA-L's API is not const-correct; it never writes a source.
      v[j] = const_cast<uint8_t*>(AsBytes(slots[j])) + off;
    }
    v[n] = p + off;
    v[n + 1] = q + off;
    [[maybe_unused]] int rc =
        pq_gen(static_cast<int>(n + 2), static_cast<int>(piece), v.data());
    assert(rc == 0);
  }
}

// ISA-L pq_gen in kPiece pieces, zero slots reading kZeroPiece and a
// missing output written to a scratch piece.
void IsalPQPieces(std::span<const void* const> slots, uint8_t* p, uint8_t* q,
                  size_t len) {
  alignas(64) uint8_t scratch[kPiece];
  std::array<void*, kMaxSyndromeSlots + 2> v;
  const size_t n = slots.size();
  for (size_t off = 0; off < len; off += kPiece) {
    const size_t piece = std::min(len - off, kPiece);
    for (size_t j = 0; j < n; ++j) {
      v[j] = slots[j] == nullptr
                 ? const_cast<uint8_t*>(kZeroPiece)
                 : const_cast<uint8_t*>(AsBytes(slots[j])) + off;
    }
    v[n] = p != nullptr ? p + off : scratch;
    v[n + 1] = q != nullptr ? q + off : scratch;
    [[maybe_unused]] int rc =
        pq_gen(static_cast<int>(n + 2), static_cast<int>(piece), v.data());
    assert(rc == 0);
  }
}

// dst = coef * src, portable: one 256-entry product row, then a lookup per
// byte.
void PortableMul(uint8_t coef, const uint8_t* src, uint8_t* dst, size_t len,
                 bool accumulate) {
  uint8_t row[256];
  for (int x = 0; x < 256; ++x) row[x] = gf_mul(coef, static_cast<uint8_t>(x));
  if (accumulate) {
    for (size_t i = 0; i < len; ++i) dst[i] ^= row[src[i]];
  } else {
    for (size_t i = 0; i < len; ++i) dst[i] = row[src[i]];
  }
}

absl::Status LostError(const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("RAID6 recovery: ", why));
}

}  // namespace

void ComputePQ(std::span<const void* const> slots, void* p, void* q,
               size_t len) {
  assert(slots.size() <= kMaxSyndromeSlots);
  if (len == 0 || (p == nullptr && q == nullptr)) return;
  uint8_t* pb = AsBytes(p);
  uint8_t* qb = AsBytes(q);
  bool aligned = (p == nullptr || Aligned(p)) && (q == nullptr || Aligned(q));
  bool any_null = false;
  for (const void* s : slots) {
    if (s == nullptr) {
      any_null = true;
    } else if (!Aligned(s)) {
      aligned = false;
    }
  }
  if (!IsalUsable(len) || !aligned || slots.size() < 2) {
    PortablePQ(slots, pb, qb, len);
    return;
  }
  if (any_null || p == nullptr || q == nullptr) {
    IsalPQPieces(slots, pb, qb, len);
  } else {
    IsalPQWhole(slots, pb, qb, len);
  }
  AfterIsal();
}

uint8_t QCoefficient(int slot) {
  assert(slot >= 0);
  uint8_t c = 1;
  for (int i = 0; i < slot % 255; ++i) c = Mul2Byte(c);
  return c;
}

void GfMulXor(uint8_t coef, const void* src, void* dst, size_t len) {
  if (len == 0 || coef == 0) return;
  if (IsalUsable(len) && len >= kIsalMinMadLen && Aligned(src) &&
      Aligned(dst)) {
    unsigned char tbl[32];
    ec_init_tables(1, 1, &coef, tbl);
    for (size_t off = 0; off < len; off += kIsalMaxLen) {
      const size_t piece = std::min(len - off, kIsalMaxLen);
      gf_vect_mad(static_cast<int>(piece), 1, 0, tbl,
                  const_cast<uint8_t*>(AsBytes(src)) + off, AsBytes(dst) + off);
    }
    AfterIsal();
    return;
  }
  PortableMul(coef, AsBytes(src), AsBytes(dst), len, /*accumulate=*/true);
}

void GfMul(uint8_t coef, const void* src, void* dst, size_t len) {
  if (len == 0) return;
  if (IsalUsable(len) && Aligned(src) && Aligned(dst)) {
    unsigned char tbl[32];
    gf_vect_mul_init(coef, tbl);
    for (size_t off = 0; off < len; off += kIsalMaxLen) {
      const size_t piece = std::min(len - off, kIsalMaxLen);
      [[maybe_unused]] int rc = gf_vect_mul(
          static_cast<int>(piece), tbl,
          const_cast<uint8_t*>(AsBytes(src)) + off, AsBytes(dst) + off);
      assert(rc == 0);
    }
    AfterIsal();
    return;
  }
  PortableMul(coef, AsBytes(src), AsBytes(dst), len, /*accumulate=*/false);
}

void UpdatePQ(int slot, const void* delta, void* p, void* q, size_t len) {
  if (p != nullptr) XorAccumulate(p, delta, len);
  if (q != nullptr) GfMulXor(QCoefficient(slot), delta, q, len);
}

absl::Status RecoverPQ(std::span<void* const> slots, void* p, void* q,
                       size_t len, std::span<const int> lost) {
  if (lost.empty() || lost.size() > 2) {
    return LostError(
        absl::StrFormat("%d blocks lost; it rebuilds one or two", lost.size()));
  }
  if (lost.size() == 2 && lost[0] == lost[1]) {
    return LostError(absl::StrFormat("block %d named twice", lost[0]));
  }
  const int n = static_cast<int>(slots.size());
  if (n > static_cast<int>(kMaxSyndromeSlots)) {
    return LostError(absl::StrFormat("%d slots (at most 255)", n));
  }
  bool p_lost = false, q_lost = false;
  int data[2], nd = 0;
  for (int b : lost) {
    if (b == kLostP) {
      p_lost = true;
    } else if (b == kLostQ) {
      q_lost = true;
    } else if (b < 0 || b >= n) {
      return LostError(absl::StrFormat("slot %d out of range 0..%d", b, n - 1));
    } else if (slots[b] == nullptr) {
      return LostError(absl::StrFormat("slot %d is a zero block", b));
    } else {
      data[nd++] = b;
    }
  }
  if ((p_lost && p == nullptr) || (q_lost && q == nullptr)) {
    return LostError("a lost P or Q has no buffer");
  }
  if (!p_lost && nd > 0 && p == nullptr) return LostError("P is missing");
  if (nd == 2 && q == nullptr) return LostError("Q is missing");
  if (nd == 2 && data[0] > data[1]) std::swap(data[0], data[1]);

  // The survivors, with the lost data slots zeroed.
  std::array<const void*, kMaxSyndromeSlots> rest;
  for (int i = 0; i < n; ++i) rest[i] = slots[i];
  for (int k = 0; k < nd; ++k) rest[data[k]] = nullptr;
  const std::span<const void* const> survivors(rest.data(), n);

  if (nd == 0) {  // P and/or Q: generate them.
    ComputePQ(survivors, p_lost ? p : nullptr, q_lost ? q : nullptr, len);
    return absl::OkStatus();
  }
  if (nd == 1 && !p_lost) {
    // From P: Da = P ^ the other data; then Q if it was lost too.
    const int a = data[0];
    std::array<const void*, kMaxSyndromeSlots + 1> srcs;
    size_t m = 0;
    srcs[m++] = p;
    for (int i = 0; i < n; ++i) {
      if (rest[i] != nullptr) srcs[m++] = rest[i];
    }
    Xor(slots[a], std::span<const void* const>(srcs.data(), m), len);
    rest[a] = slots[a];
    if (q_lost) ComputePQ(survivors, nullptr, q, len);
    return absl::OkStatus();
  }
  if (nd == 1) {
    // Data a and P: Qx into a's buffer, Px into P; Da = g^-a (Q ^ Qx).
    const int a = data[0];
    ComputePQ(survivors, p, slots[a], len);
    XorAccumulate(slots[a], q, len);
    GfMul(gf_inv(QCoefficient(a)), slots[a], slots[a], len);
    XorAccumulate(p, slots[a], len);
    return absl::OkStatus();
  }
  // Two data blocks a < b: Pxy into a's buffer, Qxy into b's.
  const int a = data[0], b = data[1];
  void* da = slots[a];
  void* db = slots[b];
  ComputePQ(survivors, da, db, len);
  XorAccumulate(da, p, len);  // P ^ Pxy = Da ^ Db
  XorAccumulate(db, q, len);  // Q ^ Qxy = g^a Da ^ g^b Db
  const uint8_t ga = QCoefficient(a), gb = QCoefficient(b);
  const uint8_t coef_p = gf_inv(QCoefficient(b - a) ^ 1);
  const uint8_t coef_q = gf_inv(ga ^ gb);
  GfMul(coef_q, db, db, len);
  GfMulXor(coef_p, da, db, len);  // Db
  XorAccumulate(da, db, len);     // Da = (Da ^ Db) ^ Db
  return absl::OkStatus();
}

PQFault LocatePQFault(std::span<const void* const> slots, const void* p,
                      const void* q, void* scratch_p, void* scratch_q,
                      size_t len) {
  uint8_t* dp = AsBytes(scratch_p);
  uint8_t* dq = AsBytes(scratch_q);
  ComputePQ(slots, dp, dq, len);
  const bool p_ok = std::memcmp(dp, p, len) == 0;
  const bool q_ok = std::memcmp(dq, q, len) == 0;
  if (p_ok && q_ok) return {PQFault::kNone, -1};
  if (p_ok) return {PQFault::kQ, -1};
  if (q_ok) return {PQFault::kP, -1};
  // Both differ: the syndromes P' and Q', then the one slot z that the
  // first byte where P' != 0 names, then Q' == g^z P' at every byte.
  XorAccumulate(dp, p, len);
  XorAccumulate(dq, q, len);
  size_t i = 0;
  while (dp[i] == 0) ++i;  // P' is not all zero: P differed
  if (dq[i] == 0) return {PQFault::kUnknown, -1};
  const uint8_t ratio = gf_mul(dq[i], gf_inv(dp[i]));
  // log_g(ratio): g has order 255 and ratio != 0, so one of these matches.
  int z = 0;
  for (uint8_t c = 1; c != ratio; c = Mul2Byte(c)) ++z;
  if (z >= static_cast<int>(slots.size()) || slots[z] == nullptr) {
    return {PQFault::kUnknown, -1};
  }
  GfMul(QCoefficient(z), dp, dp, len);
  if (std::memcmp(dp, dq, len) != 0) return {PQFault::kUnknown, -1};
  return {PQFault::kData, z};
}

void SetRaid6PortableForTesting(bool portable) {
  g_portable.store(portable, std::memory_order_relaxed);
}

}  // namespace uraid
