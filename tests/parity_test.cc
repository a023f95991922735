// SPDX-License-Identifier: MIT
// Tests for parity.h: every ISA-L variant and the portable loop against a
// byte-wise reference XOR.
//
// The ISA-L entry points are interposed below (the test binary defines
// xor_gen, xor_gen_sse, ... and forwards to the real ones in libisal), so
// the tests can prove which kernel a call reached: a forced kernel is really
// used for aligned buffers, and misaligned buffers never reach ISA-L (where
// xor_gen_sse/xor_gen_avx would fault).

#include "parity/parity.h"

#include <dlfcn.h>
#include <isa-l/raid.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "base/aligned_buffer.h"
#include "gtest/gtest.h"

// ---------------------------------------------------------------------------
// Counting interposers.

namespace {

enum IsalFn { kFnXorGen, kFnSse, kFnAvx, kFnAvx512, kFnCheck, kFnCount };
constexpr const char* kFnNames[kFnCount] = {
    "xor_gen", "xor_gen_sse", "xor_gen_avx", "xor_gen_avx512", "xor_check"};
std::array<std::atomic<int>, kFnCount> g_calls;

using IsalFnPtr = int (*)(int, int, void**);

int Forward(IsalFn fn, int vects, int len, void** array) {
  static std::array<IsalFnPtr, kFnCount> real = [] {
    // dlopen rather than RTLD_NEXT: once this file defines every ISA-L
    // symbol the library uses, --as-needed linking drops libisal from the
    // binary's dependencies.
    void* isal = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);
    if (isal == nullptr) isal = dlopen("libisal.so", RTLD_NOW | RTLD_LOCAL);
    if (isal == nullptr) {
      std::fprintf(stderr, "dlopen(libisal) failed: %s\n", dlerror());
      std::abort();
    }
    std::array<IsalFnPtr, kFnCount> r{};
    for (int i = 0; i < kFnCount; ++i) {
      r[i] = reinterpret_cast<IsalFnPtr>(dlsym(isal, kFnNames[i]));
      if (r[i] == nullptr) {
        std::fprintf(stderr, "dlsym(%s) failed: %s\n", kFnNames[i], dlerror());
        std::abort();
      }
    }
    return r;
  }();
  g_calls[fn].fetch_add(1, std::memory_order_relaxed);
  return real[fn](vects, len, array);
}

}  // namespace

extern "C" {
int xor_gen(int vects, int len, void** array) {
  return Forward(kFnXorGen, vects, len, array);
}
int xor_gen_sse(int vects, int len, void** array) {
  return Forward(kFnSse, vects, len, array);
}
int xor_gen_avx(int vects, int len, void** array) {
  return Forward(kFnAvx, vects, len, array);
}
int xor_gen_avx512(int vects, int len, void** array) {
  return Forward(kFnAvx512, vects, len, array);
}
int xor_check(int vects, int len, void** array) {
  return Forward(kFnCheck, vects, len, array);
}
}

namespace uraid {
namespace {

void ResetCalls() {
  for (auto& c : g_calls) c.store(0);
}
int Calls(IsalFn fn) { return g_calls[fn].load(); }
int AllXorGenCalls() {
  return Calls(kFnXorGen) + Calls(kFnSse) + Calls(kFnAvx) + Calls(kFnAvx512);
}

struct KernelCase {
  XorKernel kernel;
  const char* name;
  IsalFn fn;  // The entry point aligned calls must reach; unused for portable.
};

const KernelCase kKernels[] = {
    {XorKernel::kDispatch, "Dispatch", kFnXorGen},
    {XorKernel::kSse, "Sse", kFnSse},
    {XorKernel::kAvx, "Avx", kFnAvx},
    {XorKernel::kAvx512, "Avx512", kFnAvx512},
    {XorKernel::kPortable, "Portable", kFnCount},
    {XorKernel::kPortableAvx2, "PortableAvx2", kFnCount},
};

void PrintTo(const KernelCase& k, std::ostream* os) { *os << k.name; }

bool CpuSupports(XorKernel kernel) {
  __builtin_cpu_init();
  switch (kernel) {
    case XorKernel::kSse:
      return __builtin_cpu_supports("sse2");
    case XorKernel::kAvx:
      return __builtin_cpu_supports("avx");
    case XorKernel::kAvx512:
      return __builtin_cpu_supports("avx512f") &&
             __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
    case XorKernel::kPortableAvx2:
      return __builtin_cpu_supports("avx2");
    default:
      return true;
  }
}

// Fast deterministic filler (xorshift64*).
class Filler {
 public:
  explicit Filler(uint64_t seed) : s_(seed | 1) {}
  uint64_t Next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545F4914F6CDD1Dull;
  }
  void Fill(uint8_t* p, size_t len) {
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      uint64_t v = Next();
      std::memcpy(p + i, &v, 8);
    }
    for (; i < len; ++i) p[i] = static_cast<uint8_t>(Next());
  }

