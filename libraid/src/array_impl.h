// Internal: the state behind uraid::Array, shared by create.cc,
// assemble.cc (how an array comes to exist) and array.cc (the data path,
// metadata updates and background work).
//
// Locking:
// - stripe locks (StripeLocks) serialise writes, degraded reads and resync
//   of one stripe; healthy reads take none (they read data chunks only, and
//   a read racing an overlapping write may see either, as on any disk).
// - state_mu_ guards the clean/active transition and the count of writes in
//   flight; it is taken before sb_mu_ when both are needed.
// - sb_mu_ guards the superblock template and serialises superblock writes.
// - slot health is atomic so the data path reads it without locks.

#ifndef URAID_SRC_ARRAY_IMPL_H_
#define URAID_SRC_ARRAY_IMPL_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "aligned_buffer.h"
#include "stripe_cache.h"
#include "stripe_locks.h"
#include "task_pool.h"
#include "uraid/array.h"

namespace uraid {

// One member I/O of a plan. `offset` is relative to data_offset.
struct MemberIo {
  enum Kind { kRead, kWrite, kFlush, kDiscard };
  Kind kind = kRead;
  int slot = 0;
  void* buf = nullptr;  // kRead destination / kWrite source
  size_t len = 0;
  uint64_t offset = 0;
  absl::Status status;
};

struct Slot {
  std::unique_ptr<Member> member;  // null when missing
  std::atomic<SlotState> state{SlotState::kMissing};
  uint32_t dev_number = 0;
  std::array<uint8_t, 16> device_uuid{};
  uint64_t data_size_sectors = 0;  // this device's data_size
};

struct AtomicCounters {
  std::atomic<uint64_t> member_reads{0}, member_read_bytes{0},
      member_writes{0}, member_write_bytes{0}, member_flushes{0},
      full_stripe_writes{0}, rmw_writes{0}, rcw_writes{0}, degraded_writes{0},
      reconstructions{0}, resynced_stripes{0}, resync_repairs{0},
      cached_writes{0}, cache_writebacks{0}, cache_evictions{0};
  Counters Snapshot() const;
};

class ArrayImpl {
 public:
  ArrayImpl(Geometry geometry, uint64_t data_offset_bytes, Superblock sb,
            std::vector<std::unique_ptr<Slot>> slots, bool read_only,
            const CacheOptions& cache, Logger logger);
  ~ArrayImpl();

  // --- data path (array.cc) ---
  absl::Status Read(void* buf, size_t len, uint64_t offset);
  absl::Status Write(const void* buf, size_t len, uint64_t offset, bool fua);
  absl::Status Flush();
  absl::Status Trim(size_t len, uint64_t offset, bool fua);
  absl::Status Zero(size_t len, uint64_t offset, bool fua);

  // --- maintenance ---
  absl::Status Resync();
  absl::StatusOr<uint64_t> CheckParity(std::vector<uint64_t>* first_bad);
  absl::Status FailSlot(int slot, const std::string& why);
  void StartBackground();
  // Stops threads and marks clean when possible (called by ~Array).
  void Shutdown();

  // Writes the superblock (with the current roles, events+1) to every
  // active member and flushes them. A member whose write fails is marked
  // faulty and the write is repeated without it.
  // `clean`: persist clean (true), dirty (false) or keep what the
  // superblocks say now (nullopt, for role changes).
  absl::Status WriteSuperblocks(std::optional<bool> clean)
      ABSL_LOCKS_EXCLUDED(sb_mu_);

  // Parity of stripes at or beyond this stripe is not trusted (unfinished
  // resync): writes there use reconstruct-write.
  void SetResyncStart(uint64_t stripe) { resync_stripe_.store(stripe); }

  void SetCacheBytes(uint64_t bytes) { cache_.set_capacity(bytes); }
  const Geometry& geometry() const { return geo_; }
  bool read_only() const { return read_only_; }
  ArrayInfo Info() const;
  void Log(const std::string& line) const;

 private:
  // Runs a plan: every I/O in flight together. Counts member I/O. Returns OK
  // even when individual I/Os fail; their status is in each MemberIo.
  void Submit(std::vector<MemberIo>& ios);
  void RunIo(MemberIo& io);
  // The first failed I/O of a plan, marked on its slot (the slot is failed),
  // or OK. Sets *slot_failed when a member was failed, so the caller retries
  // the operation around it.
  absl::Status AbsorbFailures(std::vector<MemberIo>& ios, bool* slot_failed);

