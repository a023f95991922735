// The randomized model test: a flat reference buffer beside an array of
// in-memory members. Random reads, writes (any size and alignment), trims,
// zeroes and flushes across every layout, several chunk sizes and disk
// counts; a member fails part-way; the array is stopped and re-assembled;
// every read is checked against the reference and, while healthy, every
// stripe's parity. Seeded: set URAID_SEED to replay; the seed is printed on
// failure.

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "uraid/array.h"

namespace uraid {
namespace {

uint64_t Seed() {
  const char* s = std::getenv("URAID_SEED");
  return s ? std::strtoull(s, nullptr, 0) : 20261130;
}

struct Config {
  Layout layout;
  uint64_t chunk;
  int disks;
  int cache;  // 0: off, 1: tiny (4 stripes: constant eviction), 2: default
};

CacheOptions CacheFor(const Config& c) {
  CacheOptions o;
  if (c.cache == 0) o.bytes = 0;
  if (c.cache == 1) o.bytes = 4 * c.chunk * (c.disks - 1);
  return o;
}

class ModelRun {
 public:
  ModelRun(const Config& c, uint64_t seed) : c_(c), rng_(seed) {
    const uint64_t stripes = c.chunk >= 512 * 1024 ? 6 : 24;
    member_bytes_ = stripes * c.chunk;
    for (int i = 0; i < c.disks; ++i) {
      auto mem = std::shared_ptr<Member>(NewMemoryMember(
          absl::StrFormat("m%d", i), kDataOffset + member_bytes_));
      faulty_.push_back(std::make_shared<FaultyMember>(mem));
    }
    ref_.assign(member_bytes_ * (c.disks - 1), 0);
  }

  std::vector<std::unique_ptr<Member>> Members(int skip = -1) {
    std::vector<std::unique_ptr<Member>> v;
    for (int i = 0; i < c_.disks; ++i) {
      if (i != skip) v.push_back(ShareMember(faulty_[i]));
    }
    // Assembly must not depend on order.
    std::shuffle(v.begin(), v.end(), rng_);
    return v;
  }

  void Create() {
    CreateOptions o;
    o.layout = c_.layout;
    o.chunk_bytes = c_.chunk;
    o.data_offset_bytes = kDataOffset;
    o.member_bytes = member_bytes_;
    o.cache = CacheFor(c_);
    std::vector<std::unique_ptr<Member>> v;
    for (int i = 0; i < c_.disks; ++i) v.push_back(ShareMember(faulty_[i]));
    auto a = Array::Create(std::move(v), o);
    ASSERT_TRUE(a.ok()) << a.status();
    array_ = std::move(*a);
    ASSERT_EQ(array_->size(), ref_.size());
  }

  void Reassemble(int skip) {
    array_.reset();
    AssembleOptions o;
    o.cache = CacheFor(c_);
    auto a = Array::Assemble(Members(skip), o);
    ASSERT_TRUE(a.ok()) << a.status();
    array_ = std::move(*a);
  }

  uint64_t RandomLen() {
    const uint64_t sd = c_.chunk * (c_.disks - 1);
    switch (rng_() % 6) {
      case 0: return 1 + rng_() % 600;                 // sub-sector
      case 1: return 4096 * (1 + rng_() % 4);          // small aligned
      case 2: return c_.chunk;                          // one chunk
      case 3: return sd;                                // one stripe
      case 4: return 1 + rng_() % (2 * sd);             // anything
      default: return 1 + rng_() % c_.chunk;
    }
  }
  uint64_t RandomOffset(uint64_t len) {
    uint64_t max = ref_.size() - len;
    uint64_t off = rng_() % (max + 1);
    if (rng_() % 2) off -= off % 4096;  // often aligned, sometimes not
    return off;
  }

  void Step() {
    uint64_t len = std::min<uint64_t>(RandomLen(), ref_.size());
    uint64_t off = RandomOffset(len);
    int op = static_cast<int>(rng_() % 100);
    if (op < 55) {
      std::vector<uint8_t> data(len);
      for (auto& b : data) b = static_cast<uint8_t>(rng_());
      absl::Status st = array_->Write(data.data(), len, off, rng_() % 10 == 0);
      ASSERT_TRUE(st.ok()) << "write " << off << "+" << len << ": " << st;
      std::memcpy(ref_.data() + off, data.data(), len);
    } else if (op < 85) {
      std::vector<uint8_t> got(len);
      absl::Status st = array_->Read(got.data(), len, off);
      ASSERT_TRUE(st.ok()) << "read " << off << "+" << len << ": " << st;
      ASSERT_EQ(0, std::memcmp(got.data(), ref_.data() + off, len))
          << "read " << off << "+" << len << " differs from the reference";
    } else if (op < 90) {
      ASSERT_TRUE(array_->Zero(len, off, false).ok());
      std::memset(ref_.data() + off, 0, len);
    } else if (op < 95) {
      ASSERT_TRUE(array_->Trim(len, off, false).ok());
      // Whole stripes inside the range read back as zeros; the rest stays.
      const uint64_t sd = c_.chunk * (c_.disks - 1);
      uint64_t first = (off + sd - 1) / sd, end = (off + len) / sd;
      for (uint64_t s = first; s < end; ++s) {
        std::memset(ref_.data() + s * sd, 0, sd);
      }
    } else {
      ASSERT_TRUE(array_->Flush().ok());
    }
  }

