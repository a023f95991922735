// SPDX-License-Identifier: MIT
// Tests for md's write-intent bitmap: the bitmap_super_t codec against the
// byte layout of the md reference (§3.2), rejection of every corrupt field,
// the area geometry and chunk rule, the checks against the array, md's
// write-intent protocol (set before write, group commit, lazy clear after
// idle and flush, never while degraded) with a fake clock and a recording
// disk, and interop with the real `mdadm --examine-bitmap`.

#include "uraid/bitmap.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;

// --- Helpers written independently of the codec. ---

uint32_t Get32(const std::vector<uint8_t>& b, size_t off) {
  return b[off] | (b[off + 1] << 8) | (b[off + 2] << 16) |
         (static_cast<uint32_t>(b[off + 3]) << 24);
}

uint64_t Get64(const std::vector<uint8_t>& b, size_t off) {
  return Get32(b, off) | (static_cast<uint64_t>(Get32(b, off + 4)) << 32);
}

void Set32(std::vector<uint8_t>& b, size_t off, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

void Set64(std::vector<uint8_t>& b, size_t off, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[off + i] = static_cast<uint8_t>(v >> (8 * i));
}

bool Bit(const std::vector<uint8_t>& area, uint64_t chunk) {
  return (area[256 + chunk / 8] >> (chunk % 8)) & 1;
}

const std::array<uint8_t, 16> kUuid = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
                                       0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98,
                                       0x76, 0x54, 0x32, 0x10};

// A bitmap as mdadm makes it for a 1 GiB component: 16 chunks of 64 MiB.
BitmapSuper ValidSuper() {
  BitmapSuper sb;
  sb.uuid = kUuid;
  sb.events = 12;
  sb.events_cleared = 10;
  sb.sync_size = 2 * 1024 * 1024;  // 1 GiB in sectors
  sb.chunksize = 64 * kMiB;
  sb.daemon_sleep = 5;
  return sb;
}

// --- Codec ---

TEST(BitmapSuperCodec, ByteLayoutMatchesMd) {
  BitmapSuper sb = ValidSuper();
  sb.state = kBitmapStateStale;
  sb.write_behind = 256;
  sb.sectors_reserved = 256;
  sb.nodes = 3;
  sb.cluster_name = "lab";
  const std::vector<uint8_t> b = EncodeBitmapSuper(sb);
  ASSERT_EQ(b.size(), 256u);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 4), "bitm");
  EXPECT_EQ(Get32(b, 0), 0x6d746962u);
  EXPECT_EQ(Get32(b, 4), 4u);
  EXPECT_TRUE(std::equal(kUuid.begin(), kUuid.end(), b.begin() + 8));
  EXPECT_EQ(Get64(b, 24), 12u);
  EXPECT_EQ(Get64(b, 32), 10u);
  EXPECT_EQ(Get64(b, 40), 2u * 1024 * 1024);
  EXPECT_EQ(Get32(b, 48), 2u);
  EXPECT_EQ(Get32(b, 52), 64 * kMiB);
  EXPECT_EQ(Get32(b, 56), 5u);
  EXPECT_EQ(Get32(b, 60), 256u);
  EXPECT_EQ(Get32(b, 64), 256u);
  EXPECT_EQ(Get32(b, 68), 3u);
  EXPECT_EQ(std::string(b.begin() + 72, b.begin() + 75), "lab");
  EXPECT_TRUE(std::all_of(b.begin() + 75, b.end(), [](uint8_t x) {
    return x == 0;
  })) << "cluster_name padding and pad must be zero";
}

TEST(BitmapSuperCodec, RoundTripsEveryField) {
  BitmapSuper sb = ValidSuper();
  sb.events = 0x0102030405060708;
  sb.events_cleared = 0x0102030405060700;
  sb.sync_size = 0xfffffffffff;
  sb.state = kBitmapStateStale | kBitmapStateWriteError;
  sb.chunksize = 1u << 31;
  sb.daemon_sleep = kBitmapMaxDaemonSleep;
  sb.write_behind = kBitmapMaxWriteBehind;
  sb.sectors_reserved = 0xabcdef;
  sb.nodes = 7;
  sb.cluster_name = std::string(64, 'c');
  absl::StatusOr<BitmapSuper> got = DecodeBitmapSuper(EncodeBitmapSuper(sb));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->version, sb.version);
  EXPECT_EQ(got->uuid, sb.uuid);
  EXPECT_EQ(got->events, sb.events);
  EXPECT_EQ(got->events_cleared, sb.events_cleared);
  EXPECT_EQ(got->sync_size, sb.sync_size);
  EXPECT_EQ(got->state, sb.state);
  EXPECT_EQ(got->chunksize, sb.chunksize);
  EXPECT_EQ(got->daemon_sleep, sb.daemon_sleep);
  EXPECT_EQ(got->write_behind, sb.write_behind);
  EXPECT_EQ(got->sectors_reserved, sb.sectors_reserved);
  EXPECT_EQ(got->nodes, sb.nodes);
  EXPECT_EQ(got->cluster_name, sb.cluster_name);
  EXPECT_TRUE(got->stale());
}

TEST(BitmapSuperCodec, AcceptsLegacyVersion3AndIgnoresTrailingBytes) {
  std::vector<uint8_t> b = EncodeBitmapSuper(ValidSuper());
  Set32(b, 4, 3);
  b.resize(4096, 0xff);  // the bits that follow on disk
  absl::StatusOr<BitmapSuper> got = DecodeBitmapSuper(b);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->version, 3u);
}

struct Corruption {
  const char* name;
  size_t offset;  // of a u32 field
  uint32_t value;
  absl::StatusCode code;
  std::vector<std::string> message_parts;  // field name and value seen
};

void PrintTo(const Corruption& c, std::ostream* os) { *os << c.name; }

class BitmapSuperRejects : public ::testing::TestWithParam<Corruption> {};

