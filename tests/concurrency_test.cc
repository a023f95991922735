// SPDX-License-Identifier: MIT
// Several threads writing disjoint and overlapping ranges of one array at
// once (nbdkit's PARALLEL model), then checked: disjoint ranges hold exactly
// what their writer wrote, overlapping blocks hold one whole write from one
// writer, and every stripe's parity is consistent. Also run degraded.

#include <cstring>
#include <random>
#include <thread>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "uraid/array.h"

namespace uraid {
namespace {

constexpr uint64_t kChunk = 16 * 1024;
constexpr int kDisks = 4;
constexpr uint64_t kMemberBytes = 64 * kChunk;
constexpr uint64_t kBlock = 4096;
constexpr int kThreads = 8;

// Each 4 KiB block a writer writes is filled with (writer, sequence) so the
// final contents say who wrote it and whether it is whole.
void FillBlock(uint8_t* p, uint32_t writer, uint32_t seq) {
  for (uint64_t i = 0; i < kBlock; i += 8) {
    std::memcpy(p + i, &writer, 4);
    std::memcpy(p + i + 4, &seq, 4);
  }
}

class ConcurrencyTest : public testing::TestWithParam<bool> {};

TEST_P(ConcurrencyTest, DisjointAndOverlappingWriters) {
  const bool degraded = GetParam();
  std::vector<std::shared_ptr<Member>> mem;
  std::vector<std::unique_ptr<Member>> handles;
  for (int i = 0; i < kDisks; ++i) {
    mem.emplace_back(
        NewMemoryMember(absl::StrFormat("m%d", i), (1 << 20) + kMemberBytes));
    handles.push_back(ShareMember(mem.back()));
  }
  CreateOptions o;
  o.chunk_bytes = kChunk;
  o.data_offset_bytes = 1 << 20;
  auto created = Array::Create(std::move(handles), o);
  ASSERT_TRUE(created.ok()) << created.status();
  std::unique_ptr<Array> a = std::move(*created);
  a->StartBackground();
  if (degraded) {
    ASSERT_TRUE(a->FailSlot(1).ok());
  }

  const uint64_t blocks = a->size() / kBlock;
  // The first half: each thread owns every kThreads-th block. The second
  // half: everyone writes anywhere.
  const uint64_t half = blocks / 2;
  std::vector<std::vector<uint32_t>> last_seq(kThreads,
                                              std::vector<uint32_t>(blocks, 0));
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      std::vector<uint8_t> buf(8 * kBlock);
      for (uint32_t seq = 1; seq <= 400; ++seq) {
        bool own = rng() % 2;
        uint64_t first, count;
        if (own) {
          uint64_t k = rng() % (half / kThreads);
          first = k * kThreads + t;
          count = 1;
        } else {
          count = 1 + rng() % 8;
          first = half + rng() % (blocks - half - count + 1);
        }
        for (uint64_t i = 0; i < count; ++i) {
          FillBlock(buf.data() + i * kBlock, t + 1, seq);
        }
        if (!a->Write(buf.data(), count * kBlock, first * kBlock,
                      rng() % 16 == 0)
                 .ok()) {
          ++errors;
        }
        for (uint64_t i = 0; i < count; ++i) last_seq[t][first + i] = seq;
        if (rng() % 32 == 0 && !a->Flush().ok()) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(errors.load(), 0);

  std::vector<uint8_t> all(a->size());
  ASSERT_TRUE(a->Read(all.data(), all.size(), 0).ok());
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = all.data() + b * kBlock;
    uint32_t writer, seq;
    std::memcpy(&writer, p, 4);
    std::memcpy(&seq, p + 4, 4);
    std::vector<uint8_t> expect(kBlock, 0);
    if (writer != 0) FillBlock(expect.data(), writer, seq);
    ASSERT_EQ(0, std::memcmp(p, expect.data(), kBlock))
        << "block " << b << " is torn";
    if (b < half) {
      int owner = static_cast<int>(b % kThreads);
      uint32_t want = last_seq[owner][b];
      EXPECT_EQ(writer, want ? owner + 1u : 0u) << "block " << b;
      EXPECT_EQ(seq, want) << "block " << b;
    } else if (writer != 0) {
      // Some writer's write of this block; not older than what that writer
      // itself wrote last.
      EXPECT_EQ(seq, last_seq[writer - 1][b]) << "block " << b;
    }
  }
  if (!degraded) {
    auto n = a->CheckParity(nullptr);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(HealthyAndDegraded, ConcurrencyTest, testing::Bool());

}  // namespace
}  // namespace uraid
