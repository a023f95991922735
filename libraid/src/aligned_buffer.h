// Internal: an owned, 4 KiB-aligned byte buffer (suits O_DIRECT and every
// ISA-L kernel). Move-only. Not thread-safe; one owner at a time.

#ifndef URAID_SRC_ALIGNED_BUFFER_H_
#define URAID_SRC_ALIGNED_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace uraid {

inline constexpr size_t kBufferAlign = 4096;

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Zero-filled when `zero` is set, else uninitialised.
  explicit AlignedBuffer(size_t size, bool zero = false) : size_(size) {
    if (size == 0) return;
    size_t rounded = (size + kBufferAlign - 1) / kBufferAlign * kBufferAlign;
    data_ = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlign, rounded));
    if (data_ == nullptr) throw std::bad_alloc();
    if (zero) std::memset(data_, 0, rounded);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(data_); }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace uraid

#endif  // URAID_SRC_ALIGNED_BUFFER_H_
