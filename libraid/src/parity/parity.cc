// SPDX-License-Identifier: MIT
// RAID5 parity kernels: ISA-L for aligned buffers, a portable word loop for
// everything else.
//
// Why the alignment gate: ISA-L's xor_gen_sse/xor_check need 16-byte and
// xor_gen_avx 32-byte aligned pointers and fault otherwise, and the xor_gen
// dispatcher may pick either depending on the CPU. We only hand ISA-L
// pointers that are all 32-byte aligned (16 for xor_check), which is safe for
// every variant; anything else (e.g. malloc'd client buffers) goes through
// the portable loop, which is compiled twice (baseline x86-64 and AVX2) and
// picks the AVX2 build once per process when the CPU has it.
//
// Measured (tools/bench/microbench.cc, Release, the 2-vCPU Zen 5 VM: CPU
// time per call, medians of 10 interleaved repetitions; bare = ISA-L
// xor_gen on the same buffers):
//
//   length x sources     before: ours / bare      after: ours / bare
//   4K x 3 aligned        177 / 57 ns (3.11x)      65 / 79 ns (0.82x)
//   4K x 5 aligned        214 / 91 ns (2.34x)      98 / 92 ns (1.06x)
//   512K x 3 aligned       37 / 37 us (1.00x)      37 / 39 us (0.95x)
//   512K x 5 aligned      106 / 106 us (1.00x)    106 / 107 us (0.99x)
//   4K x 3, 16-misaligned 243 / 57 ns (4.26x)     106 / 79 ns (1.35x)
//   512K x 3, 16-misal.    55 / 37 us (1.46x)      39 / 39 us (1.01x)
//
// The 4K overhead was not the bookkeeping (pointer array, alignment checks:
// a few ns) but ISA-L itself: xor_gen_avx and xor_gen_avx512 return with
// the upper halves of the ymm/zmm registers dirty (no vzeroupper), so the
// next legacy-SSE instruction -- ours, building the next pointer array, or
// any caller's -- paid an AVX-SSE transition stall (perf: 88% of IsalXor's
// samples on its first SSE instruction). Xor now issues vzeroupper after
// ISA-L returns (ZeroUpper). Misaligned buffers were slow because the
// portable loop was SSE2-only; it now has an AVX2 build as well.
//
// State: one process-wide atomic, the kernel forced by
// SetXorKernelForTesting(). It is a TEST-ONLY knob: production code never
// calls it and it defaults to the ISA-L dispatcher. Everything else is pure.

#include "parity/parity.h"

#include <isa-l/raid.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#if defined(__x86_64__)
#include <immintrin.h>

// Exported by libisal 2.30 but missing from its raid.h.
extern "C" int xor_gen_avx512(int vects, int len, void** array);
#endif

