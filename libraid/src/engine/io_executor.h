// SPDX-License-Identifier: MIT
// Internal: the array's one member-I/O executor. Every member call the
// array makes goes through it: a plan's data I/O (Submit), the fan-out of
// independent calls such as bitmap pages (RunTogether), and the durable
// write of a superblock or bitmap page (WriteDurably). Each call is retried
// once; a second failure is the member's, and what that means for its slot
// is the caller's to decide (MemberFaults::AbsorbFailures), not the executor's.

#ifndef URAID_SRC_ENGINE_IO_EXECUTOR_H_
#define URAID_SRC_ENGINE_IO_EXECUTOR_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "base/task_pool.h"
#include "engine/atomic_counters.h"
#include "engine/member_io.h"
#include "engine/shape.h"
#include "engine/slot_table.h"
#include "plan/stripe_plan.h"
#include "uraid/member.h"

namespace uraid {

// Writes `len` bytes at raw member offset `raw` and flushes them, each step
// retried once as data I/O is: the durable write of a superblock or bitmap
// page. Thread-compatible (the member's own rules).
absl::Status WriteDurably(Member& m, const void* buf, size_t len, uint64_t raw);

// md works in 4 KiB member blocks (its STRIPE_SIZE): the unit in which a
// failed I/O is retried block by block and bad ranges are recorded.
inline constexpr uint64_t kMdBlockBytes = 4096;

// Reads the member's v1.2 superblock block: fails only when the member
// answers nothing at all (a dead disk, a lost connection), which tells
// such a member from one with a bad region after a range kept failing.
absl::Status ProbeMember(Member& m);

// A plan's member I/Os of `kind`, addressed to `stripe` of shape `sh`, with
// buffers resolved in `scratch` and `client`; or, with `client_chunks`
// (then `client` is null), client offsets resolved chunk by chunk:
// client_chunks[k] holds [k * chunk, (k + 1) * chunk), and no I/O may
// cross a chunk (StripeWriter's whole stripes).
std::vector<MemberIo> PlannedMemberIos(
    const Shape& sh, MemberIo::Kind kind, uint64_t stripe,
    const std::vector<PlannedIo>& planned, uint8_t* scratch, uint8_t* client,
    const uint8_t* const* client_chunks = nullptr);

// Sets each write's read_from to the member a read of `reads` (run by
// Submit) answered the same slot's covering range from, so that a
// read-modify-write's writes back over what it read are Member::Rewrites.
// A read that failed (even if its caller corrected it since) proves
// nothing.
void MarkRewrites(const std::vector<MemberIo>& reads,
                  std::vector<MemberIo>& writes);
// A read Submit ran that proves its member (`used`) held the range just
// now: answered by that member itself, not refused as stale, not a
// replace target's copy. What MarkRewrites and the PPL header's Rewrite
// (StripeWriter::LogToPpl) rest on.
bool ReadProvedRange(const MemberIo& r);

// Thread-safe: any number of threads submit at once. Holds references to
// the array's slots and counters, which outlive it (the slots are the
// roster's; the counters are declared before it in StripeEngine).
class IoExecutor {
 public:
  // A replace target failed a write or flush mirrored to it; it has been
  // dropped from its slot already. Called on the I/O's thread.
  using ReplacementFailed = std::function<void(
      const std::string& name, int slot, const absl::Status& why)>;

  // `threads`: the pool that runs a plan's I/O in parallel (one fewer than
  // the members it usually spans: the submitting thread runs one).
  IoExecutor(const SlotTable& slots, AtomicCounters& counters, int threads,
             ReplacementFailed replacement_failed);

  // Runs a plan made in shape `sh` (its data offset and chunk size address
  // the I/O): every I/O in flight together. Counts member I/O. Individual
  // failures are in each MemberIo's status. With `gens` (captured when the
  // plan was decided), an I/O whose slot changed members is refused
  // (MemberIo::stale). Must not be called from a pool task.
  void Submit(const Shape& sh, std::vector<MemberIo>& ios,
              const SlotGens* gens = nullptr);
  // Runs independent member calls (one per member) at once on the pool, or
  // in turn on this thread when members answer faster than a handoff (the
  // rule Submit follows). Must not be called from a pool task.
  void RunTogether(std::span<const std::function<void()>> tasks);
  // While false, every plan and batch runs in turn on the calling thread
  // and the pool starts no thread (TaskPool::SetThreadsAllowed): for work
  // done before a fork. Default true.
  void SetThreadsAllowed(bool allowed) { pool_.SetThreadsAllowed(allowed); }

