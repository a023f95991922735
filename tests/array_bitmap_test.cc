// SPDX-License-Identifier: MIT
// The write-intent bitmap inside the array: created in md's place and
// format, set before writes, used after a crash to resync only the regions
// with bits set (a crash is simulated by copying the members while the
// array is active), stale and foreign bitmaps, and refusal of corrupt ones.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_util.h"
#include "uraid/array.h"
#include "uraid/bitmap.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kStripes = 64;
constexpr uint64_t kMemberBytes = kStripes * kChunk;
constexpr uint64_t kSize = kOffset + kMemberBytes;
constexpr int kDisks = 4;
constexpr uint64_t kBitmapChunk = 4 * kChunk;  // 4 stripes per bit
constexpr uint64_t kArea = kSb12OffsetBytes + 4096;

using Shared = std::shared_ptr<Member>;
using testutil::Handles;
using testutil::LogLines;
using testutil::Pattern;

std::vector<Shared> MakeMembers(int n, const std::string& prefix = "m") {
  return testutil::MakeMembers(n, kSize, prefix);
}

// A byte-for-byte copy of every member: what the disks hold if the
// machine died at this moment.
std::vector<Shared> CrashImage(const std::vector<Shared>& m) {
  std::vector<Shared> out;
  std::vector<uint8_t> buf(kSize);
  for (const auto& x : m) {
    EXPECT_TRUE(x->Read(buf.data(), buf.size(), 0).ok());
    Shared c(NewMemoryMember(x->Name(), kSize));
    EXPECT_TRUE(c->Write(buf.data(), buf.size(), 0).ok());
    out.push_back(c);
  }
  return out;
}

// The crash tests' writes: stripe 1 (region 0) and stripes 40..41 (region
// 10), flushed; *d2 gets what stripes 40..41 now hold.
void WriteRegions0And10(Array& a, std::vector<uint8_t>* d2) {
  const uint64_t sd = (kDisks - 1) * kChunk;
  auto d1 = Pattern(sd, 1);
  *d2 = Pattern(2 * sd, 2);
  ASSERT_TRUE(a.Write(d1.data(), d1.size(), 1 * sd).ok());
  ASSERT_TRUE(a.Write(d2->data(), d2->size(), 40 * sd).ok());
  ASSERT_TRUE(a.Flush().ok());
}

// Tears stripe 41's parity on a crash image, as a crash mid-write would
// (left-symmetric, 4 disks: parity on slot 3 - 41 % 4 = 2).
void TearStripe41Parity(const std::vector<Shared>& image) {
  uint8_t junk[512];
  std::memset(junk, 0xEE, sizeof junk);
  ASSERT_TRUE(
      image[2]->Write(junk, sizeof junk, kOffset + 41 * kChunk + 4096).ok());
}

// After WriteRegions0And10 and TearStripe41Parity: the resync goes through
// exactly those two regions, repairs the torn stripe, and the data reads
// back.
void ExpectRegions0And10Resynced(Array& c, const std::vector<uint8_t>& d2) {
  ASSERT_TRUE(c.Resync().ok());
  Counters k = c.Info().counters;
  EXPECT_EQ(k.resync_bitmap_chunks, 2u);
  EXPECT_EQ(k.resynced_stripes, 2 * kBitmapChunk / kChunk);
  EXPECT_EQ(k.resync_repairs, 1u);
  EXPECT_EQ(*c.CheckParity(nullptr), 0u);
  std::vector<uint8_t> got(d2.size());
  ASSERT_TRUE(c.Read(got.data(), got.size(), 40 * (kDisks - 1) * kChunk).ok());
  EXPECT_EQ(got, d2);
}

std::unique_ptr<Array> MustCreate(const std::vector<Shared>& m,
                                  BitmapMode mode = BitmapMode::kInternal) {
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.bitmap = mode;
  o.bitmap_chunk_bytes = kBitmapChunk;
  o.cache.bytes = 0;
  return testutil::MustCreate(m, o);
}

absl::StatusOr<BitmapSuper> ReadBitmapSuper(Member& m) {
  std::vector<uint8_t> b(kBitmapSuperBytes);
  if (auto st = m.Read(b.data(), b.size(), kArea); !st.ok()) return st;
  return DecodeBitmapSuper(b);
}

