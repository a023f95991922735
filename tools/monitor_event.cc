// SPDX-License-Identifier: MIT
#include "monitor_event.h"

#include <syslog.h>
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uraid::tool {
namespace {

// Fields FormatEventBody prints in fixed places, or not at all ("time" is
// the line's prefix).
const std::set<std::string, std::less<>>& FixedFields() {
  static const auto* const kFixed = new std::set<std::string, std::less<>>{
      "event", "time", "array", "name", "member", "slot"};
  return *kFixed;
}

bool NeedsQuotes(std::string_view s) {
  if (s.empty()) return true;
  for (const char c : s) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' ||
        static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return true;
    }
  }
  return false;
}

std::string Dump(const EventJson& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string ValueText(const EventJson& v) {
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    return NeedsQuotes(s) ? Dump(v) : s;
  }
  return Dump(v);
}

}  // namespace

double NowSeconds() {
  return std::chrono::duration<double>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Warn(const std::string& message) {
  std::fprintf(stderr, "uraid: monitor: %s\n", message.c_str());
  std::fflush(stderr);
}

absl::StatusOr<EventJson> ParseEventLine(std::string_view line) {
  EventJson j = EventJson::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("an event line that is not JSON");
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError("an event line that is not an object");
  }
  auto it = j.find("event");
  if (it == j.end() || !it->is_string() ||
      it->get_ref<const std::string&>().empty()) {
    return absl::InvalidArgumentError("an event line without an \"event\"");
  }
  return j;
}

std::string EventField(const EventJson& event, const char* key) {
  auto it = event.find(key);
  if (it == event.end() || !it->is_string()) return "";
  return it->get<std::string>();
}

EventJson MakeEvent(const std::string& name, const std::string& array,
                    const std::string& array_name, const std::string& control) {
  EventJson j = EventJson::object();
  j["event"] = name;
  // Milliseconds are plenty, and keep the JSON short.
  j["time"] = std::round(NowSeconds() * 1000) / 1000;
  j["array"] = array;
  if (!array_name.empty()) j["name"] = array_name;
  if (!control.empty()) j["control"] = control;
  return j;
}

bool IsMailWorthy(const EventJson& event) {
  static const auto* const kMail = new std::set<std::string, std::less<>>{
      "Fail",        "FailSpare",   "DegradedArray",     "SparesMissing",
      "TestMessage", "ArrayFailed", "BadBlocksRecorded", "WantReplacement"};
  return kMail->count(EventName(event)) > 0;
}

bool IsProblem(const EventJson& event) {
  const std::string name = EventName(event);
  return name == "DegradedArray" || name == "ArrayFailed" ||
         name == "SparesMissing" || name == "TestMessage";
}

int SyslogPriority(const EventJson& event) {
  const std::string name = EventName(event);
  if (name == "Fail" || name == "FailSpare" || name == "ArrayFailed") {
    return LOG_CRIT;
  }
  if (name == "DegradedArray" || name == "SparesMissing" ||
      name == "TestMessage" || name == "DeviceDisappeared" ||
      name == "MetadataWriteFailed" || name == "EventsLost" ||
      name == "BadBlocksRecorded" || name == "WantReplacement") {
    return LOG_WARNING;
  }
  if (name == "CheckFinished" || name == "RepairFinished") {
    auto it = event.find("mismatches");
    const bool found =
        it != event.end() && it->is_number() && it->get<double>() > 0;
    return found ? LOG_WARNING : LOG_INFO;
  }
  if (name == "ReadErrorCorrected" || name == "MemberRemoved") {
    return LOG_NOTICE;
  }
  return LOG_INFO;
}

std::string FormatEventBody(const EventJson& event) {
  std::string out = EventName(event);
  auto add = [&](const std::string& key, const EventJson& value) {
    absl::StrAppend(&out, " ", key, "=", ValueText(value));
  };
  auto add_if = [&](const char* key) {
    auto it = event.find(key);
    if (it != event.end()) add(key, *it);
  };
  add("array", event.contains("array") ? event["array"] : EventJson(""));
  add_if("name");
  add_if("member");
  add_if("slot");
  for (auto it = event.begin(); it != event.end(); ++it) {
    if (FixedFields().count(it.key()) > 0) continue;
    add(it.key(), it.value());
  }
  return out;
}

std::string FormatEventLine(const EventJson& event) {
  auto it = event.find("time");
  const double t =
      it != event.end() && it->is_number() ? it->get<double>() : NowSeconds();
  const time_t seconds = static_cast<time_t>(std::floor(t));
  const int millis =
      std::min(999, static_cast<int>((t - std::floor(t)) * 1000 + 0.5));
  struct tm tm;
  localtime_r(&seconds, &tm);
  char stamp[64];
  strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  char zone[16];
  strftime(zone, sizeof zone, "%z", &tm);
  return absl::StrFormat("%s.%03d%s %s", stamp, millis, zone,
                         FormatEventBody(event));
}

std::string EventJsonLine(const EventJson& event) { return Dump(event); }

}  // namespace uraid::tool
