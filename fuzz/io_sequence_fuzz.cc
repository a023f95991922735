// SPDX-License-Identifier: MIT
// libFuzzer target: an in-memory array driven by a decoded sequence of
// operations, checked against a flat reference buffer.
//
// The input picks a small shape (level 4/5, any layout, 3..5 disks, 4..16
// KiB chunks, 2..8 stripes, stripe cache off/tiny/default, maybe created
// degraded or with a parity pass) and then up to 64 operations: write, read,
// zero, trim, flush, requests past the end, a member failing (I/O errors),
// a slot failed by request, a clean stop and re-assembly (members in any
// order; a gone member offered back must be refused, writing nothing), a
// crash (members cut back to a snapshot taken after a flush, then assembled
// dirty: refused while degraded unless forced, resynced otherwise), a
// parity check, a cache resize, a spare added to a degraded array and
// rebuilt onto or a member replaced by a copy (with reads and writes while
// the job runs), and a second member failing (the array must then fail
// cleanly).
//
// Abort (a crash for libFuzzer) when: a read differs from the reference; a
// request that must succeed fails; a request past the end succeeds; parity
// is inconsistent on a healthy array after a clean stop, a flush or a
// resync; a refused assembly changed member bytes; a failed array accepts
// a write (its reads may succeed only where every byte is on a working
// member, and must then be right); or a rebuild or replace does not end
// with the new member active in its slot.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "fuzz_check.h"
#include "fuzzer/FuzzedDataProvider.h"
#include "uraid/array.h"
#include "uraid/member.h"

namespace {

#define FUZZ_CHECK_OK(expr)                                              \
  do {                                                                   \
    const absl::Status _st = (expr);                                     \
    if (!_st.ok()) {                                                     \
      std::fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, \
                   #expr, std::string(_st.ToString()).c_str());          \
      std::abort();                                                      \
    }                                                                    \
  } while (0)

using uraid::Array;
using uraid::ArrayInfo;
using uraid::Member;
using uraid::SlotState;

constexpr uint64_t kDataOffset = 8192;
constexpr int kMaxOps = 64;

// The stripe cache arrived after this target was written; set it where the
// options have it, so the target builds with and without it.
template <typename Options>
void SetCache(Options& o, uint64_t bytes) {
  if constexpr (requires { o.cache.bytes; }) o.cache.bytes = bytes;
}
template <typename A>
void ResizeCache(A& a, uint64_t bytes) {
  if constexpr (requires { a.SetCacheBytes(bytes); }) a.SetCacheBytes(bytes);
}

void Fill(std::vector<uint8_t>& buf, uint32_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint8_t& b : buf) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<uint8_t>(x);
  }
}

class Run {
 public:
  explicit Run(FuzzedDataProvider& in) : in_(in) {}

  // Returns false when the input does not describe a run worth doing.
  bool Create() {
    level_ = in_.ConsumeBool() ? 4 : 5;
    layout_ =
        level_ == 4
            ? uraid::Layout::kParityLast
            : static_cast<uraid::Layout>(in_.ConsumeIntegralInRange<int>(0, 5));
    chunk_ = uint64_t{4096} << in_.ConsumeIntegralInRange<int>(0, 2);
    disks_ = in_.ConsumeIntegralInRange<int>(3, 5);
    const uint64_t stripes = in_.ConsumeIntegralInRange<uint64_t>(2, 8);
    // Bytes past the last whole chunk, which the array must not use.
    const uint64_t slack = in_.ConsumeIntegralInRange<uint64_t>(0, chunk_ - 1);
    member_bytes_ = stripes * chunk_;
    switch (in_.ConsumeIntegralInRange<int>(0, 2)) {
      case 0:
        cache_ = 0;
        break;
      case 1:  // four stripes: constant eviction
        cache_ = 4 * chunk_ * (disks_ - 1);
        break;
      default:
        cache_ = 64ull << 20;
    }
    for (int i = 0; i < disks_; ++i) {
      auto mem = std::shared_ptr<Member>(uraid::NewMemoryMember(
          absl::StrFormat("m%d", i), kDataOffset + member_bytes_ + slack));
      mem_.push_back(mem);
      faulty_.push_back(std::make_shared<uraid::FaultyMember>(mem));
    }

    uraid::CreateOptions o;
    o.level = level_;
    o.layout = layout_;
    o.chunk_bytes = chunk_;
    o.data_offset_bytes = kDataOffset;
    // 0 = what the members allow: the slack must be rounded away.
    o.member_bytes = in_.ConsumeBool() ? member_bytes_ : 0;
    o.assume_clean = in_.ConsumeBool();
    // No write-intent bitmap: it needs room before the data (bitmap_fuzz
    // covers its format).
    o.bitmap = uraid::BitmapMode::kNone;
    SetCache(o, cache_);
    const int missing =
        in_.ConsumeBool() ? in_.ConsumeIntegralInRange<int>(0, disks_ - 1) : -1;
    std::vector<std::unique_ptr<Member>> v;
    for (int i = 0; i < disks_; ++i) {
      v.push_back(i == missing ? nullptr : uraid::ShareMember(faulty_[i]));
    }
    auto a = Array::Create(std::move(v), o);
    FUZZ_CHECK_OK(a.status());
    array_ = std::move(*a);
    Unthrottle();
    FUZZ_CHECK(array_->size() == member_bytes_ * (disks_ - 1));
    ref_.assign(array_->size(), 0);
    gone_ = missing;
    FUZZ_CHECK(array_->Info().degraded == (missing >= 0));
    if (missing < 0) CheckParity();
    return true;
  }