TEST(ArrayBitmap, CreatedInMdsPlaceAndFormat) {
  auto m = MakeMembers(kDisks);
  auto a = MustCreate(m);
  ArrayInfo info = a->Info();
  ASSERT_TRUE(info.bitmap.present);
  EXPECT_EQ(info.bitmap.chunk_bytes, kBitmapChunk);
  EXPECT_EQ(info.bitmap.chunks, kMemberBytes / kBitmapChunk);
  EXPECT_EQ(info.bitmap.offset_bytes, kArea);
  EXPECT_EQ(info.bitmap.sync_size_bytes, kMemberBytes);
  for (const auto& x : m) {
    std::vector<uint8_t> sbb(kSbBlockBytes);
    ASSERT_TRUE(x->Read(sbb.data(), sbb.size(), kSb12OffsetBytes).ok());
    auto sb = DecodeSuperblock(sbb);
    ASSERT_TRUE(sb.ok());
    EXPECT_TRUE(sb->feature_map & kFeatureBitmapOffset);
    EXPECT_EQ(sb->bitmap_offset, 8);
    auto bs = ReadBitmapSuper(*x);
    ASSERT_TRUE(bs.ok()) << bs.status();
    EXPECT_EQ(bs->uuid, sb->set_uuid);
    EXPECT_EQ(bs->chunksize, kBitmapChunk);
    EXPECT_EQ(bs->sync_size, kMemberBytes / 512);
    // md writes the bitmap header before the superblocks: never behind.
    EXPECT_GE(bs->events, sb->events);
  }
}

TEST(ArrayBitmap, DefaultChunkIs64MiBAndNoneMeansNone) {
  auto m = MakeMembers(kDisks);
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  auto a = Array::Create(Handles(m), o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->Info().bitmap.chunk_bytes, 64u << 20);
  a->reset();
  auto n = MakeMembers(kDisks, "n");
  auto b = MustCreate(n, BitmapMode::kNone);
  EXPECT_FALSE(b->Info().bitmap.present);
  std::vector<uint8_t> sbb(kSbBlockBytes);
  ASSERT_TRUE(n[0]->Read(sbb.data(), sbb.size(), kSb12OffsetBytes).ok());
  EXPECT_FALSE(DecodeSuperblock(sbb)->feature_map & kFeatureBitmapOffset);
}

TEST(ArrayBitmap, BadChunkSizesAreRefused) {
  auto m = MakeMembers(kDisks);
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.bitmap_chunk_bytes = 3000;
  EXPECT_THAT(std::string(Array::Create(Handles(m), o).status().message()),
              HasSubstr("power of two"));
  o.bitmap_chunk_bytes = 512;  // 8192 bits fit in 1 MiB - 8 KiB: accepted
  EXPECT_TRUE(Array::Create(Handles(m), o).ok());
  o.data_offset_bytes = 8192;  // no room between superblock and data
  o.force = true;
  EXPECT_THAT(std::string(Array::Create(Handles(m), o).status().message()),
              HasSubstr("no room for an internal bitmap"));
}

// The crash case: regions written just before the crash have their bits
// set, so the next assembly resyncs exactly those regions.
TEST(ArrayBitmap, CrashResyncsOnlyDirtyRegions) {
  auto m = MakeMembers(kDisks);
  auto a = MustCreate(m);  // starts with every bit set: the initial sync
  ASSERT_TRUE(a->Info().counters.resync_bitmap_chunks > 0);
  a.reset();  // clean shutdown; leftover bits go at the first tick
  auto b = Array::Assemble(Handles(m), {});
  ASSERT_TRUE(b.ok()) << b.status();
  Array& arr = **b;
  std::vector<uint8_t> d2;
  ASSERT_NO_FATAL_FAILURE(WriteRegions0And10(arr, &d2));
  EXPECT_FALSE(arr.Info().clean);
  auto image = CrashImage(m);
  b->reset();
  ASSERT_NO_FATAL_FAILURE(TearStripe41Parity(image));
  auto c = Array::Assemble(Handles(image), {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->Info().bitmap.dirty_chunks >= 2);
  ExpectRegions0And10Resynced(**c, d2);
}

// Without a bitmap the same crash resyncs every stripe.
TEST(ArrayBitmap, WithoutBitmapCrashResyncsEverything) {
  auto m = MakeMembers(kDisks);
  auto a = MustCreate(m, BitmapMode::kNone);
  auto d = Pattern(4096, 3);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 0).ok());
  ASSERT_TRUE(a->Flush().ok());
  auto image = CrashImage(m);
  a.reset();
  auto c = Array::Assemble(Handles(image), {});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE((*c)->Resync().ok());
  EXPECT_EQ((*c)->Info().counters.resynced_stripes, kStripes);
}

