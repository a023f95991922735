// SPDX-License-Identifier: MIT
// NBD members: an export on any NBD server (nbdkit, qemu-nbd, nbd-server),
// reached in user space with libnbd.
//
// Threading model. The array calls Read/Write/Flush from many pool threads
// at once and each call blocks until its I/O is done, so this backend only
// has to be a synchronous, thread-safe Member whose calls overlap on the
// wire. Each connection (`Conn`) is one libnbd handle driven with the aio
// API by its callers themselves, leader/follower style, with no thread of
// its own:
//   - a caller submits its commands (nbd_aio_pread/pwrite/...) with a
//     completion callback that only records the result under the Conn's
//     mutex (libnbd runs callbacks with the handle lock held, so they must
//     not call libnbd);
//   - then, while its commands are unfinished, either it is the one thread
//     polling the socket ("driving": poll + nbd_aio_notify_read/write, which
//     completes anybody's commands) or it sleeps on the mutex until its
//     commands complete or the driver steps down, when it takes over;
//   - a submitter wakes the driver through an eventfd when libnbd needs the
//     socket to become writable, so a driver polling only for input never
//     strands a half-sent request.
// Why not a poller thread per handle: nbdkit opens and reads the members
// (superblocks) before it forks into the background, and threads do not
// survive fork; with no threads there is nothing to restart, and a forked
// child only has to replace the connections it inherited (see Usable()).
// Why not nbd_poll from every caller: a reply read by one caller's poll
// would leave its owner asleep in poll() until its own timeout.
//
// Connections: one when the server does not advertise multi-conn (requests
// then share it, up to kMaxInFlight in flight); up to
// MemberOptions::nbd_connections when it does, used round robin, so a flush
// on any of them covers writes on all (the multi-conn promise).
//
// Timeouts: every call has a deadline `nbd_timeout_ms` from its start. A
// caller whose deadline passes shuts the socket down (shutdown(2) on our own
// dup of libnbd's descriptor, never libnbd's descriptor itself, which
// libnbd may close and the process reuse), which makes libnbd fail every
// command in flight on that connection at once, so no buffer is left in
// libnbd's hands, then returns DeadlineExceeded. The other callers on that
// connection fail too (Unavailable) instead of reconnecting, and for one
// more timeout every new call fails at once: the array submits many member
// I/Os together, and a server that is not answering would otherwise cost a
// full timeout per pool-full of them before the array gives up on it. (This
// shutdown(2) is the one thing we do to libnbd's socket behind its back; to
// libnbd it looks like the server hanging up.)
//
// Reconnection: a call whose connection is lost (EOF, reset, the server
// restarted) reconnects and resubmits its whole request up to
// `nbd_reconnects` times with exponential backoff, never past its deadline.
// Resubmitting is safe: reads and writes are idempotent, and the array never
// has two overlapping writes to a member in flight. A server error reply
// (EIO, ENOSPC, ...) is returned at once; that is a member failure, not a
// transport problem.
//
// Durability across reconnection: without multi-conn, NBD does not promise
// that a flush on a new connection covers writes acknowledged on an old
// one, so when a connection is lost with acknowledged but unflushed writes,
// every later Flush fails (DataLoss) and the array fails the member rather
// than trusting data it cannot vouch for.

#include <libnbd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sync.h"
#include "member/data_extent_cache.h"
#include "member/nbd_conn.h"
#include "member/vector_bytes.h"
#include "uraid/member.h"

namespace uraid {
namespace {

using nbd::Conn;
using nbd::ErrnoText;
using nbd::ExportInfo;
using nbd::kMaxConnections;
using nbd::kMaxProbeRange;
using nbd::kMaxRange;
using nbd::MakeOp;
using nbd::Op;
using nbd::RunResult;

class NbdMember final : public Member {
 public:
  NbdMember(std::string uri, const MemberOptions& options,
            std::unique_ptr<Conn> first)
      : uri_(std::move(uri)),
        options_(options),
        info_(first->info()),
        slots_(info_.can_multi_conn ? options.nbd_connections : 1) {
    slots_[0].conn = std::move(first);
  }

  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    if (absl::Status s = RangeCheck("pread", len, offset); !s.ok()) return s;
    if (len == 0) return absl::OkStatus();
    const std::string what = absl::StrFormat("pread at %d", offset);
    if (Aligned(len, offset)) {
      std::vector<Op> ops;
      Split(Op::kRead, buf, len, offset, &ops);
      return Execute(ops, what);
    }
    uint64_t start, end;
    Window(len, offset, &start, &end);
    std::vector<uint8_t> bounce(end - start);
    std::vector<Op> ops;
    Split(Op::kRead, bounce.data(), end - start, start, &ops);
    if (absl::Status s = Execute(ops, what); !s.ok()) return s;
    std::memcpy(buf, bounce.data() + (offset - start), len);
    return absl::OkStatus();
  }

