// SPDX-License-Identifier: MIT
// File-member backend: buffered and O_DIRECT I/O at any alignment (bounce
// buffers), size, flush, hole punching reads back zeros, exclusive locks,
// and the errors for directories, read-only members and past-the-end I/O.

#include "uraid/member.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uraid {
namespace {

using ::testing::HasSubstr;

class FileMemberTest : public testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    // O_DIRECT needs a real filesystem; tmpfs refuses it. The build tree
    // sits on one.
    char tmpl[] = "uraid-member-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/m.img";
    int fd = open(path_.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, kSize), 0);
    close(fd);
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  static constexpr uint64_t kSize = 1 << 20;
  std::string dir_, path_;
};

TEST_P(FileMemberTest, AnyAlignmentRoundTrips) {
  FileMemberOptions o;
  o.direct = GetParam();
  auto m = OpenFileMember(path_, o);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->Size(), kSize);
  std::vector<uint8_t> ref(kSize, 0);
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i) {
    size_t len = 1 + rng() % 20000;
    uint64_t off = rng() % (kSize - len);
    std::vector<uint8_t> buf(len + 1);
    uint8_t* p = buf.data() + (rng() % 2);  // misaligned buffers too
    for (size_t j = 0; j < len; ++j) p[j] = static_cast<uint8_t>(rng());
    ASSERT_TRUE((*m)->Write(p, len, off).ok());
    std::copy(p, p + len, ref.begin() + off);
    size_t rlen = 1 + rng() % 20000;
    uint64_t roff = rng() % (kSize - rlen);
    std::vector<uint8_t> got(rlen + 3);
    ASSERT_TRUE((*m)->Read(got.data() + 3, rlen, roff).ok());
    ASSERT_TRUE(std::equal(got.begin() + 3, got.end(), ref.begin() + roff));
  }
  ASSERT_TRUE((*m)->Flush().ok());
  // Hole punching reads back zeros.
  ASSERT_TRUE((*m)->DiscardZeroes());
  ASSERT_TRUE((*m)->Discard(65536, 65536).ok());
  std::vector<uint8_t> z(65536);
  ASSERT_TRUE((*m)->Read(z.data(), z.size(), 65536).ok());
  EXPECT_EQ(z, std::vector<uint8_t>(65536, 0));
}

// The probes jobs make stripe after stripe remember a data extent; a
// discard inside it leaves what it punched as holes (NextDataOffset skips
// them) and the data around them as data, whether the extent is forgotten
// or kept.
TEST_P(FileMemberTest, ProbesAfterDiscardsSeeTheHoles) {
  FileMemberOptions o;
  o.direct = GetParam();
  auto m = OpenFileMember(path_, o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> ones(kSize, 1);
  ASSERT_TRUE((*m)->Write(ones.data(), ones.size(), 0).ok());
  constexpr uint64_t k = 64 * 1024;
  EXPECT_EQ(*(*m)->NextDataOffset(0), 0u);  // learns [0, kSize)
  ASSERT_TRUE((*m)->Discard(k, 0).ok());    // (len, offset)
  EXPECT_EQ(*(*m)->NextDataOffset(0), k);
  EXPECT_EQ(*(*m)->NextDataOffset(k + 4096), k + 4096);
  ASSERT_TRUE((*m)->Discard(k, 2 * k).ok());
  EXPECT_EQ(*(*m)->NextDataOffset(2 * k), 3 * k);
  EXPECT_EQ(*(*m)->NextDataOffset(k), k);
  ASSERT_TRUE((*m)->Discard(k, kSize - k).ok());
  EXPECT_EQ(*(*m)->NextDataOffset(kSize - k), kSize) << "only holes after";
  EXPECT_EQ(*(*m)->NextDataOffset(kSize - 2 * k), kSize - 2 * k);
}

TEST_P(FileMemberTest, ErrorsNameTheMember) {
  FileMemberOptions o;
  o.direct = GetParam();
  auto m = OpenFileMember(path_, o);
  ASSERT_TRUE(m.ok());
  uint8_t b[16];
  absl::Status st = (*m)->Read(b, sizeof(b), kSize - 8);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(std::string(st.message()), HasSubstr(path_));
  EXPECT_THAT(std::string(st.message()), HasSubstr("past the end"));

  // A second open is refused: members are locked.
  auto again = OpenFileMember(path_, o);
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("in use"));
  m->reset();
  EXPECT_TRUE(OpenFileMember(path_, o).ok());
}

