// SPDX-License-Identifier: MIT
#include "control/event_json.h"

#include <type_traits>
#include <variant>

namespace uraid {

nlohmann::ordered_json EventToJson(const Event& e) {
  nlohmann::ordered_json j;
  j["event"] = e.name;
  j["time"] = e.time;
  j["array"] = e.array;
  j["name"] = e.array_name;
  if (!e.member.empty()) j["member"] = e.member;
  if (e.slot.has_value()) j["slot"] = *e.slot;
  for (const auto& detail : e.details) {
    // Not a structured binding: clang 14 (the fuzz build) cannot capture
    // one in a lambda.
    const std::string& key = detail.first;
    std::visit([&j, &key](const auto& v) { j[key] = v; }, detail.second);
  }
  return j;
}

std::string EventLine(const Event& event) {
  return EventToJson(event).dump(
             -1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
         "\n";
}

}  // namespace uraid
