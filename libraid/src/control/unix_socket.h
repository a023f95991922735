// SPDX-License-Identifier: MIT
// Internal: the unix-socket helpers of the control server: a bounded
// write, the peer's credentials and what they allow, a sockaddr_un.
// Thread-compatible (no state).

#ifndef URAID_SRC_CONTROL_UNIX_SOCKET_H_
#define URAID_SRC_CONTROL_UNIX_SOCKET_H_

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace uraid {

// Writes all of `data` to the non-blocking socket `fd` within `timeout_ms`;
// false if the peer went away or the time ran out.
bool WriteAll(int fd, std::string_view data, int timeout_ms);

// Who is on the other end of a connection, and what they may do.
struct Peer {
  uid_t uid = 0;
  pid_t pid = 0;
  bool may_change = false;  // root or the server's own user
  bool may_read = false;    // may_change, or in the read group
};

// The peer's credentials from the kernel (SO_PEERCRED, and its groups
// from SO_PEERGROUPS), judged against the read group. Unknown credentials
// may do nothing.
Peer PeerOf(int fd, const std::optional<uint32_t>& read_group);

// sockaddr_un for `path`. REQUIRES: it fits sun_path.
sockaddr_un UnixAddress(const std::string& path);

}  // namespace uraid

#endif  // URAID_SRC_CONTROL_UNIX_SOCKET_H_