// A bitmap older than the superblocks cannot be trusted: every region is
// treated as dirty (md's "bitmap is stale").
TEST(ArrayBitmap, StaleBitmapMeansEverythingDirty) {
  auto m = MakeMembers(kDisks);
  auto a = MustCreate(m);
  a.reset();
  auto bs = ReadBitmapSuper(*m[0]);
  ASSERT_TRUE(bs.ok());
  bs->events = 0;  // behind the superblocks
  for (const auto& x : m) {
    auto bytes = EncodeBitmapSuper(*bs);
    ASSERT_TRUE(x->Write(bytes.data(), bytes.size(), kArea).ok());
  }
  auto b = Array::Assemble(Handles(m), {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->Info().bitmap.dirty_chunks, kMemberBytes / kBitmapChunk);
  EXPECT_TRUE((*b)->Info().resyncing);
}

TEST(ArrayBitmap, CorruptOrForeignBitmapIsRefusedWritingNothing) {
  auto m = MakeMembers(kDisks);
  MustCreate(m).reset();
  auto snapshot = [&] {
    std::vector<std::vector<uint8_t>> s;
    for (const auto& x : m) {
      std::vector<uint8_t> b(kSize);
      EXPECT_TRUE(x->Read(b.data(), b.size(), 0).ok());
      s.push_back(std::move(b));
    }
    return s;
  };
  struct Case {
    const char* what;
    std::function<void(BitmapSuper&, std::vector<uint8_t>&)> corrupt;
    const char* error;
  };
  std::vector<Case> cases = {
      {"wrong magic", [](BitmapSuper&, std::vector<uint8_t>& b) { b[0] ^= 1; },
       "magic"},
      {"foreign uuid",
       [](BitmapSuper& s, std::vector<uint8_t>& b) {
         s.uuid[0] ^= 1;
         b = EncodeBitmapSuper(s);
       },
       "uuid"},
      {"wrong size",
       [](BitmapSuper& s, std::vector<uint8_t>& b) {
         s.sync_size += 8;
         b = EncodeBitmapSuper(s);
       },
       "sync_size"},
      {"events far ahead",
       [](BitmapSuper& s, std::vector<uint8_t>& b) {
         s.events += 10;
         b = EncodeBitmapSuper(s);
       },
       "events"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto fresh = MakeMembers(kDisks, "f");
    MustCreate(fresh).reset();
    auto bs = ReadBitmapSuper(*fresh[1]);
    ASSERT_TRUE(bs.ok());
    std::vector<uint8_t> bytes = EncodeBitmapSuper(*bs);
    c.corrupt(*bs, bytes);
    for (const auto& x : fresh) {
      ASSERT_TRUE(x->Write(bytes.data(), bytes.size(), kArea).ok());
    }
    m = fresh;
    auto before = snapshot();
    absl::Status st = Array::Assemble(Handles(fresh), {}).status();
    EXPECT_FALSE(st.ok());
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.error));
    EXPECT_THAT(std::string(st.message()), HasSubstr("bitmap"));
    EXPECT_TRUE(before == snapshot()) << "assembly wrote to the members";
  }
}

