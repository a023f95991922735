// SPDX-License-Identifier: MIT
// An Event (uraid/events.h) as one JSON object, the line the control
// channel's "events" stream sends:
//   {"event":NAME,"time":UNIX_SECONDS,"array":UUID,"name":ARRAY_NAME,
//    "member":NAME,"slot":N,...details}
// with "member" and "slot" only when set, and each detail under its key
// (numbers, strings, booleans, lists of numbers). Pure.

#ifndef URAID_SRC_EVENT_JSON_H_
#define URAID_SRC_EVENT_JSON_H_

#include <string>

#include "nlohmann/json.hpp"
#include "uraid/events.h"

namespace uraid {

nlohmann::ordered_json EventToJson(const Event& event);
// EventToJson as one line, newline included; bytes of names that are not
// UTF-8 are replaced (member paths can be anything).
std::string EventLine(const Event& event);

}  // namespace uraid

#endif  // URAID_SRC_EVENT_JSON_H_
