// SPDX-License-Identifier: MIT
// Internal: md's array_state for one array: clean or active (the
// superblocks' dirty flag, written "active" before the first member write
// and "clean" again once writes have stopped for the safemode delay),
// the writes in flight, the resync front the superblocks claim, and the
// live read-only switch (`uraid readonly`/`readwrite`).
//
// Time: the safemode delay runs on the array's injected Clock
// (uraid/clock.h), so a test on a simulated clock moves the array to
// clean without waiting the delay (200 ms unless set); the safemode
// thread polls that clock every 100 ms of real time.
//
// Thread-safety: thread-safe. Lock order: the switch's mutex, then the
// state's, then the roster's (the host's WriteSuperblocks takes it under
// the state's mutex, so a write's "active" and a checkpoint's claim are
// ordered).

#ifndef URAID_SRC_ARRAY_ARRAY_STATE_H_
#define URAID_SRC_ARRAY_ARRAY_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "base/sync.h"
#include "uraid/clock.h"
#include "uraid/events.h"

namespace uraid {

// What the array state needs of its array.
class ArrayStateHost {
 public:
  virtual ~ArrayStateHost() = default;
  // Writes every member's superblock with md's clean flag `clean`
  // (nullopt: as it is).
  virtual absl::Status WriteSuperblocks(std::optional<bool> clean) = 0;
  // A client's flush: everything acknowledged durable on the members.
  virtual absl::Status Flush() = 0;
  // Writes the stripe cache back (if `writeback`) and flushes every
  // member, without counting as a client flush.
  virtual absl::Status FlushMembers(bool writeback) = 0;
  // The array has failed (too many members gone): it is never marked
  // clean again.
  virtual bool Failed() const = 0;
  // Parity is not yet trusted everywhere (a resync has not finished): the
  // array stays dirty.
  virtual bool ResyncPending() const = 0;
  // May the array serve (write: a write-type request)? The error says why
  // not.
  virtual absl::Status CheckUsable(bool write) const = 0;
  // Holds every job still (`frozen`), or lets them go on.
  virtual void FreezeJobs(bool frozen) = 0;
  // The read-only switch's last write (`frozen`): the write-intent
  // bitmap's clearable bits cleared, then nothing more written to it until
  // unfrozen. Called without the state's lock.
  virtual void FreezeBitmap(bool frozen) = 0;
  // The read-only switch ended: writes are accepted again (a recovery
  // waiting for them may start).
  virtual void WritesResumed() = 0;
  virtual void Log(LogLevel level, const std::string& line) const = 0;
};

// A write-type request on an array switched read-only: EROFS for the C API
// and the plugin (nbdkit sends it to the client as NBD's EPERM).
absl::Status SwitchedReadOnlyError();

class ArrayState {
 public:
  // `clean` and `resync_offset`: what the superblocks say at assembly (a
  // dirty array with a resync checkpoint above 0 claims its front).
  // `read_only`: opened read-only (never written, never switched).
  ArrayState(ArrayStateHost& host, bool clean, uint64_t resync_offset,
             bool read_only, Clock& clock);
  ~ArrayState();  // stops the safemode thread
  ArrayState(const ArrayState&) = delete;
  ArrayState& operator=(const ArrayState&) = delete;

  // md's rule before a member write: the superblocks say "active" first,
  // so a crash from here on is detected at the next assembly. Refused once
  // the read-only switch has closed the gate. Pairs with EndWrite.
  absl::Status BeginWrite() ABSL_LOCKS_EXCLUDED(mu_);
  void EndWrite() ABSL_LOCKS_EXCLUDED(mu_);

  bool clean() const ABSL_LOCKS_EXCLUDED(mu_);
  // Any write since assembly (lock-free): the superblocks' resync
  // checkpoint must then be 0 (those writes could tear stripes below it).
  bool wrote_since_open() const { return wrote_since_open_.load(); }
  // Switched read-only by SetReadOnly (lock-free).
  bool switched_read_only() const {
    return switched_ro_.load(std::memory_order_acquire);
  }
  // True once Stop was called: background work ends.
  bool stopping() const ABSL_LOCKS_EXCLUDED(mu_);

  // A resync checkpoint: while only the resync has written since
  // assembly, the members are flushed and the superblocks rewritten
  // (still dirty) so that they claim the resync's front as in sync.
  absl::Status CheckpointResync() ABSL_LOCKS_EXCLUDED(mu_);
  // Marks the array clean when no write is in flight (the resync ended).
  absl::Status MarkCleanIfIdle() ABSL_LOCKS_EXCLUDED(mu_);

  // The live switch: to read-only, closes the write gate, waits for the
  // writes in flight, freezes the jobs, flushes and marks clean; back,
  // opens the gate and lets the jobs go on. Serialised.
  absl::Status SetReadOnly(bool read_only) ABSL_LOCKS_EXCLUDED(switch_mu_, mu_);

  // md's safe_mode_delay (AssembleOptions::safe_mode_delay_ms): idle this
  // long on the clock, the array is marked clean; 0: only at the stop.
  void SetSafemodeDelayMs(uint32_t ms) ABSL_LOCKS_EXCLUDED(mu_);
  // Starts the safemode thread (writable arrays only).
  void Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Waits up to `ms` of real time for Stop; true once stopping.
  bool WaitForStop(int ms) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops background work: the safemode thread ends.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);
  // At the array's stop, after its last write: marks it clean when it
  // may be; returns whether it is clean.
  bool MarkCleanAtStop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Data durable, then the superblocks say clean. No-op when clean,
  // read-only, failed or resyncing.
  absl::Status MarkCleanLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same from a background path that has no caller to tell: a
  // failure is logged (the superblocks stay dirty; the next try repeats).
  void MarkCleanOrLogLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SwitchToReadOnly() ABSL_LOCKS_EXCLUDED(mu_);
  bool NoWritesInFlight() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return writes_in_flight_ == 0;
  }
  void SafemodeLoop() ABSL_LOCKS_EXCLUDED(mu_);

  ArrayStateHost& host_;
  const bool read_only_;
  Clock& clock_;  // the array's; outlives this

  // Serialises read-only switches.
  Mutex switch_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Set once a switch to read-only has finished (the gate closed, the
  // writes drained, the jobs frozen, the array clean): CheckUsable(true)
  // then refuses every write-type request with EROFS.
  std::atomic<bool> switched_ro_{false};
  std::atomic<bool> wrote_since_open_{false};

  mutable Mutex mu_;
  // The switch's gate: closed first, BeginWrite refuses new writes while
  // those in flight finish.
  bool gate_closed_ ABSL_GUARDED_BY(mu_) = false;
  bool clean_ ABSL_GUARDED_BY(mu_);
  int writes_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // The superblocks say dirty with a resync_offset above 0 (a resync
  // checkpoint): they claim the stripes below it consistent, so the first
  // client write rewrites them (offset 0) before it touches a member.
  bool resync_front_claimed_ ABSL_GUARDED_BY(mu_);
  int64_t last_write_ns_ ABSL_GUARDED_BY(mu_);      // on clock_
  int64_t safemode_delay_ns_ ABSL_GUARDED_BY(mu_);  // 0: never
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread safemode_thread_;
};

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_ARRAY_STATE_H_
