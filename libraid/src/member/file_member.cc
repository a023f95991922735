// SPDX-License-Identifier: MIT
// File and block-device members: pread/pwrite on one fd shared by all
// threads (positional I/O needs no lock), optional O_DIRECT with aligned
// bounce buffers, fdatasync for flush, hole punching for discard.

#include "member/file_member.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
#include "base/status_macros.h"
#include "member/data_extent_cache.h"
#include "member/vector_bytes.h"
#include "uraid/member.h"
#include "uraid/status_errno.h"

namespace uraid {
namespace {

// O_DIRECT transfers must be aligned to the logical block size; 4096 covers
// every device and filesystem we meet.
constexpr uint64_t kDirectAlign = 4096;

// Range check shared by the I/O methods; names the member and request.
#define RETURN_IF_BAD_RANGE(op, len, offset)                                \
  do {                                                                      \
    if ((offset) > size_ || (len) > size_ - (offset)) {                     \
      return absl::OutOfRangeError(absl::StrFormat(                         \
          "%s: %s of %d bytes at %d is past the end (%d bytes)", name_, op, \
          (len), (offset), size_));                                         \
    }                                                                       \
  } while (0)

class FileMember final : public Member {
 public:
  FileMember(std::string name, int fd, uint64_t size, bool direct,
             bool is_block, bool read_only)
      : name_(std::move(name)),
        fd_(fd),
        size_(size),
        direct_(direct),
        is_block_(is_block),
        read_only_(read_only),
        watch_size_(!is_block && WholeAtOpen(fd, size)) {}
  ~FileMember() override { ::close(fd_); }

  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    RETURN_IF_BAD_RANGE("read", len, offset);
    if (direct_ && !Aligned(buf, len, offset)) {
      const iovec v{buf, len};
      return BounceRead({&v, 1}, len, offset);
    }
    return RawRead(buf, len, offset);
  }
  bool ReadVectorIsOneCall() const override { return true; }
  // One preadv (per IOV_MAX buffers), where Read would take a pread per
  // buffer: on memory-speed members the system call, not the copy, is most
  // of a small read's cost.
  absl::Status ReadVector(std::span<const iovec> iov,
                          uint64_t offset) override {
    bool aligned = true;
    const uint64_t len = VectorBytes(
        iov, offset,
        [](const iovec& v, uint64_t at) {
          return Aligned(v.iov_base, v.iov_len, at);
        },
        &aligned);
    RETURN_IF_BAD_RANGE("read", len, offset);
    if (direct_ && !aligned) return BounceRead(iov, len, offset);
    return Transfer(ReadIov, "preadv", iov, offset);
  }

  // A file truncated under the array would silently grow back with holes
  // (reads of zeros where data was): Write refuses, so the member fails on
  // its first write after the truncation. One fstat per write.
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
    return StoreAt(buf, len, offset, /*check_size=*/true);
  }
  // The range was just read in full (Member::Rewrite): the file held it,
  // which is what the fstat would tell. A truncation since then has the
  // window the fstat has between it and the pwrite. Saves a system call
  // per member write of every read-modify-write (a quarter of the
  // array's 4 KiB random-write rate on memory-speed members).
  absl::Status Rewrite(const void* buf, size_t len, uint64_t offset) override {
    return StoreAt(buf, len, offset, /*check_size=*/false);
  }

  absl::Status WriteFua(const void* buf, size_t len, uint64_t offset) override {
    return DurableWrite(buf, len, offset, /*check_size=*/true);
  }
  absl::Status RewriteFua(const void* buf, size_t len,
                          uint64_t offset) override {
    return DurableWrite(buf, len, offset, /*check_size=*/false);
  }