namespace uraid {
namespace {

// ISA-L's xor_gen alignment requirement, the strictest of its variants.
constexpr uintptr_t kIsalXorAlign = 32;
// xor_check only has SSE and base versions.
constexpr uintptr_t kIsalCheckAlign = 16;
// ISA-L takes a caller-built pointer array; bound it so it lives on the
// stack. Longer source lists are folded in batches (see IsalXor).
constexpr size_t kMaxVects = 32;

// The portable loops XOR blocks of kBlockBytes, held in kBlockBytes / V
// vector registers of V bytes (GCC vector extensions: 16 for the baseline
// x86-64 build, 32 for the AVX2 build). Loading a whole block of every
// source before storing makes the loop correct when dst == srcs[0].
constexpr size_t kBlockBytes = 128;

std::atomic<XorKernel> g_kernel{XorKernel::kDispatch};

// True when dst and every source are `align`-aligned.
bool AllAligned(const void* dst, std::span<const void* const> bufs,
                uintptr_t align) {
  uintptr_t bits = reinterpret_cast<uintptr_t>(dst);
  for (const void* p : bufs) bits |= reinterpret_cast<uintptr_t>(p);
  return (bits & (align - 1)) == 0;
}

using XorGenFn = int (*)(int, int, void**);

// CPU features, read once per process.
struct CpuFeatures {
  bool avx = false;
  bool avx2 = false;
  // xor_gen_avx512 uses byte-granular (BW) and 256-bit EVEX (VL) forms.
  bool avx512 = false;
};

const CpuFeatures& Cpu() {
  static const CpuFeatures cpu = [] {
    CpuFeatures f;
#if defined(__x86_64__)
    // libgcc reports AVX/AVX-512 only when the OS saves their state (XCR0).
    __builtin_cpu_init();
    f.avx = __builtin_cpu_supports("avx");
    f.avx2 = __builtin_cpu_supports("avx2");
    f.avx512 = __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl");
#endif
    return f;
  }();
  return cpu;
}

// The ISA-L entry point for aligned Xor calls, or nullptr for the portable
// loop. A forced variant the CPU lacks falls back to the dispatcher rather
// than raising SIGILL (tests skip those variants anyway).
XorGenFn SelectXorGen(XorKernel kernel) {
  switch (kernel) {
    case XorKernel::kPortable:
    case XorKernel::kPortableAvx2:
      return nullptr;
#if defined(__x86_64__)
    case XorKernel::kSse:
      return &xor_gen_sse;
    case XorKernel::kAvx:
      return Cpu().avx ? &xor_gen_avx : &xor_gen;
    case XorKernel::kAvx512:
      return Cpu().avx512 ? &xor_gen_avx512 : &xor_gen;
#endif
    default:
      return &xor_gen;
  }
}

#if defined(__x86_64__)
// ISA-L's xor_gen_avx and xor_gen_avx512 (2.30) return without vzeroupper,
// leaving the upper ymm/zmm state dirty. Every legacy-SSE instruction after
// that (our own next pointer-array setup, the caller's code) then pays an
// AVX-SSE transition penalty: measured 4K XOR at 3.1x bare xor_gen before
// this was added, about 1x after (see the table at the top).
__attribute__((target("avx"))) void ZeroUpper() { _mm256_zeroupper(); }
#endif

inline uint64_t LoadWord(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof(w));
  return w;
}

inline void StoreWord(uint8_t* p, uint64_t w) { std::memcpy(p, &w, sizeof(w)); }

inline const uint8_t* Bytes(const void* p) {
  return static_cast<const uint8_t*>(p);
}

// GCC vector extensions (clang has them too): one SSE2 or one AVX2 register.
typedef uint64_t Vec16 __attribute__((vector_size(16)));
typedef uint64_t Vec32 __attribute__((vector_size(32)));

// acc[] = the block at offset i of the n >= 1 buffers, XORed together. One
// memcpy per register: GCC turns each into a single unaligned load (a
// memcpy of the whole block would go through the stack).
template <typename Vec>
[[gnu::always_inline]] inline void XorBlock(Vec* acc, const void* const* bufs,
                                            size_t n, size_t i) {
  constexpr size_t kLanes = kBlockBytes / sizeof(Vec);
  const uint8_t* b0 = Bytes(bufs[0]) + i;
#pragma GCC unroll 8
  for (size_t l = 0; l < kLanes; ++l) {
    std::memcpy(&acc[l], b0 + l * sizeof(Vec), sizeof(Vec));
  }
  for (size_t j = 1; j < n; ++j) {
    const uint8_t* bj = Bytes(bufs[j]) + i;
#pragma GCC unroll 8
    for (size_t l = 0; l < kLanes; ++l) {
      Vec t;
      std::memcpy(&t, bj + l * sizeof(Vec), sizeof(Vec));
      acc[l] ^= t;
    }
  }
}

// dst = XOR of the n >= 1 sources. dst may equal srcs[0]: every block of
// srcs[0] is read before the same block of dst is written. Inlined into one
// function per instruction set (below).
template <typename Vec>
[[gnu::always_inline]] inline void PortableXorBody(uint8_t* dst,
                                                   const void* const* srcs,
                                                   size_t n, size_t len) {
  constexpr size_t kLanes = kBlockBytes / sizeof(Vec);
  size_t i = 0;
  for (; i + kBlockBytes <= len; i += kBlockBytes) {
    Vec acc[kLanes];
    XorBlock<Vec>(acc, srcs, n, i);
#pragma GCC unroll 8
    for (size_t l = 0; l < kLanes; ++l) {
      std::memcpy(dst + i + l * sizeof(Vec), &acc[l], sizeof(Vec));
    }
  }
  const uint8_t* s0 = Bytes(srcs[0]);
  for (; i + sizeof(uint64_t) <= len; i += sizeof(uint64_t)) {
    uint64_t acc = LoadWord(s0 + i);
    for (size_t j = 1; j < n; ++j) acc ^= LoadWord(Bytes(srcs[j]) + i);
    StoreWord(dst + i, acc);
  }
  for (; i < len; ++i) {
    uint8_t acc = s0[i];
    for (size_t j = 1; j < n; ++j) acc ^= Bytes(srcs[j])[i];
    dst[i] = acc;
  }
}

// True when the XOR of bufs (n >= 1) is zero. Stops at the first non-zero
// block.
template <typename Vec>
[[gnu::always_inline]] inline bool PortableXorIsZeroBody(
    const void* const* bufs, size_t n, size_t len) {
  constexpr size_t kLanes = kBlockBytes / sizeof(Vec);
  size_t i = 0;
  for (; i + kBlockBytes <= len; i += kBlockBytes) {
    Vec acc[kLanes];
    XorBlock<Vec>(acc, bufs, n, i);
    Vec any = acc[0];
#pragma GCC unroll 8
    for (size_t l = 1; l < kLanes; ++l) any |= acc[l];
    uint64_t words[sizeof(Vec) / sizeof(uint64_t)];
    std::memcpy(words, &any, sizeof(Vec));
    uint64_t word = 0;
    for (uint64_t w : words) word |= w;
    if (word != 0) return false;
  }
  const uint8_t* b0 = Bytes(bufs[0]);
  uint64_t any = 0;
  for (; i + sizeof(uint64_t) <= len; i += sizeof(uint64_t)) {
    uint64_t acc = LoadWord(b0 + i);
    for (size_t j = 1; j < n; ++j) acc ^= LoadWord(Bytes(bufs[j]) + i);
    any |= acc;
  }
  for (; i < len; ++i) {
    uint8_t acc = b0[i];
    for (size_t j = 1; j < n; ++j) acc ^= Bytes(bufs[j])[i];
    any |= acc;
  }
  return any == 0;
}

// The portable loops, built for baseline x86-64 (SSE2) and for AVX2. The
// AVX2 build XORs 32 bytes per instruction instead of 16 (measured on
// misaligned buffers: see the table at the top); GCC ends it with
// vzeroupper itself.
using PortableXorFn = void (*)(uint8_t*, const void* const*, size_t, size_t);
using PortableXorIsZeroFn = bool (*)(const void* const*, size_t, size_t);

void PortableXorBase(uint8_t* dst, const void* const* srcs, size_t n,
                     size_t len) {
  PortableXorBody<Vec16>(dst, srcs, n, len);
}
bool PortableXorIsZeroBase(const void* const* bufs, size_t n, size_t len) {
  return PortableXorIsZeroBody<Vec16>(bufs, n, len);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) void PortableXorAvx2(uint8_t* dst,
                                                     const void* const* srcs,
                                                     size_t n, size_t len) {
  PortableXorBody<Vec32>(dst, srcs, n, len);
}
__attribute__((target("avx2"))) bool PortableXorIsZeroAvx2(
    const void* const* bufs, size_t n, size_t len) {
  return PortableXorIsZeroBody<Vec32>(bufs, n, len);
}
#endif

// AVX2 when the CPU has it, unless the test knob forces the baseline build.
bool UseAvx2Portable(XorKernel kernel) {
#if defined(__x86_64__)
  return kernel != XorKernel::kPortable && Cpu().avx2;
#else
  return false;
#endif
}

PortableXorFn SelectPortableXor(XorKernel kernel) {
#if defined(__x86_64__)
  if (UseAvx2Portable(kernel)) return &PortableXorAvx2;
#endif
  return &PortableXorBase;
}

PortableXorIsZeroFn SelectPortableXorIsZero(XorKernel kernel) {
#if defined(__x86_64__)
  if (UseAvx2Portable(kernel)) return &PortableXorIsZeroAvx2;
#endif
  return &PortableXorIsZeroBase;
}

// dst = XOR of the n sources, via ISA-L `fn` in int-sized pieces. dst may
// equal srcs[0]. REQUIRES 2 <= n < kMaxVects, every pointer 32-byte aligned.
// ISA-L's only argument check is "at least two sources", so it cannot fail
// here.
void IsalXorPieces(XorGenFn fn, uint8_t* dst, const void* const* srcs, size_t n,
                   size_t len) {
  void* array[kMaxVects];
  for (size_t off = 0; off < len; off += kIsalMaxLen) {
    const size_t piece = std::min(len - off, kIsalMaxLen);
    for (size_t j = 0; j < n; ++j) {
      // ISA-L's API is not const-correct; it never writes a source.
      array[j] = const_cast<uint8_t*>(Bytes(srcs[j])) + off;
    }
    array[n] = dst + off;
    [[maybe_unused]] int rc =
        fn(static_cast<int>(n + 1), static_cast<int>(piece), array);
    assert(rc == 0);
  }
}

// ISA-L path. REQUIRES srcs.size() >= 2, all pointers 32-byte aligned.
// Source lists longer than one pointer array are folded in batches: the
// first batch writes dst, later batches XOR into it in place (dst as source
// 0, the in-place pattern the tests cover).
void IsalXor(XorGenFn fn, uint8_t* dst, std::span<const void* const> srcs,
             size_t len) {
  size_t done = std::min(srcs.size(), kMaxVects - 1);
  IsalXorPieces(fn, dst, srcs.data(), done, len);
  while (done < srcs.size()) {
    const void* batch[kMaxVects - 1];
    const size_t take = std::min(srcs.size() - done, kMaxVects - 2);
    batch[0] = dst;
    for (size_t j = 0; j < take; ++j) batch[j + 1] = srcs[done + j];
    IsalXorPieces(fn, dst, batch, take + 1, len);
    done += take;
  }
#if defined(__x86_64__)
  if (Cpu().avx) ZeroUpper();
#endif
}

}  // namespace