// A member joining a bitmap array gets a copy of the bitmap, so any member
// can be read back after a restart.
TEST(ArrayBitmap, RebuiltMemberCarriesTheBitmap) {
  auto m = MakeMembers(kDisks);
  auto a = MustCreate(m);
  ASSERT_TRUE(a->FailSlot(0).ok());
  Shared spare(NewMemoryMember("s0", kSize));
  ASSERT_TRUE(a->AddMember(ShareMember(spare)).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  auto bs = ReadBitmapSuper(*spare);
  ASSERT_TRUE(bs.ok()) << bs.status();
  a.reset();
  auto b = Array::Assemble(Handles({spare, m[1], m[2], m[3]}), {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*b)->Info().bitmap.present);
}

// md's re-add: a member that left a degraded array and comes back holds
// everything but the regions written since, which the bitmap kept (bits
// are not cleared while degraded). `write_while_away` writes stripe 1
// (region 0) and stripes 40..41 (region 10) while it is out;
// `healed_meanwhile` has a spare rebuild the slot (clearing those bits)
// and fail again before the member returns.
struct ReAddRun {
  std::vector<Shared> m;
  std::unique_ptr<Array> array;
  std::vector<uint8_t> ref;
  std::mutex log_mu;  // background threads log too
  std::vector<std::string> log;

  void Start() {
    m = MakeMembers(kDisks);
    {
      auto a = MustCreate(m);
      ASSERT_NE(a, nullptr);
      ref = Pattern((kDisks - 1) * kMemberBytes, 21);
      ASSERT_TRUE(a->Write(ref.data(), ref.size(), 0).ok());
    }
    // Reassembled after a clean stop: the bits go at the first tick.
    auto b = Array::Assemble(Handles(m), {}, [this](const std::string& l) {
      std::lock_guard<std::mutex> lock(log_mu);
      log.push_back(l);
    });
    ASSERT_TRUE(b.ok()) << b.status();
    array = std::move(*b);
    array->StartBackground();
    ASSERT_NO_FATAL_FAILURE(AwaitClearBits());
    ASSERT_TRUE(array->FailMember("m1").ok());
    ASSERT_TRUE(array->RemoveMember("m1").ok());
    const uint64_t sd = (kDisks - 1) * kChunk;
    auto d1 = Pattern(sd, 22), d2 = Pattern(2 * sd, 23);
    ASSERT_TRUE(array->Write(d1.data(), d1.size(), 1 * sd).ok());
    ASSERT_TRUE(array->Write(d2.data(), d2.size(), 40 * sd).ok());
    std::memcpy(ref.data() + 1 * sd, d1.data(), d1.size());
    std::memcpy(ref.data() + 40 * sd, d2.data(), d2.size());
  }
  void AwaitClearBits() {
    for (int i = 0; i < 2000 && array->Info().bitmap.dirty_chunks > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(array->Info().bitmap.dirty_chunks, 0u);
  }
  // A fresh member `name` is added and rebuilt into the gone slot.
  void RebuildOntoSpare(const std::string& name) {
    Shared spare(NewMemoryMember(name, kSize));
    ASSERT_TRUE(array->AddMember(ShareMember(spare)).ok());
    ASSERT_TRUE(array->WaitForJob().ok());
    ASSERT_EQ(array->Info().slots[1].name, name);
  }
  // Adds m1 back and waits for the rebuild; returns the stripes rebuilt.
  uint64_t ReAdd() {
    const uint64_t before = array->Info().counters.recovered_stripes;
    EXPECT_TRUE(array->AddMember(ShareMember(m[1])).ok());
    EXPECT_TRUE(array->WaitForJob().ok());
    const ArrayInfo info = array->Info();
    EXPECT_EQ(info.slots[1].name, "m1");
    EXPECT_EQ(info.slots[1].state, SlotState::kActive);
    EXPECT_FALSE(info.degraded);
    return info.counters.recovered_stripes - before;
  }
  void Verify() {
    testutil::ExpectContents(*array, ref);
    EXPECT_EQ(testutil::Mismatches(*array), 0u);
  }
  bool Logged(const std::string& part) {
    std::lock_guard<std::mutex> lock(log_mu);
    return std::any_of(log.begin(), log.end(), [&](const std::string& l) {
      return l.find(part) != std::string::npos;
    });
  }
  std::string Log() {
    std::lock_guard<std::mutex> lock(log_mu);
    return absl::StrJoin(log, "\n");
  }
};

TEST(ArrayBitmap, ReAddedMemberRebuildsOnlyTheRegionsWrittenWhileAway) {
  ReAddRun run;
  ASSERT_NO_FATAL_FAILURE(run.Start());
  EXPECT_EQ(run.ReAdd(), 2 * kBitmapChunk / kChunk);
  EXPECT_TRUE(run.Logged("m1 re-added to slot 1")) << run.Log();
  run.Verify();
  // Whole again: the bits kept while degraded go.
  ASSERT_NO_FATAL_FAILURE(run.AwaitClearBits());
}

TEST(ArrayBitmap, ReAddAfterTheBitsWereClearedRebuildsInFull) {
  ReAddRun run;
  ASSERT_NO_FATAL_FAILURE(run.Start());
  // A spare rebuilds slot 1 and the array, whole, clears the bits; then
  // the spare fails. m1 misses the writes of regions 0 and 10, and no bit
  // says so any more.
  ASSERT_NO_FATAL_FAILURE(run.RebuildOntoSpare("s0"));
  ASSERT_NO_FATAL_FAILURE(run.AwaitClearBits());
  ASSERT_TRUE(run.array->FailMember("s0").ok());
  ASSERT_TRUE(run.array->RemoveMember("s0").ok());
  EXPECT_EQ(run.ReAdd(), kStripes);
  EXPECT_TRUE(run.Logged("bits were cleared after it left")) << run.Log();
  run.Verify();
}

TEST(ArrayBitmap, MemberWhoseSlotWasTakenJoinsAsASpare) {
  ReAddRun run;
  ASSERT_NO_FATAL_FAILURE(run.Start());
  // A fresh spare takes slot 1 first: m1 joins as a spare, whole.
  ASSERT_NO_FATAL_FAILURE(run.RebuildOntoSpare("s0"));
  ASSERT_TRUE(run.array->AddMember(ShareMember(run.m[1])).ok());
  const ArrayInfo info = run.array->Info();
  EXPECT_EQ(info.slots[1].name, "s0");
  ASSERT_EQ(info.spares.size(), 1u);
  EXPECT_EQ(info.spares[0].name, "m1");
  EXPECT_TRUE(run.Logged("its slot is taken")) << run.Log();
  run.Verify();
}

// --- External bitmap file (md's --bitmap FILE) ---

std::vector<uint8_t> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void WriteWholeFile(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), b.size());
  ASSERT_TRUE(out.good()) << path;
}

class ArrayBitmapFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "uraid_bmfile_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr) << strerror(errno);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  absl::StatusOr<std::unique_ptr<Array>> Create(const std::vector<Shared>& m,
                                                const std::string& file,
                                                bool assume_clean = false,
                                                bool force = false) {
    CreateOptions o;
    o.chunk_bytes = kChunk;
    o.data_offset_bytes = kOffset;
    o.bitmap = BitmapMode::kFile;
    o.bitmap_file = file;
    o.bitmap_chunk_bytes = kBitmapChunk;
    o.assume_clean = assume_clean;
    o.force = force;
    o.cache.bytes = 0;
    return Array::Create(Handles(m), o);
  }
  std::unique_ptr<Array> MustCreateWithFile(const std::vector<Shared>& m,
                                            const std::string& file,
                                            bool assume_clean = false) {
    auto a = Create(m, file, assume_clean);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? std::move(*a) : nullptr;
  }
  static absl::StatusOr<std::unique_ptr<Array>> AssembleWith(
      const std::vector<Shared>& m, const std::string& file,
      Logger logger = nullptr) {
    AssembleOptions o;
    o.bitmap_file = file;
    o.cache.bytes = 0;
    return Array::Assemble(Handles(m), o, logger);
  }
  // The set bits of the file's bit array.
  static std::vector<uint64_t> FileBits(const std::string& path) {
    std::vector<uint8_t> f = ReadWholeFile(path);
    std::vector<uint64_t> set;
    for (uint64_t c = 0; c < kMemberBytes / kBitmapChunk; ++c) {
      if (256 + c / 8 < f.size() && (f[256 + c / 8] >> (c % 8)) & 1) {
        set.push_back(c);
      }
    }
    return set;
  }

  std::string dir_;
};

TEST_F(ArrayBitmapFile, CreatedInMdsFileFormatAndNotOnTheMembers) {
  auto m = MakeMembers(kDisks);
  const std::string file = Path("md0.bitmap");
  auto a = MustCreateWithFile(m, file);
  ASSERT_NE(a, nullptr);
  ArrayInfo info = a->Info();
  ASSERT_TRUE(info.bitmap.present);
  EXPECT_EQ(info.bitmap.offset_bytes, 0u);
  EXPECT_EQ(info.bitmap.chunk_bytes, kBitmapChunk);
  const uint64_t chunks = kMemberBytes / kBitmapChunk;
  EXPECT_EQ(info.bitmap.chunks, chunks);
  a.reset();
  // md's file: the header, then exactly ceil(bits / 8) bytes.
  std::vector<uint8_t> f = ReadWholeFile(file);
  ASSERT_EQ(f.size(), 256 + (chunks + 7) / 8);
  auto bs = DecodeBitmapSuper(f);
  ASSERT_TRUE(bs.ok()) << bs.status();
  EXPECT_EQ(bs->chunksize, kBitmapChunk);
  EXPECT_EQ(bs->sync_size, kMemberBytes / 512);
  EXPECT_EQ(bs->sectors_reserved, 0u);
  for (const auto& x : m) {
    std::vector<uint8_t> sbb(kSbBlockBytes);
    ASSERT_TRUE(x->Read(sbb.data(), sbb.size(), kSb12OffsetBytes).ok());
    auto sb = DecodeSuperblock(sbb);
    ASSERT_TRUE(sb.ok());
    // The superblocks do not mention an external bitmap (md's way).
    EXPECT_FALSE(sb->feature_map & kFeatureBitmapOffset);
    EXPECT_EQ(bs->uuid, sb->set_uuid);
    EXPECT_GE(bs->events, sb->events);
    // Nothing was written where an internal bitmap would be.
    EXPECT_FALSE(ReadBitmapSuper(*x).ok());
  }
  auto b = AssembleWith(m, file);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*b)->Info().bitmap.present);
  EXPECT_EQ((*b)->Info().bitmap.offset_bytes, 0u);
}

TEST_F(ArrayBitmapFile, WritesSetTheirBitsInTheFileFirst) {
  auto m = MakeMembers(kDisks);
  const std::string file = Path("bm");
  auto a = MustCreateWithFile(m, file, /*assume_clean=*/true);
  ASSERT_NE(a, nullptr);
  EXPECT_TRUE(FileBits(file).empty());
  const uint64_t sd = (kDisks - 1) * kChunk;
  auto d = Pattern(sd, 7);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 40 * sd).ok());  // stripe 40
  // Durable before the write returned, without any flush: bit 40 / 4.
  EXPECT_EQ(FileBits(file), std::vector<uint64_t>{10});
  ASSERT_TRUE(a->Flush().ok());
  a.reset();  // a clean stop clears the idle bit
  EXPECT_TRUE(FileBits(file).empty());
}