TEST_P(BitmapSuperRejects, NamesTheFieldAndValue) {
  const Corruption& c = GetParam();
  std::vector<uint8_t> b = EncodeBitmapSuper(ValidSuper());
  Set32(b, c.offset, c.value);
  absl::StatusOr<BitmapSuper> got = DecodeBitmapSuper(b);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), c.code) << got.status();
  for (const std::string& part : c.message_parts) {
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryField, BitmapSuperRejects,
    ::testing::Values(
        Corruption{"magic",
                   0,
                   0x6d746963,
                   absl::StatusCode::kDataLoss,
                   {"magic", "0x6d746963"}},
        Corruption{"md_superblock_magic",
                   0,
                   kSbMagic,
                   absl::StatusCode::kDataLoss,
                   {"magic", "0xa92b4efc"}},
        Corruption{
            "version2", 4, 2, absl::StatusCode::kDataLoss, {"version 2"}},
        Corruption{
            "version7", 4, 7, absl::StatusCode::kDataLoss, {"version 7"}},
        Corruption{"clustered",
                   4,
                   5,
                   absl::StatusCode::kUnimplemented,
                   {"version 5", "clustered"}},
        Corruption{"llbitmap",
                   4,
                   6,
                   absl::StatusCode::kUnimplemented,
                   {"version 6", "llbitmap"}},
        Corruption{
            "chunk0", 52, 0, absl::StatusCode::kDataLoss, {"chunksize 0"}},
        Corruption{"chunk256",
                   52,
                   256,
                   absl::StatusCode::kDataLoss,
                   {"chunksize 256", "minimum 512"}},
        Corruption{"chunk_not_pow2",
                   52,
                   3 * 4096,
                   absl::StatusCode::kDataLoss,
                   {"chunksize 12288", "power of two"}},
        Corruption{"daemon_sleep0",
                   56,
                   0,
                   absl::StatusCode::kDataLoss,
                   {"daemon_sleep 0"}},
        Corruption{"daemon_sleep_huge",
                   56,
                   kBitmapMaxDaemonSleep + 1,
                   absl::StatusCode::kDataLoss,
                   {"daemon_sleep 2147484", "out of range"}},
        Corruption{"write_behind",
                   60,
                   16384,
                   absl::StatusCode::kDataLoss,
                   {"write_behind 16384", "0..16383"}},
        Corruption{"sync_size_low",
                   40,
                   0,
                   absl::StatusCode::kDataLoss,
                   {"sync_size"}}),
    [](const ::testing::TestParamInfo<Corruption>& info) {
      return std::string(info.param.name);
    });

TEST(BitmapSuperCodec, RejectsZeroSyncSize) {
  std::vector<uint8_t> b = EncodeBitmapSuper(ValidSuper());
  Set64(b, 40, 0);
  absl::StatusOr<BitmapSuper> got = DecodeBitmapSuper(b);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("sync_size is 0"));
}

TEST(BitmapSuperCodec, RejectsShortBuffer) {
  std::vector<uint8_t> b = EncodeBitmapSuper(ValidSuper());
  b.resize(255);
  absl::StatusOr<BitmapSuper> got = DecodeBitmapSuper(b);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()),
              AllOf(HasSubstr("255 bytes"), HasSubstr("256")));
}

// --- Geometry of the area ---

TEST(BitmapGeometry, ChunksRoundUpAndAreaSizes) {
  // 1 GiB / 64 MiB: 16 chunks, 2 bytes of bits, 258 bytes of area.
  EXPECT_EQ(BitmapChunks(2 * 1024 * 1024, 64 * kMiB), 16u);
  EXPECT_EQ(BitmapChunks(2 * 1024 * 1024 + 1, 64 * kMiB), 17u);
  EXPECT_EQ(BitmapChunks(1, 512), 1u);
  EXPECT_EQ(BitmapChunks(ValidSuper()), 16u);
  // No overflow for the largest sync_size.
  EXPECT_EQ(BitmapChunks(~0ull, 1u << 31), (~0ull >> 22) + 1);
  EXPECT_EQ(BitmapBitBytes(16), 2u);
  EXPECT_EQ(BitmapBitBytes(17), 3u);
  EXPECT_EQ(BitmapAreaBytes(16), 258u);
  EXPECT_EQ(BitmapAreaSectors(16), 1u);
  EXPECT_EQ(BitmapAreaPages(16), 1u);
  // The bits of chunk 2048 are the first in the second sector.
  EXPECT_EQ(BitmapAreaSectors(2048), 1u);
  EXPECT_EQ(BitmapAreaSectors(2049), 2u);
  // The bits of chunk (4096-256)*8 are the first in the second page.
  EXPECT_EQ(BitmapAreaPages(30720), 1u);
  EXPECT_EQ(BitmapAreaPages(30721), 2u);
}

TEST(BitmapGeometry, DefaultChunkIs64MiBGrownToFit) {
  // mdadm's 128 KiB cap: (131072 - 256) * 8 = 1046528 bits.
  constexpr uint64_t kRoom = 128 * 1024;
  EXPECT_EQ(*DefaultBitmapChunkBytes(1ull << 30, kRoom), 64 * kMiB);
  EXPECT_EQ(*DefaultBitmapChunkBytes(0, kRoom), 64 * kMiB);
  EXPECT_EQ(*DefaultBitmapChunkBytes(1046528 * 64 * kMiB, kRoom), 64 * kMiB);
  EXPECT_EQ(*DefaultBitmapChunkBytes(1046528 * 64 * kMiB + 1, kRoom),
            128 * kMiB);
  // The smallest reservation mdadm makes (8 sectors): 30720 bits.
  EXPECT_EQ(*DefaultBitmapChunkBytes(30720 * 64 * kMiB, 4096), 64 * kMiB);
  EXPECT_EQ(*DefaultBitmapChunkBytes(30721 * 64 * kMiB, 4096), 128 * kMiB);
  // A header-only space, and a member too large even for 2 GiB chunks.
  absl::StatusOr<uint32_t> none = DefaultBitmapChunkBytes(1 << 30, 256);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("256"));
  absl::StatusOr<uint32_t> huge = DefaultBitmapChunkBytes(~0ull, 257);
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BitmapGeometry, NewAreaIsHeaderAndAllOnesInWholePages) {
  BitmapSuper sb = ValidSuper();
  sb.chunksize = 4096;  // 262144 chunks: 32 KiB of bits, 9 pages
  const std::vector<uint8_t> area = NewBitmapArea(sb);
  EXPECT_EQ(area.size(), 9 * 4096u);
  absl::StatusOr<BitmapSuper> got = DecodeBitmapSuper(area);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->chunksize, 4096u);
  EXPECT_TRUE(std::all_of(area.begin() + 256, area.end(),
                          [](uint8_t x) { return x == 0xff; }));
  EXPECT_EQ(CountBitmapDirty(std::span(area).subspan(256), 262144), 262144u);
}

TEST(BitmapGeometry, CountDirtyIgnoresBitsPastTheLastChunk) {
  const std::vector<uint8_t> bits = {0x05, 0xff, 0xff};
  EXPECT_EQ(CountBitmapDirty(bits, 16), 10u);
  EXPECT_EQ(CountBitmapDirty(bits, 17), 11u);
  EXPECT_EQ(CountBitmapDirty(bits, 3), 2u);
  EXPECT_TRUE(BitmapBit(bits, 2));
  EXPECT_FALSE(BitmapBit(bits, 1));
}