 private:
  uint64_t s_;
};

constexpr size_t kSlack = 128;  // Room for misalignment and canaries.
constexpr uint8_t kCanary = 0xA5;

// `n` source buffers plus a destination, each its own 4 KiB-aligned
// allocation, with the data starting at a chosen offset.
class Row {
 public:
  Row(size_t n, size_t len, uint64_t seed, size_t dst_offset,
      const std::vector<size_t>& src_offsets)
      : len_(len), dst_offset_(dst_offset), dst_buf_(len + 2 * kSlack) {
    Filler f(seed);
    for (size_t j = 0; j < n; ++j) {
      bufs_.emplace_back(len + 2 * kSlack);
      uint8_t* p = bufs_.back().data() + src_offsets[j % src_offsets.size()];
      f.Fill(p, len);
      srcs_.push_back(p);
    }
    std::memset(dst_buf_.data(), kCanary, dst_buf_.size());
  }

  uint8_t* dst() { return dst_buf_.data() + dst_offset_; }
  std::vector<const void*>& srcs() { return srcs_; }

  // Byte-wise XOR of the sources: the reference every kernel must equal.
  std::vector<uint8_t> Reference() const {
    std::vector<uint8_t> want(len_, 0);
    for (const void* s : srcs_) {
      const auto* b = static_cast<const uint8_t*>(s);
      for (size_t i = 0; i < len_; ++i) want[i] ^= b[i];
    }
    return want;
  }

  // dst matches `want` and nothing outside [dst, dst + len) was touched.
  ::testing::AssertionResult DstIs(const std::vector<uint8_t>& want) {
    const uint8_t* base = dst_buf_.data();
    for (size_t i = 0; i < dst_offset_; ++i) {
      if (base[i] != kCanary) {
        return ::testing::AssertionFailure()
               << "underrun at -" << dst_offset_ - i;
      }
    }
    for (size_t i = dst_offset_ + len_; i < dst_buf_.size(); ++i) {
      if (base[i] != kCanary) {
        return ::testing::AssertionFailure()
               << "overrun at +" << i - dst_offset_ - len_;
      }
    }
    if (std::memcmp(dst(), want.data(), len_) != 0) {
      size_t i = 0;
      while (dst()[i] == want[i]) ++i;
      return ::testing::AssertionFailure()
             << "first mismatch at byte " << i << " of " << len_;
    }
    return ::testing::AssertionSuccess();
  }

 private:
  size_t len_;
  size_t dst_offset_;
  AlignedBuffer dst_buf_;
  std::vector<AlignedBuffer> bufs_;
  std::vector<const void*> srcs_;
};

// 127/128/129: either side of one block of the portable loops.
const size_t kLengths[] = {1,   7,   31,   32,        127,
                           128, 129, 4096, 4096 + 17, 1 << 20};

class XorKernelTest : public ::testing::TestWithParam<KernelCase> {
 protected:
  void SetUp() override {
    if (!CpuSupports(GetParam().kernel)) {
      GTEST_SKIP() << GetParam().name << " not supported by this CPU";
    }
    SetXorKernelForTesting(GetParam().kernel);
    ResetCalls();
  }
  void TearDown() override { SetXorKernelForTesting(XorKernel::kDispatch); }

