// SPDX-License-Identifier: MIT
// Internal: where AlignedBuffer's large blocks come from.
//
// Why not malloc: a stripe write's parity scratch, a reconstruction's rows
// and a cache entry are hundreds of KiB to a few MiB, allocated on
// whichever of nbdkit's many client threads runs the request. Once glibc's
// dynamic mmap threshold has risen past that size (it does after the first
// such block is freed), each block comes from the calling thread's arena,
// and every arena keeps its freed megabytes: measured under a 64 KiB
// sequential write stream with the default 64 MiB cache, the plugin's peak
// RSS was 113 MiB, and 58 MiB with glibc held to one arena. Here large
// blocks are mapped from the kernel (the smallest come from malloc; see
// kMappedBlockBytes) and recycled through one process-wide free list that
// keeps at most kLargeKeepBytes (the oldest blocks are given back to make
// room for a newly freed one). So the memory outside the
// caller's own bounds (the stripe cache's capacity) is the blocks in use plus
// that fixed reserve, however many threads allocate.
//
// Under AddressSanitizer blocks come from aligned_alloc as before, so its
// overflow and use-after-free checks still cover them.
//
// Thread-safe.

#ifndef URAID_SRC_BASE_LARGE_BUFFERS_H_
#define URAID_SRC_BASE_LARGE_BUFFERS_H_

#include <cstddef>

#if defined(__SANITIZE_ADDRESS__)
#define URAID_LARGE_BLOCKS_FROM_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define URAID_LARGE_BLOCKS_FROM_MALLOC 1
#endif
#endif

namespace uraid {

#ifdef URAID_LARGE_BLOCKS_FROM_MALLOC
inline constexpr bool kLargeBlocksRecycled = false;
#else
inline constexpr bool kLargeBlocksRecycled = true;
#endif

// Blocks of at least this many bytes are large (recycled here); smaller
// ones stay with malloc, which serves them well. Not glibc's mmap
// threshold (128 KiB), as it was: a degraded read's survivor and scratch
// rows of 16-64 KiB from malloc, freed beside an arena's top, took the
// arena past glibc's trim threshold (128 KiB), which gave those pages back
// to the kernel, and the next rows faulted them in again. Measured, 4 x
// 512K chunks served without one member, fio sequential reads at qd8, in
// 4 s: 64K requests, 30,000-34,000 page faults and 860-950 MB/s with the
// rows from malloc, 820-850 faults and 1,600-1,720 MB/s recycled; 16K and
// 32K requests faulted 31,000-47,000 times each with 64 KiB as the line,
// 570-670 times from here.
inline constexpr size_t kLargeBlockBytes = 16 * 1024;
// Blocks from kLargeBlockBytes up to this come from malloc when the list
// has none of their size and go back to it when the list lets them go (a
// mapping of its own for every 16 KiB block would be a VMA each); larger
// ones are mapped and unmapped.
inline constexpr size_t kMappedBlockBytes = 128 * 1024;
// The most the free list keeps for reuse; the oldest blocks go
// first when a freed one would pass it.
inline constexpr size_t kLargeKeepBytes = 16 * 1024 * 1024;
// Larger blocks are not kept at all: they are a job's windows, allocated
// once per job, and would crowd out the blocks requests recycle.
inline constexpr size_t kLargeKeepMaxBlockBytes = 4 * 1024 * 1024;

// How a newly mapped block's memory is backed (a recycled block keeps
// whatever backing it had).
enum class BlockPages {
  // Base pages (4 KiB), each faulted in at its first touch: for buffers
  // that may be touched in part (a stripe-cache entry taking one 4K write).
  kBase,
  // Transparent huge pages (madvise(MADV_HUGEPAGE), on a huge-page
  // boundary) when the block is at least one huge page long: for buffers a
  // job fills whole, again and again (a reshape's windows, a job thread's
  // scratch), where one fault then backs 2 MiB instead of 512 faults. Not
  // for partial use: a huge page is zeroed whole at its first touch, and
  // its fault may compact memory. Measured, a 4 -> 5 grow of 512 MiB
  // members on /dev/shm (40 MiB of windows): 10,300 page faults on base
  // pages, about 100 on huge pages, and 690-980 against 860-1,190 ms of
  // CPU, lower in each of 9 alternating runs (a fault on fresh memory
  // costs about 10 us in this VM).
  kHuge,
};

// The huge page size kHuge asks for.
inline constexpr size_t kHugePageBytes = 2 * 1024 * 1024;

// A block of `bytes` (a multiple of 4096, at least kLargeBlockBytes),
// 4096-aligned, contents undefined; null when the system has no memory.
void* AllocLargeBlock(size_t bytes, BlockPages pages = BlockPages::kBase);
// Returns a block from AllocLargeBlock, with the same `bytes`.
void FreeLargeBlock(void* p, size_t bytes);
// Bytes the free list keeps now (for tests).
size_t LargeBlocksKeptBytes();

}  // namespace uraid

#endif  // URAID_SRC_BASE_LARGE_BUFFERS_H_
