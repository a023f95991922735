// SPDX-License-Identifier: MIT
// File: uraid/member.h
//
// The storage under one array slot. libraid reads and writes raw member
// bytes (superblock at 4096, data at data_offset) only through this
// interface, so embedders can plug in their own backends (object storage,
// test fakes) and tests can inject faults.
//
// Contract for implementations:
// - Thread-safe: the array calls every method concurrently from many threads,
//   but never issues two overlapping writes at once.
// - All-or-nothing per call: Read fills all `len` bytes or fails; a short
//   transfer is an error. Offsets and lengths are in bytes from the start of
//   the raw member. Buffers may have any alignment.
// - Errors name the member and the offset, e.g. "m0.img: pread at 8192: EIO".
//   Return an error only for a real failure: any error from Read, Write or
//   Flush makes the array mark the member's slot faulty and stop using it
//   (the array then runs degraded from parity). A range past Size() is the
//   array's bug, not the member's: report it as OutOfRange.
// - Size() and Name() never change while the member is open; Name() returns
//   a reference that stays valid as long as the member.
// - Ownership: an Array owns its members (std::unique_ptr) and destroys
//   them when it is destroyed; release resources in the destructor. To keep
//   a handle on a member (tests), wrap a std::shared_ptr with ShareMember.

#ifndef URAID_MEMBER_H_
#define URAID_MEMBER_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "uraid/export.h"

namespace uraid {

class URAID_EXPORT Member {
 public:
  virtual ~Member() = default;

