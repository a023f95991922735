// SPDX-License-Identifier: MIT
// Example (c): your own Member backends.
//
// libraid does all member I/O through the uraid::Member interface, so a
// backend is one class: here VectorMember keeps a member in a std::vector,
// and CountingMember is a decorator that counts the I/O the array issues to
// any other member. The program builds a RAID5 array over four counted
// vector members and shows what a full-stripe write and a small write cost
// in member I/O. It exits non-zero when a check fails (ctest runs it).
//
// The contract (see uraid/member.h): every method may be called from many
// threads at once (the array never issues two overlapping writes at once,
// but reads can overlap writes); a call transfers all bytes or fails; errors
// name the member and the offset.

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "uraid/array.h"
#include "uraid/member.h"

namespace {

// A member stored in a std::vector. Readers share a lock; writers and
// discards take it exclusively (a concurrent read of bytes being written
// would otherwise be a data race on the vector).
class VectorMember final : public uraid::Member {
 public:
  VectorMember(std::string name, uint64_t size)
      : name_(std::move(name)), data_(size, 0) {}

  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    if (absl::Status s = Check("read", len, offset); !s.ok()) return s;
    std::shared_lock lock(mu_);
    std::memcpy(buf, data_.data() + offset, len);
    return absl::OkStatus();
  }
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
    if (absl::Status s = Check("write", len, offset); !s.ok()) return s;
    std::unique_lock lock(mu_);
    std::memcpy(data_.data() + offset, buf, len);
    return absl::OkStatus();
  }
  absl::Status Flush() override { return absl::OkStatus(); }  // RAM
  absl::Status Discard(size_t len, uint64_t offset) override {
    if (absl::Status s = Check("discard", len, offset); !s.ok()) return s;
    std::unique_lock lock(mu_);
    std::memset(data_.data() + offset, 0, len);
    return absl::OkStatus();
  }
  bool DiscardZeroes() const override { return true; }
  uint64_t Size() const override { return data_.size(); }
  const std::string& Name() const override { return name_; }

 private:
  absl::Status Check(const char* op, size_t len, uint64_t offset) const {
    if (offset > data_.size() || len > data_.size() - offset) {
      return absl::OutOfRangeError(absl::StrFormat(
          "%s: %s of %d bytes at %d is past the end", name_, op, len, offset));
    }
    return absl::OkStatus();
  }

  const std::string name_;
  mutable std::shared_mutex mu_;
  std::vector<uint8_t> data_;  // guarded by mu_ (the size never changes)
};

// Forwards to another member and counts what passes through.
class CountingMember final : public uraid::Member {
 public:
  struct Counts {
    std::atomic<uint64_t> reads{0}, writes{0}, flushes{0}, discards{0};
  };

  CountingMember(std::unique_ptr<uraid::Member> target,
                 std::shared_ptr<Counts> counts)
      : target_(std::move(target)), counts_(std::move(counts)) {}

  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    ++counts_->reads;
    return target_->Read(buf, len, offset);
  }
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
    ++counts_->writes;
    return target_->Write(buf, len, offset);
  }
  absl::Status Flush() override {
    ++counts_->flushes;
    return target_->Flush();
  }
  absl::Status Discard(size_t len, uint64_t offset) override {
    ++counts_->discards;
    return target_->Discard(len, offset);
  }
  bool DiscardZeroes() const override { return target_->DiscardZeroes(); }
  uint64_t Size() const override { return target_->Size(); }
  const std::string& Name() const override { return target_->Name(); }
  absl::StatusOr<uint64_t> NextDataOffset(uint64_t offset) override {
    return target_->NextDataOffset(offset);
  }

 private:
  std::unique_ptr<uraid::Member> target_;
  std::shared_ptr<Counts> counts_;  // shared with the caller, who reads it
};

constexpr int kDisks = 4;
constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kMemberBytes = 8 << 20;

int failures = 0;

void Expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

struct Totals {
  uint64_t reads = 0, writes = 0;
};

// Sums and resets the counts of every member.
Totals Take(std::vector<std::shared_ptr<CountingMember::Counts>>& counts) {
  Totals t;
  for (auto& c : counts) {
    t.reads += c->reads.exchange(0);
    t.writes += c->writes.exchange(0);
    c->flushes = 0;
    c->discards = 0;
  }
  return t;
}

}  // namespace

