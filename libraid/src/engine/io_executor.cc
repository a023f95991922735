// SPDX-License-Identifier: MIT
// The member-I/O executor (io_executor.h): one member call retried once
// (DoIo), the fan-out of a plan's I/O (Submit, RunTogether), slot
// generations and the replace target's mirror (RunIo).
#include "engine/io_executor.h"

#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cstring>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
#include "base/status_macros.h"
#include "parity/parity.h"
#include "uraid/superblock.h"

namespace uraid {

namespace {

// One call on one member, retried once (`attempts` 2): a transient error
// (a dropped connection, a busy device) should not cost a member. A second
// failure is the member's.
// `rewrite`: a kWrite is a Member::Rewrite (see MemberIo::read_from).
absl::Status DoIo(Member& m, const MemberIo& io, uint64_t raw,
                  bool rewrite = false, int attempts = 2) {
  absl::Status st;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    switch (io.kind) {
      case MemberIo::kRead:
        st = m.Read(io.buf, io.len, raw);
        break;
      case MemberIo::kWrite:
        if (io.fua) {
          st = rewrite ? m.RewriteFua(io.buf, io.len, raw)
                       : m.WriteFua(io.buf, io.len, raw);
        } else {
          st = rewrite ? m.Rewrite(io.buf, io.len, raw)
                       : m.Write(io.buf, io.len, raw);
        }
        break;
      case MemberIo::kFlush:
        st = m.Flush();
        break;
      case MemberIo::kDiscard:
        st = m.Discard(io.len, raw);
        break;
    }
    if (st.ok() || absl::IsOutOfRange(st)) break;
  }
  return st;
}

// What an I/O planned before its slot changed members gets (MemberIo::stale).
absl::Status StaleError(int slot) {
  return absl::AbortedError(absl::StrFormat(
      "slot %d changed members while the request was planned", slot));
}

}  // namespace

absl::Status WriteDurably(Member& m, const void* buf, size_t len,
                          uint64_t raw) {
  MemberIo io{MemberIo::kWrite, 0, const_cast<void*>(buf), len, 0, {}};
  absl::Status st = DoIo(m, io, raw);
  if (!st.ok()) return st;
  io.kind = MemberIo::kFlush;
  return DoIo(m, io, raw);
}

absl::Status ProbeMember(Member& m) {
  AlignedBuffer probe(kSbBlockBytes);
  return m.Read(probe.data(), probe.size(), kSb12OffsetBytes);
}

IoExecutor::IoExecutor(const SlotTable& slots, AtomicCounters& counters,
                       int threads, ReplacementFailed replacement_failed)
    : slots_(slots),
      counters_(counters),
      replacement_failed_(std::move(replacement_failed)),
      pool_(threads) {}

bool IoExecutor::InTurn(size_t n) const {
  // Unmeasured is not fast: before any data I/O has been timed (a new
  // array's first superblock fan-out, a recovery's first stripes) the calls
  // go out together. Taken in turn, a recovery pass's first stripes on NBD
  // members 2 ms away read their survivors one after another, and its
  // first window took two to three times as long as the next ones.
  //
  // Slower I/O in turn too when it is mostly CPU work on the calling
  // thread (a page-cache copy of a large piece): another thread would take
  // a CPU the other requests are using rather than overlap a wait, and the
  // handoff costs a wakeup. On this project's 2-vCPU VM, 4 x 512K members
  // on /dev/shm, 1M reads (512 KiB per member, about 60 us each): qd8
  // 0.90 -> 0.96 of the file plugin and 0.284 -> 0.249 CPU s/GiB, qd1
  // 0.91 -> 0.97 (docs/architecture.md). I/O that waits (a disk, an NBD
  // member, O_DIRECT, a page-cache miss) spends little of its time on the
  // CPU and still goes out together.
  const int64_t lat = io_latency_ns_.load(std::memory_order_relaxed);
  return n <= 1 ||
         (lat >= 0 && (lat < kParallelIoThresholdNs ||
                       io_cpu_permille_.load(std::memory_order_relaxed) >=
                           kCpuBoundPermille));
}

namespace {
int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// The calling thread's involuntary context switches so far.
long ThreadPreemptions() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return ru.ru_nivcsw;
}
}  // namespace

