// SPDX-License-Identifier: MIT
// Internal: RAID6 P+Q syndromes as md computes them, over byte buffers.
//
// Arithmetic is GF(2^8) with polynomial 0x11d and generator g = {02} (md's
// lib/raid6 and ISA-L's pq_gen agree on both). A stripe's data is passed in
// md's Q SLOT order (Geometry::QSlot, not the data index): `slots[i]` is the
// block at Q slot i, or nullptr for a block that is all zeros (the P and Q
// positions of md's DDF layouts, whose syndrome spans every disk). Then
//
//   P = XOR over i of slots[i]        Q = XOR over i of g^i * slots[i].
//
// ISA-L's kernels need 32-byte aligned pointers and lengths that are a
// multiple of 32, so, as in parity.h, every entry point checks and falls back
// to a portable word-wise loop for anything else (client buffers from nbdkit
// are only malloc-aligned). Buffers allocated by libraid (AlignedBuffer)
// always take the ISA-L path.
//
// Thread-compatible; no state.

#ifndef URAID_SRC_PARITY_RAID6_H_
#define URAID_SRC_PARITY_RAID6_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace uraid {

// md's syndrome covers at most 255 slots (g has order 255); Geometry allows
// 64 disks, so this is never the binding limit in practice.
inline constexpr size_t kMaxSyndromeSlots = 255;

// Computes P and Q of `slots` over `len` bytes. Either output may be nullptr
// when the caller does not want it. Outputs must not alias any slot.
// REQUIRES: slots.size() <= kMaxSyndromeSlots.
void ComputePQ(std::span<const void* const> slots, void* p, void* q,
               size_t len);

// g^slot in GF(2^8): the coefficient of Q slot `slot`.
uint8_t QCoefficient(int slot);

// dst ^= coef * src over `len` bytes (GF(2^8)). dst may equal src.
void GfMulXor(uint8_t coef, const void* src, void* dst, size_t len);
// dst = coef * src over `len` bytes. dst may equal src (in place).
void GfMul(uint8_t coef, const void* src, void* dst, size_t len);

// Read-modify-write of the block at Q slot `slot`: with delta = Dold ^ Dnew,
// P ^= delta and Q ^= g^slot * delta (md's rmw for RAID6). Either of p, q may
// be nullptr to update only the other.
void UpdatePQ(int slot, const void* delta, void* p, void* q, size_t len);

// Markers for RecoverPQ's `lost`: P and Q themselves (data blocks are named
// by their slot, 0..slots.size()-1).
inline constexpr int kLostP = -1;
inline constexpr int kLostQ = -2;

// Rebuilds one or two lost blocks of a stripe in place from the others:
// any pair of data blocks, a data block with P or with Q, P with Q, or one
// alone. `lost` names them (a slot index, kLostP or kLostQ); a lost block's
// buffer (slots[i], p or q) is the output and its contents are ignored, the
// others are inputs and are left as they are. nullptr slots are zeros and
// cannot be lost.
// Errors: InvalidArgument when `lost` is empty, longer than two, repeats a
// block, or names a slot out of range or a nullptr one, or an output is
// nullptr.
absl::Status RecoverPQ(std::span<void* const> slots, void* p, void* q,
                       size_t len, std::span<const int> lost);

// What P and Q say about a stripe whose syndromes disagree: mdadm's
// raid6check. With P' = P ^ (P of the data) and Q' = Q ^ (Q of the data),
// one bad block explains every byte: P' = 0 everywhere, Q' not (Q is bad);
// Q' = 0 everywhere, P' not (P is bad); or Q' = g^z P' at every byte for one
// data slot z (a bad block Dz ^ E gives P' = E, Q' = g^z E). Anything else
// (two or more bad blocks, or one whose z names no data slot) cannot be
// located: kUnknown.
struct PQFault {
  enum Kind { kNone, kP, kQ, kData, kUnknown };
  Kind kind = kNone;
  int slot = -1;  // kData: the bad block's Q slot
};

// Computes P and Q of `slots` (as ComputePQ) into `scratch_p` and
// `scratch_q`, `len` bytes each and clobbered, compares them with the
// stored `p` and `q`, and locates the bad block as above (kNone: both
// match). A nullptr slot is a zero block and is never named.
// REQUIRES: slots.size() <= kMaxSyndromeSlots; scratch buffers alias
// nothing else.
PQFault LocatePQFault(std::span<const void* const> slots, const void* p,
                      const void* q, void* scratch_p, void* scratch_q,
                      size_t len);

// Test-only: forces the portable loops even for aligned buffers (true) or
// restores ISA-L for them (false). Process-wide; production never calls it.
void SetRaid6PortableForTesting(bool portable);

}  // namespace uraid

#endif  // URAID_SRC_PARITY_RAID6_H_