void Xor(void* dst, std::span<const void* const> srcs, size_t len) {
  if (len == 0) return;
  auto* out = static_cast<uint8_t*>(dst);
  if (srcs.empty()) {
    std::memset(out, 0, len);
    return;
  }
  if (srcs.size() == 1) {
    std::memmove(out, srcs[0], len);
    return;
  }
  const XorKernel kernel = g_kernel.load(std::memory_order_relaxed);
  if (XorGenFn fn = SelectXorGen(kernel);
      fn != nullptr && AllAligned(dst, srcs, kIsalXorAlign)) {
    IsalXor(fn, out, srcs, len);
    return;
  }
  SelectPortableXor(kernel)(out, srcs.data(), srcs.size(), len);
}

void XorAccumulate(void* dst, const void* src, size_t len) {
  const void* srcs[2] = {dst, src};
  Xor(dst, srcs, len);
}

bool XorIsZero(std::span<const void* const> bufs, size_t len) {
  if (len == 0 || bufs.empty()) return true;
  if (bufs.size() == 1) return IsAllZero(bufs[0], len);
  const XorKernel kernel = g_kernel.load(std::memory_order_relaxed);
  if (SelectXorGen(kernel) != nullptr && bufs.size() <= kMaxVects &&
      AllAligned(bufs[0], bufs, kIsalCheckAlign)) {
    void* array[kMaxVects];
    for (size_t off = 0; off < len; off += kIsalMaxLen) {
      const size_t piece = std::min(len - off, kIsalMaxLen);
      for (size_t j = 0; j < bufs.size(); ++j) {
        array[j] = const_cast<uint8_t*>(Bytes(bufs[j])) + off;
      }
      // xor_check returns 0 when the XOR is zero. Its only other failure is
      // bad arguments (fewer than 2 vectors), which the gate above rules out.
      if (xor_check(static_cast<int>(bufs.size()), static_cast<int>(piece),
                    array) != 0) {
        return false;
      }
    }
    return true;
  }
  return SelectPortableXorIsZero(kernel)(bufs.data(), bufs.size(), len);
}

bool IsAllZero(const void* p, size_t len) {
  // The memcmp trick: once the first kHead bytes are known to be zero,
  // "p[i] == p[i + kHead] for every i" means every later byte is zero too
  // (by induction). glibc's SIMD memcmp then does the scan, stopping at the
  // first non-zero byte; measured about 3x faster than a scalar OR loop.
  constexpr size_t kHead = 64;
  const auto* b = static_cast<const uint8_t*>(p);
  const size_t head = std::min(len, kHead);
  uint64_t any = 0;
  size_t i = 0;
  for (; i + sizeof(uint64_t) <= head; i += sizeof(uint64_t)) {
    any |= LoadWord(b + i);
  }
  for (; i < head; ++i) any |= b[i];
  if (any != 0) return false;
  return len <= kHead || std::memcmp(b, b + kHead, len - kHead) == 0;
}

void SetXorKernelForTesting(XorKernel kernel) {
  g_kernel.store(kernel, std::memory_order_relaxed);
}

}  // namespace uraid