  // Fills `buf` with the `len` bytes at `offset`, or fails.
  virtual absl::Status Read(void* buf, size_t len, uint64_t offset) = 0;
  // Fills the buffers of `iov` in order from consecutive bytes: iov[0] with
  // those at `offset`, iov[1] with those right after, and so on (preadv's
  // contract, all or nothing as Read). The default is Read of each buffer
  // in turn (member.cc); a backend with a vectored call overrides it (a
  // file: one preadv; NBD: every command in flight at once).
  virtual absl::Status ReadVector(std::span<const iovec> iov, uint64_t offset);
  // True when ReadVector costs about what one Read does (one system call,
  // one round trip), not one Read per buffer. Only then does the array join
  // its reads of a member's pieces of consecutive stripes into one
  // ReadVector: joined, the default's Reads would run one after another
  // where the array runs separate reads of slow members in parallel. The
  // default is false.
  virtual bool ReadVectorIsOneCall() const { return false; }
  // Stores `len` bytes from `buf` at `offset`, or fails. Need not be durable
  // before Flush(); must be visible to every later Read.
  virtual absl::Status Write(const void* buf, size_t len, uint64_t offset) = 0;
  // Makes every completed write durable (fdatasync semantics).
  virtual absl::Status Flush() = 0;
  // Write() whose own bytes are durable when it returns (NBD's and the
  // block layer's FUA; no promise about other writes). The default is
  // Write then Flush; backends with a cheaper form override it (a file:
  // one pwritev2 with RWF_DSYNC instead of pwrite, fdatasync and checks).
  virtual absl::Status WriteFua(const void* buf, size_t len, uint64_t offset) {
    if (absl::Status st = Write(buf, len, offset); !st.ok()) return st;
    return Flush();
  }
  // Write() of a range the caller has just read in full from this member
  // (a read-modify-write: old data or parity read, new bytes written back
  // over them). That read proved the range is there, so a backend may skip
  // what it checks per write against having shrunk under the array (a
  // file: the fstat before each pwrite). Same contract as Write otherwise.
  // The default is Write.
  virtual absl::Status Rewrite(const void* buf, size_t len, uint64_t offset) {
    return Write(buf, len, offset);
  }
  // WriteFua() of a range just read in full (see Rewrite). The default is
  // Rewrite then Flush.
  virtual absl::Status RewriteFua(const void* buf, size_t len,
                                  uint64_t offset) {
    if (absl::Status st = Rewrite(buf, len, offset); !st.ok()) return st;
    return Flush();
  }
  // Drops the range. Only called when DiscardZeroes() is true, and then the
  // range must read back as zeros afterwards.
  virtual absl::Status Discard(size_t len, uint64_t offset) = 0;
  // True when Discard is supported and guarantees zeros on read.
  virtual bool DiscardZeroes() const = 0;
  // Raw size in bytes.
  virtual uint64_t Size() const = 0;
  // The smallest offset >= `offset` that may hold non-zero bytes (Size()
  // when none does): lets resync skip never-written regions of sparse
  // members. Backends that cannot tell return `offset` (the default).
  virtual absl::StatusOr<uint64_t> NextDataOffset(uint64_t offset) {
    return offset;
  }
  // The name used in messages: the path or URI the user gave.
  virtual const std::string& Name() const = 0;
};

// How OpenFileMember opens a file or block device.
struct FileMemberOptions {
  // O_DIRECT on the member; unaligned transfers go through aligned bounce
  // buffers. Default: false (buffered).
  bool direct = false;
  // Open O_RDONLY; writes fail with FailedPrecondition.
  bool read_only = false;
  // Take an exclusive, non-blocking flock() so a second server cannot open
  // the member (a second open in the same process is refused too). Turn it
  // off to read members another process is serving (with read_only).
  bool lock = true;
};

// Opens a regular file or block device. Size comes from fstat or
// BLKGETSIZE64; Flush is fdatasync; Discard is FALLOC_FL_PUNCH_HOLE (files)
// or BLKDISCARD (only when the device reports discard-zeroes);
// NextDataOffset uses SEEK_DATA. The member is thread-safe (positional I/O
// on one descriptor) and closes the file when destroyed. Errors name the
// path: the errno of open/fstat as absl::ErrnoToStatus codes (NotFound,
// PermissionDenied, ...), FailedPrecondition when another open holds the
// lock, InvalidArgument for something that is neither a regular file nor a
// block device.
URAID_EXPORT absl::StatusOr<std::unique_ptr<Member>> OpenFileMember(
    const std::string& path, const FileMemberOptions& options = {});

// Options for OpenMember, which opens a file, a block device or an NBD
// export. Fields that do not apply to the kind of member are ignored.
struct MemberOptions {
  // Never write: Write and Discard fail with FailedPrecondition.
  bool read_only = false;
  // Files and block devices only: see FileMemberOptions.
  bool direct = false;
  bool lock = true;
  // NBD only. A call (read, write, flush, ...) that gets no answer within
  // this many milliseconds fails with DeadlineExceeded and its connection is
  // closed, so the array fails the member and carries on degraded instead
  // of hanging. Reconnection attempts count against the same budget. After
  // a timeout, calls fail at once (Unavailable) for one more timeout rather
  // than each waiting for a server that is not answering.
  int nbd_timeout_ms = 30000;
  // NBD only. Connections per member when the server advertises multi-conn;
  // one connection otherwise. 1..16.
  int nbd_connections = 4;
  // NBD only. How many times one call reconnects a dropped connection (with
  // backoff 100 ms, 200 ms, 400 ms, ... capped at 2 s) before failing.
  int nbd_reconnects = 3;
};

// True when `spec` names a remote member (it contains "://"), false for a
// path.
URAID_EXPORT bool IsMemberUri(const std::string& spec);

// Opens `spec`: an NBD URI (nbd://, nbds://, nbd+unix://, nbds+unix://, ...:
// anything containing "://") through OpenNbdMember, anything else through
// OpenFileMember.
URAID_EXPORT absl::StatusOr<std::unique_ptr<Member>> OpenMember(
    const std::string& spec, const MemberOptions& options = {});

// Opens an NBD export with libnbd (URI syntax: libnbd's nbd_connect_uri,
// e.g. "nbd://host:10809/export", "nbd+unix:///?socket=/run/m0.sock").
// Size comes from the export; Flush is NBD_CMD_FLUSH (a no-op when the
// server does not offer flush); Discard is NBD_CMD_WRITE_ZEROES, which reads
// back zeros, so DiscardZeroes() is true when the export is writable and
// offers write-zeroes. Transfers that do not match the export's minimum
// block size are done by aligned read-modify-write. Every error names the
// URI. Does not lock the export: two arrays over one export is the user's
// mistake to avoid.
URAID_EXPORT absl::StatusOr<std::unique_ptr<Member>> OpenNbdMember(
    const std::string& uri, const MemberOptions& options = {});

// A zero-filled member in memory, for tests and embedding. Thread-safe.
// Allocates all `size` bytes up front. Discard zeroes the range
// (DiscardZeroes() is true); ranges past the end fail with OutOfRange.
URAID_EXPORT std::unique_ptr<Member> NewMemoryMember(std::string name,
                                                     uint64_t size);

// A non-owning handle: forwards every call to `target`, which outlives it by
// shared ownership. Lets a test stop an array and assemble the same
// in-memory members again.
URAID_EXPORT std::unique_ptr<Member> ShareMember(
    std::shared_ptr<Member> target);

// Fault injection for tests: FaultyMember forwards to a target member and
// fails, drops or tears calls as its FaultPlan says.
//
// Offsets and lengths are in bytes of the raw member (superblock area
// included: data_offset is not subtracted). A call covers [offset,
// offset+len); it "overlaps" a range when the two share at least one byte.
// Flush covers no bytes.

// Which calls a fault applies to. Discard counts as a write.
enum class FaultOp { kRead, kWrite, kAny };

// One rule of a FaultPlan. Each call is checked against the rules in order;
// the first rule that matches fires (and uses up one of its `times`), the
// later ones are not consulted for that call.
struct FaultRule {
  enum class Action {
    // The call fails with FaultPlan::error_code and nothing is transferred.
    kError,
    // Write only: the call returns OK but nothing is written (a lost
    // write). Later reads see the old bytes.
    kLose,
    // Write only: only the first `torn_bytes` bytes are written (a crash
    // mid-write), then the call fails, or returns OK if `torn_ok`.
    kTear,
  };
  Action action = Action::kError;
  // The calls the rule matches. kLose and kTear match only Write calls,
  // whatever `op` says.
  FaultOp op = FaultOp::kAny;
  // The byte range the call must overlap: [offset, offset+len). The default
  // is the whole member. Clipped at 2^64-1.
  uint64_t offset = 0;
  uint64_t len = UINT64_MAX;
  // How many times the rule fires before it heals: 1 is one-shot (the
  // first matching call fails, the next one succeeds). Decremented as it
  // fires; a rule at 0 matches nothing. UINT64_MAX (the default) is forever
  // and is never decremented.
  uint64_t times = UINT64_MAX;
  // kTear: bytes written from the start of the call, rounded down to a
  // multiple of 512 (whole sectors) and capped at the call's length.
  uint64_t torn_bytes = 0;
  // kTear: return OK (a write the device acknowledged but only partly
  // stored) instead of the injected error (a crash or failed write).
  bool torn_ok = false;
};

// What a FaultyMember injects besides SetFailed. The default plan injects
// nothing. Checks run in this order, and the first that fires decides the
// call: SetFailed / fail_after_ios, fail_flushes (Flush only), `rules`,
// `fail_rate`. "Data I/O" below means a Read, Write or Discard call.
struct FaultPlan {
  std::vector<FaultRule> rules;
  // When set, the first `*fail_after_ios` data I/Os after SetPlan proceed
  // (subject to the rest of the plan) and the next data I/O fails as if by
  // SetFailed(true): it and every later call fails (Unavailable) and
  // failed() turns true. SetFailed(false) heals the member; the trigger
  // fires only once per SetPlan. 0 fails the next data I/O.
  std::optional<uint64_t> fail_after_ios;
  // The next `fail_flushes` Flush calls fail (then Flush works again).
  uint64_t fail_flushes = 0;
  // Each data I/O of kind `fail_rate_op` that no earlier check failed fails
  // with probability `fail_rate` (0 to 1). Deterministic: the k-th such call
  // after SetPlan fails iff a hash of (`seed`, k) is below the rate, so a
  // given seed and call sequence always fail the same calls.
  double fail_rate = 0;
  FaultOp fail_rate_op = FaultOp::kAny;
  uint64_t seed = 0;
  // The code of errors from `rules`, `fail_rate` and `fail_flushes`.
  // Unavailable is what a real EIO maps to (absl::ErrnoToStatus); use
  // e.g. kDataLoss to model an unreadable sector distinctly.
  absl::StatusCode error_code = absl::StatusCode::kUnavailable;
};

// What a FaultyMember has seen since construction or ResetCounters. Every
// call is counted, whether it failed or not.
struct FaultCounters {
  uint64_t reads = 0;
  uint64_t writes = 0;    // Write and Rewrite calls
  uint64_t rewrites = 0;  // of those, Rewrite calls
  uint64_t discards = 0;
  uint64_t flushes = 0;
  // Calls failed by injection: SetFailed (including NextDataOffset),
  // fail_after_ios, fail_flushes, kError rules and fail_rate. Torn writes
  // are counted in `torn_writes` only.
  uint64_t errors = 0;
  uint64_t lost_writes = 0;  // kLose rules fired
  uint64_t torn_writes = 0;  // kTear rules fired
  // Every injected fault.
  uint64_t injected() const { return errors + lost_writes + torn_writes; }
};

// A member that forwards to `target` until failed: then every call returns
// an I/O error naming the member (Unavailable, "injected I/O error").
// Thread-safe; SetFailed may be called at any time from any thread, and
// SetFailed(false) makes the member work again (the array does not take a
// faulty slot back by itself).
//
// SetPlan adds finer faults (errors at given ranges, after N I/Os, at a
// rate; lost and torn writes): see FaultPlan. Every injected error is
// "<member>: <op> at <offset>: injected I/O error" plus the reason in
// parentheses, <offset> being the call's offset. Injection is decided under
// one mutex, so concurrent calls each see a consistent plan; the target is
// called outside it.
class URAID_EXPORT FaultyMember : public Member {
 public:
  explicit FaultyMember(std::shared_ptr<Member> target);
  void SetFailed(bool failed);
  bool failed() const;