// --- Against the array ---

TEST(BitmapValidateForArray, CurrentStaleAndWrong) {
  const BitmapSuper sb = ValidSuper();  // events 12
  const uint64_t size = sb.sync_size;
  EXPECT_EQ(*ValidateBitmapForArray(sb, kUuid, 12, size),
            BitmapVerdict::kCurrent);
  // md writes the bitmap before the member superblocks: one ahead is a
  // crash between the two, still current.
  EXPECT_EQ(*ValidateBitmapForArray(sb, kUuid, 11, size),
            BitmapVerdict::kCurrent);
  EXPECT_EQ(*ValidateBitmapForArray(sb, kUuid, 13, size),
            BitmapVerdict::kStale);
  BitmapSuper stale = sb;
  stale.state |= kBitmapStateStale;
  EXPECT_EQ(*ValidateBitmapForArray(stale, kUuid, 12, size),
            BitmapVerdict::kStale);

  absl::StatusOr<BitmapVerdict> ahead =
      ValidateBitmapForArray(sb, kUuid, 10, size);
  EXPECT_EQ(ahead.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(ahead.status().message()),
              AllOf(HasSubstr("events 12"), HasSubstr("10")));

  std::array<uint8_t, 16> other = kUuid;
  other[15] ^= 1;
  absl::StatusOr<BitmapVerdict> foreign =
      ValidateBitmapForArray(sb, other, 12, size);
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(foreign.status().message()),
              AllOf(HasSubstr("uuid"), HasSubstr("01234567:89abcdef"),
                    HasSubstr("76543211")));

  absl::StatusOr<BitmapVerdict> resized =
      ValidateBitmapForArray(sb, kUuid, 12, size - 1024);
  EXPECT_EQ(resized.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(resized.status().message()),
              AllOf(HasSubstr("sync_size 2097152"), HasSubstr("2096128")));
}

// --- The write-intent protocol ---

// The members' copy of the bitmap area, written only through the persist
// callback; records every call, can fail or hold calls, and checks that
// calls never overlap.
class FakeDisk {
 public:
  explicit FakeDisk(std::vector<uint8_t> area) : area_(std::move(area)) {}

  BitmapPersistFn Persist() {
    return [this](uint64_t offset, std::span<const uint8_t> bytes) {
      const int inflight = inflight_.fetch_add(1) + 1;
      max_inflight_ = std::max(max_inflight_.load(), inflight);
      absl::Status status = Write(offset, bytes);
      inflight_.fetch_sub(1);
      return status;
    };
  }

  std::vector<uint8_t> Area() const {
    absl::MutexLock lock(&mu_);
    return area_;
  }
  bool DiskBit(uint64_t chunk) const {
    absl::MutexLock lock(&mu_);
    return Bit(area_, chunk);
  }
  BitmapSuper Header() const {
    absl::MutexLock lock(&mu_);
    return *DecodeBitmapSuper(area_);
  }
  int calls() const {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(calls_.size());
  }
  std::vector<std::pair<uint64_t, uint64_t>> Calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  void Fail(absl::Status status) {
    absl::MutexLock lock(&mu_);
    fail_ = std::move(status);
  }
  // Calls block until Release() while held.
  void Hold() {
    absl::MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }
  // Until `n` calls have started since the disk was made.
  void WaitEntered(int n) {
    absl::MutexLock lock(&mu_);
    auto entered = [this, n]()
                       ABSL_NO_THREAD_SAFETY_ANALYSIS { return entered_ >= n; };
    mu_.Await(absl::Condition(&entered));
  }
  void SetDelay(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    delay_ = d;
  }
  // Shared event log ("persist", "flush", ...) for ordering checks.
  void Log(std::string event) {
    absl::MutexLock lock(&mu_);
    log_.push_back(std::move(event));
  }
  std::vector<std::string> log() const {
    absl::MutexLock lock(&mu_);
    return log_;
  }
  int max_inflight() const { return max_inflight_.load(); }

 private:
  absl::Status Write(uint64_t offset, std::span<const uint8_t> bytes) {
    absl::Duration delay;
    {
      absl::MutexLock lock(&mu_);
      ++entered_;
      mu_.Await(absl::Condition(
          +[](bool* held) { return !*held; }, &held_));
      delay = delay_;
    }
    if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
    absl::MutexLock lock(&mu_);
    calls_.emplace_back(offset, bytes.size());
    if (!fail_.ok()) {
      log_.push_back("persist-failed");
      return fail_;
    }
    EXPECT_EQ(offset % kBitmapPageBytes, 0u);
    EXPECT_LE(offset + bytes.size(), area_.size());
    if (offset + bytes.size() > area_.size()) {
      return absl::OutOfRangeError("past the area");
    }
    std::copy(bytes.begin(), bytes.end(), area_.begin() + offset);
    log_.push_back(absl::StrFormat("persist %u+%u", offset, bytes.size()));
    return absl::OkStatus();
  }

  mutable absl::Mutex mu_;
  std::vector<uint8_t> area_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<uint64_t, uint64_t>> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration delay_ ABSL_GUARDED_BY(mu_);
  int entered_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> inflight_{0};
  std::atomic<int> max_inflight_{0};
};

class FakeClock {
 public:
  using Clock = WriteIntentBitmap::Clock;
  std::function<Clock::time_point()> Fn() {
    return [this] { return Clock::time_point(Clock::duration(now_.load())); };
  }
  void Advance(std::chrono::milliseconds d) {
    now_ += std::chrono::duration_cast<Clock::duration>(d).count();
  }

 private:
  std::atomic<Clock::rep> now_{Clock::duration(std::chrono::hours(1)).count()};
};

// A bitmap with `chunks` chunks of 4 KiB, all clean, on a FakeDisk sized to
// its sectors.
class BitmapWriteIntent : public ::testing::Test {
 protected:
  static constexpr uint64_t kChunk = 4096;