// WriteFua (one pwritev2 with RWF_DSYNC where it can) stores exactly what
// Write stores, at any alignment (O_DIRECT's unaligned ones bounce through
// Write then Flush), and refuses what Write refuses: past the end, a
// truncated file, a read-only member.
TEST_P(FileMemberTest, WriteFuaStoresLikeWrite) {
  FileMemberOptions o;
  o.direct = GetParam();
  auto m = OpenFileMember(path_, o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> ref(kSize, 0);
  std::mt19937 rng(11);
  for (int i = 0; i < 100; ++i) {
    const bool aligned = i % 2 == 0;
    size_t len = aligned ? 4096 * (1 + rng() % 4) : 1 + rng() % 9000;
    uint64_t off =
        aligned ? 4096 * (rng() % (kSize / 4096 - 4)) : rng() % (kSize - len);
    std::vector<uint8_t> buf(len);
    for (uint8_t& b : buf) b = static_cast<uint8_t>(rng());
    ASSERT_TRUE((*m)->WriteFua(buf.data(), len, off).ok()) << i;
    std::copy(buf.begin(), buf.end(), ref.begin() + off);
  }
  std::vector<uint8_t> got(kSize);
  ASSERT_TRUE((*m)->Read(got.data(), got.size(), 0).ok());
  EXPECT_TRUE(got == ref);
  // What a fresh open reads from the file agrees too.
  m->reset();
  auto again = OpenFileMember(path_);
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE((*again)->Read(got.data(), got.size(), 0).ok());
  EXPECT_TRUE(got == ref);

  uint8_t b[4096] = {};
  absl::Status past = (*again)->WriteFua(b, sizeof(b), kSize - 2048);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_THAT(std::string(past.message()), HasSubstr(path_));
  ASSERT_EQ(truncate(path_.c_str(), 8192), 0);
  absl::Status shrank = (*again)->WriteFua(b, sizeof(b), 0);
  EXPECT_EQ(shrank.code(), absl::StatusCode::kOutOfRange) << shrank;
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8192) << "the refused write did not grow the file";
}

// ReadVector fills its buffers from consecutive bytes, as a Read of each
// in turn would: any lengths and alignments (with O_DIRECT, aligned
// buffers take the one preadv and unaligned ones one bounced read), and a
// range past the end is refused whole.
TEST_P(FileMemberTest, ReadVectorFillsEachBufferFromConsecutiveBytes) {
  FileMemberOptions o;
  o.direct = GetParam();
  auto m = OpenFileMember(path_, o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> ref(kSize);
  std::mt19937 rng(7);
  for (uint8_t& b : ref) b = static_cast<uint8_t>(rng());
  ASSERT_TRUE((*m)->Write(ref.data(), ref.size(), 0).ok());
  constexpr size_t kAlign = 4096;
  for (int i = 0; i < 200; ++i) {
    // Every other vector is 4 KiB-aligned throughout (the direct path).
    const bool aligned = i % 2 == 0;
    const int n = 1 + static_cast<int>(rng() % 5);
    std::vector<size_t> lens;
    size_t total = 0;
    for (int k = 0; k < n; ++k) {
      lens.push_back(aligned ? kAlign * (1 + rng() % 4) : 1 + rng() % 20000);
      total += lens.back();
    }
    uint64_t off = rng() % (kSize - total);
    if (aligned) off = off / kAlign * kAlign;
    std::vector<std::unique_ptr<uint8_t, decltype(&std::free)>> bufs;
    std::vector<iovec> iov;
    for (size_t len : lens) {
      // aligned_alloc wants a multiple of the alignment.
      const size_t room = (len + 2 * kAlign - 1) / kAlign * kAlign;
      auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlign, room));
      bufs.emplace_back(p, &std::free);
      iov.push_back(iovec{p + (aligned ? 0 : 1 + rng() % 3), len});
    }
    ASSERT_TRUE((*m)->ReadVector(iov, off).ok());
    uint64_t at = off;
    for (const iovec& v : iov) {
      const auto* p = static_cast<const uint8_t*>(v.iov_base);
      ASSERT_TRUE(std::equal(p, p + v.iov_len, ref.begin() + at))
          << "vector " << i << ", buffer at " << at;
      at += v.iov_len;
    }
  }
  std::vector<uint8_t> a(4096, 1), b(8192, 2);
  std::vector<iovec> past{iovec{a.data(), a.size()}, iovec{b.data(), b.size()}};
  absl::Status st = (*m)->ReadVector(past, kSize - 8192);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
  EXPECT_THAT(st.message(), HasSubstr(path_));
  EXPECT_EQ(a, std::vector<uint8_t>(4096, 1)) << "nothing read";
}

INSTANTIATE_TEST_SUITE_P(BufferedAndDirect, FileMemberTest, testing::Bool());

