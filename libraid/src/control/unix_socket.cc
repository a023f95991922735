// SPDX-License-Identifier: MIT
#include "control/unix_socket.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace uraid {

// Writes all of `data` to the non-blocking socket `fd` within `timeout_ms`.
bool WriteAll(int fd, std::string_view data, int timeout_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p = {fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      return false;
    }
  }
  return true;
}

// The peer's credentials from the kernel (SO_PEERCRED, and its groups
// from SO_PEERGROUPS), judged against the read group.
Peer PeerOf(int fd, const std::optional<uint32_t>& read_group) {
  Peer p;
  ucred cred = {};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return p;  // unknown: may do nothing
  }
  p.uid = cred.uid;
  p.pid = cred.pid;
  p.may_change = cred.uid == 0 || cred.uid == geteuid();
  p.may_read = p.may_change;
  if (p.may_read || !read_group.has_value()) return p;
  if (cred.gid == *read_group) {
    p.may_read = true;
    return p;
  }
  std::vector<gid_t> groups(64);
  for (;;) {
    len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      break;
    }
    if (errno != ERANGE || groups.size() > 65536) return p;
    groups.resize(len / sizeof(gid_t) + 1);
  }
  p.may_read =
      std::find(groups.begin(), groups.end(), *read_group) != groups.end();
  return p;
}

// sockaddr_un for `path`, which the caller checked fits.
sockaddr_un UnixAddress(const std::string& path) {
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.data(), path.size());
  return addr;
}

}  // namespace uraid
