// File: uraid/member.h
//
// The storage under one array slot. libraid reads and writes raw member
// bytes (superblock at 4096, data at data_offset) only through this
// interface, so embedders can plug in their own backends (object storage,
// test fakes) and tests can inject faults.
//
// Contract for implementations:
// - Thread-safe: the array calls every method concurrently from many threads,
//   but never issues two overlapping writes at once.
// - All-or-nothing per call: Read fills all `len` bytes or fails; a short
//   transfer is an error. Offsets and lengths are in bytes from the start of
//   the raw member. Buffers may have any alignment.
// - Errors name the member and the offset, e.g. "m0.img: pread at 8192: EIO".

#ifndef URAID_MEMBER_H_
#define URAID_MEMBER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace uraid {

class Member {
 public:
  virtual ~Member() = default;

  virtual absl::Status Read(void* buf, size_t len, uint64_t offset) = 0;
  virtual absl::Status Write(const void* buf, size_t len, uint64_t offset) = 0;
  // Makes every completed write durable (fdatasync semantics).
  virtual absl::Status Flush() = 0;
  // Drops the range. Only called when DiscardZeroes() is true, and then the
  // range must read back as zeros afterwards.
  virtual absl::Status Discard(size_t len, uint64_t offset) = 0;
  // True when Discard is supported and guarantees zeros on read.
  virtual bool DiscardZeroes() const = 0;
  // Raw size in bytes.
  virtual uint64_t Size() const = 0;
  // The smallest offset >= `offset` that may hold non-zero bytes (Size()
  // when none does): lets resync skip never-written regions of sparse
  // members. Backends that cannot tell return `offset` (the default).
  virtual absl::StatusOr<uint64_t> NextDataOffset(uint64_t offset) {
    return offset;
  }
  // The name used in messages: the path or URI the user gave.
  virtual const std::string& Name() const = 0;
};

struct FileMemberOptions {
  // O_DIRECT on the member; unaligned transfers go through aligned bounce
  // buffers. Default: false (buffered).
  bool direct = false;
  // Open O_RDONLY; writes fail with FailedPrecondition.
  bool read_only = false;
  // Take an exclusive flock() so a second server cannot open the member.
  bool lock = true;
};

// Opens a regular file or block device. Size comes from fstat or
// BLKGETSIZE64; Flush is fdatasync; Discard is FALLOC_FL_PUNCH_HOLE (files)
// or BLKDISCARD (only when the device reports discard-zeroes).
absl::StatusOr<std::unique_ptr<Member>> OpenFileMember(
    const std::string& path, const FileMemberOptions& options = {});

// A zero-filled member in memory, for tests and embedding. Thread-safe.
std::unique_ptr<Member> NewMemoryMember(std::string name, uint64_t size);

// A non-owning handle: forwards every call to `target`, which outlives it by
// shared ownership. Lets a test stop an array and assemble the same
// in-memory members again.
std::unique_ptr<Member> ShareMember(std::shared_ptr<Member> target);

// A member that forwards to `target` until failed: then every call returns
// an I/O error naming the member. Thread-safe; SetFailed may be called at
// any time from any thread.
class FaultyMember : public Member {
 public:
  explicit FaultyMember(std::shared_ptr<Member> target);
  void SetFailed(bool failed);
  bool failed() const;

  absl::Status Read(void* buf, size_t len, uint64_t offset) override;
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override;
  absl::Status Flush() override;
  absl::Status Discard(size_t len, uint64_t offset) override;
  bool DiscardZeroes() const override;
  uint64_t Size() const override;
  const std::string& Name() const override;
  absl::StatusOr<uint64_t> NextDataOffset(uint64_t offset) override;

 private:
  absl::Status Check(const char* op, uint64_t offset) const;
  std::shared_ptr<Member> target_;
  std::atomic<bool> failed_{false};
};

}  // namespace uraid

#endif  // URAID_MEMBER_H_
