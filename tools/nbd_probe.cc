// SPDX-License-Identifier: MIT
#include "nbd_probe.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace uraid::tool {
namespace {

// Reads exactly `len` bytes within `timeout_ms`; false on EOF, error or
// timeout.
bool ReadExactly(int fd, char* buf, size_t len, int timeout_ms) {
  size_t got = 0;
  while (got < len) {
    pollfd p = {fd, POLLIN, 0};
    const int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    const ssize_t r = recv(fd, buf + got, len - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

bool NbdHandshakeAborts(int fd) {
  char greeting[18];
  if (!ReadExactly(fd, greeting, sizeof greeting, 5000) ||
      std::memcmp(greeting, "NBDMAGICIHAVEOPT", 16) != 0) {
    return false;
  }
  const unsigned char request[20] = {0, 0, 0, 3,  // NBD_FLAG_C_FIXED_NEWSTYLE |
                                                  // NBD_FLAG_C_NO_ZEROES
                                     'I', 'H', 'A', 'V', 'E', 'O', 'P',
                                     'T',          // option magic
                                     0, 0, 0, 2,   // NBD_OPT_ABORT
                                     0, 0, 0, 0};  // no data
  if (send(fd, request, sizeof request, MSG_NOSIGNAL) !=
      static_cast<ssize_t>(sizeof request)) {
    return false;
  }
  // The server's ack (20 bytes); it may also just close.
  char reply[20];
  ReadExactly(fd, reply, sizeof reply, 2000);
  return true;
}

}  // namespace uraid::tool
