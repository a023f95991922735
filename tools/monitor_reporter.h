// SPDX-License-Identifier: MIT
// Where `uraid monitor` sends each event: one line on stdout (human or
// JSON, flushed at once), syslog(3) when asked, and the slow alerts
// (program, mail) queued for their worker (alert_queue.h).

#ifndef URAID_TOOLS_MONITOR_REPORTER_H_
#define URAID_TOOLS_MONITOR_REPORTER_H_

#include <string>

#include "absl/synchronization/mutex.h"
#include "alert_queue.h"
#include "monitor_event.h"

namespace uraid::tool {

struct ReporterOptions {
  bool json = false;    // --json: the event object verbatim, one per line
  bool syslog = false;  // --syslog: ident "uraid-monitor", LOG_DAEMON
};

class Reporter {
 public:
  // `alerts` must outlive the Reporter. Opens the syslog connection when
  // asked (lazily: a syslog daemon that starts later is still reached).
  Reporter(ReporterOptions options, AlertQueue* alerts);
  ~Reporter();
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Reports `event`, which came from (or is about) control socket
  // `control`; `last_state` is the array's state as last known, for the
  // mail. Printing and syslog happen before this returns; alerts later.
  // Thread-safe: lines of concurrent calls never interleave.
  void Report(const EventJson& event, const std::string& control,
              const std::string& last_state);

 private:
  const ReporterOptions options_;
  AlertQueue* const alerts_;
  absl::Mutex stdout_mu_;
};

}  // namespace uraid::tool

#endif  // URAID_TOOLS_MONITOR_REPORTER_H_