  bool ReadVectorIsOneCall() const override { return true; }
  // Every buffer's commands in flight at once: one round trip for a
  // member's pieces of consecutive stripes, where Member's default would
  // take one per piece.
  absl::Status ReadVector(std::span<const iovec> iov,
                          uint64_t offset) override {
    bool aligned = true;
    const uint64_t len = VectorBytes(
        iov, offset,
        [&](const iovec& v, uint64_t at) { return Aligned(v.iov_len, at); },
        &aligned);
    if (absl::Status s = RangeCheck("pread", len, offset); !s.ok()) return s;
    if (!aligned) return Member::ReadVector(iov, offset);
    std::vector<Op> ops;
    uint64_t at = offset;
    for (const iovec& v : iov) {
      Split(Op::kRead, v.iov_base, v.iov_len, at, &ops);
      at += v.iov_len;
    }
    if (ops.empty()) return absl::OkStatus();
    return Execute(ops, absl::StrFormat("pread at %d", offset));
  }

  absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
    return WriteOut(buf, len, offset, /*fua=*/false);
  }

  // One FUA write when the server offers FUA (one round trip, not a write
  // and a flush); otherwise, and for an unaligned write (read-modify-write
  // of its edge blocks), Member's write then flush.
  absl::Status WriteFua(const void* buf, size_t len, uint64_t offset) override {
    if (!info_.can_fua || len == 0 || !Aligned(len, offset)) {
      return Member::WriteFua(buf, len, offset);
    }
    return WriteOut(buf, len, offset, /*fua=*/true);
  }

  absl::Status Flush() override {
    absl::Status s = absl::OkStatus();
    // A server that offers no flush writes through (or cannot be made to
    // flush at all); either way there is nothing to ask of it.
    if (info_.can_flush && !info_.read_only && !options_.read_only) {
      std::vector<Op> ops{MakeOp(Op::kFlush, nullptr, 0, 0)};
      s = Execute(ops, "flush");
    }
    MutexLock l(&mu_);
    if (s.ok() && lost_unflushed_writes_) {
      return absl::DataLossError(absl::StrFormat(
          "%s: flush: a connection was lost after the server acknowledged "
          "writes and before they were flushed; the server does not "
          "advertise multi-conn, so a flush on a new connection cannot "
          "vouch for them",
          uri_));
    }
    return s;
  }

  absl::Status Discard(size_t len, uint64_t offset) override {
    if (absl::Status s = CheckWritable("discard", offset); !s.ok()) return s;
    known_data_.Forget(offset, len);
    if (!info_.can_zero) {
      return absl::UnimplementedError(absl::StrFormat(
          "%s: discard at %d: the export does not offer write-zeroes", uri_,
          offset));
    }
    if (absl::Status s = RangeCheck("discard", len, offset); !s.ok()) return s;
    const uint64_t b = info_.min_block;
    const uint64_t head_end =
        std::min<uint64_t>((offset + b - 1) / b * b, offset + len);
    const uint64_t tail_start =
        std::max<uint64_t>((offset + len) / b * b, head_end);
    // Partial blocks at the edges are written as zeros (read-modify-write).
    for (auto [start, end] :
         {std::pair{offset, head_end}, std::pair{tail_start, offset + len}}) {
      if (start == end) continue;
      std::vector<uint8_t> zeros(end - start, 0);
      absl::Status s = BounceWrite(zeros.data(), end - start, start,
                                   absl::StrFormat("discard at %d", start));
      if (!s.ok()) return s;
    }
    if (tail_start == head_end) return absl::OkStatus();
    std::vector<Op> ops;
    for (uint64_t pos = head_end; pos < tail_start;) {
      const uint64_t n =
          std::min<uint64_t>(tail_start - pos, kMaxRange / b * b);
      ops.push_back(MakeOp(Op::kZero, nullptr, n, pos));
      pos += n;
    }
    return Execute(ops, absl::StrFormat("write-zeroes at %d", head_end));
  }

  bool DiscardZeroes() const override {
    return info_.can_zero && !info_.read_only && !options_.read_only;
  }

  uint64_t Size() const override { return info_.size; }
  const std::string& Name() const override { return uri_; }