// A file truncated under an open member has lost its data: reads past the
// new end, writes anywhere and flushes say so (OutOfRange, naming the file),
// instead of a read error to rewrite or a write that grows the file back
// with holes.
TEST_P(FileMemberTest, TruncatedUnderneathIsOutOfRange) {
  FileMemberOptions o;
  o.direct = GetParam();
  auto m = OpenFileMember(path_, o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(4096, 7);
  ASSERT_TRUE((*m)->Write(buf.data(), buf.size(), 0).ok());
  ASSERT_TRUE((*m)->Flush().ok());
  ASSERT_EQ(truncate(path_.c_str(), 8192), 0);
  absl::Status r = (*m)->Read(buf.data(), buf.size(), kSize - 4096);
  EXPECT_EQ(r.code(), absl::StatusCode::kOutOfRange) << r;
  EXPECT_THAT(r.message(), HasSubstr("shrank to 8192 bytes"));
  EXPECT_THAT(r.message(), HasSubstr(path_));
  // A vector across the new end: the bytes before it read (a short
  // preadv), then the end is met and named.
  std::vector<uint8_t> head(4096), tail(4096);
  std::vector<iovec> across{iovec{head.data(), head.size()},
                            iovec{tail.data(), tail.size()}};
  absl::Status v = (*m)->ReadVector(across, 4096);
  EXPECT_EQ(v.code(), absl::StatusCode::kOutOfRange) << v;
  EXPECT_THAT(v.message(), HasSubstr("shrank to 8192 bytes"));
  absl::Status w = (*m)->Write(buf.data(), buf.size(), 0);
  EXPECT_EQ(w.code(), absl::StatusCode::kOutOfRange) << w;
  EXPECT_EQ((*m)->Flush().code(), absl::StatusCode::kOutOfRange);
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8192) << "the refused write did not grow the file";
}

// Rewrite (a range just read in full) skips only the truncation probe:
// the range and read-only checks stay, and the bytes land as Write's do.
TEST_P(FileMemberTest, RewriteKeepsTheRangeAndReadOnlyChecks) {
  FileMemberOptions o;
  o.direct = GetParam();
  auto m = OpenFileMember(path_, o);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<uint8_t> buf(4096, 9), got(4096);
  ASSERT_TRUE((*m)->Rewrite(buf.data(), buf.size(), 8192).ok());
  ASSERT_TRUE((*m)->Read(got.data(), got.size(), 8192).ok());
  EXPECT_EQ(got, buf);
  absl::Status past = (*m)->Rewrite(buf.data(), buf.size(), kSize - 2048);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  std::vector<uint8_t> durable(4096, 10);
  ASSERT_TRUE((*m)->RewriteFua(durable.data(), durable.size(), 8192).ok());
  ASSERT_TRUE((*m)->Read(got.data(), got.size(), 8192).ok());
  EXPECT_EQ(got, durable);
  past = (*m)->RewriteFua(buf.data(), buf.size(), kSize - 2048);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), kSize) << "nothing grew";
  m->reset();  // the file's lock goes with it
  o.read_only = true;
  auto ro = OpenFileMember(path_, o);
  ASSERT_TRUE(ro.ok()) << ro.status();
  EXPECT_EQ((*ro)->Rewrite(buf.data(), buf.size(), 0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*ro)->RewriteFua(buf.data(), buf.size(), 0).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(FileMember, DirectoryMissingAndReadOnly) {
  auto d = OpenFileMember("/tmp");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("directory"));
  auto missing = OpenFileMember("/nonexistent/uraid.img");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("/nonexistent/uraid.img"));

  char tmpl[] = "/tmp/uraid-ro-XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 65536), 0);
  close(fd);
  FileMemberOptions o;
  o.read_only = true;
  auto m = OpenFileMember(tmpl, o);
  ASSERT_TRUE(m.ok());
  uint8_t b[4096] = {};
  EXPECT_FALSE((*m)->Write(b, sizeof(b), 0).ok());
  EXPECT_EQ((*m)->WriteFua(b, sizeof(b), 0).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE((*m)->DiscardZeroes());
  unlink(tmpl);
}

TEST(MemoryMember, FaultyMemberFailsOnDemand) {
  auto mem = std::shared_ptr<Member>(NewMemoryMember("mem", 8192));
  FaultyMember f(mem);
  uint8_t b[100] = {1};
  EXPECT_TRUE(f.Write(b, sizeof(b), 10).ok());
  f.SetFailed(true);
  absl::Status st = f.Read(b, sizeof(b), 10);
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), HasSubstr("mem"));
  f.SetFailed(false);
  EXPECT_TRUE(f.Read(b, sizeof(b), 10).ok());
  EXPECT_EQ(b[0], 1);
}

}  // namespace
}  // namespace uraid