// The crash case with the bitmap in a file: only the regions whose bits
// the file holds are resynced.
TEST_F(ArrayBitmapFile, CrashResyncsOnlyDirtyRegions) {
  auto m = MakeMembers(kDisks);
  const std::string file = Path("bm");
  auto a = MustCreateWithFile(m, file);
  ASSERT_NE(a, nullptr);
  EXPECT_GT(a->Info().counters.resync_bitmap_chunks, 0u);
  a.reset();
  auto b = AssembleWith(m, file);
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<uint8_t> d2;
  ASSERT_NO_FATAL_FAILURE(WriteRegions0And10(**b, &d2));
  auto image = CrashImage(m);
  const std::string crashed = Path("bm.crash");
  WriteWholeFile(crashed, ReadWholeFile(file));
  b->reset();
  ASSERT_NO_FATAL_FAILURE(TearStripe41Parity(image));
  auto c = AssembleWith(image, crashed);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->Info().bitmap.dirty_chunks, 2u);
  ExpectRegions0And10Resynced(**c, d2);
}

// md's behaviour: without its file the array assembles with no bitmap,
// and the log says why the resync covers everything.
TEST_F(ArrayBitmapFile, AssembledWithoutTheFileResyncsEverything) {
  auto m = MakeMembers(kDisks);
  const std::string file = Path("bm");
  auto a = MustCreateWithFile(m, file, /*assume_clean=*/true);
  ASSERT_NE(a, nullptr);
  auto d = Pattern(4096, 3);
  ASSERT_TRUE(a->Write(d.data(), d.size(), 0).ok());
  ASSERT_TRUE(a->Flush().ok());
  auto image = CrashImage(m);
  a.reset();
  LogLines log;
  auto c = Array::Assemble(Handles(image), {}, log.logger());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE((*c)->Info().bitmap.present);
  EXPECT_TRUE(log.Has("no write-intent bitmap")) << "log line missing";
  EXPECT_TRUE(log.Has("--bitmap FILE"));
  ASSERT_TRUE((*c)->Resync().ok());
  EXPECT_EQ((*c)->Info().counters.resynced_stripes, kStripes);
}

// After a run without its file the file missed writes: it is stale, and
// every region is treated as dirty.
TEST_F(ArrayBitmapFile, FileOlderThanTheSuperblocksMeansEverythingDirty) {
  auto m = MakeMembers(kDisks);
  const std::string file = Path("bm");
  MustCreateWithFile(m, file, /*assume_clean=*/true).reset();
  {
    auto b = Array::Assemble(Handles(m), {});
    ASSERT_TRUE(b.ok()) << b.status();
    auto d = Pattern(4096, 4);
    ASSERT_TRUE((*b)->Write(d.data(), d.size(), 0).ok());
  }
  LogLines log;
  auto c = AssembleWith(m, file, log.logger());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->Info().bitmap.dirty_chunks, kMemberBytes / kBitmapChunk);
  EXPECT_TRUE((*c)->Info().resyncing);
  EXPECT_TRUE(log.Has("file " + file)) << "the log names the file";
  // The stale verdict reached the file itself: all bits set on disk.
  EXPECT_EQ(FileBits(file).size(), kMemberBytes / kBitmapChunk);
}

TEST_F(ArrayBitmapFile, WrongCorruptOrTruncatedFileIsRefusedWritingNothing) {
  auto m = MakeMembers(kDisks);
  const std::string file = Path("bm");
  MustCreateWithFile(m, file).reset();
  auto other = MakeMembers(kDisks, "o");
  const std::string foreign = Path("foreign");
  MustCreateWithFile(other, foreign).reset();
  std::vector<uint8_t> good = ReadWholeFile(file);
  auto snapshot = [&] {
    std::vector<std::vector<uint8_t>> s;
    for (const auto& x : m) {
      std::vector<uint8_t> b(kSize);
      EXPECT_TRUE(x->Read(b.data(), b.size(), 0).ok());
      s.push_back(std::move(b));
    }
    return s;
  };
  auto before = snapshot();
  struct Case {
    const char* what;
    std::string path;
    std::vector<uint8_t> bytes;  // written to `path` first unless empty
    std::vector<std::string> error;
  };
  std::vector<uint8_t> bad_magic = good;
  bad_magic[0] ^= 1;
  std::vector<uint8_t> truncated(good.begin(), good.end() - 1);
  auto bigger = DecodeBitmapSuper(good);
  ASSERT_TRUE(bigger.ok());
  bigger->sync_size += 8;
  std::vector<uint8_t> resized = good;
  auto hdr = EncodeBitmapSuper(*bigger);
  std::copy(hdr.begin(), hdr.end(), resized.begin());
  std::vector<Case> cases = {
      {"another array's file", foreign, {}, {"another array"}},
      {"wrong magic", Path("magic"), bad_magic, {"corrupt", "magic"}},
      {"truncated", Path("short"), truncated, {"truncated"}},
      {"other size", Path("size"), resized, {"sync_size"}},
      {"missing", Path("nonexistent"), {}, {"No such file"}},
      {"a directory", dir_, {}, {"directory"}},
      {"empty", Path("empty"), {}, {"too short"}},
  };
  WriteWholeFile(Path("empty"), {});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    if (!c.bytes.empty()) WriteWholeFile(c.path, c.bytes);
    absl::Status st = AssembleWith(m, c.path).status();
    ASSERT_FALSE(st.ok());
    const std::string msg(st.message());
    EXPECT_THAT(msg, HasSubstr("bitmap file " + c.path));
    for (const std::string& e : c.error) EXPECT_THAT(msg, HasSubstr(e));
    EXPECT_TRUE(before == snapshot()) << "assembly wrote to the members";
  }
  // The foreign file was not touched either.
  EXPECT_TRUE(AssembleWith(other, foreign).ok());
}