  // One operation; false ends the run.
  bool Step() {
    switch (in_.ConsumeIntegralInRange<int>(0, 15)) {
      case 0:
      case 1:
      case 2:
      case 3:
        Write();
        return true;
      case 4:
      case 5:
      case 6:
        Read();
        return true;
      case 7:
        Zero();
        return true;
      case 8:
        Trim();
        return true;
      case 9:
        FUZZ_CHECK_OK(array_->Flush());
        return true;
      case 10:
        PastTheEnd();
        return true;
      case 11:
        FailOne();
        return true;
      case 12:
        Reassemble();
        return true;
      case 13:
        Crash();
        return true;
      case 14:
        if (in_.ConsumeBool()) {
          CheckParity();
        } else {
          ResizeCache(*array_, in_.ConsumeBool() ? 0 : cache_);
        }
        return true;
      default:
        switch (in_.ConsumeIntegralInRange<int>(0, 3)) {
          case 0:
            FailSecond();
            return false;
          case 1:
            MemberChange();
            return true;
          default:
            Read();
            return true;
        }
    }
  }

  // Jobs at memory speed: md's minimum while clients are busy (1 MB/s)
  // would make every rebuild here take a tenth of a second.
  void Unthrottle() {
    array_->SetSpeedLimits({.min_kib_s = 1 << 30, .max_kib_s = 1 << 30});
  }

  void VerifyAll() {
    std::vector<uint8_t> got(ref_.size());
    FUZZ_CHECK_OK(array_->Read(got.data(), got.size(), 0));
    FUZZ_CHECK(got == ref_);
  }

 private:
  // Lengths: empty, sub-sector, small, a chunk, a stripe, anything.
  void Range(uint64_t* len, uint64_t* off) {
    const uint64_t sd = chunk_ * (disks_ - 1);
    uint64_t l;
    switch (in_.ConsumeIntegralInRange<int>(0, 5)) {
      case 0:
        l = in_.ConsumeIntegralInRange<uint64_t>(0, 600);
        break;
      case 1:
        l = 4096 * in_.ConsumeIntegralInRange<uint64_t>(1, 4);
        break;
      case 2:
        l = chunk_;
        break;
      case 3:
        l = sd * in_.ConsumeIntegralInRange<uint64_t>(1, 2);
        break;
      default:
        l = in_.ConsumeIntegralInRange<uint64_t>(1, 3 * sd);
    }
    l = std::min<uint64_t>(l, ref_.size());
    uint64_t o = in_.ConsumeIntegralInRange<uint64_t>(0, ref_.size() - l);
    if (in_.ConsumeBool()) o -= o % 4096;
    *len = l;
    *off = o;
  }

