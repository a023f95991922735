// SPDX-License-Identifier: MIT
// Internal: RAID5 parity over byte buffers with ISA-L.
//
// ISA-L's per-ISA kernels need aligned pointers (xor_gen_avx: 32 bytes,
// xor_gen_sse: 16), and the dispatcher may pick either on a given CPU, so
// these functions check alignment and fall back to a word-wise loop when any
// buffer is not 32-byte aligned (client buffers from nbdkit are only
// malloc-aligned). Buffers allocated by libraid use AlignedBuffer (4 KiB).
//
// Thread-compatible; no state.

#ifndef URAID_SRC_PARITY_H_
#define URAID_SRC_PARITY_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace uraid {

// ISA-L takes `int len`: parity.cc's XOR and raid6.cc's P+Q feed it
// pieces no larger than this. A multiple of 64 so later pieces keep every
// pointer's alignment.
inline constexpr size_t kIsalMaxLen = size_t{1} << 30;

// dst = srcs[0] ^ srcs[1] ^ ... over `len` bytes. srcs may be empty (dst is
// zeroed) or hold one buffer (copied). dst may alias srcs[0] (in-place
// update, e.g. P ^= Dold ^ Dnew as XorInto(P, {P, Dold, Dnew})) but no other
// source.
void Xor(void* dst, std::span<const void* const> srcs, size_t len);

// dst ^= src, over `len` bytes.
void XorAccumulate(void* dst, const void* src, size_t len);

// True when the XOR of all `bufs` is zero over `len` bytes (parity check of
// a full row: data chunks plus parity).
bool XorIsZero(std::span<const void* const> bufs, size_t len);

// True when `len` bytes at `p` are all zero.
bool IsAllZero(const void* p, size_t len);

// Which ISA-L entry point Xor uses for aligned buffers; tests force each
// variant to prove the alignment rules hold on every CPU. kPortable and
// kPortableAvx2 force the portable loop for every buffer, in its baseline
// and its AVX2 build (the latter only where the CPU has AVX2); otherwise
// misaligned buffers use the AVX2 build whenever the CPU has it.
enum class XorKernel {
  kDispatch,
  kSse,
  kAvx,
  kAvx512,
  kPortable,
  kPortableAvx2
};
void SetXorKernelForTesting(XorKernel kernel);

}  // namespace uraid

#endif  // URAID_SRC_PARITY_H_
