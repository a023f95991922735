// SPDX-License-Identifier: MIT
// File: uraid/events.h
//
// What an array tells the world: log lines with a severity, and events in
// mdadm --monitor's words (Fail, DegradedArray, RebuildFinished, ...) for
// programs that must react to them.
//
// Both are delivered through callbacks an embedder passes in (a Logger to
// Array::Create/Assemble, listeners via Array::AddEventListener). Callbacks
// run on the thread where the thing happened, possibly while the array
// holds internal locks: they must be thread-safe, return quickly, never
// block on I/O and never call back into the Array. Queue the work
// elsewhere (the control server does: a bounded queue per subscriber).

#ifndef URAID_EVENTS_H_
#define URAID_EVENTS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "uraid/export.h"

namespace uraid {

// syslog's severities, the ones a storage engine uses. Routine lines are
// kInfo or kNotice; kWarning and above mean something needs a look.
enum class LogLevel { kDebug, kInfo, kNotice, kWarning, kError, kCritical };

// "debug", "info", "notice", "warning", "error", "critical".
URAID_EXPORT const char* LogLevelName(LogLevel level);

// One event of one array. Names are mdadm --monitor's where md has one:
//   Fail            an active member failed (member, slot, "error")
//   FailSpare       a member being rebuilt onto, or a replace target, failed
//   DegradedArray   the array runs with one slot gone ("gone_slots")
//   ArrayFailed     a second slot is gone: the array cannot serve all data
//   SpareActive     a rebuilt member now holds its slot
//   RebuildStarted  recovery or replace began (member = target, "kind")
//   Rebuild20/40/60/80  progress milestones ("percent")
//   RebuildFinished ("result": "completed", "interrupted" or the error)
//   SparesMissing   fewer spares than expected ("spares", "expected")
//   NewArray        the array as a new subscriber first sees it ("state")
// and uraid's own: ReadErrorCorrected ("offset": member byte offset),
// CheckFinished / RepairFinished ("mismatches", "first_mismatches",
// "located_mismatches", "first_located", "first_located_slots": RAID6's
// located bad chunks, JobInfo; "result"), ResyncStarted / ResyncFinished,
// ReshapeStarted / ReshapeFinished, LevelChanged (a RAID5 <-> RAID6
// takeover: the member that holds or held Q, its slot), SpareAdded,
// MemberRemoved, MetadataWriteFailed ("error"), EventsLost ("count"; the
// control channel's, per subscriber),
// BadBlocksRecorded (a range of a member recorded in its bad-block log:
// "first_sector", "sectors", "error", "affects": the array bytes it held),
// WantReplacement (a member's write error was recorded instead of failing
// it, md's want_replacement; once per member: "error").
struct URAID_EXPORT Event {
  using Value = std::variant<int64_t, std::string, bool, std::vector<uint64_t>>;

  std::string name;
  double time = 0;          // seconds since the Unix epoch
  std::string array;        // the array uuid, mdadm's text form
  std::string array_name;   // md's set name
  std::string member;       // Member::Name(); empty when about no member
  std::optional<int> slot;  // the raid slot; -1 for a spare
  // Further fields, in order, each key once.
  std::vector<std::pair<std::string, Value>> details;

  // The detail named `key`, or nullptr.
  const Value* Find(std::string_view key) const;
};

// One log line and what it is about.
struct LogRecord {
  LogLevel level = LogLevel::kInfo;
  std::string message;
  // The event this line reports, or nullptr for a line that is no event.
  // Valid only during the call.
  const Event* event = nullptr;
};

// Receives the array's log lines. Built from a callable taking a
// `const LogRecord&` (severity and event fields), or, for code written
// before severities, one taking a `const std::string&` (the message only).
// An empty Logger discards everything. Same calling rules as above.
class Logger {
 public:
  using Sink = std::function<void(const LogRecord&)>;

  Logger() = default;
  Logger(std::nullptr_t) {}  // NOLINT: `Logger log = nullptr` reads well
  template <typename F>
  requires(!std::is_same_v<std::decay_t<F>, Logger> &&
           std::is_invocable_v<F&, const LogRecord&>) Logger(F sink)
      : sink_(std::move(sink)) {}  // NOLINT: implicit by design
  template <typename F>
  requires(!std::is_same_v<std::decay_t<F>, Logger> &&
           !std::is_invocable_v<F&, const LogRecord&> &&
           std::is_invocable_v<F&, const std::string&>)
      Logger(F lines)  // NOLINT: implicit, so old line loggers still work
      : sink_([lines = std::move(lines)](const LogRecord& r) mutable {
          lines(r.message);
        }) {}

  explicit operator bool() const { return static_cast<bool>(sink_); }
  void operator()(const LogRecord& record) const {
    if (sink_) sink_(record);
  }
  void operator()(LogLevel level, const std::string& message) const {
    if (sink_) sink_(LogRecord{level, message, nullptr});
  }

 private:
  Sink sink_;
};

// Receives every event of an array (Array::AddEventListener).
using EventListener = std::function<void(const Event&)>;

}  // namespace uraid

#endif  // URAID_EVENTS_H_