  void Make(uint64_t chunks, WriteIntentBitmapOptions options = {},
            std::optional<BitmapSuper> sb_in = std::nullopt) {
    sb_ = sb_in.value_or(ValidSuper());
    if (!sb_in) {
      sb_.chunksize = kChunk;
      sb_.sync_size = chunks * kChunk / 512;
    }
    const uint64_t n = BitmapChunks(sb_);
    std::vector<uint8_t> area(BitmapAreaSectors(n) * 512, 0);
    const std::vector<uint8_t> header = EncodeBitmapSuper(sb_);
    std::copy(header.begin(), header.end(), area.begin());
    for (uint64_t c : initially_dirty_) area[256 + c / 8] |= 1 << (c % 8);
    disk_ = std::make_unique<FakeDisk>(area);
    options.clock = clock_.Fn();
    absl::StatusOr<std::unique_ptr<WriteIntentBitmap>> bm =
        WriteIntentBitmap::Create(sb_, std::span(area).subspan(256),
                                  disk_->Persist(), options);
    ASSERT_TRUE(bm.ok()) << bm.status();
    bm_ = std::move(*bm);
  }

  absl::Status Flush() {
    ++flushes_;
    disk_->Log("flush");
    return flush_status_;
  }
  absl::Status Tick() {
    return bm_->Tick([this] { return Flush(); });
  }

  FakeClock clock_;
  BitmapSuper sb_;
  std::vector<uint64_t> initially_dirty_;
  std::unique_ptr<FakeDisk> disk_;
  std::unique_ptr<WriteIntentBitmap> bm_;
  int flushes_ = 0;
  absl::Status flush_status_;
};

