// SPDX-License-Identifier: MIT
// File: uraid/control_protocol.h
//
// The control channel's wire format (uraid/control.h describes the
// protocol) for clients: a request as a value, its request line, and the
// check of a reply line. Pure: no I/O, no Array; safe on any input (fuzzed
// by fuzz/control_fuzz.cc). The server and the `uraid` tool share it.
//
// JSON stays text here, so that these headers need no JSON library: a
// client reads a reply's fields with its own (the tool uses nlohmann-json)
// after ReplyStatus has said the reply is a well-formed success.
//
// Thread-compatible; no state.

#ifndef URAID_CONTROL_PROTOCOL_H_
#define URAID_CONTROL_PROTOCOL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "uraid/consistency_policy.h"
#include "uraid/export.h"
#include "uraid/geometry.h"

namespace uraid::control {

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
  kEvents,    // a subscription: the connection streams events until closed
  kReadOnly,  // Array::SetReadOnly(true) (md's --readonly)
  kReadWrite  // Array::SetReadOnly(false) (md's --readwrite)
};

// "detail", "fail", ... as on the wire.
URAID_EXPORT const char* CmdName(Cmd cmd);

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
  // grow: a consistency policy switch (Array::SetConsistencyPolicy); it
  // comes alone, never with a reshape's fields.
  std::optional<ConsistencyPolicy> consistency_policy;

  friend bool operator==(const Request&, const Request&) = default;
};

// Parses one request line (without its newline; a trailing "\r" is
// whitespace). InvalidArgument naming the problem for anything but a valid
// request.
URAID_EXPORT absl::StatusOr<Request> ParseRequest(std::string_view line);

// The request as one line, newline included; ParseRequest(line) gives back
// `request` when it is valid.
URAID_EXPORT std::string RequestLine(const Request& request);

// Checks one reply line (with or without its newline): OK when it is a
// JSON object whose "ok" is true (its other fields are the caller's to
// read); the server's error, with its code and message, when "ok" is
// false; Internal naming the problem for a line that is no reply
// ("malformed reply from the control server (...)").
URAID_EXPORT absl::Status ReplyStatus(std::string_view line);

// absl's name of a status code ("INVALID_ARGUMENT") and back (Unknown for
// anything else).
URAID_EXPORT std::string CodeName(absl::StatusCode code);
URAID_EXPORT absl::StatusCode CodeFromName(std::string_view name);

}  // namespace uraid::control

#endif  // URAID_CONTROL_PROTOCOL_H_
