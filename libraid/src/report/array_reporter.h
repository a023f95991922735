// SPDX-License-Identifier: MIT
// Internal: how an array speaks. Log lines go to its Logger; events, stamped
// with the time and the array's uuid and name, go to its listeners (an
// EventHub) and, attached to their log line, to the Logger.

#ifndef URAID_SRC_REPORT_ARRAY_REPORTER_H_
#define URAID_SRC_REPORT_ARRAY_REPORTER_H_

#include <optional>
#include <string>

#include "report/event_hub.h"
#include "uraid/events.h"

namespace uraid {

// An event named `name`, about `member` in `slot` when given; not stamped.
Event MakeEvent(const char* name, std::string member = "",
                std::optional<int> slot = std::nullopt);
// md's SparesMissing: `have` spares where `expected` were asked for.
Event SparesMissing(int have, int expected);

// Thread-safe: the logger, uuid and name are fixed for the array's life, so
// reporting takes no lock of the array's; the hub has its own leaf lock.
// Report may be called under any of the array's locks except the job
// runner's (a listener may ask the array for its state).
class ArrayReporter {
 public:
  ArrayReporter(Logger logger, std::string uuid, std::string name);

  // One log line at `level` (no event).
  void Log(LogLevel level, const std::string& line) const;
  // Event `e` (stamped here) goes to every listener, and `line` to the
  // logger at `level` with the event attached.
  void Report(LogLevel level, Event e, const std::string& line) const;
  // Sets the event's time (now), array uuid and name.
  void Stamp(Event& e) const;
  EventHub& hub() { return hub_; }

 private:
  const Logger logger_;
  const std::string uuid_;
  const std::string name_;
  EventHub hub_;
};

}  // namespace uraid

#endif  // URAID_SRC_REPORT_ARRAY_REPORTER_H_
