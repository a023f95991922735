// SPDX-License-Identifier: MIT
// The client side of a control socket's event stream: connect, send
// {"cmd":"events"}, read the {"ok":true,"initial":N} reply, then one event
// per line until the server goes away (uraid/control.h). Says what a path
// is when it is not a uraid control socket.
//
// Errors, by what the monitor does about them (status codes):
//   NotFound           - the path does not exist (retry)
//   Unavailable        - nothing listens (a stale socket), the server
//                        closed the stream or the connection broke, or it
//                        closed without a word (one going down) (retry)
//   DeadlineExceeded   - the server did not answer the request (retry)
//   FailedPrecondition - not something to retry: not a socket, an NBD
//                        server, a socket that answers something else, a
//                        uraid server that refuses events (its message,
//                        e.g. permission denied)
//   Cancelled          - the cancel fd became readable (the monitor stops)
// Every message starts with the socket's path.

#ifndef URAID_TOOLS_EVENT_STREAM_H_
#define URAID_TOOLS_EVENT_STREAM_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "monitor_event.h"

namespace uraid::tool {

class EventStream {
 public:
  // Connects to `path` and subscribes. `cancel_fd` (-1: none) is polled
  // with every wait: once it is readable, calls return Cancelled.
  // `reply_timeout_ms` bounds the wait for the subscription's reply.
  static absl::StatusOr<std::unique_ptr<EventStream>> Open(
      const std::string& path, int cancel_fd, int reply_timeout_ms = 10000);
  ~EventStream();
  EventStream(const EventStream&) = delete;
  EventStream& operator=(const EventStream&) = delete;

  // How many lines of current state follow the reply (NewArray first).
  int initial() const { return initial_; }

  // The next event, waiting as long as it takes (timeout_ms < 0) or at most
  // timeout_ms (then DeadlineExceeded). A line that is not an event is
  // InvalidArgument naming it, and the stream stays usable.
  absl::StatusOr<EventJson> Next(int timeout_ms = -1);

  const std::string& path() const { return path_; }

 private:
  EventStream(int fd, std::string path, int cancel_fd)
      : fd_(fd), path_(std::move(path)), cancel_fd_(cancel_fd) {}
  // One line without its newline; `first` classifies a first reply that is
  // not a line (an NBD server's greeting).
  absl::StatusOr<std::string> ReadLine(int timeout_ms, bool first);

  int fd_;
  std::string path_;
  int cancel_fd_;
  int initial_ = 0;
  std::string buf_;
};

}  // namespace uraid::tool

#endif  // URAID_TOOLS_EVENT_STREAM_H_