TEST_F(ArrayBitmapFile, FileForAnArrayWithAnInternalBitmapIsRefused) {
  auto m = MakeMembers(kDisks);
  MustCreate(m).reset();
  auto n = MakeMembers(kDisks, "n");
  const std::string file = Path("bm");
  MustCreateWithFile(n, file).reset();
  absl::Status st = AssembleWith(m, file).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(st.message()), HasSubstr("internal bitmap"));
  EXPECT_THAT(std::string(st.message()), HasSubstr(file));
}

TEST_F(ArrayBitmapFile, CreateRefusalsWriteNothingToTheMembers) {
  auto m = MakeMembers(kDisks);
  auto untouched = [&] {
    for (const auto& x : m) {
      std::vector<uint8_t> b(kOffset);
      EXPECT_TRUE(x->Read(b.data(), b.size(), 0).ok());
      if (std::any_of(b.begin(), b.end(), [](uint8_t v) { return v != 0; })) {
        return false;
      }
    }
    return true;
  };
  // The directory does not exist.
  const std::string lost = Path("no/such/dir/bm");
  absl::Status st = Create(m, lost).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr(lost));
  EXPECT_THAT(std::string(st.message()), HasSubstr("directory"));
  EXPECT_TRUE(untouched());
  // An existing non-empty file needs force (mdadm's --force).
  const std::string used = Path("used");
  WriteWholeFile(used, {1, 2, 3});
  st = Create(m, used).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("already exists"));
  EXPECT_THAT(std::string(st.message()), HasSubstr(used));
  EXPECT_EQ(ReadWholeFile(used), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_TRUE(untouched());
  // Not a regular file.
  st = Create(m, dir_).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("regular file"));
  // The mode and the path go together.
  st = Create(m, "").status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  CreateOptions o;
  o.bitmap_file = used;
  EXPECT_EQ(Array::Create(Handles(m), o).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(untouched());
  // With force the used file is overwritten; an empty file needs nothing.
  EXPECT_TRUE(Create(m, used, false, /*force=*/true).ok());
  auto n = MakeMembers(kDisks, "n");
  const std::string empty = Path("empty");
  WriteWholeFile(empty, {});
  EXPECT_TRUE(Create(n, empty).ok());
  EXPECT_TRUE(DecodeBitmapSuper(ReadWholeFile(empty)).ok());
}

// File-backed members: the bitmap file may not be one of them, under any
// name, and nothing is written when it is.
TEST_F(ArrayBitmapFile, FileThatIsAMemberIsRefused) {
  std::vector<std::string> paths;
  for (int i = 0; i < kDisks; ++i) {
    paths.push_back(Path(absl::StrFormat("d%d.img", i)));
    const int fd = open(paths.back().c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, kSize), 0);
    close(fd);
  }
  std::vector<std::unique_ptr<Member>> members;
  for (const auto& p : paths) {
    auto mem = OpenFileMember(p);
    ASSERT_TRUE(mem.ok()) << mem.status();
    members.push_back(std::move(*mem));
  }
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.bitmap = BitmapMode::kFile;
  o.bitmap_file = dir_ + "/./d2.img";  // another name for a member
  o.force = true;
  o.assume_clean = true;
  absl::Status st = Array::Create(std::move(members), o).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("member " + paths[2]));
  struct stat sb;
  ASSERT_EQ(stat(paths[2].c_str(), &sb), 0);
  EXPECT_EQ(static_cast<uint64_t>(sb.st_size), kSize) << "member truncated";
  std::vector<uint8_t> sbb = ReadWholeFile(paths[0]);
  EXPECT_FALSE(DecodeSuperblock(std::span<const uint8_t>(sbb).subspan(
                                    kSb12OffsetBytes, kSbBlockBytes))
                   .ok());
}