IoExecutor::IoStart IoExecutor::StartIo() const {
  IoStart start;
  // Only where it can change a decision: below the latency threshold the
  // plans run in turn anyway.
  const int64_t lat = io_latency_ns_.load(std::memory_order_relaxed);
  static thread_local uint32_t count = 0;
  if (lat >= kParallelIoThresholdNs && ++count % kCpuSampleEvery == 0) {
    start.preempted = ThreadPreemptions();
    start.cpu_ns = ThreadCpuNs();
  }
  // Last, so that the sampling's own system calls are not in the I/O's
  // latency (NoteLatency reads the clock before its own).
  start.wall = std::chrono::steady_clock::now();
  return start;
}

void IoExecutor::RunTogether(std::span<const std::function<void()>> tasks) {
  if (InTurn(tasks.size())) {
    for (const auto& task : tasks) task();
    return;
  }
  pool_.RunAll(tasks);
}

void IoExecutor::RunIo(MemberIo& io, int attempts) {
  Slot& slot = *slots_[io.slot];
  const auto stale = [&] {
    if (!io.check_gen || slot.gen.load() == io.gen) return false;
    io.stale = true;
    io.status = StaleError(io.slot);
    return true;
  };
  if (stale()) return;
  std::shared_ptr<Member> m =
      io.to_replacement ? slot.replacement.load() : slot.member.load();
  if (m == nullptr) {
    io.status = absl::UnavailableError("member is gone");
    return;
  }
  const uint64_t raw = io.base + io.offset;
  const IoStart start = StartIo();
  io.used = m.get();
  io.used_ref = m;
  if (io.keep_sparse && io.kind == MemberIo::kWrite &&
      IsAllZero(io.buf, io.len)) {
    absl::StatusOr<uint64_t> data = m->NextDataOffset(raw);
    if (data.ok() && *data >= raw + io.len) {
      // Already zeros there (a hole): nothing to write, and no latency
      // sample (a probe is not a write).
      io.status = absl::OkStatus();
      stale();
      return;
    }
  }
  // A data write changes what members hold: counted before it is issued
  // and after it (and its replacement copy) is done.
  const bool writes =
      io.kind == MemberIo::kWrite || io.kind == MemberIo::kDiscard;
  if (writes) writes_started_.fetch_add(1);
  io.status = DoIo(*m, io, raw, io.read_from == m.get(), attempts);
  io.answered = io.status.ok();
  switch (io.kind) {
    case MemberIo::kRead:
      counters_.member_reads.fetch_add(1, std::memory_order_relaxed);
      counters_.member_read_bytes.fetch_add(io.len, std::memory_order_relaxed);
      break;
    case MemberIo::kWrite:
      counters_.member_writes.fetch_add(1, std::memory_order_relaxed);
      counters_.member_write_bytes.fetch_add(io.len, std::memory_order_relaxed);
      if (io.fua) {
        counters_.member_fua_writes.fetch_add(1, std::memory_order_relaxed);
      }
      break;
    case MemberIo::kFlush:
      counters_.member_flushes.fetch_add(1, std::memory_order_relaxed);
      break;
    case MemberIo::kDiscard:
      break;
  }
  // A replace job's target gets every write and flush of the stripes it
  // already holds, so that it is current when it takes the slot. Its own
  // failure ends the replace, not the slot.
  if (io.status.ok() && !io.to_replacement && io.kind != MemberIo::kRead) {
    std::shared_ptr<Member> r = slot.replacement.load();
    if (r != nullptr && (io.kind == MemberIo::kFlush ||
                         io.offset / io.chunk_bytes <
                             slot.repl_front.load(std::memory_order_acquire))) {
      absl::Status rs = DoIo(*r, io, raw);
      if (!rs.ok() && DropReplacementIf(slot, r)) {
        replacement_failed_(r->Name(), io.slot, rs);
      }
    }
  }
  if (writes) {
    writes_finished_.fetch_add(1);
    slot.writes_done.fetch_add(1);  // after its replacement copy, too
  }
  // The member changed under the I/O: whatever it did went to a member that
  // no longer holds the slot (or read from one that does not yet).
  if (stale()) return;
  MemberStats* stats = io.to_replacement ? nullptr : &slot.stats;
  if (!io.status.ok()) {
    if (stats != nullptr) {
      (io.kind == MemberIo::kRead ? stats->read_errors : stats->write_errors)
          .fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  // Flushes and discards say nothing about per-I/O latency.
  if (io.kind == MemberIo::kFlush || io.kind == MemberIo::kDiscard) return;
  NoteLatency(stats, start);
}

void IoExecutor::RunVectorRead(std::span<MemberIo* const> call) {
  MemberIo& head = *call[0];
  Slot& slot = *slots_[head.slot];
  // Every read of the call is of one slot, planned with one generation.
  const auto changed = [&] {
    return head.check_gen && slot.gen.load() != head.gen;
  };
  std::shared_ptr<Member> m = slot.member.load();
  if (changed() || m == nullptr) {
    for (MemberIo* io : call) RunIo(*io);  // each refused as RunIo does
    return;
  }
  absl::InlinedVector<iovec, 16> iov;
  size_t len = 0;
  for (const MemberIo* io : call) {
    iov.push_back(iovec{io->buf, io->len});
    len += io->len;
  }
  const IoStart start = StartIo();
  if (!m->ReadVector(iov, head.base + head.offset).ok()) {
    // Which read failed is not known: each is run once more on its own
    // (the joined call was its first attempt), so that an error is held
    // against the piece that has it and a bad sector costs its own piece
    // only (the correction and the bad-block records of stripe_reader.h
    // work piece by piece).
    for (MemberIo* io : call) RunIo(*io, /*attempts=*/1);
    return;
  }
  counters_.member_reads.fetch_add(1, std::memory_order_relaxed);
  counters_.member_read_bytes.fetch_add(len, std::memory_order_relaxed);
  const bool stale = changed();
  for (MemberIo* io : call) {
    io->used = m.get();
    io->used_ref = m;
    io->answered = true;
    io->stale = stale;
    io->status = stale ? StaleError(io->slot) : absl::OkStatus();
  }
  if (!stale) NoteLatency(&slot.stats, start);
}

void IoExecutor::NoteLatency(MemberStats* stats, const IoStart& start) {
  // Moving averages of data I/O latency, the array's and the member's (1/8
  // weight per sample). Racy updates lose a sample now and then, which is
  // harmless.
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start.wall)
                         .count();
  // -1 is no sample yet: the first is taken whole.
  const auto average = [](std::atomic<int64_t>& avg, int64_t sample) {
    const int64_t old = avg.load(std::memory_order_relaxed);
    avg.store(old < 0 ? sample : old + (sample - old) / 8,
              std::memory_order_relaxed);
  };
  // A thread preempted during the I/O spent the lost time neither on the
  // CPU nor waiting for the member: the sample says nothing.
  if (start.cpu_ns >= 0 && ns > 0 && ThreadPreemptions() == start.preempted) {
    const int64_t cpu = ThreadCpuNs() - start.cpu_ns;
    average(io_cpu_permille_, std::min<int64_t>(1000, cpu * 1000 / ns));
  }
  // The array's average only decides InTurn, so each sample counts at most
  // kLatencySampleCapNs: a thread preempted mid-I/O on a busy machine
  // (milliseconds) no longer lifts the average of fast members over the
  // threshold for the next few dozen plans, and members really slower than
  // the threshold still average above it after two samples.
  const int64_t capped = std::min(ns, kLatencySampleCapNs);
  average(io_latency_ns_, capped);
  // The member's figures are reported (uraid detail), so they stay true.
  if (stats != nullptr) {
    stats->ios.fetch_add(1, std::memory_order_relaxed);
    stats->io_ns.fetch_add(static_cast<uint64_t>(ns),
                           std::memory_order_relaxed);
    average(stats->latency_ns, ns);
  }
}

void IoExecutor::Submit(const Shape& sh, std::vector<MemberIo>& ios,
                        const SlotGens* gens) {
  for (MemberIo& io : ios) {
    io.base = sh.data_offset;
    io.chunk_bytes = sh.geo.chunk_bytes();
  }
  if (gens != nullptr) {
    for (MemberIo& io : ios) {
      io.check_gen = true;
      io.gen = (*gens)[io.slot];
    }
  }
  // Members that answer within a few microseconds (page cache, memory) are
  // cheaper to call one after another than to hand to other threads: a
  // handoff costs more than the I/O. Slower members (disks, O_DIRECT,
  // remote exports) get every I/O of the plan in flight at once, so a
  // stripe costs one member latency, not N, unless they are slow only
  // because each I/O is a long copy on this CPU (InTurn). The choice follows
  // what is measured, so it adapts to whatever the members are.
  // A member's reads at adjacent offsets are joined into one call first
  // (MemberCalls): at memory speed the system call, not the copy, is most
  // of a small read's cost, and a 4 MiB request on 64 KiB chunks would
  // otherwise take 64 of them.
  IoOrder order;
  const Calls calls = MemberCalls(ios, order);
  const auto run = [this](std::span<MemberIo* const> call) {
    if (call.size() == 1) {
      RunIo(*call[0]);
    } else {
      RunVectorRead(call);
    }
  };
  if (InTurn(calls.size())) {
    for (const auto call : calls) run(call);
    return;
  }
  std::vector<std::function<void()>> tasks;
  tasks.reserve(calls.size());
  for (const auto call : calls) tasks.emplace_back([&run, call] { run(call); });
  pool_.RunAll(tasks);
}

IoExecutor::Calls IoExecutor::MemberCalls(std::vector<MemberIo>& ios,
                                          IoOrder& order) const {
  Calls calls;
  size_t reads = 0;
  for (MemberIo& io : ios) {
    if (io.kind == MemberIo::kRead && !io.to_replacement) ++reads;
  }
  order.reserve(ios.size());
  if (reads < 2) {
    for (MemberIo& io : ios) order.push_back(&io);
    for (MemberIo* const& io : order) calls.emplace_back(&io, 1);
    return calls;
  }
  // Reads first, by slot and offset, so that a chain is a run of `order`.
  for (MemberIo& io : ios) {
    if (io.kind == MemberIo::kRead && !io.to_replacement) order.push_back(&io);
  }
  std::sort(
      order.begin(), order.end(), [](const MemberIo* a, const MemberIo* b) {
        return a->slot != b->slot ? a->slot < b->slot : a->offset < b->offset;
      });
  for (MemberIo& io : ios) {
    if (io.kind != MemberIo::kRead || io.to_replacement) order.push_back(&io);
  }
  const auto adjacent = [&](size_t j) {
    return order[j]->slot == order[j - 1]->slot &&
           order[j]->offset == order[j - 1]->offset + order[j - 1]->len;
  };
  int joins_slot = -1;  // the last slot whose member was asked
  bool joins = false;
  for (size_t i = 0; i < order.size();) {
    size_t j = i + 1;
    if (j < reads && adjacent(j)) {
      if (order[i]->slot != joins_slot) {
        joins_slot = order[i]->slot;
        const std::shared_ptr<Member> m = slots_[joins_slot]->member.load();
        joins = m != nullptr && m->ReadVectorIsOneCall();
      }
      while (joins && j < reads && j - i < kMaxVectorBuffers && adjacent(j)) {
        ++j;
      }
    }
    calls.emplace_back(&order[i], j - i);
    i = j;
  }
  return calls;
}

bool ReadProvedRange(const MemberIo& r) {
  return r.kind == MemberIo::kRead && r.answered && !r.stale &&
         !r.to_replacement;
}

void MarkRewrites(const std::vector<MemberIo>& reads,
                  std::vector<MemberIo>& writes) {
  for (MemberIo& w : writes) {
    if (w.kind != MemberIo::kWrite || w.to_replacement) continue;
    for (const MemberIo& r : reads) {
      if (ReadProvedRange(r) && r.slot == w.slot && r.offset <= w.offset &&
          w.offset + w.len <= r.offset + r.len) {
        w.read_from = r.used;
        break;
      }
    }
  }
}

std::vector<MemberIo> PlannedMemberIos(const Shape& sh, MemberIo::Kind kind,
                                       uint64_t stripe,
                                       const std::vector<PlannedIo>& planned,
                                       uint8_t* scratch, uint8_t* client,
                                       const uint8_t* const* client_chunks) {
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t base = stripe * C;
  std::vector<MemberIo> ios;
  ios.reserve(planned.size());
  for (const PlannedIo& p : planned) {
    uint8_t* buf;
    if (p.ref.buffer == PlanRef::kScratch) {
      buf = scratch + p.ref.offset;
    } else if (client_chunks == nullptr) {
      buf = client + p.ref.offset;
    } else {
      assert(p.ref.offset % C + p.len <= C);
      // Only written from, like `client`.
      buf = const_cast<uint8_t*>(client_chunks[p.ref.offset / C]) +
            p.ref.offset % C;
    }
    ios.push_back(
        MemberIo{kind, p.slot, buf, p.len, base + p.chunk_offset, {}});
  }
  return ios;
}

}  // namespace uraid