int main() {
  std::vector<std::shared_ptr<CountingMember::Counts>> counts;
  std::vector<std::unique_ptr<uraid::Member>> members;
  for (int i = 0; i < kDisks; ++i) {
    counts.push_back(std::make_shared<CountingMember::Counts>());
    members.push_back(std::make_unique<CountingMember>(
        std::make_unique<VectorMember>(absl::StrFormat("vec%d", i),
                                       kMemberBytes),
        counts.back()));
  }
  uraid::CreateOptions options;
  options.chunk_bytes = kChunk;
  options.assume_clean = true;  // the vectors start zeroed: parity holds
  auto created = uraid::Array::Create(std::move(members), options);
  if (!created.ok()) {
    std::fprintf(stderr, "custom_member: %s\n",
                 std::string(created.status().message()).c_str());
    return 1;
  }
  std::unique_ptr<uraid::Array> array = *std::move(created);
  const uraid::Geometry& geo = array->geometry();
  std::printf("array: %d x %s, %" PRIu64 " KiB chunks, %" PRIu64 " bytes\n",
              geo.raid_disks(),
              std::string(uraid::LayoutName(geo.layout())).c_str(),
              geo.chunk_bytes() >> 10, array->size());

  // The first write marks the array active (like md, it writes every
  // member's superblock before any data); measure what comes after it.
  std::vector<uint8_t> stripe(geo.stripe_data_bytes());
  for (size_t i = 0; i < stripe.size(); ++i) stripe[i] = uint8_t(i * 7 + 3);
  absl::Status st = array->Write(stripe.data(), stripe.size(), 0);
  if (st.ok()) st = array->Flush();
  Expect(st.ok(), "first write: " + st.ToString());
  Take(counts);

  // Each measurement is a write plus a Flush: a write is only durable after
  // Flush (or with fua), and the array may keep a partial-stripe write in
  // its stripe cache until then.

  // A full stripe: every data chunk and the parity chunk are written once;
  // nothing has to be read.
  st = array->Write(stripe.data(), stripe.size(), geo.stripe_data_bytes());
  if (st.ok()) st = array->Flush();
  Expect(st.ok(), "full-stripe write: " + st.ToString());
  Totals t = Take(counts);
  std::printf("full-stripe write: %" PRIu64 " member reads, %" PRIu64
              " member writes\n",
              t.reads, t.writes);
  Expect(t.reads == 0, "a full-stripe write reads nothing");
  Expect(t.writes == uint64_t(kDisks),
         "a full-stripe write writes each member once");

  // 4 KiB inside one chunk: the old data and parity (or the other data
  // chunks) are read, then the data chunk and parity are written.
  std::vector<uint8_t> small(4096, 0xAB);
  const uint64_t small_offset = geo.stripe_data_bytes() * 5 + 8192;
  st = array->Write(small.data(), small.size(), small_offset);
  if (st.ok()) st = array->Flush();
  Expect(st.ok(), "small write: " + st.ToString());
  t = Take(counts);
  std::printf("4 KiB write:       %" PRIu64 " member reads, %" PRIu64
              " member writes\n",
              t.reads, t.writes);
  Expect(t.writes == 2, "a small write writes the data and parity chunks");
  Expect(t.reads >= 1 && t.reads <= uint64_t(kDisks - 2),
         "a small write reads only what parity needs");

  // The data reads back, healthy and with a member failed, and the parity
  // the array computed is consistent.
  std::vector<uint8_t> back(small.size());
  st = array->Read(back.data(), back.size(), small_offset);
  Expect(st.ok() && back == small, "small write reads back");
  std::vector<uint64_t> bad;
  auto mismatches = array->CheckParity(&bad);
  Expect(mismatches.ok() && *mismatches == 0, "parity is consistent");
  Expect(array->FailSlot(geo.Map(small_offset).disk).ok(),
         "fail the member holding the small write");
  back.assign(back.size(), 0);
  st = array->Read(back.data(), back.size(), small_offset);
  Expect(st.ok() && back == small, "degraded read rebuilds it from parity");

  if (failures > 0) {
    std::printf("custom_member: %d check(s) failed\n", failures);
    return 1;
  }
  std::printf("custom_member: all checks passed\n");
  return 0;
}
