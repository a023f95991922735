// SPDX-License-Identifier: MIT
#include "base/large_buffers.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <new>

#include "absl/container/flat_hash_map.h"
#include "base/sync.h"

namespace uraid {
namespace {

// A free block's own first bytes hold its place in the list: in the order
// blocks were freed (oldest to newest) and among the blocks of its size.
// Intrusive, so that freeing a block allocates nothing (a healthy 4K write
// frees a recycled block, and its heap allocations are counted:
// tests/write_allocations_test.cc; a std::list node per free broke its
// budget), and both a request's lookup (the newest block of its size: the
// likeliest still in the CPU's caches) and the eviction of the oldest are
// O(1) however many small blocks the list holds.
struct FreeBlock {
  size_t bytes;
  FreeBlock* older;
  FreeBlock* newer;
  FreeBlock* older_same;  // of the same size
  FreeBlock* newer_same;
};
static_assert(sizeof(FreeBlock) <= kLargeBlockBytes);

// When a freed block does not fit, the oldest blocks go, not the new one:
// sizes a finished job used must not crowd out the ones in use (with the
// new one unmapped, every block of a size the full list did not hold is
// mapped and faulted in afresh. The first version did that; the jobs
// table's reshape on members at 2 ms measured 0.72x with it, 0.86x with
// this rule, 0.85x before large blocks came from here).
struct FreeList {
  Mutex mu;
  FreeBlock* oldest ABSL_GUARDED_BY(mu) = nullptr;
  FreeBlock* newest ABSL_GUARDED_BY(mu) = nullptr;
  // Sizes seen: an entry each, null once none is free (a few sizes: chunk,
  // stripe, request sizes).
  absl::flat_hash_map<size_t, FreeBlock*> newest_of ABSL_GUARDED_BY(mu);
  size_t kept ABSL_GUARDED_BY(mu) = 0;

  // Puts `b` (a freed block of b->bytes) in both orders, as the newest.
  void LinkNewestLocked(FreeBlock* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    b->older = newest;
    b->newer = nullptr;
    (newest != nullptr ? newest->newer : oldest) = b;
    newest = b;
    FreeBlock*& same = newest_of[b->bytes];
    b->older_same = same;
    b->newer_same = nullptr;
    if (same != nullptr) same->newer_same = b;
    same = b;
    kept += b->bytes;
  }
  // Takes `b` out of both orders.
  void UnlinkLocked(FreeBlock* b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    (b->older != nullptr ? b->older->newer : oldest) = b->newer;
    (b->newer != nullptr ? b->newer->older : newest) = b->older;
    if (b->older_same != nullptr) b->older_same->newer_same = b->newer_same;
    if (b->newer_same != nullptr) {
      b->newer_same->older_same = b->older_same;
    } else {
      newest_of[b->bytes] = b->older_same;
    }
    kept -= b->bytes;
  }
};

FreeList& Free() {
  static FreeList* list = new FreeList;  // never destroyed: used at exit
  return *list;
}

// [[maybe_unused]]: a sanitizer build takes every block from malloc.
[[maybe_unused]] void* NewBlock(size_t bytes, BlockPages pages) {
  if (bytes < kMappedBlockBytes) return std::aligned_alloc(4096, bytes);
  // Huge pages of 2 MiB over 4 KiB base pages (x86-64's; elsewhere the
  // trimming below could leave an unaligned end, and the advice would not
  // apply anyway).
  static const bool huge_pages_fit = sysconf(_SC_PAGESIZE) == 4096;
  if (pages == BlockPages::kBase || bytes < kHugePageBytes || !huge_pages_fit) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // A huge page more than asked, trimmed to `bytes` from the first huge
  // page boundary in it: a huge page backs only an aligned 2 MiB, so an
  // unaligned block would get none for its first and last pieces.
  // ReleaseBlock unmaps exactly [p, p + bytes).
  const size_t span = bytes + kHugePageBytes;
  void* m = mmap(nullptr, span, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(m);
  const uintptr_t begin =
      (start + kHugePageBytes - 1) & ~uintptr_t{kHugePageBytes - 1};
  const uintptr_t end = begin + bytes;
  if (begin > start) munmap(m, begin - start);
  munmap(reinterpret_cast<void*>(end), start + span - end);
  void* p = reinterpret_cast<void*>(begin);
  // Advice only: without transparent huge pages (a kernel built without,
  // or "never" in /sys/kernel/mm/transparent_hugepage/enabled) the block
  // is backed by base pages, as before.
  (void)madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

[[maybe_unused]] void ReleaseBlock(void* p, size_t bytes) {
  if (bytes < kMappedBlockBytes) {
    std::free(p);
  } else {
    munmap(p, bytes);
  }
}

}  // namespace

void* AllocLargeBlock(size_t bytes, BlockPages pages) {
#ifdef URAID_LARGE_BLOCKS_FROM_MALLOC
  (void)pages;
  return std::aligned_alloc(4096, bytes);
#else
  {
    FreeList& f = Free();
    MutexLock lock(&f.mu);
    auto it = f.newest_of.find(bytes);
    if (it != f.newest_of.end() && it->second != nullptr) {
      FreeBlock* b = it->second;
      f.UnlinkLocked(b);
      return b;
    }
  }
  return NewBlock(bytes, pages);
#endif
}

void FreeLargeBlock(void* p, size_t bytes) {
  if (p == nullptr) return;
#ifdef URAID_LARGE_BLOCKS_FROM_MALLOC
  std::free(p);
#else
  if (bytes > kLargeKeepMaxBlockBytes) {
    ReleaseBlock(p, bytes);  // a job's window: allocated once, not recycled
    return;
  }
  // The blocks that go, chained through their own `older` (nothing is
  // allocated), given back outside the mutex.
  FreeBlock* evicted = nullptr;
  {
    FreeList& f = Free();
    MutexLock lock(&f.mu);
    f.LinkNewestLocked(
        new (p) FreeBlock{bytes, nullptr, nullptr, nullptr, nullptr});
    while (f.kept > kLargeKeepBytes) {
      FreeBlock* old = f.oldest;
      f.UnlinkLocked(old);
      old->older = evicted;
      evicted = old;
    }
  }
  while (evicted != nullptr) {
    FreeBlock* next = evicted->older;
    ReleaseBlock(evicted, evicted->bytes);
    evicted = next;
  }
#endif
}

size_t LargeBlocksKeptBytes() {
  FreeList& f = Free();
  MutexLock lock(&f.mu);
  return f.kept;
}

}  // namespace uraid