TEST_F(BitmapWriteIntent, CreateRejectsShortBitsAndMissingCallback) {
  BitmapSuper sb = ValidSuper();  // 16 chunks: 2 bytes of bits
  std::vector<uint8_t> bits(1);
  auto persist = [](uint64_t, std::span<const uint8_t>) {
    return absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<WriteIntentBitmap>> bm =
      WriteIntentBitmap::Create(sb, bits, persist);
  EXPECT_EQ(bm.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bm.status().message()), HasSubstr("1 bytes"));
  bits.resize(2);
  EXPECT_EQ(WriteIntentBitmap::Create(sb, bits, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  sb.chunksize = 1000;
  EXPECT_EQ(WriteIntentBitmap::Create(sb, bits, persist).status().code(),
            absl::StatusCode::kDataLoss);
  sb.chunksize = 1u << 31;
  sb.sync_size = (~0ull >> 9) + 1;  // bytes overflow 64 bits
  absl::Status huge = WriteIntentBitmap::Create(sb, bits, persist).status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(huge.message()), HasSubstr("sync_size"));
}

TEST_F(BitmapWriteIntent, BitIsDurableBeforeStartWriteReturns) {
  Make(64);
  ASSERT_TRUE(bm_->StartWrite(3 * kChunk + 100, 10).ok());
  EXPECT_TRUE(disk_->DiskBit(3));
  EXPECT_EQ(disk_->Calls(),
            (std::vector<std::pair<uint64_t, uint64_t>>{{0, 512}}));
  EXPECT_TRUE(bm_->IsChunkDirty(3));
  EXPECT_EQ(bm_->DirtyChunks(), 1u);
  // Already durable: no I/O for a second write into the chunk.
  ASSERT_TRUE(bm_->StartWrite(3 * kChunk, kChunk).ok());
  EXPECT_EQ(disk_->calls(), 1);
  // A range over three chunks sets the two new bits in one write.
  ASSERT_TRUE(bm_->StartWrite(3 * kChunk + 1, 2 * kChunk).ok());
  EXPECT_EQ(disk_->calls(), 2);
  for (uint64_t c : {3, 4, 5}) EXPECT_TRUE(disk_->DiskBit(c)) << c;
  EXPECT_FALSE(disk_->DiskBit(6));
  EXPECT_EQ(bm_->DirtyChunks(), 3u);
}

TEST_F(BitmapWriteIntent, RangePastSyncSizeIsOutOfRangeAndEmptyIsNoOp) {
  Make(64);
  absl::Status s = bm_->StartWrite(63 * kChunk, kChunk + 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(s.message()), HasSubstr("262144"));
  EXPECT_EQ(bm_->StartWrite(64 * kChunk, 1).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(bm_->StartWrite(~0ull, 2).code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(bm_->StartWrite(5, 0).ok());
  EXPECT_EQ(disk_->calls(), 0);
  EXPECT_EQ(bm_->DirtyChunks(), 0u);
}

TEST_F(BitmapWriteIntent, ConcurrentStartWriteOnOneChunkPersistsOnce) {
  Make(64);
  disk_->Hold();
  std::atomic<bool> second_done{false};
  std::thread first([&] { EXPECT_TRUE(bm_->StartWrite(7 * kChunk, 1).ok()); });
  disk_->WaitEntered(1);
  std::thread second([&] {
    EXPECT_TRUE(bm_->StartWrite(7 * kChunk + 9, 1).ok());
    EXPECT_TRUE(disk_->DiskBit(7));
    second_done = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(second_done) << "returned before the bit was durable";
  disk_->Release();
  first.join();
  second.join();
  EXPECT_EQ(disk_->calls(), 1);
  EXPECT_EQ(disk_->max_inflight(), 1);
}

// A Tick's clear of chunk 3 is on its way to disk when a new write into
// chunk 3 starts: the bit is still set on disk, but the write in flight is
// clearing it, so the new write must wait for the next batch.
TEST_F(BitmapWriteIntent, StartWriteWaitsOutAClearInFlight) {
  Make(64);
  ASSERT_TRUE(bm_->SetEvents(12).ok());
  ASSERT_TRUE(bm_->StartWrite(1 * kChunk, 1).ok());
  bm_->EndWrite(1 * kChunk, 1);
  clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(Tick().ok());  // events_cleared catches up with events
  ASSERT_TRUE(bm_->StartWrite(3 * kChunk, 1).ok());
  bm_->EndWrite(3 * kChunk, 1);
  clock_.Advance(std::chrono::seconds(5));
  const int calls = disk_->calls();

  disk_->Hold();
  std::thread tick([&] { EXPECT_TRUE(Tick().ok()); });
  disk_->WaitEntered(calls + 1);  // the clear is in flight
  EXPECT_TRUE(disk_->DiskBit(3));
  std::atomic<bool> returned{false};
  std::thread writer([&] {
    EXPECT_TRUE(bm_->StartWrite(3 * kChunk, 1).ok());
    returned = true;
    EXPECT_TRUE(disk_->DiskBit(3)) << "writer let through with the bit clear";
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(returned) << "StartWrite trusted a bit a write in flight clears";
  disk_->Release();
  tick.join();
  writer.join();
  EXPECT_TRUE(disk_->DiskBit(3));
  EXPECT_EQ(disk_->calls(), calls + 2);  // the clear, then the set again
}

TEST_F(BitmapWriteIntent, ManyWritersAreBatchedAndEachBitIsDurableFirst) {
  // 8 threads x 128 new chunks each, spread over 4 pages.
  constexpr int kThreads = 8;
  constexpr int kPerThread = 128;
  Make(4 * 30720);
  disk_->SetDelay(absl::Microseconds(500));
  std::atomic<int> not_durable{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < kPerThread; ++i) {
        // Disjoint chunk sets per thread, in random pages.
        const uint64_t chunk = (rng() % (4 * 30720 / kThreads)) * kThreads + t;
        const uint64_t off = chunk * kChunk;
        ASSERT_TRUE(bm_->StartWrite(off, 512).ok());
        if (!disk_->DiskBit(chunk)) ++not_durable;
        bm_->EndWrite(off, 512);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(not_durable, 0);
  EXPECT_EQ(disk_->max_inflight(), 1);
  const int calls = disk_->calls();
  EXPECT_LT(calls, kThreads * kPerThread / 2)
      << "group commit should merge concurrent bit writes";
  EXPECT_GT(calls, 0);
  // Everything set in memory is on disk.
  EXPECT_EQ(disk_->Area(), bm_->AreaImage());
  RecordProperty("persist_calls", calls);
}

TEST_F(BitmapWriteIntent, TickClearsOnlyAfterIdleTimeAndAfterFlush) {
  Make(64);
  ASSERT_TRUE(bm_->StartWrite(2 * kChunk, 1).ok());
  bm_->EndWrite(2 * kChunk, 1);
  clock_.Advance(std::chrono::milliseconds(4999));
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(flushes_, 0) << "nothing idle long enough: no flush needed";
  EXPECT_TRUE(disk_->DiskBit(2));
  clock_.Advance(std::chrono::milliseconds(1));
  const int calls = disk_->calls();
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(flushes_, 1);
  EXPECT_FALSE(disk_->DiskBit(2));
  EXPECT_FALSE(bm_->IsChunkDirty(2));
  EXPECT_GT(disk_->calls(), calls);
  const std::vector<std::string> log = disk_->log();
  ASSERT_GE(log.size(), 3u);
  EXPECT_EQ(log[1], "flush") << "the clear must follow the data flush";
  EXPECT_EQ(log.back(), "persist 0+512");
  // Nothing left to clear: no flush, no I/O.
  clock_.Advance(std::chrono::seconds(60));
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(flushes_, 1);
}

TEST_F(BitmapWriteIntent, EventsClearedIsDurableBeforeAnyBitClears) {
  Make(40000);  // the chunk below lives in page 1, the header in page 0
  const uint64_t chunk = 30720 + 5;
  ASSERT_TRUE(bm_->SetEvents(20).ok());
  ASSERT_TRUE(bm_->StartWrite(chunk * kChunk, 1).ok());
  bm_->EndWrite(chunk * kChunk, 1);
  EXPECT_EQ(disk_->Header().events_cleared, 10u);
  clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(disk_->Header().events_cleared, 20u);
  EXPECT_EQ(bm_->events_cleared(), 20u);
  EXPECT_FALSE(disk_->DiskBit(chunk));
  const std::vector<std::string> log = disk_->log();
  ASSERT_EQ(log.size(), 5u);
  EXPECT_EQ(log[0], "persist 0+4096");     // SetEvents
  EXPECT_EQ(log[1], "persist 4096+1536");  // bit set (page 1, trimmed)
  EXPECT_EQ(log[2], "flush");
  EXPECT_EQ(log[3], "persist 0+4096");     // events_cleared first
  EXPECT_EQ(log[4], "persist 4096+1536");  // then the bit goes
}

TEST_F(BitmapWriteIntent, ChunkWithWriteInProgressIsNeverCleared) {
  Make(64);
  ASSERT_TRUE(bm_->StartWrite(0, 2 * kChunk).ok());
  bm_->EndWrite(kChunk, kChunk);  // chunk 1 done, chunk 0 still in progress
  clock_.Advance(std::chrono::hours(1));
  ASSERT_TRUE(Tick().ok());
  EXPECT_TRUE(disk_->DiskBit(0));
  EXPECT_FALSE(disk_->DiskBit(1));
  bm_->EndWrite(0, kChunk);
  ASSERT_TRUE(Tick().ok());
  EXPECT_TRUE(disk_->DiskBit(0)) << "idle for less than daemon_sleep";
  clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(Tick().ok());
  EXPECT_FALSE(disk_->DiskBit(0));
}

TEST_F(BitmapWriteIntent, WrittenAgainDuringFlushIsKept) {
  Make(64);
  ASSERT_TRUE(bm_->StartWrite(4 * kChunk, 1).ok());
  bm_->EndWrite(4 * kChunk, 1);
  clock_.Advance(std::chrono::seconds(5));
  // A write into the chunk completes while Tick flushes: its data is not
  // covered by that flush.
  ASSERT_TRUE(bm_->Tick([&] {
                   EXPECT_TRUE(bm_->StartWrite(4 * kChunk, 1).ok());
                   bm_->EndWrite(4 * kChunk, 1);
                   return absl::OkStatus();
                 })
                  .ok());
  EXPECT_TRUE(disk_->DiskBit(4));
  clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(Tick().ok());
  EXPECT_FALSE(disk_->DiskBit(4));
}

TEST_F(BitmapWriteIntent, NeverClearsWhileDegraded) {
  Make(64);
  ASSERT_TRUE(bm_->SetEvents(30).ok());
  ASSERT_TRUE(bm_->StartWrite(9 * kChunk, 1).ok());
  bm_->EndWrite(9 * kChunk, 1);
  bm_->SetDegraded(true);
  clock_.Advance(std::chrono::hours(1));
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(flushes_, 0);
  EXPECT_TRUE(disk_->DiskBit(9));
  EXPECT_EQ(disk_->Header().events_cleared, 10u);
  // Degraded while the flush runs: still nothing cleared.
  bm_->SetDegraded(false);
  ASSERT_TRUE(bm_->Tick([&] {
                   bm_->SetDegraded(true);
                   return absl::OkStatus();
                 })
                  .ok());
  EXPECT_TRUE(disk_->DiskBit(9));
  EXPECT_EQ(bm_->events_cleared(), 10u);
  bm_->SetDegraded(false);
  ASSERT_TRUE(Tick().ok());
  EXPECT_FALSE(disk_->DiskBit(9));
  EXPECT_EQ(disk_->Header().events_cleared, 30u);
}

TEST_F(BitmapWriteIntent, FlushErrorClearsNothing) {
  Make(64);
  ASSERT_TRUE(bm_->StartWrite(1 * kChunk, 1).ok());
  bm_->EndWrite(1 * kChunk, 1);
  clock_.Advance(std::chrono::seconds(5));
  flush_status_ = absl::UnavailableError("m2: fdatasync: EIO");
  absl::Status s = Tick();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(disk_->DiskBit(1));
  EXPECT_TRUE(bm_->IsChunkDirty(1));
  flush_status_ = absl::OkStatus();
  ASSERT_TRUE(Tick().ok());
  EXPECT_FALSE(disk_->DiskBit(1));
}

TEST_F(BitmapWriteIntent, PersistErrorPropagatesAndIsRetried) {
  Make(64);
  disk_->Fail(absl::UnavailableError("m1: pwrite at 8192: EIO"));
  absl::Status s = bm_->StartWrite(6 * kChunk, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()),
              AllOf(HasSubstr("bitmap write"), HasSubstr("m1: pwrite")));
  EXPECT_FALSE(disk_->DiskBit(6));
  EXPECT_EQ(bm_->SetEvents(13).code(), absl::StatusCode::kUnavailable);
  disk_->Fail(absl::OkStatus());
  ASSERT_TRUE(bm_->Sync().ok());
  EXPECT_EQ(disk_->Area(), bm_->AreaImage());
  EXPECT_EQ(disk_->Header().events, 13u);
  // The failed StartWrite counted nothing: its chunk goes like an idle one.
  clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(Tick().ok());
  EXPECT_FALSE(disk_->DiskBit(6));
  // Nothing pending: Sync does no I/O.
  const int calls = disk_->calls();
  ASSERT_TRUE(bm_->Sync().ok());
  EXPECT_EQ(disk_->calls(), calls);
}

TEST_F(BitmapWriteIntent, ClearThatFailedToPersistIsNotCarriedLater) {
  Make(64);
  ASSERT_TRUE(bm_->StartWrite(1 * kChunk, 1).ok());
  bm_->EndWrite(1 * kChunk, 1);
  clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(Tick().ok());  // events_cleared catches up with events
  ASSERT_EQ(disk_->Header().events_cleared, 12u);
  ASSERT_TRUE(bm_->StartWrite(7 * kChunk, 1).ok());
  bm_->EndWrite(7 * kChunk, 1);
  clock_.Advance(std::chrono::seconds(5));
  // The clear's own write fails: the bit is set again in memory.
  const int calls = disk_->calls();
  absl::Status s = bm_->Tick([&] {
    disk_->Fail(absl::UnavailableError("m0: EIO"));
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(disk_->calls(), calls + 1) << "only the clear was attempted";
  EXPECT_TRUE(bm_->IsChunkDirty(7));
  EXPECT_TRUE(disk_->DiskBit(7));
  // Degraded from here: a later write of the page must not carry the clear.
  disk_->Fail(absl::OkStatus());
  bm_->SetDegraded(true);
  ASSERT_TRUE(bm_->SetEvents(14).ok());
  ASSERT_TRUE(bm_->Sync().ok());
  EXPECT_TRUE(disk_->DiskBit(7));
  bm_->SetDegraded(false);
  ASSERT_TRUE(Tick().ok());
  EXPECT_FALSE(disk_->DiskBit(7));
}

TEST_F(BitmapWriteIntent, FailedWriteKeepsBitUntilClearChunk) {
  Make(64);
  ASSERT_TRUE(bm_->StartWrite(8 * kChunk, 2 * kChunk).ok());
  bm_->EndWrite(8 * kChunk, 2 * kChunk, /*success=*/false);
  clock_.Advance(std::chrono::hours(1));
  ASSERT_TRUE(Tick().ok());
  EXPECT_TRUE(disk_->DiskBit(8));
  EXPECT_TRUE(disk_->DiskBit(9));
  bm_->ClearChunk(9);     // resynced
  bm_->ClearChunk(1000);  // out of range: ignored
  ASSERT_TRUE(Tick().ok());
  EXPECT_TRUE(disk_->DiskBit(8));
  EXPECT_FALSE(disk_->DiskBit(9));
}

TEST_F(BitmapWriteIntent, BitsFoundSetAfterUncleanShutdownWaitForResync) {
  initially_dirty_ = {0, 17, 63};
  Make(64);
  EXPECT_EQ(bm_->DirtyChunks(), 3u);
  std::vector<uint64_t> dirty;
  bm_->ForEachDirtyChunk([&](uint64_t c) { dirty.push_back(c); });
  EXPECT_EQ(dirty, (std::vector<uint64_t>{0, 17, 63}));
  clock_.Advance(std::chrono::hours(1));
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(bm_->DirtyChunks(), 3u);
  EXPECT_EQ(flushes_, 0);
  bm_->ClearChunk(17);
  ASSERT_TRUE(Tick().ok());
  EXPECT_FALSE(disk_->DiskBit(17));
  EXPECT_TRUE(disk_->DiskBit(0));
  EXPECT_TRUE(disk_->DiskBit(63));
}

TEST_F(BitmapWriteIntent, BitsFoundSetAfterCleanShutdownClearLazily) {
  initially_dirty_ = {0, 17, 63};
  WriteIntentBitmapOptions options;
  options.array_clean = true;
  Make(64, options);
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(bm_->DirtyChunks(), 3u);
  clock_.Advance(std::chrono::seconds(5));
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(bm_->DirtyChunks(), 0u);
  const std::vector<uint8_t> area = disk_->Area();
  EXPECT_EQ(CountBitmapDirty(std::span(area).subspan(256), 64), 0u);
}

TEST_F(BitmapWriteIntent, MarkAllDirtyWritesBitsBeforeClearingStale) {
  BitmapSuper sb = ValidSuper();
  sb.chunksize = kChunk;
  sb.sync_size = 40000 * kChunk / 512;  // two pages of area
  sb.state = kBitmapStateStale;
  Make(0, {}, sb);
  ASSERT_TRUE(bm_->MarkAllDirty().ok());
  EXPECT_EQ(bm_->DirtyChunks(), 40000u);
  const std::vector<uint8_t> area = disk_->Area();
  EXPECT_EQ(CountBitmapDirty(std::span(area).subspan(256), 40000), 40000u);
  EXPECT_FALSE(DecodeBitmapSuper(area)->stale());
  const std::vector<std::string> log = disk_->log();
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], "persist 0+5632");  // every bit, the old (stale) header
  EXPECT_EQ(log[1], "persist 0+4096");  // then the header
  // Kept until resynced.
  clock_.Advance(std::chrono::hours(1));
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(bm_->DirtyChunks(), 40000u);
  bm_->ClearChunk(39999);
  ASSERT_TRUE(Tick().ok());
  EXPECT_EQ(bm_->DirtyChunks(), 39999u);
  EXPECT_FALSE(disk_->DiskBit(39999));
}

TEST_F(BitmapWriteIntent, SetEventsPersistsHeaderAndLowersEventsCleared) {
  Make(64);
  ASSERT_TRUE(bm_->SetEvents(100).ok());
  EXPECT_EQ(disk_->Header().events, 100u);
  EXPECT_EQ(bm_->events(), 100u);
  EXPECT_EQ(bm_->events_cleared(), 10u);
  ASSERT_TRUE(bm_->SetEvents(9).ok());
  EXPECT_EQ(disk_->Header().events, 9u);
  EXPECT_EQ(disk_->Header().events_cleared, 9u);
  EXPECT_EQ(bm_->super().events_cleared, 9u);
}

TEST_F(BitmapWriteIntent, Version3IsRewrittenAsVersion4) {
  BitmapSuper sb = ValidSuper();
  sb.version = kBitmapVersionHostEndian;
  sb.state = kBitmapStateHostEndian;
  Make(0, {}, sb);
  EXPECT_EQ(bm_->super().version, 4u);
  ASSERT_TRUE(bm_->SetEvents(13).ok());
  EXPECT_EQ(disk_->Header().version, 4u);
  EXPECT_EQ(disk_->Header().state, 0u);
}

TEST_F(BitmapWriteIntent, KeepsBytesPastTheBitsInTheLastSector) {
  BitmapSuper sb = ValidSuper();  // 16 chunks: bits end at byte 258
  std::vector<uint8_t> bits(512 - 256, 0xa5);
  bits[0] = bits[1] = 0;
  auto persist = [](uint64_t, std::span<const uint8_t>) {
    return absl::OkStatus();
  };
  absl::StatusOr<std::unique_ptr<WriteIntentBitmap>> bm =
      WriteIntentBitmap::Create(sb, bits, persist);
  ASSERT_TRUE(bm.ok());
  const std::vector<uint8_t> image = (*bm)->AreaImage();
  ASSERT_EQ(image.size(), 512u);
  EXPECT_EQ(image[258], 0xa5);
  EXPECT_EQ(image[511], 0xa5);
  EXPECT_EQ((*bm)->DirtyChunks(), 0u);
}

// --- Interop with mdadm --examine-bitmap ---

using testutil::HaveTool;
using testutil::ParseExamine;
using testutil::RunCommand;

class BitmapInterop : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveTool("mdadm")) GTEST_SKIP() << "mdadm not installed; skipping";
    std::string tmpl = ::testing::TempDir() + "uraid_bitmap_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << strerror(errno);
    dir_ = tmpl;
    path_ = dir_ + "/bitmap.img";
  }
  void TearDown() override {
    if (!path_.empty()) unlink(path_.c_str());
    if (!dir_.empty()) rmdir(dir_.c_str());
  }

  void WriteFile(const std::vector<uint8_t>& bytes, uint64_t offset,
                 uint64_t size) {
    const int fd = open(path_.c_str(), O_CREAT | O_WRONLY, 0600);
    ASSERT_GE(fd, 0) << strerror(errno);
    ASSERT_EQ(ftruncate(fd, size), 0) << strerror(errno);
    ASSERT_EQ(pwrite(fd, bytes.data(), bytes.size(), offset),
              static_cast<ssize_t>(bytes.size()));
    ASSERT_EQ(close(fd), 0);
  }

  std::map<std::string, std::string> ExamineBitmap() {
    int status = 0;
    std::optional<std::string> out =
        RunCommand("mdadm --examine-bitmap '" + path_ + "' 2>&1", &status);
    if (!out.has_value()) return {};
    EXPECT_EQ(status, 0) << *out;
    SCOPED_TRACE(*out);
    return ParseExamine(*out);
  }

  std::string dir_;
  std::string path_;
};

TEST_F(BitmapInterop, MdadmReadsOurBitmapArea) {
  // 3 GiB + 2.5 KiB component: 49 chunks of 64 MiB, the last one partial.
  BitmapSuper sb = ValidSuper();
  sb.sync_size = 3 * 2 * 1024 * 1024 + 5;
  sb.events = 7;
  sb.events_cleared = 5;
  std::vector<uint8_t> area = NewBitmapArea(sb);
  ASSERT_EQ(area.size(), 4096u);
  std::fill(area.begin() + 256, area.end(), 0);
  for (uint64_t c : {0, 2, 8, 9, 10, 11, 12, 13, 14, 15, 48}) {
    area[256 + c / 8] |= 1 << (c % 8);
  }
  area[256 + 6] |= 0xfe;  // bits past chunk 48: not chunks, not counted
  WriteFile(area, 0, area.size());
  std::map<std::string, std::string> kv = ExamineBitmap();
  EXPECT_EQ(kv["Magic"], "6d746962");
  EXPECT_EQ(kv["Version"], "4");
  EXPECT_EQ(kv["UUID"], FormatUuid(kUuid));
  EXPECT_EQ(kv["Events"], "7");
  EXPECT_EQ(kv["Events Cleared"], "5");
  EXPECT_EQ(kv["State"], "OK");
  EXPECT_EQ(kv["Chunksize"], "64 MB");
  EXPECT_EQ(kv["Daemon"], "5s flush period");
  EXPECT_EQ(kv["Write Mode"], "Normal");
  EXPECT_THAT(kv["Sync Size"], ::testing::StartsWith("3145730 "));  // KiB
  EXPECT_THAT(kv["Bitmap"],
              ::testing::StartsWith("49 bits (chunks), 11 dirty"));
  EXPECT_EQ(CountBitmapDirty(std::span(area).subspan(256), 49), 11u);

  sb.state = kBitmapStateStale;
  const std::vector<uint8_t> header = EncodeBitmapSuper(sb);
  std::copy(header.begin(), header.end(), area.begin());
  WriteFile(area, 0, area.size());
  EXPECT_EQ(ExamineBitmap()["State"], "Out of date");
}

// The external bitmap file an array keeps (md's --bitmap FILE) is what
// `mdadm -X FILE` reads: header at byte 0, the bits after it, and the bit
// a write set is there as soon as the write returns.
TEST_F(BitmapInterop, MdadmReadsAnArraysBitmapFile) {
  constexpr uint64_t kChunk = 64 * 1024;
  constexpr uint64_t kOffset = 1 * kMiB;
  constexpr uint64_t kMemberData = 4 * kMiB;
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.bitmap = BitmapMode::kFile;
  o.bitmap_file = path_;
  o.bitmap_chunk_bytes = 256 * 1024;  // 16 bits
  o.assume_clean = true;
  o.cache.bytes = 0;
  std::unique_ptr<Array> a =
      testutil::MustCreate(testutil::MakeMembers(4, kOffset + kMemberData), o);
  ASSERT_NE(a, nullptr);
  std::vector<uint8_t> data(3 * kChunk, 0x5a);
  ASSERT_TRUE(a->Write(data.data(), data.size(), 3 * kChunk * 9).ok());
  const ArrayInfo info = a->Info();
  std::map<std::string, std::string> kv = ExamineBitmap();
  EXPECT_EQ(kv["UUID"], FormatUuid(info.uuid));
  EXPECT_EQ(kv["Events"], absl::StrCat(info.bitmap.events));
  EXPECT_EQ(kv["State"], "OK");
  EXPECT_EQ(kv["Chunksize"], "256 KB");
  // KiB; mdadm adds the size in MiB/GiB only when it is large.
  EXPECT_EQ(kv["Sync Size"].substr(0, kv["Sync Size"].find(' ')), "4096");
  // Stripe 9 is member bytes [576K, 640K): chunk 2.
  EXPECT_THAT(kv["Bitmap"], ::testing::StartsWith("16 bits (chunks), 1 dirty"));
}

// A 1.2 member whose bitmap area (+8 sectors from the superblock, byte
// 8192) holds what WriteIntentBitmap persisted after a few writes.
class BitmapMemberInterop : public BitmapInterop {
 protected:
  static constexpr uint64_t kDeviceBytes = 256 * kMiB;
  static constexpr uint64_t kAreaOffset = kSb12OffsetBytes + 8 * 512;

  void SetUp() override {
    BitmapInterop::SetUp();
    if (IsSkipped()) return;
    msb_.set_uuid = kUuid;
    msb_.device_uuid[0] = 0xaa;
    msb_.set_name = "testhost:bm";
    msb_.level = 5;
    msb_.layout = 2;
    msb_.chunksize = 1024;
    msb_.raid_disks = 4;
    msb_.feature_map = kFeatureBitmapOffset;
    msb_.bitmap_offset = 8;
    msb_.data_offset = DefaultDataOffsetSectors(kDeviceBytes / 512, 1024);
    msb_.data_size = kDeviceBytes / 512 - msb_.data_offset;
    msb_.size = msb_.data_size / msb_.chunksize * msb_.chunksize;
    msb_.dev_number = 1;
    msb_.events = 21;
    msb_.max_dev = 128;
    msb_.dev_roles = {0, 1, 2, 3};

    sb_ = ValidSuper();
    sb_.sync_size = msb_.size;
    sb_.chunksize = 1 * kMiB;  // enough chunks to see a count
    sb_.events = 20;
    sb_.events_cleared = 20;
    chunks_ = BitmapChunks(sb_);
    std::vector<uint8_t> area = NewBitmapArea(sb_);
    std::fill(area.begin() + 256, area.end(), 0);

    disk_ = area;
    auto persist = [this](uint64_t offset, std::span<const uint8_t> bytes) {
      std::copy(bytes.begin(), bytes.end(), disk_.begin() + offset);
      return absl::OkStatus();
    };
    absl::StatusOr<std::unique_ptr<WriteIntentBitmap>> bm =
        WriteIntentBitmap::Create(sb_, std::span(area).subspan(256), persist);
    ASSERT_TRUE(bm.ok()) << bm.status();
    ASSERT_TRUE((*bm)->SetEvents(21).ok());
    ASSERT_TRUE((*bm)->StartWrite(0, 3 * kMiB).ok());  // chunks 0..2
    ASSERT_TRUE((*bm)->StartWrite(100 * kMiB + 5, 1).ok());
  }

  void ExpectOurBitmap(std::map<std::string, std::string> kv) {
    EXPECT_EQ(kv["Events"], "21");
    EXPECT_EQ(kv["Events Cleared"], "20");
    EXPECT_EQ(kv["State"], "OK");
    EXPECT_EQ(kv["Chunksize"], "1 MB");
    EXPECT_EQ(kv["UUID"], FormatUuid(kUuid));
    EXPECT_THAT(kv["Sync Size"],
                ::testing::StartsWith(absl::StrCat(msb_.size / 2, " ")));
    EXPECT_THAT(kv["Bitmap"], ::testing::StartsWith(absl::StrFormat(
                                  "%u bits (chunks), 4 dirty", chunks_)));
  }

  Superblock msb_;
  BitmapSuper sb_;
  uint64_t chunks_ = 0;
  std::vector<uint8_t> disk_;  // the area as persisted
};

TEST_F(BitmapMemberInterop, MdadmReadsTheAreaTheProtocolPersisted) {
  WriteFile(disk_, 0, disk_.size());
  ExpectOurBitmap(ExamineBitmap());
}

// mdadm looks for the superblock (and through bitmap_offset, the bitmap)
// only on block devices, so this one goes through a read-only loop device.
TEST_F(BitmapMemberInterop, MdadmFindsTheBitmapThroughTheSuperblock) {
  WriteFile(EncodeSuperblock(msb_), kSb12OffsetBytes, kDeviceBytes);
  WriteFile(disk_, kAreaOffset, kDeviceBytes);
  int status = 0;
  std::optional<std::string> loop =
      RunCommand("losetup -f --show -r '" + path_ + "' 2>/dev/null", &status);
  if (!loop.has_value() || status != 0 || loop->empty()) {
    GTEST_SKIP() << "no loop device (needs root and a free /dev/loopN); "
                    "the plain-file variant above still ran";
  }
  const std::string dev(absl::StripTrailingAsciiWhitespace(*loop));
  std::optional<std::string> out =
      RunCommand("mdadm --examine-bitmap '" + dev + "' 2>&1", &status);
  const int examine_status = status;
  RunCommand("losetup -d '" + dev + "' 2>&1", &status);
  EXPECT_EQ(status, 0) << "losetup -d " << dev;
  ASSERT_TRUE(out.has_value());
  ASSERT_EQ(examine_status, 0) << *out;
  SCOPED_TRACE(*out);
  ExpectOurBitmap(ParseExamine(*out));
}

}  // namespace
}  // namespace uraid
