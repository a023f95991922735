// SPDX-License-Identifier: MIT
#include "member/nbd_conn.h"

#include <fcntl.h>
#include <libnbd.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/sync.h"

namespace uraid {
namespace nbd {

std::string LibnbdError() {
  const char* e = nbd_get_error();
  return e != nullptr ? e : "unknown libnbd error";
}

std::string ErrnoText(int err) {
  char buf[128];
  // GNU strerror_r: returns the message, maybe not in buf.
  return strerror_r(err, buf, sizeof(buf));
}

int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  int64_t ms =
      absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
  return static_cast<int>(std::min<int64_t>(ms, INT_MAX));
}

absl::StatusOr<std::unique_ptr<Conn>> Conn::Open(const std::string& uri,
                                                 absl::Time deadline) {
  nbd_handle* h = nbd_create();
  if (h == nullptr) {
    return absl::InternalError(absl::StrCat("nbd_create: ", LibnbdError()));
  }
  auto fail = [h](absl::StatusCode code, const std::string& msg) {
    nbd_close(h);
    return absl::Status(code, msg);
  };
  // The URI comes from the user (command line, plugin key), so its
  // tls-psk-file= and tls-certificates= may name local files.
  nbd_set_uri_allow_local_file(h, true);
  // libnbd zeroes every read buffer before the read by default (so that a
  // caller that ignores a failure cannot leak old heap bytes); a read is
  // all or nothing (nbd_pread(3)), and no caller of Member::Read looks at
  // the buffer of a failed read (a file member's pread leaves it undefined
  // too). The memset was 4-6% of the engine's CPU in a RAID6 rebuild over
  // NBD members (perf: __memset under nbd_aio_pread); every byte read from
  // an NBD member paid it.
  nbd_set_pread_initialize(h, false);
  // For NextDataOffset; servers without it simply do not agree to it.
  nbd_add_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION);
  if (nbd_aio_connect_uri(h, uri.c_str()) == -1) {
    const int err = nbd_get_errno();
    std::string msg = absl::StrCat("connect: ", LibnbdError());
    return fail(err == EINVAL || err == ENOTSUP
                    ? absl::StatusCode::kInvalidArgument
                    : absl::StatusCode::kUnavailable,
                msg);
  }
  // The handshake, polled by hand so that a host that never answers costs
  // at most the deadline (a blocking connect could wait minutes for TCP).
  while (nbd_aio_is_ready(h) <= 0) {
    if (nbd_aio_is_dead(h) > 0 || nbd_aio_is_closed(h) > 0) {
      return fail(absl::StatusCode::kUnavailable,
                  "connect: the server closed the connection");
    }
    const int fd = nbd_aio_get_fd(h);
    if (fd == -1) {
      return fail(absl::StatusCode::kUnavailable,
                  absl::StrCat("connect: ", LibnbdError()));
    }
    const unsigned dir = nbd_aio_get_direction(h);
    pollfd p{fd, 0, 0};
    if (dir & LIBNBD_AIO_DIRECTION_READ) p.events |= POLLIN;
    if (dir & LIBNBD_AIO_DIRECTION_WRITE) p.events |= POLLOUT;
    const int timeout = PollTimeoutMs(deadline);
    const int r = ::poll(&p, 1, timeout);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      return fail(absl::StatusCode::kInternal,
                  absl::StrCat("connect: poll: ", ErrnoText(errno)));
    }
    if (r == 0) {
      return fail(absl::StatusCode::kDeadlineExceeded,
                  "connect: no answer from the server in time");
    }
    int rc = 0;
    if (p.revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
      rc = nbd_aio_notify_read(h);
    } else if (p.revents & POLLOUT) {
      rc = nbd_aio_notify_write(h);
    }
    if (rc == -1) {
      return fail(absl::StatusCode::kUnavailable,
                  absl::StrCat("connect: ", LibnbdError()));
    }
  }

  ExportInfo info;
  const int64_t size = nbd_get_size(h);
  if (size < 0) {
    return fail(absl::StatusCode::kUnavailable,
                absl::StrCat("size: ", LibnbdError()));
  }
  info.size = static_cast<uint64_t>(size);
  info.read_only = nbd_is_read_only(h) > 0;
  info.can_flush = nbd_can_flush(h) > 0;
  info.can_fua = nbd_can_fua(h) > 0;
  info.can_zero = nbd_can_zero(h) > 0;
  info.can_multi_conn = nbd_can_multi_conn(h) > 0;
  info.can_block_status =
      nbd_can_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION) > 0;
  const int64_t min_block = nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM);
  const int64_t max_block = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
  info.min_block = min_block > 0 ? static_cast<uint64_t>(min_block) : 1;
  uint64_t max_io = kDefaultMaxIo;
  if (max_block > 0) max_io = std::min<uint64_t>(max_io, max_block);
  max_io = max_io / info.min_block * info.min_block;
  info.max_io = std::max<uint64_t>(max_io, info.min_block);

  const int fd = nbd_aio_get_fd(h);
  const int kill_fd = fd >= 0 ? ::fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  if (kill_fd < 0) {
    return fail(absl::StatusCode::kInternal,
                absl::StrCat("dup socket: ", ErrnoText(errno)));
  }
  const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    const int err = errno;
    ::close(kill_fd);
    return fail(absl::StatusCode::kInternal,
                absl::StrCat("eventfd: ", ErrnoText(err)));
  }
  return std::unique_ptr<Conn>(new Conn(h, kill_fd, wake_fd, info));
}

