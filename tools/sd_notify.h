// SPDX-License-Identifier: MIT
// systemd's readiness protocol (sd_notify(3)) for `uraid serve` under a
// Type=notify unit: one datagram of "KEY=VALUE\n" lines to the unix socket
// named by $NOTIFY_SOCKET ('@' = abstract namespace).
//
// Written here rather than linked from libsystemd: the protocol is one
// sendto() and stable (systemd documents it for reimplementation), and the
// tool then behaves the same whether or not libsystemd-dev was installed at
// build time; the test exercises this one code path.

#ifndef URAID_TOOLS_SD_NOTIFY_H_
#define URAID_TOOLS_SD_NOTIFY_H_

#include <string>

#include "absl/status/status.h"

namespace uraid::tool {

// Sends `state` (e.g. "READY=1\nSTATUS=serving home") to $NOTIFY_SOCKET.
// OK without doing anything when NOTIFY_SOCKET is unset or empty (not run
// by systemd). An error names the socket.
absl::Status NotifySystemd(const std::string& state);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_SD_NOTIFY_H_