  bool UsesIsal() const {
    return GetParam().kernel != XorKernel::kPortable &&
           GetParam().kernel != XorKernel::kPortableAvx2;
  }

  // Checks that the last operation made `n` xor_gen calls, all through the
  // selected entry point. When ISA-L's own dispatcher is used, its internal
  // call to the per-ISA kernel may or may not go through our interposers
  // (it does when the binary exports its symbols, e.g. under ASan), so only
  // the dispatcher itself is counted then.
  ::testing::AssertionResult XorGenCalls(int n) const {
    const int all = AllXorGenCalls();
    if (n == 0 || !UsesIsal()) {
      if (all == 0) return ::testing::AssertionSuccess();
      return ::testing::AssertionFailure() << all << " ISA-L xor_gen calls";
    }
    const int got = Calls(GetParam().fn);
    const bool ok = GetParam().kernel == XorKernel::kDispatch
                        ? got == n
                        : got == n && all == n;
    if (ok) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << got << " calls to " << kFnNames[GetParam().fn] << " and " << all
           << " xor_gen calls in all, want " << n;
  }
};

TEST_P(XorKernelTest, AlignedMatchesReference) {
  for (size_t len : kLengths) {
    for (size_t n = 0; n <= 16; ++n) {
      SCOPED_TRACE("len " + std::to_string(len) + " sources " +
                   std::to_string(n));
      Row row(n, len, len * 100 + n, 0, {0});
      ResetCalls();
      Xor(row.dst(), row.srcs(), len);
      ASSERT_TRUE(row.DstIs(row.Reference()));
      // ISA-L needs two sources; fewer are memset/memmove.
      EXPECT_TRUE(XorGenCalls(n >= 2 ? 1 : 0));
    }
  }
}

// Offsets chosen to trap each ISA-L variant if the alignment gate were
// wrong: 8 faults xor_gen_sse, 16 faults xor_gen_avx, odd offsets fault
// both. Only the portable loop may run.
TEST_P(XorKernelTest, MisalignedTakesPortablePath) {
  struct Offsets {
    size_t dst;
    std::vector<size_t> srcs;
  };
  const Offsets kOffsets[] = {
      {16, {16}},         // 16-aligned only: would fault xor_gen_avx.
      {8, {8}},           // 8-aligned: would fault xor_gen_sse too.
      {1, {3, 5, 7}},     // Odd.
      {16, {0}},          // Only dst misaligned.
      {0, {0, 0, 48}},    // One source in three misaligned.
      {0, {32, 64, 96}},  // All 32-aligned: must use ISA-L (control).
  };
  for (const Offsets& o : kOffsets) {
    for (size_t len : kLengths) {
      for (size_t n : {2, 3, 5, 16}) {
        // Row gives source j the offset o.srcs[j % o.srcs.size()].
        bool all_aligned = o.dst % 32 == 0;
        for (size_t j = 0; j < n; ++j) {
          all_aligned = all_aligned && o.srcs[j % o.srcs.size()] % 32 == 0;
        }
        SCOPED_TRACE("dst offset " + std::to_string(o.dst) + " len " +
                     std::to_string(len) + " sources " + std::to_string(n));
        Row row(n, len, len + n, o.dst, o.srcs);
        ResetCalls();
        Xor(row.dst(), row.srcs(), len);
        ASSERT_TRUE(row.DstIs(row.Reference()));
        EXPECT_TRUE(XorGenCalls(all_aligned ? 1 : 0));
      }
    }
  }
}

// Source counts beyond one ISA-L pointer array are folded in batches.
TEST_P(XorKernelTest, ManySources) {
  for (size_t n : {30, 31, 32, 33, 61, 62, 64, 70}) {
    for (size_t len : {size_t{31}, size_t{4096 + 17}}) {
      SCOPED_TRACE("sources " + std::to_string(n) + " len " +
                   std::to_string(len));
      Row row(n, len, n * 7 + len, 0, {0});
      ResetCalls();
      Xor(row.dst(), row.srcs(), len);
      ASSERT_TRUE(row.DstIs(row.Reference()));
      // 31 sources fill one ISA-L call; each further call folds up to 30
      // more into dst in place.
      const int want_calls =
          n <= 31 ? 1 : 1 + static_cast<int>((n - 31 + 29) / 30);
      EXPECT_TRUE(XorGenCalls(want_calls));
    }
  }
}