Conn::~Conn() {
  // Every caller has returned from Run, so nothing is in flight. Say
  // goodbye (NBD_CMD_DISC, not waited for) only in the process that
  // connected and only on a live connection; in a forked child, closing
  // just drops this process's copy of the socket.
  if (pid_ == ::getpid() && !broken_.load() && nbd_aio_is_ready(h_) > 0) {
    nbd_aio_disconnect(h_, 0);
  }
  nbd_close(h_);
  ::close(kill_fd_);
  ::close(wake_fd_);
}

void Conn::Wake() {
  const uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the wake is pending.
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void Conn::MarkBroken(const std::string& why) {
  MutexLock l(&mu_);
  if (broken_why_.empty()) broken_why_ = why;
  broken_.store(true);
}

void Conn::KillLocked(const std::string& why) {
  if (killed_) return;
  killed_ = true;
  if (broken_why_.empty()) broken_why_ = why;
  broken_.store(true);
  // The socket reads EOF from now on: the driver's next notify moves libnbd
  // to its dead state, which fails every command in flight.
  ::shutdown(kill_fd_, SHUT_RDWR);
  Wake();
}

int Conn::OnComplete(void* user_data, int* error) {
  Op* op = static_cast<Op*>(user_data);
  Conn* c = op->conn;
  MutexLock l(&c->mu_);
  op->error = *error;
  --*op->pending;
  --c->in_flight_;
  if (*error == 0) {
    if ((op->kind == Op::kWrite && !op->fua) || op->kind == Op::kZero) {
      ++c->writes_completed_;
    } else if (op->kind == Op::kFlush) {
      c->writes_flushed_ = std::max(c->writes_flushed_, op->flush_mark);
    }
  }
  return 1;  // retire the command; nobody asks for it by cookie
}

int Conn::OnExtent(void* user_data, const char* metacontext, uint64_t offset,
                   uint32_t* entries, size_t nr_entries, int* error) {
  if (std::strcmp(metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0) return 0;
  Op* op = static_cast<Op*>(user_data);
  // Only the driving thread runs callbacks, and the caller reads the
  // extents after completion (ordered by the Conn's mutex).
  op->extents_offset = offset;
  for (size_t i = 0; i + 1 < nr_entries; i += 2) {
    op->extents.emplace_back(entries[i], entries[i + 1]);
  }
  return 0;
}

int64_t Conn::Submit(Op& op) {
  nbd_completion_callback done{&Conn::OnComplete, &op, nullptr};
  switch (op.kind) {
    case Op::kRead:
      return nbd_aio_pread(h_, op.buf, op.len, op.offset, done, 0);
    case Op::kWrite:
      return nbd_aio_pwrite(h_, op.buf, op.len, op.offset, done,
                            op.fua ? LIBNBD_CMD_FLAG_FUA : 0);
    case Op::kFlush:
      return nbd_aio_flush(h_, done, 0);
    case Op::kZero:
      // No NO_HOLE: the server may punch holes, and the range still reads
      // back as zeros, which is all Discard promises.
      return nbd_aio_zero(h_, op.len, op.offset, done, 0);
    case Op::kBlockStatus: {
      nbd_extent_callback extent{&Conn::OnExtent, &op, nullptr};
      return nbd_aio_block_status(h_, op.len, op.offset, extent, done, 0);
    }
  }
  return -1;
}

bool Conn::WaitLocked(absl::FunctionRef<bool()> cond, absl::Time deadline) {
  while (!cond()) {
    if (absl::Now() >= deadline) return false;
    if (!driving_) {
      driving_ = true;
      mu_.Unlock();
      DriveOnce(deadline);
      mu_.Lock();
      driving_ = false;  // a waiter whose commands are unfinished takes over
    } else {
      // Woken when a callback changes our state or the driver steps down.
      auto ready = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return cond() || !driving_;
      };
      mu_.AwaitWithDeadline(Condition(&ready), deadline);
    }
  }
  return true;
}

void Conn::DriveOnce(absl::Time deadline) {
  const unsigned dir = nbd_aio_get_direction(h_);
  pollfd fds[2] = {{kill_fd_, 0, 0}, {wake_fd_, POLLIN, 0}};
  if (dir & LIBNBD_AIO_DIRECTION_READ) fds[0].events |= POLLIN;
  if (dir & LIBNBD_AIO_DIRECTION_WRITE) fds[0].events |= POLLOUT;
  const int r = ::poll(fds, 2, PollTimeoutMs(deadline));
  if (r <= 0) return;  // timeout or EINTR: the caller checks its deadline
  if (fds[1].revents & POLLIN) {
    uint64_t count;
    (void)!::read(wake_fd_, &count, sizeof(count));
  }
  int rc;
  // As libnbd's own nbd_poll: hang-ups and errors are read to find out why.
  if (fds[0].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)) {
    rc = nbd_aio_notify_read(h_);
  } else if (fds[0].revents & POLLOUT) {
    rc = nbd_aio_notify_write(h_);
  } else {
    return;  // only the wake: re-read the direction
  }
  if (rc == -1) {
    MarkBroken(LibnbdError());
  } else if (nbd_aio_is_dead(h_) > 0 || nbd_aio_is_closed(h_) > 0) {
    MarkBroken("the server closed the connection");
  }
}

