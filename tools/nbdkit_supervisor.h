// SPDX-License-Identifier: MIT
// Runs nbdkit servers as children of `uraid serve` and stays their parent
// (serve --foreground, serve --scan --foreground, the uraid@ unit):
//
// - each child is `nbdkit -f --exit-with-parent ...`, so it dies with us
//   even on SIGKILL;
// - a child is ready when its -P pid file exists and its export answers
//   (NbdkitServes); its ready_message is printed then, and once every
//   child is ready, systemd is told READY=1 (sd_notify.h; nothing happens
//   outside systemd);
// - SIGTERM, SIGINT or SIGHUP: STOPPING=1, SIGTERM to every child (nbdkit
//   then flushes and the plugin marks the array clean), and wait for them;
// - a child that exits on its own is reported on stderr; the others keep
//   serving. Returns when no child is left.

#ifndef URAID_TOOLS_NBDKIT_SUPERVISOR_H_
#define URAID_TOOLS_NBDKIT_SUPERVISOR_H_

#include <string>
#include <vector>

namespace uraid::tool {

struct NbdkitChild {
  std::string name;               // the array, for messages
  std::vector<std::string> argv;  // argv[0] = "nbdkit"; has -f and -P
  std::string pidfile;            // absolute; removed before the start
  // Exactly one listener to probe: a unix socket path, or TCP addr:port.
  std::string unix_socket;
  std::string tcp_addr;
  int tcp_port = 0;
  // Printed on stdout (a line, with "; nbdkit pid N" added) once the
  // export answers, never before: "serving array ...".
  std::string ready_message;
};

// True when `child`'s pid file is written and its listener answers as an
// NBD server: the greeting is read and the handshake ended with
// NBD_OPT_ABORT, so nbdkit logs no error for the probe. A listener on a
// host name or wildcard address cannot be probed: the pid file decides.
bool NbdkitServes(const NbdkitChild& child);

// Runs `child` (without -f) as nbdkit's daemon: nbdkit forks once it
// listens and its first process exits. Waits (up to 60 s) until the daemon
// serves, then prints ready_message with the daemon's pid. 0 then; 1
// after reporting why not (nbdkit's exit status, its messages being
// above, or the daemon gone before it served).
int StartNbdkitDaemon(const NbdkitChild& child);

// Starts and supervises `children` as above. Exit code: 0 when every child
// was stopped by our SIGTERM and exited cleanly; 1 when one failed to start
// (the others are stopped then), or exited non-zero or on a signal.
int SuperviseNbdkit(const std::vector<NbdkitChild>& children);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_NBDKIT_SUPERVISOR_H_