  // From the export's base:allocation map: skips ranges the server reports
  // as reading zeros. Any trouble answers `offset` ("may hold data"), which
  // is always safe; real I/O errors surface on the reads that follow.
  absl::StatusOr<uint64_t> NextDataOffset(uint64_t offset) override {
    if (!info_.can_block_status || offset >= info_.size) return offset;
    if (known_data_.Contains(offset)) return offset;
    uint64_t pos = offset / info_.min_block * info_.min_block;
    // Each round covers at least one extent of at least one byte; the bound
    // only guards against a server that answers nonsense.
    for (int round = 0; round < 1 << 16 && pos < info_.size; ++round) {
      const uint64_t count = std::min<uint64_t>(
          info_.size - pos, kMaxProbeRange / info_.min_block * info_.min_block);
      std::vector<Op> ops{MakeOp(Op::kBlockStatus, nullptr, count, pos)};
      if (!Execute(ops, absl::StrFormat("block status at %d", pos)).ok()) {
        return offset;
      }
      const Op& op = ops[0];
      if (op.extents.empty() || op.extents_offset != pos) return offset;
      for (const auto& [length, flags] : op.extents) {
        if (length == 0) return offset;
        if (!(flags & LIBNBD_STATE_ZERO)) {
          known_data_.Remember(pos, pos + length);
          return std::max(offset, pos);
        }
        pos += length;
      }
    }
    return pos >= info_.size ? info_.size : offset;
  }

 private:
  struct Slot {
    std::shared_ptr<Conn> conn;
    bool connecting = false;
  };

  absl::Status RangeCheck(const char* op, uint64_t len, uint64_t offset) const {
    if (offset > info_.size || len > info_.size - offset) {
      return absl::OutOfRangeError(
          absl::StrFormat("%s: %s of %d bytes at %d is past the end (%d bytes)",
                          uri_, op, len, offset, info_.size));
    }
    return absl::OkStatus();
  }

