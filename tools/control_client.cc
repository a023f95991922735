// SPDX-License-Identifier: MIT
#include "control_client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nbd_probe.h"
#include "uraid/info_json.h"
#include "uraid/member.h"

namespace uraid::tool {
namespace {

// A detail reply of 64 members is a few tens of KiB; anything near this is
// not our server.
constexpr size_t kMaxReplyBytes = 16 << 20;
// How long Connect listens for a greeting nobody asked for (NBD servers
// greet at once; a uraid server says nothing until asked), as the
// monitor's EventStream does.
constexpr int kUnaskedGreetingMs = 50;

// Why a connected peer is no uraid control server, from what it said
// before it was asked; OK when it said nothing (or closed: the first read
// reports that).
absl::Status UnaskedGreeting(int fd) {
  pollfd p = {fd, POLLIN, 0};
  if (poll(&p, 1, kUnaskedGreetingMs) <= 0) return absl::OkStatus();
  char buf[64];
  const ssize_t got = recv(fd, buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (got <= 0) return absl::OkStatus();
  const std::string_view said(buf, static_cast<size_t>(got));
  if (std::string_view("NBDMAGIC").starts_with(said.substr(0, 8))) {
    // Leave it the way a client that changed its mind does, so that the
    // export logs no error for our mistake.
    NbdHandshakeAborts(fd);
    return absl::FailedPreconditionError(
        "an NBD server, not a uraid control socket (the export's socket? "
        "give the plugin's control=SOCKET)");
  }
  return absl::FailedPreconditionError(
      absl::StrCat("not a uraid control socket (it spoke first: \"",
                   PrintableExcerpt(said), "\")"));
}

}  // namespace

std::string PrintableExcerpt(std::string_view data) {
  std::string out;
  for (const char c : data.substr(0, 60)) {
    out += (c >= 0x20 && c < 0x7f) ? c : '.';
  }
  if (data.size() > 60) out += "...";
  return out;
}

absl::StatusOr<std::unique_ptr<ControlClient>> ControlClient::Connect(
    const std::string& path, int timeout_ms) {
  const auto fail = [&](const std::string& why) {
    return absl::UnavailableError(
        absl::StrFormat("cannot connect to control socket %s: %s", path, why));
  };
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  if (path.empty()) return fail("no path given");
  if (path.size() >= sizeof addr.sun_path) {
    return fail(absl::StrFormat("the path is longer than %d bytes",
                                sizeof addr.sun_path - 1));
  }
  // A file that is no socket is a mistake in the path, whatever connect(2)
  // says of it (ECONNREFUSED, which would read as a stale socket).
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
    return fail(S_ISDIR(st.st_mode) ? "not a socket (a directory)"
                                    : "not a socket");
  }
  memcpy(addr.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(strerror(errno));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    close(fd);
    std::string why = strerror(err);
    if (err == ENOENT) {
      why += " (is the array served with control=" + path + "?)";
    } else if (err == ECONNREFUSED) {
      why += " (a stale socket: its server is gone)";
    } else if (err == ENOTSOCK ||
               (stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))) {
      why = "not a socket";
    }
    return fail(why);
  }
  if (absl::Status s = UnaskedGreeting(fd); !s.ok()) {
    close(fd);
    return fail(std::string(s.message()));
  }
  return std::unique_ptr<ControlClient>(
      new ControlClient(fd, path, timeout_ms));
}

ControlClient::~ControlClient() { close(fd_); }

absl::StatusOr<int> ControlClient::ServerPid() const {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd_, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("control socket ", path_, ": SO_PEERCRED"));
  }
  if (cred.pid <= 0) {
    return absl::UnavailableError(absl::StrCat(
        "control socket ", path_,
        ": its server's pid is not visible here (another pid namespace?)"));
  }
  return static_cast<int>(cred.pid);
}

absl::StatusOr<std::string> ControlClient::ReadLine() {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_);
  while (true) {
    const size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      return line;
    }
    if (buf_.size() > kMaxReplyBytes) {
      return absl::InternalError(
          absl::StrFormat("control socket %s: a reply longer than %d bytes",
                          path_, kMaxReplyBytes));
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(
          absl::StrFormat("control socket %s: no reply within %d s", path_,
                          timeout_ms_ / 1000));
    }
    pollfd p = {fd_, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno != EINTR) {
      return absl::ErrnoToStatus(errno, absl::StrCat("control socket ", path_));
    }
    if (n <= 0) continue;
    char chunk[65536];
    const ssize_t got = recv(fd_, chunk, sizeof chunk, 0);
    if (got == 0) {
      return absl::UnavailableError(absl::StrFormat(
          "control socket %s: the server closed the connection", path_));
    }
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("control socket ", path_));
    }
    buf_.append(chunk, static_cast<size_t>(got));
  }
}

absl::StatusOr<nlohmann::ordered_json> ControlClient::CallLine(
    const std::string& line) {
  std::string_view data = line;
  while (!data.empty()) {
    const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(
          errno, absl::StrCat("control socket ", path_, ": send"));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  absl::StatusOr<std::string> reply = ReadLine();
  if (!reply.ok()) return reply.status();
  return ParseReplyLine(*reply);
}

absl::StatusOr<nlohmann::ordered_json> ControlClient::Call(
    const control::Request& request) {
  return CallLine(control::RequestLine(request));
}

absl::StatusOr<ArrayInfo> ControlClient::Detail() {
  absl::StatusOr<nlohmann::ordered_json> reply =
      Call({.cmd = control::Cmd::kDetail});
  if (!reply.ok()) return reply.status();
  auto it = reply->find("detail");
  if (it == reply->end()) {
    return absl::InternalError(absl::StrFormat(
        "control socket %s: the detail reply has no \"detail\"", path_));
  }
  return InfoFromJsonText(
      it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

absl::StatusOr<nlohmann::ordered_json> ParseReplyLine(std::string_view line) {
  if (absl::Status s = control::ReplyStatus(line); !s.ok()) return s;
  // ReplyStatus has parsed it: valid JSON, an object with "ok": true.
  return nlohmann::ordered_json::parse(line.begin(), line.end());
}

std::string MemberNameForServer(const std::string& arg) {
  if (IsMemberUri(arg) || arg.empty() || arg[0] == '/') return arg;
  std::error_code ec;
  if (!std::filesystem::exists(arg, ec)) return arg;
  std::filesystem::path abs = std::filesystem::absolute(arg, ec);
  return ec ? arg : abs.lexically_normal().string();
}

std::string MemberPathForServer(const std::string& arg) {
  if (IsMemberUri(arg) || arg.empty()) return arg;
  char* real = realpath(arg.c_str(), nullptr);
  if (real != nullptr) {
    std::string out = real;
    free(real);
    return out;
  }
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(arg, ec);
  return ec ? arg : abs.lexically_normal().string();
}

}  // namespace uraid::tool