  absl::Status Flush() override {
    if (::fdatasync(fd_) != 0) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrFormat("%s: fdatasync", name_));
    }
    // A flush is where a write after a truncation would otherwise pass for
    // durable: the file grew back with holes where data was.
    return CheckSize();
  }

  absl::Status Discard(size_t len, uint64_t offset) override {
    RETURN_IF_BAD_RANGE("discard", len, offset);
    if (is_block_) {
      return absl::UnimplementedError(
          absl::StrFormat("%s: discard does not guarantee zeros", name_));
    }
    known_data_.Forget(offset, len);
    if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    static_cast<off_t>(offset), static_cast<off_t>(len)) != 0) {
      return absl::ErrnoToStatus(
          errno,
          absl::StrFormat("%s: punch hole at %d+%d", name_, offset, len));
    }
    return absl::OkStatus();
  }

  bool DiscardZeroes() const override { return !is_block_ && !read_only_; }

  absl::StatusOr<uint64_t> NextDataOffset(uint64_t offset) override {
    if (is_block_ || offset >= size_) return offset;
    if (known_data_.Contains(offset)) return offset;
    off_t r = ::lseek(fd_, static_cast<off_t>(offset), SEEK_DATA);
    if (r < 0) {
      if (errno == ENXIO) return size_;  // only holes from here on
      return offset;  // cannot tell (e.g. no SEEK_DATA support)
    }
    // Learn where this data ends, so the probes of the stripes that
    // follow cost nothing (SEEK_* on tmpfs walks pages).
    const off_t hole = ::lseek(fd_, r, SEEK_HOLE);
    if (hole > r) {
      known_data_.Remember(static_cast<uint64_t>(r),
                           static_cast<uint64_t>(hole));
    }
    return static_cast<uint64_t>(r);
  }
  uint64_t Size() const override { return size_; }
  const std::string& Name() const override { return name_; }

 private:
  // Whether the file held all `size` bytes when opened: only then is a
  // shorter file a truncation (a bitmap file being created grows into its
  // size by writes; AdoptFileMember).
  static bool WholeAtOpen(int fd, uint64_t size) {
    struct stat st;
    return ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
           static_cast<uint64_t>(st.st_size) >= size;
  }
  // OutOfRange when the regular file is now shorter than it was at open
  // (truncated or replaced under the array): not a bad sector to rewrite
  // but a member that lost its data, which the array fails at once.
  absl::Status CheckSize() const {
    struct stat st;
    if (!watch_size_ || ::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) >= size_) {
      return absl::OkStatus();
    }
    return absl::OutOfRangeError(absl::StrFormat(
        "%s: the file shrank to %d bytes (it had %d): truncated under the "
        "array",
        name_, st.st_size, size_));
  }

  // WriteFua, or RewriteFua without `check_size` (see Rewrite).
  absl::Status DurableWrite(const void* buf, size_t len, uint64_t offset,
                            bool check_size) {
    if (read_only_ || (direct_ && !Aligned(buf, len, offset)) ||
        !dsync_writes_.load(std::memory_order_relaxed)) {
      return check_size ? Member::WriteFua(buf, len, offset)
                        : Member::RewriteFua(buf, len, offset);
    }
    RETURN_IF_BAD_RANGE("write", len, offset);
    if (check_size) {
      if (absl::Status shrank = CheckSize(); !shrank.ok()) return shrank;
    }
    const iovec v{const_cast<void*>(buf), len};
    absl::Status st =
        Transfer(DsyncWriteIov, "pwritev2(RWF_DSYNC)", {&v, 1}, offset);
    if (absl::IsUnimplemented(st) || absl::IsInvalidArgument(st)) {
      // EOPNOTSUPP or EINVAL: a kernel or filesystem without RWF_DSYNC.
      // Nothing was written; from now on this member writes then flushes.
      dsync_writes_.store(false, std::memory_order_relaxed);
      return check_size ? Member::WriteFua(buf, len, offset)
                        : Member::RewriteFua(buf, len, offset);
    }
    return st;
  }

  // Write, or Rewrite without `check_size`.
  absl::Status StoreAt(const void* buf, size_t len, uint64_t offset,
                       bool check_size) {
    if (read_only_) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: member is open read-only", name_));
    }
    RETURN_IF_BAD_RANGE("write", len, offset);
    if (check_size) {
      if (absl::Status shrank = CheckSize(); !shrank.ok()) return shrank;
    }
    if (direct_ && !Aligned(buf, len, offset)) {
      return BounceWrite(static_cast<const uint8_t*>(buf), len, offset);
    }
    return RawWrite(buf, len, offset);
  }

  static bool Aligned(const void* buf, size_t len, uint64_t offset) {
    return reinterpret_cast<uintptr_t>(buf) % kDirectAlign == 0 &&
           len % kDirectAlign == 0 && offset % kDirectAlign == 0;
  }

  absl::Status RawRead(void* buf, size_t len, uint64_t offset) {
    const iovec v{buf, len};
    return Transfer(ReadIov, "pread", {&v, 1}, offset);
  }

  absl::Status RawWrite(const void* buf, size_t len, uint64_t offset) {
    const iovec v{const_cast<void*>(buf), len};
    return Transfer(WriteIov, "pwrite", {&v, 1}, offset);
  }

  // The system calls Transfer makes, each in preadv's shape: one buffer
  // goes as pread or pwrite (no vector to copy in), more as their vector
  // forms; writes with RWF_DSYNC are durable on return, in one call.
  static ssize_t ReadIov(int fd, const iovec* v, int n, off_t off) {
    return n == 1 ? ::pread(fd, v->iov_base, v->iov_len, off)
                  : ::preadv(fd, v, n, off);
  }
  static ssize_t WriteIov(int fd, const iovec* v, int n, off_t off) {
    return n == 1 ? ::pwrite(fd, v->iov_base, v->iov_len, off)
                  : ::pwritev(fd, v, n, off);
  }
  static ssize_t DsyncWriteIov(int fd, const iovec* v, int n, off_t off) {
    return ::pwritev2(fd, v, n, off, RWF_DSYNC);
  }

  // Moves every byte of `iov`, in order from `offset`, with `io` (one of
  // the above; at most IOV_MAX buffers a call), retrying EINTR and short
  // transfers, which may stop anywhere, even inside a buffer. A call that
  // moves nothing meets the end of the file: an error that says whether
  // the file shrank under the array.
  template <typename Io>
  absl::Status Transfer(Io io, const char* op, std::span<const iovec> iov,
                        uint64_t offset) {
    // What remains: left[at..], its first buffer trimmed to the bytes
    // still wanted.
    absl::InlinedVector<iovec, 16> left(iov.begin(), iov.end());
    size_t at = 0;
    const auto skip_empty = [&] {
      while (at < left.size() && left[at].iov_len == 0) ++at;
    };
    skip_empty();
    while (at < left.size()) {
      const int n_iov =
          static_cast<int>(std::min<size_t>(left.size() - at, IOV_MAX));
      ssize_t n = io(fd_, &left[at], n_iov, static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return absl::ErrnoToStatus(
            errno, absl::StrFormat("%s: %s at %d", name_, op, offset));
      }
      if (n == 0) {
        if (absl::Status shrank = CheckSize(); !shrank.ok()) return shrank;
        return absl::DataLossError(absl::StrFormat(
            "%s: %s at %d: unexpected end of member", name_, op, offset));
      }
      offset += static_cast<uint64_t>(n);
      for (size_t done = static_cast<size_t>(n); done > 0;) {
        iovec& v = left[at];
        const size_t step = std::min(done, v.iov_len);
        v.iov_base = static_cast<uint8_t*>(v.iov_base) + step;
        v.iov_len -= step;
        done -= step;
        if (v.iov_len == 0) ++at;
      }
      skip_empty();
    }
    return absl::OkStatus();
  }

  // The aligned window [start, end) that covers [offset, offset+len).
  static void Window(size_t len, uint64_t offset, uint64_t* start,
                     uint64_t* end) {
    *start = offset / kDirectAlign * kDirectAlign;
    *end = (offset + len + kDirectAlign - 1) / kDirectAlign * kDirectAlign;
  }

  // One aligned read of the window around [offset, offset + len), then
  // each buffer of `iov` (`len` bytes in all) its part.
  absl::Status BounceRead(std::span<const iovec> iov, size_t len,
                          uint64_t offset) {
    uint64_t start, end;
    Window(len, offset, &start, &end);
    AlignedBuffer bounce(end - start);
    RETURN_IF_ERROR(RawRead(bounce.data(), end - start, start));
    const uint8_t* from = bounce.data() + (offset - start);
    for (const iovec& v : iov) {
      std::memcpy(v.iov_base, from, v.iov_len);
      from += v.iov_len;
    }
    return absl::OkStatus();
  }

  // Read-modify-write of the partial blocks at the edges. Safe because the
  // array never issues overlapping writes to one member at once, and its
  // writes never share a 4 KiB block across stripes (chunks are >= 4 KiB).
  absl::Status BounceWrite(const uint8_t* buf, size_t len, uint64_t offset) {
    uint64_t start, end;
    Window(len, offset, &start, &end);
    AlignedBuffer bounce(end - start);
    if (start != offset) {
      absl::Status s = RawRead(bounce.data(), kDirectAlign, start);
      if (!s.ok()) return s;
    }
    if ((offset + len) % kDirectAlign != 0 &&
        (end - kDirectAlign != start || start == offset)) {
      absl::Status s = RawRead(bounce.data() + (end - start - kDirectAlign),
                               kDirectAlign, end - kDirectAlign);
      if (!s.ok()) return s;
    }
    std::memcpy(bounce.data() + (offset - start), buf, len);
    return RawWrite(bounce.data(), end - start, start);
  }

  const std::string name_;
  const int fd_;
  const uint64_t size_;
  const bool direct_;
  const bool is_block_;
  const bool read_only_;
  const bool watch_size_;  // WholeAtOpen: CheckSize applies
  // WriteFua uses RWF_DSYNC until the kernel or filesystem refuses it.
  std::atomic<bool> dsync_writes_{true};
  // The last data extent NextDataOffset learned (one lseek pair per extent).
  DataExtentCache known_data_;
};

}  // namespace