// RMW parity update, P' = P ^ Dold ^ Dnew, with dst == srcs[0]: must equal
// the parity recomputed from scratch.
TEST_P(XorKernelTest, InPlaceReadModifyWrite) {
  for (size_t offset : {size_t{0}, size_t{8}, size_t{16}}) {
    for (size_t len : kLengths) {
      SCOPED_TRACE("offset " + std::to_string(offset) + " len " +
                   std::to_string(len));
      const size_t dd = 4;
      Row data(dd, len, len ^ 0xD00D, offset, {offset});
      Row fresh(1, len, len ^ 0xBEEF, offset, {offset});
      // P over the old row.
      AlignedBuffer pbuf(len + kSlack);
      uint8_t* p = pbuf.data() + offset;
      Xor(p, data.srcs(), len);
      ASSERT_TRUE(XorIsZero(
          {std::vector<const void*>{data.srcs()[0], data.srcs()[1],
                                    data.srcs()[2], data.srcs()[3], p}},
          len));

      // Replace data chunk 2 and update P in place.
      const void* old_d = data.srcs()[2];
      const void* new_d = fresh.srcs()[0];
      const void* update[] = {p, old_d, new_d};
      ResetCalls();
      Xor(p, update, len);
      EXPECT_TRUE(XorGenCalls(offset == 0 ? 1 : 0));

      data.srcs()[2] = new_d;
      std::vector<uint8_t> want = data.Reference();
      ASSERT_EQ(std::memcmp(p, want.data(), len), 0);

      // Same via XorAccumulate, twice (XOR is an involution).
      XorAccumulate(p, new_d, len);
      XorAccumulate(p, old_d, len);
      data.srcs()[2] = old_d;
      want = data.Reference();
      ASSERT_EQ(std::memcmp(p, want.data(), len), 0);
    }
  }
}

TEST_P(XorKernelTest, XorAccumulateMatchesReference) {
  for (size_t offset : {size_t{0}, size_t{1}, size_t{16}}) {
    for (size_t len : kLengths) {
      Row row(2, len, len + offset, offset, {offset});
      std::memcpy(row.dst(), row.srcs()[0], len);
      ResetCalls();
      XorAccumulate(row.dst(), row.srcs()[1], len);
      ASSERT_TRUE(row.DstIs(row.Reference())) << "len " << len;
      EXPECT_TRUE(XorGenCalls(offset == 0 ? 1 : 0));
    }
  }
}

TEST_P(XorKernelTest, XorIsZero) {
  for (size_t offset : {size_t{0}, size_t{8}, size_t{16}, size_t{3}}) {
    for (size_t len : kLengths) {
      for (size_t n : {1, 2, 3, 5, 9}) {
        SCOPED_TRACE("offset " + std::to_string(offset) + " len " +
                     std::to_string(len) + " data " + std::to_string(n));
        Row row(n, len, n + len, offset, {offset});
        // A consistent row: data plus its parity.
        Xor(row.dst(), row.srcs(), len);
        std::vector<const void*> all = row.srcs();
        all.push_back(row.dst());
        ResetCalls();
        EXPECT_TRUE(XorIsZero(all, len));
        const bool isal = UsesIsal() && offset % 16 == 0;
        EXPECT_EQ(Calls(kFnCheck), isal ? 1 : 0);

        // One flipped bit anywhere breaks it.
        for (size_t at : {size_t{0}, len / 2, len - 1}) {
          row.dst()[at] ^= 0x10;
          EXPECT_FALSE(XorIsZero(all, len)) << "flip at " << at;
          row.dst()[at] ^= 0x10;
          auto* first =
              const_cast<uint8_t*>(static_cast<const uint8_t*>(row.srcs()[0]));
          first[at] ^= 0x80;
          EXPECT_FALSE(XorIsZero(all, len)) << "flip at " << at;
          first[at] ^= 0x80;
        }
        EXPECT_TRUE(XorIsZero(all, len));
      }
    }
  }
}

