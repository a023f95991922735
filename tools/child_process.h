// SPDX-License-Identifier: MIT
// Runs a program to completion within a time limit, for the monitor's
// alerts (--program, sendmail): argv directly (no shell), in a process
// group of its own so that a timeout kills everything it started.

#ifndef URAID_TOOLS_CHILD_PROCESS_H_
#define URAID_TOOLS_CHILD_PROCESS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace uraid::tool {

struct ChildSpec {
  // argv[0] is looked up on PATH when it has no '/'. REQUIRES: non-empty.
  std::vector<std::string> argv;
  // Set in the child's environment on top of the monitor's own.
  std::vector<std::pair<std::string, std::string>> env;
  // Written to the child's stdin, which is then closed (empty: /dev/null).
  std::string stdin_data;
  // Whole seconds or fractions; the child's process group gets SIGKILL
  // when it has not exited by then.
  double timeout_s = 30;
};

// Runs the child with its stdout sent to our stderr (the monitor's stdout
// carries events only) and every signal at its default, unblocked. OK when
// it exits 0; otherwise an error saying why: it could not be started
// (NotFound, PermissionDenied, ...), "exited with status N", "killed by
// signal S", or DeadlineExceeded "did not finish within T s (killed)".
// Thread-safe; blocks the calling thread until the child is gone.
absl::Status RunChild(const ChildSpec& spec);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_CHILD_PROCESS_H_
