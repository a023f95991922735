// SPDX-License-Identifier: MIT
#include "base/large_buffers.h"

#include <sys/mman.h>

#include <cstdlib>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/sync.h"

namespace uraid {
namespace {

// Free blocks by size. Requests come in a handful of sizes (chunk, stripe,
// their multiples), so exact-size lists find a match nearly always.
struct FreeList {
  Mutex mu;
  absl::flat_hash_map<size_t, std::vector<void*>> by_size ABSL_GUARDED_BY(mu);
  size_t kept ABSL_GUARDED_BY(mu) = 0;
};

FreeList& Free() {
  static FreeList* list = new FreeList;  // never destroyed: used at exit
  return *list;
}

}  // namespace

void* AllocLargeBlock(size_t bytes) {
#ifdef URAID_LARGE_BLOCKS_FROM_MALLOC
  return std::aligned_alloc(4096, bytes);
#else
  {
    FreeList& f = Free();
    MutexLock lock(&f.mu);
    auto it = f.by_size.find(bytes);
    if (it != f.by_size.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      f.kept -= bytes;
      return p;
    }
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
#endif
}

void FreeLargeBlock(void* p, size_t bytes) {
  if (p == nullptr) return;
#ifdef URAID_LARGE_BLOCKS_FROM_MALLOC
  std::free(p);
#else
  {
    FreeList& f = Free();
    MutexLock lock(&f.mu);
    if (f.kept + bytes <= kLargeKeepBytes) {
      f.by_size[bytes].push_back(p);
      f.kept += bytes;
      return;
    }
  }
  munmap(p, bytes);
#endif
}

size_t LargeBlocksKeptBytes() {
  FreeList& f = Free();
  MutexLock lock(&f.mu);
  return f.kept;
}

}  // namespace uraid
