// SPDX-License-Identifier: MIT
// Internal: an owned, 4 KiB-aligned byte buffer (suits O_DIRECT and every
// ISA-L kernel). Move-only. Not thread-safe; one owner at a time. Large
// buffers come from base/large_buffers.h (which says why), small ones
// from aligned_alloc.

#ifndef URAID_SRC_ALIGNED_BUFFER_H_
#define URAID_SRC_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "base/large_buffers.h"

namespace uraid {

inline constexpr size_t kBufferAlign = 4096;

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Zero-filled when `zero` is set, else uninitialised. `pages`: how a
  // large block is backed (BlockPages says which buffers want kHuge).
  explicit AlignedBuffer(size_t size, bool zero = false,
                         BlockPages pages = BlockPages::kBase)
      : size_(size) {
    if (size == 0) return;
    const size_t rounded = Rounded(size);
    data_ =
        static_cast<uint8_t*>(rounded >= kLargeBlockBytes
                                  ? AllocLargeBlock(rounded, pages)
                                  : std::aligned_alloc(kBufferAlign, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    // A recycled large block holds its last user's bytes.
    if (zero) std::memset(data_, 0, rounded);
  }
  // A buffer a job fills whole, again and again (a reshape's windows, a
  // rebuild's chunk window, a job thread's scratch): on huge pages where
  // it is at least one long (BlockPages::kHuge says why).
  static AlignedBuffer FilledWhole(size_t size) {
    return AlignedBuffer(size, /*zero=*/false, BlockPages::kHuge);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() {
    if (data_ == nullptr) return;
    const size_t rounded = Rounded(size_);
    if (rounded >= kLargeBlockBytes) {
      FreeLargeBlock(data_, rounded);
    } else {
      std::free(data_);
    }
  }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  static size_t Rounded(size_t size) {
    return (size + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
  }
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Scratch space for the background jobs (rebuild, scrub, resync), which
// work stripe after stripe with buffers of one size: allocating and freeing
// a multi-megabyte buffer per stripe costs more than the XOR (page faults
// and munmap on every stripe). Only a thread that called
// EnableThreadScratch() keeps its buffers; elsewhere (client threads, of
// which nbdkit has many) the buffer is the caller's own and freed as usual.
// `user` keeps apart the callers that can be active at once on one thread
// (a scan whose read error is corrected by a reconstruction).
enum class ScratchUser { kReconstruct = 0, kScan = 1 };

class ScratchOrOwned {
 public:
  static void EnableThreadScratch() { enabled() = true; }
  ScratchOrOwned(ScratchUser user, size_t size) {
    if (!enabled()) {
      owned_ = AlignedBuffer(size);
      data_ = owned_.data();
      return;
    }
    thread_local AlignedBuffer bufs[2];
    AlignedBuffer& b = bufs[static_cast<int>(user)];
    if (b.size() < size) b = AlignedBuffer::FilledWhole(size);
    data_ = b.data();
  }
  uint8_t* data() { return data_; }

 private:
  static bool& enabled() {
    thread_local bool on = false;
    return on;
  }
  AlignedBuffer owned_;
  uint8_t* data_ = nullptr;
};

}  // namespace uraid

#endif  // URAID_SRC_ALIGNED_BUFFER_H_