  int MissingSlot() const;  // the one slot not active, or -1
  int GoneSlots() const;    // slots not active (missing or faulty)
  // InvalidArgument naming `op` when [offset, offset+len) leaves the array.
  absl::Status CheckRange(const char* op, size_t len, uint64_t offset) const;
  bool SlotUsable(int slot) const {
    return slots_[slot]->state.load(std::memory_order_acquire) ==
           SlotState::kActive;
  }
  absl::Status CheckUsable(bool write) const;

  // Reads one piece with its stripe lock held: from its member, or rebuilt
  // from parity, then overlaid with newer cached bytes.
  absl::Status ReadPieceLocked(const Location& loc, size_t len, uint8_t* dst);
  // Reads `slot`'s bytes, or rebuilds them from the others. REQUIRES: the
  // stripe lock.
  absl::Status ReadPieceDegraded(uint64_t stripe, int slot,
                                 uint64_t chunk_offset, size_t len,
                                 uint8_t* dst);
  // One stripe's share of a write: bytes [a, b) of the stripe's data space
  // (0 .. chunk * data disks), new contents at `src`. Gathers it in the
  // cache or writes it through. Takes the stripe lock.
  absl::Status WritePiece(uint64_t stripe, uint64_t a, uint64_t b,
                          const uint8_t* src, bool fua,
                          std::vector<bool>* touched);
  // Writes [a, b) of a stripe to the members, retrying around members that
  // fail. REQUIRES: the stripe lock.
  absl::Status WriteStripeLocked(uint64_t stripe, uint64_t a, uint64_t b,
                                 const uint8_t* src,
                                 std::vector<bool>* touched);
  // Writes a cache entry's dirty ranges and drops it. REQUIRES: its lock.
  absl::Status WritebackLocked(StripeCache::Entry* e,
                               std::vector<bool>* touched);
  absl::Status WritebackStripe(uint64_t stripe);  // takes the lock
  absl::Status WritebackAll();
  void WritebackLoop();
  // `missing` is the slot to write around, or -1. Fills `ios` outcome.
  absl::Status PlanAndWriteStripe(uint64_t stripe, uint64_t a, uint64_t b,
                                  const uint8_t* src, int missing,
                                  bool* slot_failed,
                                  std::vector<bool>* touched);
  absl::Status FlushSlots(const std::vector<bool>& which);
  absl::Status ScanStripe(uint64_t stripe, bool repair, bool* mismatch);
  // The first stripe at or after `stripe` that is not a hole on every
  // member (`stripe` itself when unknown).
  uint64_t SkipHoles(uint64_t stripe);

  absl::Status BeginWrite();
  void EndWrite();
  absl::Status MarkCleanLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state_mu_);
  void SafemodeLoop();
  void ResyncLoop();

  const Geometry geo_;
  const uint64_t data_offset_;  // bytes
  const bool read_only_;
  const Logger logger_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::atomic<bool> failed_{false};
  // Moving average of member data-I/O latency, in ns (see Submit).
  std::atomic<int64_t> io_latency_ns_{0};
  AtomicCounters counters_;
  StripeLocks locks_;
  TaskPool pool_;
  StripeCache cache_;
  const std::chrono::milliseconds cache_max_age_;

  mutable absl::Mutex sb_mu_;
  Superblock sb_ ABSL_GUARDED_BY(sb_mu_);

  mutable absl::Mutex state_mu_ ABSL_ACQUIRED_BEFORE(sb_mu_);
  bool clean_ ABSL_GUARDED_BY(state_mu_) = true;
  int writes_in_flight_ ABSL_GUARDED_BY(state_mu_) = 0;
  // Any write since assembly: the persisted resync checkpoint must then be 0
  // (those writes could have torn stripes below the checkpoint).
  std::atomic<bool> wrote_since_open_{false};
  std::chrono::steady_clock::time_point last_write_ ABSL_GUARDED_BY(state_mu_);
  bool stop_ ABSL_GUARDED_BY(state_mu_) = false;

  // First stripe whose parity is not yet known good; stripe_count() when
  // the array is in sync.
  std::atomic<uint64_t> resync_stripe_;
  std::atomic<bool> resync_running_{false};
  std::thread safemode_thread_;
  std::thread writeback_thread_;
  std::thread resync_thread_;
  bool shut_down_ = false;
};

// Helpers shared by create.cc and assemble.cc.
// Reads and decodes the 1.2 superblock of `member`.
absl::StatusOr<Superblock> ReadSuperblock(Member& member);

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_IMPL_H_
