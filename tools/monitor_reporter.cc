// SPDX-License-Identifier: MIT
#include "monitor_reporter.h"

#include <syslog.h>

#include <cstdio>

namespace uraid::tool {

Reporter::Reporter(ReporterOptions options, AlertQueue* alerts)
    : options_(options), alerts_(alerts) {
  if (options_.syslog) openlog("uraid-monitor", LOG_PID, LOG_DAEMON);
}

Reporter::~Reporter() {
  if (options_.syslog) closelog();
}

void Reporter::Report(const EventJson& event, const std::string& control,
                      const std::string& last_state) {
  const std::string line =
      options_.json ? EventJsonLine(event) : FormatEventLine(event);
  {
    absl::MutexLock lock(&stdout_mu_);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  if (options_.syslog) {
    // syslog stamps its own time; the body is the human line without it.
    syslog(SyslogPriority(event), "%s", FormatEventBody(event).c_str());
  }
  alerts_->Push({.event = event, .control = control, .last_state = last_state});
}

}  // namespace uraid::tool
