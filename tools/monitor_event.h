// SPDX-License-Identifier: MIT
// One event of the control channel's event stream ({"cmd":"events"}, see
// uraid/control.h), as `uraid monitor` handles it: what md's vocabulary
// says about it (mail-worthy, a problem, its syslog priority), its one-line
// human form, and the events the monitor makes up itself (DeviceDisappeared,
// TestMessage). Pure: no I/O.
//
// An event is a JSON object {"event":NAME,"time":UNIX_SECONDS,
// "array":UUID,"name":ARRAY_NAME,"member":M?,"slot":S?,...details}. Names
// the monitor does not know are printed and passed on like any other
// (a newer server may send more).

#ifndef URAID_TOOLS_MONITOR_EVENT_H_
#define URAID_TOOLS_MONITOR_EVENT_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace uraid::tool {

using EventJson = nlohmann::ordered_json;

// Parses one line of the stream: InvalidArgument unless it is a JSON
// object whose "event" is a non-empty string.
absl::StatusOr<EventJson> ParseEventLine(std::string_view line);

// The event's string field `key`, "" when absent or not a string.
std::string EventField(const EventJson& event, const char* key);
// "event" of the object.
inline std::string EventName(const EventJson& event) {
  return EventField(event, "event");
}

// A monitor-made event: {"event":name,"time":now,"array":array,
// "name":array_name,"control":control} (the fields that are empty are
// left out, except "array").
EventJson MakeEvent(const std::string& name, const std::string& array,
                    const std::string& array_name, const std::string& control);

// md's mail-worthy events plus ArrayFailed: Fail, FailSpare, DegradedArray,
// SparesMissing, TestMessage, ArrayFailed.
bool IsMailWorthy(const EventJson& event);

// What --oneshot reports among the current-state lines: DegradedArray,
// ArrayFailed, SparesMissing (and the TestMessage --test adds).
bool IsProblem(const EventJson& event);

// syslog(3) priority (LOG_CRIT, LOG_WARNING, LOG_NOTICE or LOG_INFO) for
// the event; CheckFinished/RepairFinished are warnings when they found
// mismatches.
int SyslogPriority(const EventJson& event);

// "EVENT array=UUID name=NAME [member=M slot=S] key=value..." (no time, no
// newline): the rest of the fields in the server's order. Strings that
// contain spaces, quotes, '=' or control characters are JSON-quoted;
// numbers, booleans and lists as compact JSON.
std::string FormatEventBody(const EventJson& event);

// FormatEventBody prefixed by the event's time as local ISO 8601 with
// milliseconds ("2025-01-31T12:00:00.250+0100"), the time of formatting
// when the event has none.
std::string FormatEventLine(const EventJson& event);

// The event as one JSON line without the newline (invalid UTF-8 replaced).
std::string EventJsonLine(const EventJson& event);

// Wall-clock time in seconds since the epoch (an event's "time").
double NowSeconds();

// The monitor's own trouble, on stderr as "uraid: monitor: MESSAGE".
void Warn(const std::string& message);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_MONITOR_EVENT_H_
