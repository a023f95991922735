// SPDX-License-Identifier: MIT
// The control channel's wire format, server side: the JSON-free part
// (requests, ReplyStatus, code names) is public in uraid/control_protocol.h;
// this adds what takes or gives nlohmann-json values, which the installed
// headers must not depend on: building reply lines, and ParseReply for
// the library's own code and white-box tests. Pure: no I/O, no Array.

#ifndef URAID_SRC_CONTROL_PROTOCOL_H_
#define URAID_SRC_CONTROL_PROTOCOL_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "uraid/control_protocol.h"  // IWYU pragma: export

namespace uraid::control {

using Json = nlohmann::ordered_json;

// Reply lines, newline included. Strings that are not valid UTF-8 (member
// paths can be anything) are written with U+FFFD in place of bad bytes.
std::string OkReply(const Json& fields = Json::object());
std::string ErrorReply(const absl::Status& status);

// Parses a reply line: the reply object when "ok" is true, else the
// error as a status with the server's code and message. Malformed replies
// are Internal errors naming the problem.
absl::StatusOr<Json> ParseReply(std::string_view line);

}  // namespace uraid::control

#endif  // URAID_SRC_CONTROL_PROTOCOL_H_