TEST_P(XorKernelTest, ReconstructsAnyMissingChunk) {
  const size_t chunk = 64 * 1024;
  for (size_t n : {3, 4, 5, 8}) {
    const size_t dd = n - 1;
    Row data(dd, chunk, n, 0, {0});
    AlignedBuffer parity(chunk);
    Xor(parity.data(), data.srcs(), chunk);
    std::vector<const void*> row = data.srcs();
    row.push_back(parity.data());
    for (size_t missing = 0; missing < n; ++missing) {
      std::vector<const void*> survivors;
      for (size_t j = 0; j < n; ++j) {
        if (j != missing) survivors.push_back(row[j]);
      }
      AlignedBuffer rebuilt(chunk);
      Xor(rebuilt.data(), survivors, chunk);
      EXPECT_EQ(std::memcmp(rebuilt.data(), row[missing], chunk), 0)
          << "disks " << n << " missing " << missing;
      // Misaligned destination (portable path) gives the same answer.
      AlignedBuffer odd(chunk + 8);
      Xor(odd.data() + 8, survivors, chunk);
      EXPECT_EQ(std::memcmp(odd.data() + 8, row[missing], chunk), 0);
    }
  }
}

#if defined(__x86_64__)
// The AVX state components in use (XGETBV with ECX = 1, "XINUSE"), or 0 when
// the CPU cannot report them.
uint64_t AvxUpperStateInUse() {
  unsigned a, b, c, d;
  if (!__builtin_cpu_supports("avx") ||
      !__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || (a & (1u << 2)) == 0) {
    return 0;
  }
  uint32_t lo, hi;
  asm volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  // Bit 2: upper halves of ymm0-15; bit 6: upper halves of zmm0-15. Both
  // make later legacy-SSE code pay a transition penalty; vzeroupper clears
  // them.
  return ((uint64_t{hi} << 32) | lo) & ((1u << 2) | (1u << 6));
}
#endif

// ISA-L's AVX/AVX-512 kernels return with dirty upper register state; Xor
// must clean it (vzeroupper) so callers' SSE code doesn't stall. The same
// for the AVX2 portable loop, on aligned and misaligned buffers.
TEST_P(XorKernelTest, LeavesNoDirtyUpperVectorState) {
#if defined(__x86_64__)
  for (size_t offset : {size_t{0}, size_t{16}}) {
    for (size_t n : {2, 3, 5, 40}) {
      Row row(n, 4096, n, offset, {offset});
      Xor(row.dst(), row.srcs(), 4096);
      EXPECT_EQ(AvxUpperStateInUse(), 0u)
          << "offset " << offset << " sources " << n;
      ASSERT_TRUE(row.DstIs(row.Reference()));
    }
  }
#else
  GTEST_SKIP() << "x86-64 only";
#endif
}

INSTANTIATE_TEST_SUITE_P(AllKernels, XorKernelTest,
                         ::testing::ValuesIn(kKernels),
                         [](const ::testing::TestParamInfo<KernelCase>& info) {
                           return std::string(info.param.name);
                         });

// ---------------------------------------------------------------------------
// Kernel-independent behaviour.

TEST(XorTest, ZeroAndOneSource) {
  for (size_t offset : {size_t{0}, size_t{5}}) {
    Row none(0, 4096 + 17, 1, offset, {0});
    Xor(none.dst(), none.srcs(), 4096 + 17);
    EXPECT_TRUE(none.DstIs(std::vector<uint8_t>(4096 + 17, 0)));

    Row one(1, 4096 + 17, 2, offset, {offset});
    Xor(one.dst(), one.srcs(), 4096 + 17);
    EXPECT_TRUE(one.DstIs(one.Reference()));
  }
  // Zero length touches nothing.
  Row row(3, 64, 3, 0, {0});
  Xor(row.dst(), row.srcs(), 0);
  std::vector<uint8_t> canary(64, kCanary);
  EXPECT_EQ(std::memcmp(row.dst(), canary.data(), 64), 0);
}