std::unique_ptr<Member> AdoptFileMember(std::string name, int fd, uint64_t size,
                                        bool read_only) {
  return std::make_unique<FileMember>(std::move(name), fd, size,
                                      /*direct=*/false, /*is_block=*/false,
                                      read_only);
}

absl::StatusOr<std::unique_ptr<Member>> OpenFileMember(
    const std::string& path, const FileMemberOptions& options) {
  // Look before opening: opening a FIFO blocks until a writer appears.
  struct stat pre;
  if (::stat(path.c_str(), &pre) == 0 && !S_ISREG(pre.st_mode) &&
      !S_ISBLK(pre.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s, not a regular file or block device", path,
                        S_ISDIR(pre.st_mode)    ? "is a directory"
                        : S_ISFIFO(pre.st_mode) ? "is a FIFO"
                        : S_ISSOCK(pre.st_mode) ? "is a socket"
                        : S_ISCHR(pre.st_mode)  ? "is a character device"
                                                : "unsupported file type"));
  }
  int flags = (options.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;
  if (options.direct) flags |= O_DIRECT;
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    int err = errno;
    if (err == EISDIR) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: is a directory, not a file or block device", path));
    }
    if (err == EINVAL && options.direct) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: O_DIRECT not supported on this filesystem (use direct=false)",
          path));
    }
    return absl::ErrnoToStatus(err, absl::StrFormat("%s: open", path));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return absl::ErrnoToStatus(err, absl::StrFormat("%s: fstat", path));
  }
  uint64_t size = 0;
  bool is_block = false;
  if (S_ISREG(st.st_mode)) {
    size = static_cast<uint64_t>(st.st_size);
  } else if (S_ISBLK(st.st_mode)) {
    is_block = true;
    if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
      int err = errno;
      ::close(fd);
      return absl::ErrnoToStatus(err,
                                 absl::StrFormat("%s: BLKGETSIZE64", path));
    }
  } else {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: %s, not a regular file or block device", path,
        S_ISDIR(st.st_mode) ? "is a directory" : "unsupported file type"));
  }
  if (options.lock && ::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return WithErrno(absl::FailedPreconditionError(absl::StrFormat(
                           "%s: member is in use by another uraid process "
                           "(locked)",
                           path)),
                       EBUSY);
    }
    return absl::ErrnoToStatus(err, absl::StrFormat("%s: flock", path));
  }
  return std::unique_ptr<Member>(new FileMember(path, fd, size, options.direct,
                                                is_block, options.read_only));
}

}  // namespace uraid
