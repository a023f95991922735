// SPDX-License-Identifier: MIT
// The arrays served on this machine, as `uraid status`, `uraid metrics` and
// `uraid stop --scan` find them: every ARRAY of the config (its control
// socket: control=, or RUN_DIR/NAME.ctl as `uraid serve` makes it) and
// every control socket (*.ctl) in the run directory (DefaultRunDir():
// $URAID_RUN_DIR, else /run/uraid), plus any given by hand; each asked for
// its detail over the control channel (control_client.h).

#ifndef URAID_TOOLS_SERVED_ARRAYS_H_
#define URAID_TOOLS_SERVED_ARRAYS_H_

#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "uraid/array.h"

namespace uraid::tool {

// Where one array's control socket is, and what answers there.
enum class Presence {
  kServed,      // a uraid server answered: `info` is its detail
  kNotServed,   // no socket file, or one nobody listens on (stale)
  kUnreadable,  // something is there but did not give a detail (`error`)
};

struct ServedArray {
  // The ARRAY name, else the socket's file name without ".ctl" (for a
  // socket given by hand: its path).
  std::string name;
  std::string control;      // the control socket's path, as found
  bool configured = false;  // an ARRAY line of the config names it
  Presence presence = Presence::kNotServed;
  std::optional<ArrayInfo> info;  // set when kServed
  absl::Status error;             // kNotServed and kUnreadable: why
};

struct FindOptions {
  std::string config;                 // empty: DefaultConfigPath()
  std::vector<std::string> controls;  // sockets given by hand (--control)
  // Only the sockets given by hand: no config, no run directory.
  bool only_given = false;
  int timeout_ms = 10000;  // per server, for its detail
};

// Every array found, in order: given sockets, the config's ARRAYs, then
// the run directory's other sockets by name; a socket reached twice (same
// file) is listed once. A config that is missing is no error (a machine
// serving by hand has none); one that does not parse is returned as the
// error, naming its line.
absl::StatusOr<std::vector<ServedArray>> FindServedArrays(
    const FindOptions& options);

// The options every command that looks at the served arrays takes, into
// `options`: --config,-c FILE and --control SOCKET (repeatable).
void AddFindOptions(CLI::App* sub, FindOptions* options);

// Asks the server behind `control` for its detail, telling a socket
// nobody serves (kNotServed) from one that does not answer as uraid does
// (kUnreadable); fills presence, info and error of `array`.
void ProbeServedArray(ServedArray& array, int timeout_ms);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_SERVED_ARRAYS_H_
