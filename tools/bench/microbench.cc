// In-process benchmarks: parity (our Xor against bare ISA-L xor_gen, the
// ceiling), layout mapping, and the array read/write paths on in-memory
// members (no NBD, no syscalls: the engine's own cost).

#include <isa-l/raid.h>

#include <random>
#include <vector>

#include "aligned_buffer.h"
#include "benchmark/benchmark.h"
#include "parity.h"
#include "uraid/array.h"
#include "uraid/geometry.h"

namespace uraid {
namespace {

// 3 data chunks + parity, as in a 4-member array.
void BM_IsalXorGen(benchmark::State& state) {
  const size_t len = state.range(0);
  std::vector<AlignedBuffer> bufs;
  for (int i = 0; i < 4; ++i) bufs.emplace_back(len, true);
  void* v[4];
  for (int i = 0; i < 4; ++i) v[i] = bufs[i].data();
  for (auto _ : state) {
    xor_gen(4, static_cast<int>(len), v);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * len * 3);
}
BENCHMARK(BM_IsalXorGen)->Arg(4096)->Arg(64 << 10)->Arg(512 << 10);

void BM_UraidXor(benchmark::State& state) {
  const size_t len = state.range(0);
  std::vector<AlignedBuffer> bufs;
  for (int i = 0; i < 4; ++i) bufs.emplace_back(len, true);
  const void* srcs[3] = {bufs[0].data(), bufs[1].data(), bufs[2].data()};
  for (auto _ : state) {
    Xor(bufs[3].data(), srcs, len);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * len * 3);
}
BENCHMARK(BM_UraidXor)->Arg(4096)->Arg(64 << 10)->Arg(512 << 10);

void BM_Map(benchmark::State& state) {
  auto g = Geometry::Make(5, Layout::kLeftSymmetric, 512 << 10, 4, 1ull << 40);
  std::mt19937_64 rng(1);
  uint64_t x = 0;
  for (auto _ : state) {
    Location l = g->Map(rng() % g->array_bytes());
    x += l.disk + l.member_offset;
  }
  benchmark::DoNotOptimize(x);
}
BENCHMARK(BM_Map);

std::unique_ptr<Array> MemoryArray(uint64_t cache) {
  std::vector<std::unique_ptr<Member>> m;
  for (int i = 0; i < 4; ++i) {
    m.push_back(NewMemoryMember("m", (1 << 20) + (256ull << 20)));
  }
  CreateOptions o;
  o.data_offset_bytes = 1 << 20;
  o.assume_clean = true;
  o.cache.bytes = cache;
  return std::move(*Array::Create(std::move(m), o));
}

void BM_ArrayRead(benchmark::State& state) {
  auto a = MemoryArray(0);
  const size_t len = state.range(0);
  AlignedBuffer buf(len);
  std::mt19937_64 rng(2);
  for (auto _ : state) {
    uint64_t off = (rng() % (a->size() / len)) * len;
    benchmark::DoNotOptimize(a->Read(buf.data(), len, off));
  }
  state.SetBytesProcessed(state.iterations() * len);
}
BENCHMARK(BM_ArrayRead)->Arg(4096)->Arg(1 << 20)->UseRealTime();

void BM_ArrayWriteSequential(benchmark::State& state) {
  auto a = MemoryArray(64 << 20);
  const size_t len = state.range(0);
  AlignedBuffer buf(len, true);
  uint64_t off = 0;
  for (auto _ : state) {
    if (off + len > a->size()) off = 0;
    benchmark::DoNotOptimize(a->Write(buf.data(), len, off));
    off += len;
  }
  state.SetBytesProcessed(state.iterations() * len);
}
BENCHMARK(BM_ArrayWriteSequential)->Arg(64 << 10)->Arg(1 << 20)->UseRealTime();

void BM_ArrayWriteRandom4K(benchmark::State& state) {
  auto a = MemoryArray(64 << 20);
  AlignedBuffer buf(4096, true);
  std::mt19937_64 rng(3);
  for (auto _ : state) {
    uint64_t off = (rng() % (a->size() / 4096)) * 4096;
    benchmark::DoNotOptimize(a->Write(buf.data(), 4096, off));
  }
  state.SetBytesProcessed(state.iterations() * 4096);
}
BENCHMARK(BM_ArrayWriteRandom4K)->UseRealTime();

}  // namespace
}  // namespace uraid

BENCHMARK_MAIN();
