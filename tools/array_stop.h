// SPDX-License-Identifier: MIT
// Stopping a served array, md's --stop: the server behind a control socket
// is found by the socket's peer credentials (SO_PEERCRED names the process
// that listens: nbdkit, which opens the socket after it forks), sent
// SIGTERM, and waited for until it has exited. On SIGTERM nbdkit closes the
// plugin, which flushes and marks the array clean in every superblock, as
// the uraid@ unit stops it; a supervising `uraid serve --foreground` then
// sees its child end and exits too. Only nbdkit is signalled: another
// program serving the control channel (an embedder) is refused, as is a
// server this user may not signal.

#ifndef URAID_TOOLS_ARRAY_STOP_H_
#define URAID_TOOLS_ARRAY_STOP_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "uraid/array.h"

namespace uraid::tool {

struct StoppedArray {
  int pid = 0;                      // nbdkit's
  std::optional<ArrayInfo> before;  // its detail just before the stop
  // Members (local files and devices) whose superblock, read after the
  // exit, is not marked clean: empty when every one is (NBD members are
  // not read).
  std::vector<std::string> unclean;
};

// Stops the array served on `control`, waiting up to `timeout_s` seconds
// for the server to exit (DeadlineExceeded naming the pid after that).
absl::StatusOr<StoppedArray> StopServedArray(const std::string& control,
                                             double timeout_s);

// The control socket of `ref` as `uraid stop` takes it: an ARRAY name or
// uuid of the config (`config`, empty: the default), the name of a socket
// NAME.ctl in the run directory, or the path of a control socket.
absl::StatusOr<std::string> ControlSocketOf(const std::string& ref,
                                            const std::string& config);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_ARRAY_STOP_H_