  void Write() {
    uint64_t len, off;
    Range(&len, &off);
    std::vector<uint8_t> data(len);
    Fill(data, in_.ConsumeIntegral<uint32_t>());
    const bool fua = in_.ConsumeBool();
    FUZZ_CHECK_OK(array_->Write(data.data(), len, off, fua));
    std::copy(data.begin(), data.end(), ref_.begin() + off);
  }

  void Read() {
    uint64_t len, off;
    Range(&len, &off);
    std::vector<uint8_t> got(len, 0xA5);
    FUZZ_CHECK_OK(array_->Read(got.data(), len, off));
    FUZZ_CHECK(std::equal(got.begin(), got.end(), ref_.begin() + off));
  }

  void Zero() {
    uint64_t len, off;
    Range(&len, &off);
    FUZZ_CHECK_OK(array_->Zero(len, off, in_.ConsumeBool()));
    std::fill_n(ref_.begin() + off, len, 0);
  }

  void Trim() {
    uint64_t len, off;
    Range(&len, &off);
    FUZZ_CHECK_OK(array_->Trim(len, off, in_.ConsumeBool()));
    // Memory members discard to zeros, so whole stripes inside the range
    // read back as zeros; partial stripes keep their data.
    const uint64_t sd = chunk_ * (disks_ - 1);
    for (uint64_t s = (off + sd - 1) / sd; s < (off + len) / sd; ++s) {
      std::fill_n(ref_.begin() + s * sd, sd, 0);
    }
  }

  void PastTheEnd() {
    const uint64_t size = ref_.size();
    const uint64_t len = in_.ConsumeIntegralInRange<uint64_t>(1, 3 * chunk_);
    const uint64_t off =
        in_.ConsumeBool()
            ? size - std::min<uint64_t>(
                         size, in_.ConsumeIntegralInRange<uint64_t>(0, len - 1))
            : in_.ConsumeIntegral<uint64_t>() | (uint64_t{1} << 63);
    std::vector<uint8_t> buf(len, 0x5A);
    absl::Status st;
    switch (in_.ConsumeIntegralInRange<int>(0, 3)) {
      case 0:
        st = array_->Write(buf.data(), len, off, false);
        break;
      case 1:
        st = array_->Read(buf.data(), len, off);
        break;
      case 2:
        st = array_->Zero(len, off, false);
        break;
      default:
        st = array_->Trim(len, off, false);
    }
    FUZZ_CHECK(!st.ok());
    FUZZ_CHECK(st.code() == absl::StatusCode::kInvalidArgument ||
               st.code() == absl::StatusCode::kOutOfRange);
  }

  // A member starts failing every I/O, or a slot is failed by request.
  void FailOne() {
    if (gone_ >= 0 || failing_ >= 0) return;
    const int k = in_.ConsumeIntegralInRange<int>(0, disks_ - 1);
    if (in_.ConsumeBool()) {
      faulty_[k]->SetFailed(true);
      failing_ = k;
    } else {
      FUZZ_CHECK_OK(array_->FailSlot(k));
      const ArrayInfo info = array_->Info();
      FUZZ_CHECK(info.degraded && !info.failed);
      FUZZ_CHECK(info.slots[k].state == SlotState::kFaulty);
      gone_ = k;
    }
  }