  void VerifyAll() {
    std::vector<uint8_t> got(ref_.size());
    // Read in odd-sized pieces so piece boundaries move around.
    for (uint64_t off = 0; off < ref_.size();) {
      uint64_t n = std::min<uint64_t>(ref_.size() - off, 1 + rng_() % (3 << 20));
      ASSERT_TRUE(array_->Read(got.data() + off, n, off).ok());
      off += n;
    }
    for (uint64_t i = 0; i < ref_.size(); ++i) {
      ASSERT_EQ(got[i], ref_[i]) << "byte " << i << " differs";
    }
  }

  void CheckParity() {
    std::vector<uint64_t> bad;
    auto n = array_->CheckParity(&bad);
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_EQ(*n, 0u) << "stripes with bad parity, first "
                      << (bad.empty() ? 0 : bad[0]);
  }

  static constexpr uint64_t kDataOffset = 1 << 20;
  Config c_;
  std::mt19937_64 rng_;
  uint64_t member_bytes_;
  std::vector<std::shared_ptr<FaultyMember>> faulty_;
  std::vector<uint8_t> ref_;
  std::unique_ptr<Array> array_;
};

class ModelTest : public testing::TestWithParam<Config> {};

TEST_P(ModelTest, RandomOpsAgainstReference) {
  const Config c = GetParam();
  const uint64_t seed =
      Seed() ^ (static_cast<uint64_t>(c.layout) << 40) ^ (c.chunk << 8) ^
      static_cast<uint64_t>(c.disks);
  SCOPED_TRACE(absl::StrFormat("seed=%d (URAID_SEED=%d)", seed, Seed()));
  ModelRun run(c, seed);
  ASSERT_NO_FATAL_FAILURE(run.Create());
  constexpr int kOps = 300;  // x 72 configurations = 21,600 operations

  // Healthy phase, then a clean stop and re-assembly.
  for (int i = 0; i < kOps / 2; ++i) ASSERT_NO_FATAL_FAILURE(run.Step());
  ASSERT_NO_FATAL_FAILURE(run.CheckParity());
  ASSERT_NO_FATAL_FAILURE(run.Reassemble(-1));
  ASSERT_TRUE(run.array_->Info().clean);
  ASSERT_NO_FATAL_FAILURE(run.VerifyAll());

  // A member dies under I/O; the array carries on degraded.
  const int victim = static_cast<int>(run.rng_() % c.disks);
  run.faulty_[victim]->SetFailed(true);
  for (int i = 0; i < kOps / 2; ++i) ASSERT_NO_FATAL_FAILURE(run.Step());
  ArrayInfo info = run.array_->Info();
  EXPECT_TRUE(info.degraded || run.array_->Info().counters.member_reads == 0);
  ASSERT_NO_FATAL_FAILURE(run.VerifyAll());

  // Restart without it: a clean degraded array assembles and reads back.
  run.faulty_[victim]->SetFailed(false);
  ASSERT_NO_FATAL_FAILURE(run.Reassemble(victim));
  ASSERT_TRUE(run.array_->Info().degraded);
  ASSERT_NO_FATAL_FAILURE(run.VerifyAll());
}

std::vector<Config> AllConfigs() {
  std::vector<Config> v;
  for (int l = 0; l <= 5; ++l) {
    for (uint64_t chunk : {4096ull, 65536ull, 524288ull}) {
      for (int disks : {3, 4, 5, 8}) {
        v.push_back(Config{static_cast<Layout>(l), chunk, disks,
                           static_cast<int>(v.size() % 3)});
      }
    }
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    AllLayouts, ModelTest, testing::ValuesIn(AllConfigs()),
    [](const testing::TestParamInfo<Config>& p) {
      return absl::StrFormat("L%d_C%dK_N%d_cache%d",
                             static_cast<int>(p.param.layout),
                             p.param.chunk / 1024, p.param.disks,
                             p.param.cache);
    });

}  // namespace
}  // namespace uraid
