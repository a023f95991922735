// The write-intent bitmap inside the array: created in md's place and
// format, set before writes, used after a crash to resync only the regions
// with bits set (a crash is simulated by copying the members while the
// array is active), stale and foreign bitmaps, and refusal of corrupt ones.

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

std::vector<Shared> MakeMembers(int n, const std::string& prefix = "m") {
  std::vector<Shared> v;
  for (int i = 0; i < n; ++i) {
    v.push_back(
        Shared(NewMemoryMember(absl::StrFormat("%s%d", prefix, i), kSize)));
  }
  return v;
}

std::vector<std::unique_ptr<Member>> Handles(const std::vector<Shared>& v) {
  std::vector<std::unique_ptr<Member>> out;
  for (const auto& m : v) out.push_back(ShareMember(m));
  return out;
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

std::unique_ptr<Array> MustCreate(const std::vector<Shared>& m,
                                  BitmapMode mode = BitmapMode::kInternal) {
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = kOffset;
  o.bitmap = mode;
  o.bitmap_chunk_bytes = kBitmapChunk;
  o.cache.bytes = 0;
  auto a = Array::Create(Handles(m), o);
  EXPECT_TRUE(a.ok()) << a.status();
  return std::move(*a);
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
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
  const uint64_t sd = (kDisks - 1) * kChunk;
  // Writes in stripe 1 (region 0) and stripes 40..41 (region 10).
  auto d1 = Pattern(sd, 1), d2 = Pattern(2 * sd, 2);
  ASSERT_TRUE(arr.Write(d1.data(), d1.size(), 1 * sd).ok());
  ASSERT_TRUE(arr.Write(d2.data(), d2.size(), 40 * sd).ok());
  ASSERT_TRUE(arr.Flush().ok());
  EXPECT_FALSE(arr.Info().clean);
  auto image = CrashImage(m);
  b->reset();
  // Tear the parity of stripe 41 on the image, as a crash mid-write would.
  {
    uint8_t junk[512];
    std::memset(junk, 0xEE, sizeof junk);
    // stripe 41, left-symmetric, 4 disks: parity on slot 3 - 41 % 4 = 2.
    ASSERT_TRUE(
        image[2]->Write(junk, sizeof junk, kOffset + 41 * kChunk + 4096).ok());
  }
  auto c = Array::Assemble(Handles(image), {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE((*c)->Info().bitmap.dirty_chunks >= 2);
  ASSERT_TRUE((*c)->Resync().ok());
  Counters k = (*c)->Info().counters;
  EXPECT_EQ(k.resync_bitmap_chunks, 2u);
  EXPECT_EQ(k.resynced_stripes, 2 * kBitmapChunk / kChunk);
  EXPECT_EQ(k.resync_repairs, 1u);
  EXPECT_EQ(*(*c)->CheckParity(nullptr), 0u);
  std::vector<uint8_t> got(2 * sd);
  ASSERT_TRUE((*c)->Read(got.data(), got.size(), 40 * sd).ok());
  EXPECT_EQ(got, d2);
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

}  // namespace
}  // namespace uraid
