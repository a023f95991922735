// RAID5 parity kernels: ISA-L for aligned buffers, a portable word loop for
// everything else.
//
// Why the alignment gate: ISA-L's xor_gen_sse/xor_check need 16-byte and
// xor_gen_avx 32-byte aligned pointers and fault otherwise, and the xor_gen
// dispatcher may pick either depending on the CPU. We only hand ISA-L
// pointers that are all 32-byte aligned (16 for xor_check), which is safe for
// every variant; anything else (e.g. malloc'd client buffers) goes through
// the portable loop.
//
// State: one process-wide atomic, the kernel forced by
// SetXorKernelForTesting(). It is a TEST-ONLY knob: production code never
// calls it and it defaults to the ISA-L dispatcher. Everything else is pure.

#include "parity.h"

#include <isa-l/raid.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#if defined(__x86_64__)
// Exported by libisal 2.30 but missing from its raid.h.
extern "C" int xor_gen_avx512(int vects, int len, void** array);
#endif

namespace uraid {
namespace {

// ISA-L's xor_gen alignment requirement, the strictest of its variants.
constexpr uintptr_t kIsalXorAlign = 32;
// xor_check only has SSE and base versions.
constexpr uintptr_t kIsalCheckAlign = 16;
// ISA-L takes `int len`: feed it pieces no larger than this. A multiple of
// 64 so later pieces keep every pointer's alignment.
constexpr size_t kIsalMaxLen = size_t{1} << 30;
// ISA-L takes a caller-built pointer array; bound it so it lives on the
// stack. Longer source lists are folded in batches (see IsalXor).
constexpr size_t kMaxVects = 32;

// Portable loops work on blocks of kBlockWords 64-bit words. Loading a whole
// block of every source into locals before storing makes the loop correct
// when dst == srcs[0] and lets GCC's SLP vectoriser turn each block into a
// few SIMD loads/xors/stores without runtime alias checks.
constexpr size_t kBlockWords = 8;
constexpr size_t kBlockBytes = kBlockWords * sizeof(uint64_t);

std::atomic<XorKernel> g_kernel{XorKernel::kDispatch};

bool Aligned(const void* p, uintptr_t align) {
  return (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0;
}

bool AllAligned(std::span<const void* const> bufs, uintptr_t align) {
  for (const void* p : bufs) {
    if (!Aligned(p, align)) return false;
  }
  return true;
}

using XorGenFn = int (*)(int, int, void**);

#if defined(__x86_64__)
bool CpuHasAvx() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx");
}
bool CpuHasAvx512() {
  // xor_gen_avx512 uses byte-granular (BW) and 256-bit EVEX (VL) forms.
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}
#endif

// The ISA-L entry point for aligned Xor calls, or nullptr for the portable
// loop. A forced variant the CPU lacks falls back to the dispatcher rather
// than raising SIGILL (tests skip those variants anyway).
XorGenFn SelectXorGen() {
  switch (g_kernel.load(std::memory_order_relaxed)) {
    case XorKernel::kPortable:
      return nullptr;
#if defined(__x86_64__)
    case XorKernel::kSse:
      return &xor_gen_sse;
    case XorKernel::kAvx: {
      static const bool ok = CpuHasAvx();
      return ok ? &xor_gen_avx : &xor_gen;
    }
    case XorKernel::kAvx512: {
      static const bool ok = CpuHasAvx512();
      return ok ? &xor_gen_avx512 : &xor_gen;
    }
#endif
    default:
      return &xor_gen;
  }
}

inline uint64_t LoadWord(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof(w));
  return w;
}

inline void StoreWord(uint8_t* p, uint64_t w) { std::memcpy(p, &w, sizeof(w)); }

inline const uint8_t* Bytes(const void* p) {
  return static_cast<const uint8_t*>(p);
}

// dst = XOR of the n >= 1 sources. dst may equal srcs[0]: every block of
// srcs[0] is read before the same block of dst is written.
void PortableXor(uint8_t* dst, const void* const* srcs, size_t n, size_t len) {
  const uint8_t* s0 = Bytes(srcs[0]);
  size_t i = 0;
  for (; i + kBlockBytes <= len; i += kBlockBytes) {
    uint64_t acc[kBlockWords];
    std::memcpy(acc, s0 + i, kBlockBytes);
    for (size_t j = 1; j < n; ++j) {
      uint64_t t[kBlockWords];
      std::memcpy(t, Bytes(srcs[j]) + i, kBlockBytes);
      for (size_t w = 0; w < kBlockWords; ++w) acc[w] ^= t[w];
    }
    std::memcpy(dst + i, acc, kBlockBytes);
  }
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
bool PortableXorIsZero(const void* const* bufs, size_t n, size_t len) {
  const uint8_t* b0 = Bytes(bufs[0]);
  size_t i = 0;
  for (; i + kBlockBytes <= len; i += kBlockBytes) {
    uint64_t acc[kBlockWords];
    std::memcpy(acc, b0 + i, kBlockBytes);
    for (size_t j = 1; j < n; ++j) {
      uint64_t t[kBlockWords];
      std::memcpy(t, Bytes(bufs[j]) + i, kBlockBytes);
      for (size_t w = 0; w < kBlockWords; ++w) acc[w] ^= t[w];
    }
    uint64_t any = 0;
    for (size_t w = 0; w < kBlockWords; ++w) any |= acc[w];
    if (any != 0) return false;
  }
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
  if (XorGenFn fn = SelectXorGen(); fn != nullptr &&
                                    Aligned(dst, kIsalXorAlign) &&
                                    AllAligned(srcs, kIsalXorAlign)) {
    IsalXor(fn, out, srcs, len);
    return;
  }
  PortableXor(out, srcs.data(), srcs.size(), len);
}

void XorAccumulate(void* dst, const void* src, size_t len) {
  const void* srcs[2] = {dst, src};
  Xor(dst, srcs, len);
}

bool XorIsZero(std::span<const void* const> bufs, size_t len) {
  if (len == 0 || bufs.empty()) return true;
  if (bufs.size() == 1) return IsAllZero(bufs[0], len);
  const bool portable =
      g_kernel.load(std::memory_order_relaxed) == XorKernel::kPortable;
  if (!portable && bufs.size() <= kMaxVects &&
      AllAligned(bufs, kIsalCheckAlign)) {
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
  return PortableXorIsZero(bufs.data(), bufs.size(), len);
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