  // Replaces the plan (SetPlan({}) clears it) and restarts its counts
  // (fail_after_ios, the fail_rate sequence). Any time, any thread.
  void SetPlan(FaultPlan plan);
  // The current plan, with each rule's `times` as used up so far.
  FaultPlan plan() const;
  FaultCounters counters() const;
  void ResetCounters();

  absl::Status Read(void* buf, size_t len, uint64_t offset) override;
  // ReadVector is Member's: a Read per buffer, each through the plan. Joined
  // reads as the target's are, so that tests see the array's joins.
  bool ReadVectorIsOneCall() const override;
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override;
  absl::Status Rewrite(const void* buf, size_t len, uint64_t offset) override;
  absl::Status Flush() override;
  absl::Status Discard(size_t len, uint64_t offset) override;
  bool DiscardZeroes() const override;
  uint64_t Size() const override;
  const std::string& Name() const override;
  absl::StatusOr<uint64_t> NextDataOffset(uint64_t offset) override;

  ~FaultyMember() override;

 private:
  // The plan, its mutex and the counters (faulty_member.cc): behind a
  // pointer so that the class layout, and with it this header, depends on
  // no mutex type (the library's TSan build swaps them).
  struct URAID_NO_EXPORT Impl;
  // Write or Rewrite (`rewrite`) through the plan; the target gets the same.
  absl::Status WriteThrough(const void* buf, size_t len, uint64_t offset,
                            bool rewrite);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uraid

#endif  // URAID_MEMBER_H_