// A writable array holds the file's lock: a second server of the same
// array is refused.
TEST_F(ArrayBitmapFile, SecondWritableOpenIsRefusedReadOnlyIsNot) {
  auto m = MakeMembers(kDisks);
  const std::string file = Path("bm");
  auto a = MustCreateWithFile(m, file, /*assume_clean=*/true);
  ASSERT_NE(a, nullptr);
  absl::Status st = AssembleWith(m, file).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("locked"));
  AssembleOptions ro;
  ro.read_only = true;
  ro.bitmap_file = file;
  auto r = Array::Assemble(Handles(m), ro);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)->Info().bitmap.present);
  EXPECT_EQ((*r)->Info().bitmap.chunks, kMemberBytes / kBitmapChunk);
}

// create --force over the bitmap file of a running array is refused by
// the lock before anything is truncated.
TEST_F(ArrayBitmapFile, ForcedCreateOverARunningArraysFileIsRefused) {
  auto m = MakeMembers(kDisks);
  const std::string file = Path("bm");
  auto a = MustCreateWithFile(m, file, /*assume_clean=*/true);
  ASSERT_NE(a, nullptr);
  const std::vector<uint8_t> before = ReadWholeFile(file);
  auto n = MakeMembers(kDisks, "n");
  absl::Status st = Create(n, file, true, /*force=*/true).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_THAT(std::string(st.message()), HasSubstr("locked"));
  EXPECT_EQ(ReadWholeFile(file), before);
}

// md's lazy clear runs on the array's clock: a written region's bit stays
// while the clock is short of daemon_sleep since the write (however much
// real time passes) and goes at the writeback thread's next look (every
// 10 ms of real time) once it has passed. daemon_sleep is set to an hour
// in the headers (md's --delay), which no real wait could reach.
TEST(ArrayBitmap, DaemonSleepRunsOnTheArraysClock) {
  constexpr uint32_t kDelayS = 3600;
  auto m = MakeMembers(kDisks);
  {
    auto a = MustCreate(m);
    ASSERT_NE(a, nullptr);
  }
  for (const Shared& x : m) {
    absl::StatusOr<BitmapSuper> bs = ReadBitmapSuper(*x);
    ASSERT_TRUE(bs.ok()) << bs.status();
    bs->daemon_sleep = kDelayS;
    const std::vector<uint8_t> b = EncodeBitmapSuper(*bs);
    ASSERT_TRUE(x->Write(b.data(), b.size(), kArea).ok());
  }
  auto clock = std::make_shared<testutil::StepClock>();
  AssembleOptions ao;
  ao.clock = clock;
  ao.cache.bytes = 0;  // the write sets its bit at once
  auto b = Array::Assemble(Handles(m), ao);
  ASSERT_TRUE(b.ok()) << b.status();
  Array& a = **b;
  ASSERT_EQ(a.Info().bitmap.daemon_sleep_s, kDelayS);
  ASSERT_EQ(a.Info().bitmap.dirty_chunks, 0u);
  a.StartBackground();
  auto d = Pattern(4096, 31);
  ASSERT_TRUE(a.Write(d.data(), d.size(), 0).ok());
  ASSERT_EQ(a.Info().bitmap.dirty_chunks, 1u);
  // 300 ms of real time, then a second short of daemon_sleep on the clock
  // and 300 ms more (the thread ticks the bitmap once the clock has moved
  // a second since its last tick): the bit stays.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(a.Info().bitmap.dirty_chunks, 1u);
  clock->Advance(int64_t{kDelayS - 1} * 1'000'000'000);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(a.Info().bitmap.dirty_chunks, 1u);
  // A second past it: cleared.
  clock->Advance(int64_t{2} * 1'000'000'000);
  EXPECT_TRUE(testutil::WaitUntil(
      [&] { return a.Info().bitmap.dirty_chunks == 0; }, 10));
}

// A member joining gets no copy of an external bitmap (nothing at byte 0
// of it), and the array still assembles with the file afterwards.
TEST_F(ArrayBitmapFile, RebuiltMemberGetsNoCopy) {
  auto m = MakeMembers(kDisks);
  const std::string file = Path("bm");
  auto a = MustCreateWithFile(m, file, /*assume_clean=*/true);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->FailSlot(0).ok());
  Shared spare(NewMemoryMember("s0", kSize));
  ASSERT_TRUE(a->AddMember(ShareMember(spare)).ok());
  ASSERT_TRUE(a->WaitForJob().ok());
  std::vector<uint8_t> head(kSb12OffsetBytes);
  ASSERT_TRUE(spare->Read(head.data(), head.size(), 0).ok());
  EXPECT_TRUE(
      std::all_of(head.begin(), head.end(), [](uint8_t v) { return v == 0; }));
  EXPECT_FALSE(ReadBitmapSuper(*spare).ok());
  a.reset();
  auto b = AssembleWith({spare, m[1], m[2], m[3]}, file);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*b)->Info().bitmap.present);
}

}  // namespace
}  // namespace uraid