  // Member data writes (and discards) started and finished, for the
  // survivor cache's freshness rule (see survivor_cache.h).
  uint64_t writes_started() const { return writes_started_.load(); }
  uint64_t writes_finished() const { return writes_finished_.load(); }

 private:
  // Member I/O faster than this (moving average) is cheaper to run on the
  // calling thread than to hand to the pool.
  static constexpr int64_t kParallelIoThresholdNs = 30'000;
  // The most one I/O's latency counts in that average (see RunIo).
  static constexpr int64_t kLatencySampleCapNs = 4 * kParallelIoThresholdNs;
  // Slower I/O that spends at least this share of its time (per mille) on
  // its thread's CPU is a copy (page cache, memory), not a wait: it runs in
  // turn too (see InTurn).
  static constexpr int64_t kCpuBoundPermille = 500;
  // One I/O in this many per thread is timed on the thread's CPU clock
  // (four more system calls each), and only while latency alone would hand
  // plans to the pool.
  static constexpr uint32_t kCpuSampleEvery = 16;
  // The most reads joined into one vectored call (IOV_MAX is 1024).
  static constexpr size_t kMaxVectorBuffers = 64;

  // True when `n` member calls are cheaper run in turn on this thread:
  // never before a latency has been measured.
  bool InTurn(size_t n) const;
  // When an I/O began: on the wall clock, and for a sampled one (see
  // kCpuSampleEvery) on its thread's CPU clock, with the thread's
  // involuntary context switches so far.
  struct IoStart {
    std::chrono::steady_clock::time_point wall;
    int64_t cpu_ns = -1;  // -1: not sampled
    long preempted = 0;
  };
  IoStart StartIo() const;
  // Pointers into a plan's I/Os, and the member calls they make: inline up
  // to a plan's usual size, so that a 4 KiB write allocates nothing more.
  using IoOrder = absl::InlinedVector<MemberIo*, 16>;
  using Calls = absl::InlinedVector<std::span<MemberIo* const>, 16>;
  // The member calls `ios` make, each a span of `order` (which they fill):
  // one I/O, or reads of one slot's member at adjacent offsets (a request's
  // pieces of consecutive stripes), at most kMaxVectorBuffers, which
  // RunVectorRead makes one Member::ReadVector call where the member's
  // ReadVectorIsOneCall.
  Calls MemberCalls(std::vector<MemberIo>& ios, IoOrder& order) const;
  // `attempts`: 2 is a call retried once (DoIo); 1 when a vectored read
  // that covered it failed already (RunVectorRead).
  void RunIo(MemberIo& io, int attempts = 2);
  // One vectored read for the reads of `call` (MemberCalls). When it fails,
  // each read is run on its own once more, so that an error is held
  // against the piece that has it (the vectored call was each one's first
  // attempt).
  void RunVectorRead(std::span<MemberIo* const> call);
  // Takes one data I/O's latency (started at `start`) into the array's
  // average and, with `stats`, the member's figures; a sampled one's CPU
  // share into io_cpu_permille_.
  void NoteLatency(MemberStats* stats, const IoStart& start);

  const SlotTable& slots_;
  AtomicCounters& counters_;
  const ReplacementFailed replacement_failed_;
  TaskPool pool_;
  // Moving average of member data-I/O latency, in ns (see Submit); -1
  // until the first data I/O is measured.
  std::atomic<int64_t> io_latency_ns_{-1};
  // Moving average of the share of a sampled data I/O's time spent on its
  // thread's CPU, per mille (see InTurn); -1 until the first sample.
  std::atomic<int64_t> io_cpu_permille_{-1};
  std::atomic<uint64_t> writes_started_{0};
  std::atomic<uint64_t> writes_finished_{0};
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_IO_EXECUTOR_H_
