// SPDX-License-Identifier: MIT
// Internal: one NBD connection (a libnbd handle) that any number of threads
// share, for the NBD member backend (nbd_member.cc, whose file comment gives
// the threading model, timeouts and reconnection rules this implements).
// Thread-safe.

#ifndef URAID_SRC_MEMBER_NBD_CONN_H_
#define URAID_SRC_MEMBER_NBD_CONN_H_

#include <libnbd.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/sync.h"

namespace uraid {
namespace nbd {

// libnbd's manual advises about this many commands in flight per
// connection; more only queue inside libnbd.
constexpr int kMaxInFlight = 64;
// Largest read or write sent as one command when the server does not say:
// below libnbd's 64 MiB cap and nbdkit's limit.
constexpr uint64_t kDefaultMaxIo = 32ull << 20;
// Largest write-zeroes or block-status request (NBD lengths are 32-bit).
constexpr uint64_t kMaxRange = 1ull << 30;
// The most one hole probe asks the server about: a server may spend time in
// proportion to the range (nbdkit's file plugin walks SEEK_DATA/SEEK_HOLE
// over it), and a probe needs only the first extent.
constexpr uint64_t kMaxProbeRange = 128ull << 20;
constexpr int kMaxConnections = 16;

// libnbd's last error message, or a stand-in.
std::string LibnbdError();
// strerror_r's text for `err`.
std::string ErrnoText(int err);
// Milliseconds left until `deadline`, for poll(2) (-1: no deadline).
int PollTimeoutMs(absl::Time deadline);

// What the server offers; read once per connection after the handshake.
struct ExportInfo {
  uint64_t size = 0;
  bool read_only = false;
  bool can_flush = false;
  bool can_fua = false;  // NBD_CMD_FLAG_FUA on writes
  bool can_zero = false;
  bool can_multi_conn = false;
  bool can_block_status = false;
  uint64_t min_block = 1;           // alignment every request must keep
  uint64_t max_io = kDefaultMaxIo;  // largest read/write payload
};

class Conn;

// One NBD command, and (while in flight) its result. Owned by the caller of
// Conn::Run, which does not return before libnbd is done with it.
struct Op {
  enum Kind { kRead, kWrite, kFlush, kZero, kBlockStatus };
  Kind kind = kRead;
  void* buf = nullptr;  // kRead, kWrite
  uint64_t len = 0;
  uint64_t offset = 0;
  // kWrite: sent with NBD_CMD_FLAG_FUA (durable when acknowledged, so not
  // a write a later flush must cover). Only where the export can_fua.
  bool fua = false;
  // Set by Conn::Run and the callbacks, under the Conn's mutex.
  Conn* conn = nullptr;
  int* pending = nullptr;  // the batch's count of unfinished commands
  bool submitted = false;
  int error = 0;             // errno of a failed command, 0 on success
  std::string submit_error;  // libnbd's message when submission failed
  uint64_t flush_mark = 0;   // kFlush: writes completed before submission
  // kBlockStatus: (length, NBD state flags) from `extents_offset` on,
  // filled by the extent callback before completion.
  uint64_t extents_offset = 0;
  std::vector<std::pair<uint64_t, uint32_t>> extents;
};

inline Op MakeOp(Op::Kind kind, void* buf, uint64_t len, uint64_t offset) {
  Op op;
  op.kind = kind;
  op.buf = buf;
  op.len = len;
  op.offset = offset;
  return op;
}

struct RunResult {
  enum Kind {
    kOk,
    kFailed,    // the server (or libnbd) refused a command: a real error
    kLost,      // the connection died: reconnecting may help
    kTimedOut,  // our deadline passed; the connection has been shut down
  };
  Kind kind = kOk;
  int err = 0;
  std::string message;
  // kLost: the connection was shut down because a request on it got no
  // reply in time.
  bool killed_by_timeout = false;
};

// One connected libnbd handle plus the leader/follower machinery that lets
// any number of threads share it (see the file comment). Thread-safe.
class Conn {
 public:
  // Connects and negotiates, giving up at `deadline`. Messages do not name
  // the URI; the member adds it.
  static absl::StatusOr<std::unique_ptr<Conn>> Open(const std::string& uri,
                                                    absl::Time deadline);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  const ExportInfo& info() const { return info_; }

  // False once the connection has died or been shut down, and in a forked
  // child: the socket is shared with the parent, whose replies would be
  // read by either process at random.
  bool Usable() const { return !broken_.load() && pid_ == ::getpid(); }

  // True when writes completed on this connection since its last flush.
  bool HasUnflushedWrites() {
    MutexLock l(&mu_);
    return writes_completed_ > writes_flushed_;
  }

  // Submits every op, then waits until all have completed or `deadline`
  // passes (the connection is then shut down and the in-flight commands
  // fail before Run returns). Never returns while libnbd may still touch an
  // op's buffer.
  RunResult Run(std::span<Op> ops, absl::Time deadline);

 private:
  Conn(nbd_handle* h, int kill_fd, int wake_fd, ExportInfo info)
      : h_(h),
        kill_fd_(kill_fd),
        wake_fd_(wake_fd),
        pid_(::getpid()),
        info_(info) {}

  int64_t Submit(Op& op);
  // Waits, driving the socket when no other thread does, until `cond`
  // holds; false if `deadline` passed first.
  bool WaitLocked(absl::FunctionRef<bool()> cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One poll of the socket and the wake eventfd, then one notify.
  void DriveOnce(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  void MarkBroken(const std::string& why) ABSL_LOCKS_EXCLUDED(mu_);
  void KillLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();

  static int OnComplete(void* user_data, int* error);
  static int OnExtent(void* user_data, const char* metacontext, uint64_t offset,
                      uint32_t* entries, size_t nr_entries, int* error);

  nbd_handle* const h_;
  const int kill_fd_;  // our dup of the socket: shutdown(2) target, polled
  const int wake_fd_;  // eventfd: a submitter needs the socket writable
  const pid_t pid_;    // the process that connected
  const ExportInfo info_;
  std::atomic<bool> broken_{false};

  Mutex mu_;
  bool driving_ ABSL_GUARDED_BY(mu_) = false;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool killed_ ABSL_GUARDED_BY(mu_) = false;
  std::string broken_why_ ABSL_GUARDED_BY(mu_);
  uint64_t writes_completed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_flushed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace nbd
}  // namespace uraid

#endif  // URAID_SRC_MEMBER_NBD_CONN_H_
