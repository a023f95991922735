// SPDX-License-Identifier: MIT
#include "event_stream.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control_client.h"

namespace uraid::tool {
namespace {

// What every NBD server (nbdkit, qemu-nbd, nbd-server) writes first, before
// the client says anything.
constexpr std::string_view kNbdMagic = "NBDMAGIC";
// An event line is a few hundred bytes; a "line" longer than this is not
// our server talking.
constexpr size_t kMaxLineBytes = 1 << 20;
// How long Open listens for a greeting before it sends the request.
constexpr int kGreetingWaitMs = 50;

absl::Status ConnectError(const std::string& path, int err) {
  const auto msg = [&](const std::string& why) {
    return absl::StrCat(path, ": ", why);
  };
  struct stat st;
  if (err == ENOENT) return absl::NotFoundError(msg("does not exist"));
  if (err == ECONNREFUSED) {
    // connect(2) on a file that is not a socket also says ECONNREFUSED.
    if (stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(msg("not a socket"));
    }
    return absl::UnavailableError(msg("no server is listening (stale socket)"));
  }
  if (err == ENOTSOCK ||
      (stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))) {
    return absl::FailedPreconditionError(msg("not a socket"));
  }
  return absl::UnavailableError(msg(strerror(err)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventStream>> EventStream::Open(
    const std::string& path, int cancel_fd, int reply_timeout_ms) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.empty()) return absl::FailedPreconditionError("empty socket path");
  if (path.size() >= sizeof addr.sun_path) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: the path is longer than %d bytes", path,
                        sizeof addr.sun_path - 1));
  }
  // Say "not a socket" before trying: a regular file is a configuration
  // error, not a server that is down.
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, S_ISDIR(st.st_mode) ? ": not a socket (a directory)"
                                               : ": not a socket"));
  }
  memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    close(fd);
    return ConnectError(path, err);
  }
  std::unique_ptr<EventStream> stream(new EventStream(fd, path, cancel_fd));
  // A uraid server says nothing until asked; an NBD server greets at once.
  // Listening briefly first names an NBD socket without sending it our
  // request (which nbdkit would log as a bad handshake).
  pollfd early = {fd, POLLIN, 0};
  if (poll(&early, 1, kGreetingWaitMs) > 0) {
    absl::StatusOr<std::string> line =
        stream->ReadLine(reply_timeout_ms, /*first=*/true);
    if (!line.ok()) return line.status();
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: not a uraid control socket (it spoke first: \"%s\")", path,
        PrintableExcerpt(*line)));
  }
  // The subscription takes no fields (uraid/control.h).
  constexpr std::string_view request = "{\"cmd\":\"events\"}\n";
  // A server that closes at once (an NBD server waiting for its own
  // handshake may) still gets classified from what it sent: ignore send
  // errors here and let the read say what the peer is.
  (void)send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  absl::StatusOr<std::string> line =
      stream->ReadLine(reply_timeout_ms, /*first=*/true);
  if (!line.ok()) return line.status();
  absl::StatusOr<nlohmann::ordered_json> reply = ParseReplyLine(*line);
  if (!reply.ok()) {
    if (reply.status().code() == absl::StatusCode::kInternal) {
      // Not a reply of ours at all.
      return absl::FailedPreconditionError(
          absl::StrFormat("%s: not a uraid control socket (it answered \"%s\")",
                          path, PrintableExcerpt(*line)));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        ": the server refused the event stream: ", reply.status().message()));
  }
  auto it = reply->find("initial");
  if (it == reply->end() || !it->is_number_unsigned()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: the server does not stream events (its reply has no "
        "\"initial\": \"%s\")",
        path, PrintableExcerpt(*line)));
  }
  stream->initial_ = it->get<int>();
  return stream;
}

EventStream::~EventStream() { close(fd_); }

absl::StatusOr<std::string> EventStream::ReadLine(int timeout_ms, bool first) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    if (first && buf_.size() >= kNbdMagic.size() &&
        std::string_view(buf_).starts_with(kNbdMagic)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path_, ": an NBD server, not a uraid control socket"));
    }
    const size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    if (buf_.size() > kMaxLineBytes) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: not a uraid control socket (a line longer than %d bytes)", path_,
          kMaxLineBytes));
    }
    int wait_ms = -1;
    if (timeout_ms >= 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        if (first && !buf_.empty()) {
          return absl::FailedPreconditionError(absl::StrFormat(
              "%s: not a uraid control socket (it answered \"%s\")", path_,
              PrintableExcerpt(buf_)));
        }
        return absl::DeadlineExceededError(
            absl::StrFormat("%s: no answer within %d ms", path_, timeout_ms));
      }
      wait_ms = static_cast<int>(left.count());
    }
    pollfd p[2] = {{fd_, POLLIN, 0}, {cancel_fd_, POLLIN, 0}};
    const int n = poll(p, cancel_fd_ >= 0 ? 2 : 1, wait_ms);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat(path_, ": poll"));
    }
    if (cancel_fd_ >= 0 && (p[1].revents & POLLIN)) {
      return absl::CancelledError(absl::StrCat(path_, ": stopping"));
    }
    if (n == 0) continue;
    char chunk[65536];
    const ssize_t got = recv(fd_, chunk, sizeof chunk, 0);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got <= 0) {
      const int err = got < 0 ? errno : 0;
      if (first && !buf_.empty()) {
        if (kNbdMagic.starts_with(buf_)) {
          return absl::FailedPreconditionError(absl::StrCat(
              path_, ": an NBD server, not a uraid control socket"));
        }
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s: not a uraid control socket (it answered \"%s\" and "
            "closed)",
            path_, PrintableExcerpt(buf_)));
      }
      if (first) {
        // Nothing said at all: a server on its way down, as likely as a
        // foreign one. Worth another try.
        return absl::UnavailableError(absl::StrCat(
            path_, ": the server closed the connection without a reply"));
      }
      return absl::UnavailableError(
          err ? absl::StrCat(path_, ": ", strerror(err))
              : absl::StrCat(path_, ": the server closed the stream"));
    }
    buf_.append(chunk, static_cast<size_t>(got));
  }
}

absl::StatusOr<EventJson> EventStream::Next(int timeout_ms) {
  absl::StatusOr<std::string> line = ReadLine(timeout_ms, /*first=*/false);
  if (!line.ok()) return line.status();
  absl::StatusOr<EventJson> event = ParseEventLine(*line);
  if (!event.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s: \"%s\"", path_,
                                                      event.status().message(),
                                                      PrintableExcerpt(*line)));
  }
  return event;
}

}  // namespace uraid::tool
