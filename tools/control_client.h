// SPDX-License-Identifier: MIT
// The `uraid` side of the control channel (uraid/control.h): connect to a
// served array's control socket, send one request line, read its reply.

#ifndef URAID_TOOLS_CONTROL_CLIENT_H_
#define URAID_TOOLS_CONTROL_CLIENT_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "uraid/array.h"
#include "uraid/control_protocol.h"

namespace uraid::tool {

class ControlClient {
 public:
  // Connects to the socket at `path`; every later call fails when the
  // server does not answer within `timeout_ms`. The error says "cannot
  // connect to control socket PATH: <why>", telling apart as the monitor
  // does: no such file, not a socket (or a directory), a stale socket
  // (nobody listens), an NBD server (the export's socket, which greets
  // first), and any other server that speaks before it is asked.
  static absl::StatusOr<std::unique_ptr<ControlClient>> Connect(
      const std::string& path, int timeout_ms = 60000);
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // Sends `request` and returns the reply object when it says ok; the
  // server's error (its code and message) otherwise.
  absl::StatusOr<nlohmann::ordered_json> Call(const control::Request& request);
  // A raw line (for tests and odd requests); same reply handling.
  absl::StatusOr<nlohmann::ordered_json> CallLine(const std::string& line);

  // The "detail" request, decoded.
  absl::StatusOr<ArrayInfo> Detail();

  // The pid of the process serving the socket (SO_PEERCRED: the process
  // that listens on it, nbdkit for the plugin). Unavailable when the
  // kernel cannot say (a server in another pid namespace gives 0).
  absl::StatusOr<int> ServerPid() const;

  // The socket's path, as given to Connect.
  const std::string& path() const { return path_; }

 private:
  ControlClient(int fd, std::string path, int timeout_ms)
      : fd_(fd), path_(std::move(path)), timeout_ms_(timeout_ms) {}
  absl::StatusOr<std::string> ReadLine();

  int fd_;
  std::string path_;
  int timeout_ms_;
  std::string buf_;
};

// Up to 60 bytes of what a foreign server said, printable ('.' for the
// rest), "..." after when there was more: for "not a uraid control socket
// (it answered ...)".
std::string PrintableExcerpt(std::string_view data);

// Reads one reply line of the control channel: the reply object when it
// says ok (control::ReplyStatus in uraid/control_protocol.h checks the
// line; nlohmann-json reads the fields), the server's error otherwise, and
// Internal for a line that is no reply.
absl::StatusOr<nlohmann::ordered_json> ParseReplyLine(std::string_view line);

// A member argument as the server should see it: a relative path to an
// existing file becomes absolute (the server's working directory is not
// ours); URIs and names of no local file are kept as given.
std::string MemberNameForServer(const std::string& arg);
// A member the server will open (add, replace): URIs as given, paths made
// absolute with symlinks resolved (as the plugin names its members).
std::string MemberPathForServer(const std::string& arg);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_CONTROL_CLIENT_H_
