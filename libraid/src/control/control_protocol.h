// SPDX-License-Identifier: MIT
// The control channel's wire format (see uraid/control.h for the protocol):
// one request line -> a validated ControlRequest or an error status, and
// the reply lines. Pure: no I/O, no Array; safe on any input (fuzzed by
// fuzz/control_fuzz.cc). Shared by the server and the `uraid` tool.

#ifndef URAID_SRC_CONTROL_PROTOCOL_H_
#define URAID_SRC_CONTROL_PROTOCOL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "uraid/geometry.h"

namespace uraid::control {

using Json = nlohmann::ordered_json;

enum class Cmd {
  kDetail,
  kFail,
  kRemove,
  kAdd,
  kReplace,
  kCheck,
  kRepair,
  kStop,
  kSet,
  kGrow,
  kEvents  // a subscription: the connection streams events until closed
};

// "detail", "fail", ... as on the wire.
const char* CmdName(Cmd cmd);

// Longest member name or path in a request (PATH_MAX).
inline constexpr size_t kMaxNameBytes = 4096;
// Deepest nesting of arrays/objects in a request line (a request is one
// flat object; a little room lets wrong-type errors name the field).
inline constexpr int kMaxDepth = 4;
// Most members one grow request may add (md's limit on raid devices).
inline constexpr size_t kMaxGrowAdd = 64;

struct Request {
  Cmd cmd = Cmd::kDetail;
  // fail, remove, add: the member; replace: the old member.
  std::string member;
  // replace: the new member (path or URI).
  std::string replacement;
  // set: each field given.
  std::optional<uint64_t> speed_min_kib_s;
  std::optional<uint64_t> speed_max_kib_s;
  std::optional<uint32_t> busy_share_pct;  // SpeedLimits::busy_share_pct
  std::optional<uint64_t> cache_bytes;
  // grow: each field given (at least one). `add` is empty when not given;
  // a non-empty `add` comes with raid_devices.
  std::optional<int> raid_devices;
  std::vector<std::string> add;  // paths or URIs the server opens
  std::optional<Layout> layout;
  std::optional<uint64_t> chunk_bytes;
  std::optional<int> level;

  friend bool operator==(const Request&, const Request&) = default;
};

// Parses one request line (without its newline; a trailing "\r" is
// whitespace). InvalidArgument naming the problem for anything but a valid
// request.
absl::StatusOr<Request> ParseRequest(std::string_view line);

// The request as one line, newline included; ParseRequest(line) gives back
// `request` when it is valid.
std::string RequestLine(const Request& request);

// Reply lines, newline included. Strings that are not valid UTF-8 (member
// paths can be anything) are written with U+FFFD in place of bad bytes.
std::string OkReply(const Json& fields = Json::object());
std::string ErrorReply(const absl::Status& status);

// Parses a reply line: the reply object when "ok" is true, else the
// error as a status with the server's code and message. Malformed replies
// are Internal errors naming the problem.
absl::StatusOr<Json> ParseReply(std::string_view line);

// absl's name of a status code ("INVALID_ARGUMENT") and back (Unknown for
// anything else).
std::string CodeName(absl::StatusCode code);
absl::StatusCode CodeFromName(std::string_view name);

}  // namespace uraid::control

#endif  // URAID_SRC_CONTROL_PROTOCOL_H_