  // Member management: a degraded array gets a spare and rebuilds onto it;
  // a healthy one has a member replaced by a copy. Reads and writes go on
  // while the job runs in the background; when it ends the new member
  // holds the slot, every byte reads back and parity is consistent.
  void MemberChange() {
    const bool degraded = gone_ >= 0 || (failing_ >= 0 && Noticed());
    if (failing_ >= 0 && !degraded) return;  // not seen yet: nothing to do
    const int k = degraded ? (gone_ >= 0 ? gone_ : failing_)
                           : in_.ConsumeIntegralInRange<int>(0, disks_ - 1);
    const std::string name =
        absl::StrFormat("%s%d", degraded ? "s" : "r", next_member_++);
    // Sometimes larger than needed: only member_bytes_ is used.
    const uint64_t extra = in_.ConsumeBool() ? chunk_ : 0;
    auto mem = std::shared_ptr<Member>(
        uraid::NewMemoryMember(name, kDataOffset + member_bytes_ + extra));
    auto faulty = std::make_shared<uraid::FaultyMember>(mem);
    if (degraded) {
      FUZZ_CHECK_OK(array_->AddMember(uraid::ShareMember(faulty)));
    } else {
      FUZZ_CHECK_OK(array_->ReplaceMember(faulty_[k]->Name(),
                                          uraid::ShareMember(faulty)));
    }
    const int during = in_.ConsumeIntegralInRange<int>(0, 3);
    for (int i = 0; i < during && in_.remaining_bytes() > 0; ++i) {
      if (in_.ConsumeBool()) {
        Write();
      } else {
        Read();
      }
    }
    FUZZ_CHECK_OK(array_->WaitForJob());
    const ArrayInfo info = array_->Info();
    FUZZ_CHECK(!info.degraded && !info.failed);
    FUZZ_CHECK(info.slots[k].name == name);
    FUZZ_CHECK(info.slots[k].state == SlotState::kActive);
    FUZZ_CHECK(info.last_job.kind == (degraded ? uraid::JobKind::kRecover
                                               : uraid::JobKind::kReplace));
    // The old member is out of the array for good; the new one is slot k.
    mem_[k] = mem;
    faulty_[k] = faulty;
    gone_ = -1;
    failing_ = -1;
    VerifyAll();
    CheckParity();
  }

  std::vector<std::vector<uint8_t>> SnapshotMembers() {
    std::vector<std::vector<uint8_t>> snap;
    for (const auto& m : mem_) {
      std::vector<uint8_t> bytes(m->Size());
      FUZZ_CHECK_OK(m->Read(bytes.data(), bytes.size(), 0));
      snap.push_back(std::move(bytes));
    }
    return snap;
  }

  std::vector<std::unique_ptr<Member>> Members(bool include_gone) {
    std::vector<std::unique_ptr<Member>> v;
    for (int i = 0; i < disks_; ++i) {
      if (i != gone_ || include_gone) {
        v.push_back(uraid::ShareMember(faulty_[i]));
      }
    }
    std::shuffle(v.begin(), v.end(),
                 std::minstd_rand(in_.ConsumeIntegral<uint32_t>()));
    return v;
  }

  uraid::AssembleOptions AssembleOpts(bool force) {
    uraid::AssembleOptions o;
    o.force = force;
    SetCache(o, in_.ConsumeBool() ? cache_ : 0);
    return o;
  }

  // Whether the open array has marked the failing member faulty (a member
  // left out or failed by request always is).
  bool Noticed() {
    if (gone_ >= 0) return true;
    return failing_ >= 0 &&
           array_->Info().slots[failing_].state != SlotState::kActive;
  }

  // The failing member comes back (healthy again) at the next assembly. A
  // member the array had marked faulty must be refused, writing nothing;
  // one whose failure went unnoticed until the stop may be refused or
  // rejoin (its bytes are then current).
  void AssembleAfterStop(bool dirty, bool noticed) {
    if (failing_ >= 0) {
      faulty_[failing_]->SetFailed(false);
      gone_ = failing_;
      failing_ = -1;
    }
    if (gone_ >= 0) {
      const auto before = SnapshotMembers();
      auto a = Array::Assemble(Members(true), AssembleOpts(false));
      if (a.ok()) {
        // Only a member whose failure went unnoticed may rejoin; its bytes
        // are then current and everything must read back.
        FUZZ_CHECK(!noticed);
        array_ = std::move(*a);
        Unthrottle();
        gone_ = -1;
        FinishAssembly(dirty);
        return;
      }
      FUZZ_CHECK(SnapshotMembers() == before);
    }
    const bool degraded = gone_ >= 0;
    if (dirty && degraded) {
      const auto before = SnapshotMembers();
      auto a = Array::Assemble(Members(false), AssembleOpts(false));
      FUZZ_CHECK(!a.ok());  // dirty + degraded: md refuses without force
      FUZZ_CHECK(a.status().code() == absl::StatusCode::kFailedPrecondition);
      FUZZ_CHECK(SnapshotMembers() == before);
    }
    auto a = Array::Assemble(Members(false), AssembleOpts(dirty && degraded));
    FUZZ_CHECK_OK(a.status());
    array_ = std::move(*a);
    Unthrottle();
    FUZZ_CHECK(array_->Info().degraded == degraded);
    FinishAssembly(dirty);
  }