RunResult Conn::Run(std::span<Op> ops, absl::Time deadline) {
  int pending = 0;
  bool timed_out = false;
  RunResult result;
  mu_.Lock();
  for (Op& op : ops) {
    op.conn = this;
    op.pending = &pending;
    op.submitted = false;
    op.error = 0;
    op.submit_error.clear();
    op.extents.clear();
  }
  for (Op& op : ops) {
    auto has_room = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return in_flight_ < kMaxInFlight || broken_.load();
    };
    if (!WaitLocked(has_room, deadline)) {
      timed_out = true;
      break;
    }
    if (broken_.load()) break;
    if (op.kind == Op::kFlush) op.flush_mark = writes_completed_;
    ++in_flight_;
    ++pending;
    mu_.Unlock();
    const int64_t cookie = Submit(op);
    std::string why;
    int err = 0;
    if (cookie == -1) {
      // Thread-local: read at once, before any other libnbd call.
      why = LibnbdError();
      err = nbd_get_errno();
      if (nbd_aio_is_dead(h_) > 0 || nbd_aio_is_closed(h_) > 0) {
        MarkBroken(why);
      }
    } else if (nbd_aio_get_direction(h_) & LIBNBD_AIO_DIRECTION_WRITE) {
      Wake();  // the request is not all sent: the driver must poll POLLOUT
    }
    mu_.Lock();
    if (cookie == -1) {
      --in_flight_;
      --pending;
      op.error = err != 0 ? err : EIO;
      op.submit_error = why;
      break;
    }
    op.submitted = true;
  }
  auto all_done = [&pending]() { return pending == 0; };
  if (!timed_out && !WaitLocked(all_done, deadline)) timed_out = true;
  if (timed_out) {
    KillLocked("no reply before the timeout");
    // Cannot take long: the socket is shut, so libnbd fails what is left.
    WaitLocked(all_done, absl::InfiniteFuture());
  }
  mu_.Unlock();

  if (timed_out) {
    result.kind = RunResult::kTimedOut;
    return result;
  }
  const Op* failed = nullptr;
  bool unsent = false;  // skipped because the connection had died
  for (const Op& op : ops) {
    if (op.error != 0 && failed == nullptr) failed = &op;
    if (!op.submitted && op.error == 0) unsent = true;
  }
  if (failed == nullptr && !unsent) return result;
  // libnbd may have found the connection dead inside a submit call (a send
  // failing), failing our commands there: ask the handle itself.
  if (nbd_aio_is_dead(h_) > 0 || nbd_aio_is_closed(h_) > 0) {
    MarkBroken("the connection died");
  }
  if (broken_.load() || failed == nullptr) {
    // Whatever the commands say, the transport is at fault: worth a retry,
    // unless a request on this connection timed out (the server is not
    // answering; retrying would only wait for it again).
    MutexLock l(&mu_);
    result.kind = RunResult::kLost;
    result.killed_by_timeout = killed_;
    result.message = broken_why_.empty() ? "connection lost" : broken_why_;
    return result;
  }
  result.kind = RunResult::kFailed;
  result.err = failed->error;
  result.message = failed->submit_error.empty() ? ErrnoText(failed->error)
                                                : failed->submit_error;
  return result;
}

}  // namespace nbd
}  // namespace uraid
