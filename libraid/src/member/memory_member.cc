// SPDX-License-Identifier: MIT
// In-memory members and the sharing decorator (fault injection:
// faulty_member.cc).

#include <sys/uio.h>

#include <cstring>
#include <span>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/sync.h"
#include "uraid/member.h"

namespace uraid {
namespace {

absl::Status RangeCheck(const std::string& name, const char* op, size_t len,
                        uint64_t offset, uint64_t size) {
  if (offset > size || len > size - offset) {
    return absl::OutOfRangeError(
        absl::StrFormat("%s: %s of %d bytes at %d is past the end (%d bytes)",
                        name, op, len, offset, size));
  }
  return absl::OkStatus();
}

// One mutex for the whole store: concurrent reads and writes of the same
// bytes are legal for a block device but would be a data race on the
// vector; test members do not need more parallelism than this.
class MemoryMember final : public Member {
 public:
  MemoryMember(std::string name, uint64_t size)
      : name_(std::move(name)), size_(size), data_(size, 0) {}

  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    absl::Status s = RangeCheck(name_, "read", len, offset, size_);
    if (!s.ok()) return s;
    MutexLock lock(&mu_);
    std::memcpy(buf, data_.data() + offset, len);
    return absl::OkStatus();
  }
  // One lock for the whole vector.
  absl::Status ReadVector(std::span<const iovec> iov,
                          uint64_t offset) override {
    size_t len = 0;
    for (const iovec& v : iov) len += v.iov_len;
    absl::Status s = RangeCheck(name_, "read", len, offset, size_);
    if (!s.ok()) return s;
    MutexLock lock(&mu_);
    for (const iovec& v : iov) {
      std::memcpy(v.iov_base, data_.data() + offset, v.iov_len);
      offset += v.iov_len;
    }
    return absl::OkStatus();
  }
  bool ReadVectorIsOneCall() const override { return true; }
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
    absl::Status s = RangeCheck(name_, "write", len, offset, size_);
    if (!s.ok()) return s;
    MutexLock lock(&mu_);
    std::memcpy(data_.data() + offset, buf, len);
    return absl::OkStatus();
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  absl::Status Discard(size_t len, uint64_t offset) override {
    absl::Status s = RangeCheck(name_, "discard", len, offset, size_);
    if (!s.ok()) return s;
    MutexLock lock(&mu_);
    std::memset(data_.data() + offset, 0, len);
    return absl::OkStatus();
  }
  bool DiscardZeroes() const override { return true; }
  uint64_t Size() const override { return size_; }
  const std::string& Name() const override { return name_; }

 private:
  const std::string name_;
  const uint64_t size_;
  Mutex mu_;
  std::vector<uint8_t> data_ ABSL_GUARDED_BY(mu_);
};

class SharedMember final : public Member {
 public:
  explicit SharedMember(std::shared_ptr<Member> t) : t_(std::move(t)) {}
  absl::Status Read(void* b, size_t l, uint64_t o) override {
    return t_->Read(b, l, o);
  }
  absl::Status ReadVector(std::span<const iovec> v, uint64_t o) override {
    return t_->ReadVector(v, o);
  }
  bool ReadVectorIsOneCall() const override {
    return t_->ReadVectorIsOneCall();
  }
  absl::Status Write(const void* b, size_t l, uint64_t o) override {
    return t_->Write(b, l, o);
  }
  absl::Status Rewrite(const void* b, size_t l, uint64_t o) override {
    return t_->Rewrite(b, l, o);
  }
  absl::Status WriteFua(const void* b, size_t l, uint64_t o) override {
    return t_->WriteFua(b, l, o);
  }
  absl::Status RewriteFua(const void* b, size_t l, uint64_t o) override {
    return t_->RewriteFua(b, l, o);
  }
  absl::Status Flush() override { return t_->Flush(); }
  absl::Status Discard(size_t l, uint64_t o) override {
    return t_->Discard(l, o);
  }
  bool DiscardZeroes() const override { return t_->DiscardZeroes(); }
  absl::StatusOr<uint64_t> NextDataOffset(uint64_t o) override {
    return t_->NextDataOffset(o);
  }
  uint64_t Size() const override { return t_->Size(); }
  const std::string& Name() const override { return t_->Name(); }

 private:
  std::shared_ptr<Member> t_;
};

}  // namespace

std::unique_ptr<Member> NewMemoryMember(std::string name, uint64_t size) {
  return std::make_unique<MemoryMember>(std::move(name), size);
}

std::unique_ptr<Member> ShareMember(std::shared_ptr<Member> target) {
  return std::make_unique<SharedMember>(std::move(target));
}

}  // namespace uraid