  void FinishAssembly(bool dirty) {
    const ArrayInfo info = array_->Info();
    if (!dirty) FUZZ_CHECK(info.clean);
    if (dirty && !info.degraded) FUZZ_CHECK_OK(array_->Resync());
    VerifyAll();
    if (!info.degraded) CheckParity();
  }

  void Reassemble() {
    const bool noticed = Noticed();
    array_.reset();  // clean stop: flush and mark clean
    AssembleAfterStop(false, noticed);
  }

  // Power cut right after a flush: members go back to how they were then
  // (the superblocks still say "active"), and the array comes up dirty.
  void Crash() {
    if (failing_ >= 0) return;  // a snapshot would read the failing member
    FUZZ_CHECK_OK(array_->Flush());
    const bool wrote = !array_->Info().clean;
    const bool noticed = Noticed();
    const auto snap = SnapshotMembers();
    array_.reset();
    for (int i = 0; i < disks_; ++i) {
      FUZZ_CHECK_OK(mem_[i]->Write(snap[i].data(), snap[i].size(), 0));
    }
    AssembleAfterStop(wrote, noticed);
  }

  void CheckParity() {
    const ArrayInfo info = array_->Info();
    std::vector<uint64_t> bad;
    auto n = array_->CheckParity(&bad);
    if (info.degraded) {
      FUZZ_CHECK(!n.ok());
      return;
    }
    if (failing_ >= 0) return;  // the read may hit the failing member
    FUZZ_CHECK_OK(n.status());
    if (*n != 0) {
      std::fprintf(stderr, "%llu stripes with bad parity, first %llu\n",
                   static_cast<unsigned long long>(*n),
                   static_cast<unsigned long long>(bad.empty() ? 0 : bad[0]));
    }
    FUZZ_CHECK(*n == 0);
  }

  // A second member goes: reads that succeed must still be right; once the
  // array reports failure, writes fail, and reads fail unless every byte
  // lies on a working member (array.h), when they must be right.
  void FailSecond() {
    int k = in_.ConsumeIntegralInRange<int>(0, disks_ - 1);
    const int first = gone_ >= 0 ? gone_ : failing_;
    if (first < 0) {
      faulty_[k]->SetFailed(true);  // the first
      k = (k + 1) % disks_;
    } else if (k == first) {
      k = (k + 1) % disks_;
    }
    faulty_[k]->SetFailed(true);
    for (int i = 0; i < 8 && in_.remaining_bytes() > 0; ++i) {
      uint64_t len, off;
      Range(&len, &off);
      std::vector<uint8_t> got(len);
      const absl::Status st = array_->Read(got.data(), len, off);
      if (array_->Info().failed && len > 0) {
        std::vector<uint8_t> more(len);
        if (array_->Read(more.data(), len, off).ok()) {
          FUZZ_CHECK(std::equal(more.begin(), more.end(), ref_.begin() + off));
        }
        FUZZ_CHECK(!array_->Write(more.data(), len, off, false).ok());
      }
      if (st.ok()) {
        FUZZ_CHECK(std::equal(got.begin(), got.end(), ref_.begin() + off));
      }
    }
    array_.reset();  // must not crash or hang
  }

  FuzzedDataProvider& in_;
  int level_ = 5;
  uraid::Layout layout_ = uraid::Layout::kLeftSymmetric;
  uint64_t chunk_ = 4096;
  int disks_ = 3;
  uint64_t member_bytes_ = 0;
  uint64_t cache_ = 0;
  std::vector<std::shared_ptr<Member>> mem_;
  std::vector<std::shared_ptr<uraid::FaultyMember>> faulty_;
  std::vector<uint8_t> ref_;
  std::unique_ptr<Array> array_;
  int next_member_ = 0;  // names of added members
  int gone_ = -1;        // slot left out of the array (missing or faulty)
  int failing_ = -1;     // member failing every I/O, not yet left out
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Run run(in);
  if (!run.Create()) return 0;
  for (int i = 0; i < kMaxOps && in.remaining_bytes() > 0; ++i) {
    if (!run.Step()) return 0;
  }
  run.VerifyAll();
  return 0;
}