TEST(XorTest, SingleSourceAliasingDestination) {
  // The header allows dst == srcs[0]; with one source that is a no-op copy.
  AlignedBuffer buf(4096 + 8);
  for (size_t offset : {size_t{0}, size_t{8}}) {
    uint8_t* p = buf.data() + offset;
    for (int i = 0; i < 4096; ++i) p[i] = static_cast<uint8_t>(i * 31);
    const void* src[] = {p};
    Xor(p, src, 4096);
    for (int i = 0; i < 4096; ++i) {
      ASSERT_EQ(p[i], static_cast<uint8_t>(i * 31));
    }
  }
}

TEST(XorTest, UnsupportedForcedKernelFallsBack) {
  // Whatever the CPU, forcing any kernel must never crash or miscompute.
  for (const KernelCase& k : kKernels) {
    SetXorKernelForTesting(k.kernel);
    Row row(3, 4096, 9, 0, {0});
    Xor(row.dst(), row.srcs(), 4096);
    EXPECT_TRUE(row.DstIs(row.Reference())) << k.name;
  }
  SetXorKernelForTesting(XorKernel::kDispatch);
}

TEST(XorIsZeroTest, DegenerateInputs) {
  AlignedBuffer zero(4096, /*zero=*/true);
  AlignedBuffer one(4096, /*zero=*/true);
  one.data()[4095] = 1;
  EXPECT_TRUE(XorIsZero({}, 4096));
  EXPECT_TRUE(XorIsZero({std::vector<const void*>{one.data()}}, 0));
  EXPECT_TRUE(XorIsZero({std::vector<const void*>{zero.data()}}, 4096));
  EXPECT_FALSE(XorIsZero({std::vector<const void*>{one.data()}}, 4096));
  EXPECT_TRUE(
      XorIsZero({std::vector<const void*>{one.data(), one.data()}}, 4096));
  EXPECT_FALSE(
      XorIsZero({std::vector<const void*>{one.data(), zero.data()}}, 4096));
  // More buffers than one ISA-L call takes.
  std::vector<const void*> many(40, one.data());
  EXPECT_TRUE(XorIsZero(many, 4096));
  many.push_back(one.data());
  EXPECT_FALSE(XorIsZero(many, 4096));
}

TEST(IsAllZeroTest, FindsAnySingleNonZeroByte) {
  AlignedBuffer buf(4096 + 64, /*zero=*/true);
  for (size_t offset : {size_t{0}, size_t{1}, size_t{7}, size_t{16}}) {
    uint8_t* p = buf.data() + offset;
    for (size_t len :
         {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{63},
          size_t{64}, size_t{65}, size_t{127}, size_t{128}, size_t{129},
          size_t{255}, size_t{256}, size_t{257}, size_t{1000}, size_t{4096}}) {
      ASSERT_TRUE(IsAllZero(p, len)) << "len " << len;
      for (size_t at = 0; at < len; ++at) {
        p[at] = 0x40;
        ASSERT_FALSE(IsAllZero(p, len)) << "len " << len << " at " << at;
        p[at] = 0;
      }
      // A non-zero byte just outside the range is ignored.
      if (offset > 0) {
        p[-1] = 1;
        p[len] = 1;
        ASSERT_TRUE(IsAllZero(p, len)) << "len " << len;
        p[-1] = 0;
        p[len] = 0;
      }
    }
  }
}

TEST(IsAllZeroTest, LargeBuffer) {
  const size_t len = 16 << 20;
  AlignedBuffer buf(len, /*zero=*/true);
  EXPECT_TRUE(IsAllZero(buf.data(), len));
  buf.data()[len - 1] = 1;
  EXPECT_FALSE(IsAllZero(buf.data(), len));
  buf.data()[len - 1] = 0;
  buf.data()[len / 2 + 3] = 0x80;
  EXPECT_FALSE(IsAllZero(buf.data(), len));
}

}  // namespace
}  // namespace uraid
