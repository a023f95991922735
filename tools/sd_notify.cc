// SPDX-License-Identifier: MIT
#include "sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace uraid::tool {

absl::Status NotifySystemd(const std::string& state) {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || *path == '\0') return absl::OkStatus();
  const std::string name = path;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (name.size() >= sizeof(addr.sun_path) ||
      (name[0] != '/' && name[0] != '@')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NOTIFY_SOCKET=", name, ": not an absolute path or @abstract name"));
  }
  std::memcpy(addr.sun_path, name.data(), name.size());
  if (name[0] == '@') addr.sun_path[0] = '\0';
  const socklen_t len = static_cast<socklen_t>(
      offsetof(sockaddr_un, sun_path) + name.size() + (name[0] == '@' ? 0 : 1));
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "NOTIFY_SOCKET: socket");
  const ssize_t n = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                           reinterpret_cast<const sockaddr*>(&addr), len);
  const int saved = errno;
  close(fd);
  if (n < 0) {
    return absl::ErrnoToStatus(saved, absl::StrCat("NOTIFY_SOCKET ", name));
  }
  return absl::OkStatus();
}

}  // namespace uraid::tool