  absl::Status CheckWritable(const char* op, uint64_t offset) const {
    if (options_.read_only) {
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: member is open read-only", uri_));
    }
    if (info_.read_only) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: %s at %d: the NBD export is read-only (the server refuses "
          "writes)",
          uri_, op, offset));
    }
    return absl::OkStatus();
  }

  bool Aligned(uint64_t len, uint64_t offset) const {
    return len % info_.min_block == 0 && offset % info_.min_block == 0;
  }

  // The block-aligned window [start, end) that covers [offset, offset+len).
  void Window(uint64_t len, uint64_t offset, uint64_t* start,
              uint64_t* end) const {
    const uint64_t b = info_.min_block;
    *start = offset / b * b;
    *end = std::min<uint64_t>((offset + len + b - 1) / b * b, info_.size);
  }

  // Appends an aligned transfer to `ops` as commands of at most max_io
  // bytes (Execute submits them all together).
  void Split(Op::Kind kind, void* buf, uint64_t len, uint64_t offset,
             std::vector<Op>* ops) const {
    auto* p = static_cast<uint8_t*>(buf);
    for (uint64_t done = 0; done < len;) {
      const uint64_t n = std::min<uint64_t>(len - done, info_.max_io);
      ops->push_back(MakeOp(kind, p + done, n, offset + done));
      done += n;
    }
  }

  // Write, or with `fua` (only for an aligned write to an export that
  // can_fua) each command sent with NBD's FUA flag.
  absl::Status WriteOut(const void* buf, size_t len, uint64_t offset,
                        bool fua) {
    if (absl::Status s = CheckWritable("pwrite", offset); !s.ok()) return s;
    if (absl::Status s = RangeCheck("pwrite", len, offset); !s.ok()) return s;
    if (len == 0) return absl::OkStatus();
    const std::string what =
        absl::StrCat(fua ? "pwrite (FUA) at " : "pwrite at ", offset);
    void* data = const_cast<void*>(buf);  // libnbd only reads it
    if (Aligned(len, offset)) {
      std::vector<Op> ops;
      Split(Op::kWrite, data, len, offset, &ops);
      for (Op& op : ops) op.fua = fua;
      return Execute(ops, what);
    }
    return BounceWrite(static_cast<const uint8_t*>(buf), len, offset, what);
  }

  // Read-modify-write of the partial blocks at the edges of an unaligned
  // write. Serialised on the member: the array never writes overlapping
  // bytes at once, but two unaligned writes may share a block when the
  // export's minimum block is larger than the array's 4 KiB granularity.
  absl::Status BounceWrite(const uint8_t* buf, uint64_t len, uint64_t offset,
                           const std::string& what) {
    MutexLock l(&rmw_mu_);
    const uint64_t b = info_.min_block;
    uint64_t start, end;
    Window(len, offset, &start, &end);
    std::vector<uint8_t> bounce(end - start);
    std::vector<Op> reads;
    if (offset != start) {
      reads.push_back(MakeOp(Op::kRead, bounce.data(), b, start));
    }
    if ((offset + len) % b != 0 && (end - b != start || offset == start)) {
      reads.push_back(
          MakeOp(Op::kRead, bounce.data() + (end - b - start), b, end - b));
    }
    if (!reads.empty()) {
      if (absl::Status s = Execute(reads, what); !s.ok()) return s;
    }
    std::memcpy(bounce.data() + (offset - start), buf, len);
    std::vector<Op> ops;
    Split(Op::kWrite, bounce.data(), end - start, start, &ops);
    return Execute(ops, what);
  }

  // A usable connection for `slot`, connecting when it has none or its
  // connection is broken (or was inherited across fork).
  absl::StatusOr<std::shared_ptr<Conn>> GetConn(size_t slot,
                                                absl::Time deadline) {
    std::shared_ptr<Conn> old;
    {
      MutexLock l(&mu_);
      auto idle = [this, slot]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !slots_[slot].connecting;
      };
      if (!mu_.AwaitWithDeadline(Condition(&idle), deadline)) {
        return absl::DeadlineExceededError(
            "no connection: reconnecting took longer than the timeout");
      }
      Slot& s = slots_[slot];
      if (s.conn != nullptr && s.conn->Usable()) return s.conn;
      s.connecting = true;
      old = std::move(s.conn);
      if (old != nullptr && !info_.can_multi_conn &&
          old->HasUnflushedWrites()) {
        lost_unflushed_writes_ = true;
      }
    }
    // Close before connecting again: some servers take one client at a
    // time (qemu-nbd's default).
    old.reset();
    absl::StatusOr<std::unique_ptr<Conn>> fresh = Conn::Open(uri_, deadline);
    absl::Status check =
        fresh.ok() ? SameExport((*fresh)->info()) : fresh.status();
    MutexLock l(&mu_);
    slots_[slot].connecting = false;
    if (!check.ok()) return check;
    slots_[slot].conn = std::shared_ptr<Conn>(std::move(*fresh));
    return slots_[slot].conn;
  }

  // After a reconnect, the export must still be the one we assembled.
  absl::Status SameExport(const ExportInfo& now) const {
    // FUA too: WriteFua chose the wire form from the first connection's.
    if (now.size != info_.size || now.read_only != info_.read_only ||
        now.min_block != info_.min_block || now.can_fua != info_.can_fua) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "the export changed across a reconnect (size %d -> %d, read-only "
          "%d -> %d, minimum block %d -> %d, FUA %d -> %d)",
          info_.size, now.size, info_.read_only, now.read_only, info_.min_block,
          now.min_block, info_.can_fua, now.can_fua));
    }
    return absl::OkStatus();
  }

  // The server let a request or a handshake go unanswered for the whole
  // timeout: for one more timeout, calls fail at once instead of each
  // waiting out its own (the array submits many member I/Os together and
  // would otherwise wait for them one pool-full at a time). After that a
  // call tries again.
  void NotAnswering() {
    MutexLock l(&mu_);
    fail_fast_until_ =
        absl::Now() + absl::Milliseconds(options_.nbd_timeout_ms);
    fail_fast_why_ = absl::StrFormat(
        "the server is not answering (a request got no reply within %d ms); "
        "calls fail at once for %d ms after that",
        options_.nbd_timeout_ms, options_.nbd_timeout_ms);
  }
  // Every reconnect attempt failed: the server is gone (killed, its host
  // down). The calls that follow (the array's retry of the same I/O, the
  // other requests in flight) fail at once for a while instead of each
  // spending the whole backoff again, so the member is failed within about
  // one backoff (under a second) rather than several.
  void Gone(const std::string& why) {
    MutexLock l(&mu_);
    fail_fast_until_ = absl::Now() + kGoneFailFast;
    fail_fast_why_ = absl::StrFormat(
        "connection lost (%s) and reconnecting failed; calls fail at once "
        "for %d ms after that",
        why, absl::ToInt64Milliseconds(kGoneFailFast));
  }
  static constexpr absl::Duration kGoneFailFast = absl::Seconds(1);

  // Runs `ops` on one connection within this call's timeout, reconnecting
  // and resubmitting them all when the connection is lost. A lost
  // connection whose loss was a timeout is not retried.
  absl::Status Execute(std::vector<Op>& ops, const std::string& what) {
    const absl::Time now = absl::Now();
    const absl::Duration timeout = absl::Milliseconds(options_.nbd_timeout_ms);
    const absl::Time deadline = now + timeout;
    {
      MutexLock l(&mu_);
      if (now < fail_fast_until_) {
        return absl::UnavailableError(
            absl::StrFormat("%s: %s: %s", uri_, what, fail_fast_why_));
      }
    }
    const size_t slot = next_slot_.fetch_add(1) % slots_.size();
    std::string lost;
    for (int attempt = 0;; ++attempt) {
      if (attempt > 0) {
        if (attempt > options_.nbd_reconnects) {
          Gone(lost);
          return absl::UnavailableError(absl::StrFormat(
              "%s: %s: connection lost (%s); gave up after %d reconnect "
              "attempts",
              uri_, what, lost, options_.nbd_reconnects));
        }
        const absl::Duration backoff =
            std::min(absl::Milliseconds(100) * (1 << std::min(attempt - 1, 5)),
                     absl::Seconds(2));
        if (absl::Now() + backoff >= deadline) {
          return absl::DeadlineExceededError(absl::StrFormat(
              "%s: %s: connection lost (%s); no time left to reconnect "
              "within the %d ms timeout",
              uri_, what, lost, options_.nbd_timeout_ms));
        }
        absl::SleepFor(backoff);
      }
      absl::StatusOr<std::shared_ptr<Conn>> conn = GetConn(slot, deadline);
      if (!conn.ok()) {
        const absl::StatusCode code = conn.status().code();
        if (code == absl::StatusCode::kDeadlineExceeded) NotAnswering();
        if (code == absl::StatusCode::kDeadlineExceeded ||
            code == absl::StatusCode::kFailedPrecondition ||
            code == absl::StatusCode::kInvalidArgument) {
          return absl::Status(code, absl::StrFormat("%s: %s: %s", uri_, what,
                                                    conn.status().message()));
        }
        lost = std::string(conn.status().message());
        continue;
      }
      RunResult r = (*conn)->Run(ops, deadline);
      switch (r.kind) {
        case RunResult::kOk:
          return absl::OkStatus();
        case RunResult::kFailed:
          return absl::Status(
              absl::ErrnoToStatus(r.err, "").code(),
              absl::StrFormat("%s: %s: %s", uri_, what, r.message));
        case RunResult::kTimedOut:
          NotAnswering();
          return absl::DeadlineExceededError(absl::StrFormat(
              "%s: %s: no reply within %d ms; connection closed", uri_, what,
              options_.nbd_timeout_ms));
        case RunResult::kLost:
          if (r.killed_by_timeout) {
            return absl::UnavailableError(absl::StrFormat(
                "%s: %s: connection closed because a request on it got no "
                "reply within %d ms",
                uri_, what, options_.nbd_timeout_ms));
          }
          lost = r.message;
          break;
      }
    }
  }

  const std::string uri_;
  const MemberOptions options_;
  const ExportInfo info_;
  // The last data extent NextDataOffset learned (one query per extent).
  DataExtentCache known_data_;
  std::atomic<uint64_t> next_slot_{0};
  Mutex rmw_mu_;
  Mutex mu_;
  // Sized once; entries guarded by mu_.
  std::vector<Slot> slots_;
  bool lost_unflushed_writes_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time fail_fast_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::string fail_fast_why_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<Member>> OpenNbdMember(
    const std::string& uri, const MemberOptions& options) {
  if (options.nbd_timeout_ms <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: NBD timeout must be more than 0 ms, not %d", uri,
                        options.nbd_timeout_ms));
  }
  if (options.nbd_connections < 1 ||
      options.nbd_connections > kMaxConnections) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: NBD connections must be 1..%d, not %d", uri,
                        kMaxConnections, options.nbd_connections));
  }
  if (options.nbd_reconnects < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: NBD reconnect attempts must be 0 or more, not %d",
                        uri, options.nbd_reconnects));
  }
  const absl::Time deadline =
      absl::Now() + absl::Milliseconds(options.nbd_timeout_ms);
  absl::StatusOr<std::unique_ptr<Conn>> conn = Conn::Open(uri, deadline);
  if (!conn.ok()) {
    return absl::Status(
        conn.status().code(),
        absl::StrFormat("%s: %s", uri, conn.status().message()));
  }
  return std::unique_ptr<Member>(new NbdMember(uri, options, *std::move(conn)));
}

}  // namespace uraid
