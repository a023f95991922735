// SPDX-License-Identifier: MIT
// File: uraid/control.h
//
// The live control channel of a served array: a unix socket (mode 0600,
// so only its owner may connect) speaking line-delimited JSON. The nbdkit
// plugin opens it with `control=SOCKET`; `uraid <command> --control SOCKET`
// speaks it; embedders can serve their own Array with it.
//
// Protocol. The client sends one request per line (a JSON object, at most
// kControlMaxLineBytes bytes before the newline); the server answers every
// line with exactly one reply line, in order. A connection may carry any
// number of requests. Requests:
//
//   {"cmd":"detail"}                          the array's state (below)
//   {"cmd":"fail","member":"NAME"}            Array::FailMember
//   {"cmd":"remove","member":"NAME"}          Array::RemoveMember
//   {"cmd":"add","member":"PATH_OR_URI"}      opens it, Array::AddMember
//   {"cmd":"replace","old":"NAME","new":"PATH_OR_URI"}
//                                             Array::ReplaceMember
//   {"cmd":"check"} / {"cmd":"repair"}        Array::StartScrub
//   {"cmd":"stop"}                            Array::StopJob (md's "idle")
//   {"cmd":"set","speed_min":KIB_S,"speed_max":KIB_S,"cache":BYTES}
//                                             any non-empty subset;
//                                             SetSpeedLimits, SetCacheBytes
//   {"cmd":"grow","raid_devices":N,"add":["PATH_OR_URI",...],
//    "layout":"NAME","chunk":BYTES,"level":4|5}
//                                             any non-empty subset; opens
//                                             the "add" members (one per
//                                             added device, given slots in
//                                             order), then Array::Grow
//   {"cmd":"grow","consistency_policy":"resync"|"bitmap"|"ppl"}
//                                             alone (no reshape field):
//                                             Array::SetConsistencyPolicy;
//                                             replies once switched
//   {"cmd":"readonly"} / {"cmd":"readwrite"}  Array::SetReadOnly (md's
//                                             --readonly / --readwrite);
//                                             replies once switched, with
//                                             "changed" (false when it
//                                             already was) and "clean"
//   {"cmd":"events"}                          a subscription (below)
//
// NAME is a member's Member::Name() as `detail` shows it (for the plugin,
// the absolute path or the URI it was given); another path to the same
// file (relative to the server, or through a symlink) is accepted too.
// PATH_OR_URI for add/replace/grow is opened by the server, so a path must
// be absolute. Grow: raid_devices in [kMinDisks, kMaxDisks], and required
// with a non-empty "add"; "add" at most 64 entries; layout
// any name or number ParseLayout (uraid/geometry.h) accepts; chunk a power
// of two in [kMinChunkBytes, kMaxChunkBytes]. Whether the new shape is one
// the array can reshape to is Array::Grow's answer, sent back as the error.
// Numbers are non-negative JSON integers; speed limits are KiB/s
// per member (md's sync_speed_min/max), at most kControlMaxSpeedKiBs, and
// min <= max after merging with the current limits; cache at most
// kControlMaxCacheBytes. Unknown fields, duplicate fields, wrong types,
// NUL bytes and nesting are refused (grow's "add", an array of strings, is
// the one field that is not a scalar).
//
// Replies: {"ok":true} (plus, for detail, "detail": the ArrayInfo as JSON;
// for set, the limits in force: "speed_min", "speed_max" and, when given,
// "cache"), or {"ok":false,"error":"MESSAGE","code":"ABSL_CODE"} where
// MESSAGE names the cause and ABSL_CODE is absl's name for the status code
// (e.g. "INVALID_ARGUMENT", "FAILED_PRECONDITION"). Commands that start
// work (add, replace, check, repair, grow) reply when it has started;
// progress is in detail's "job" (kind "reshape" for grow, and detail's
// "reshape" has the position and both shapes), the outcome of the last job
// in "last_job". The exported size changes when a reshape ends.
//
// Events: the reply to {"cmd":"events"} is {"ok":true,"initial":N}, then
// N lines with the current state (Array::StateEvents: NewArray first), then
// every event as it happens (uraid/events.h), one JSON object per line
// ({"event":NAME,"time":UNIX_SECONDS,"array":UUID,"name":ARRAY_NAME,
// "member":...,"slot":...,...details}; see event_json.h), until the server
// stops or the client closes. The connection takes no further requests.
// A subscriber that reads too slowly never holds up the array: at most
// max_queued_events lines wait for it; past that, events are counted, and
// once it has caught up it gets {"event":"EventsLost","count":N,...} and
// the current state again (NewArray ...). A subscriber whose socket takes
// nothing for write_timeout_ms is disconnected.
//
// Access: the socket is mode 0600 (only its owner, and root, can connect)
// unless read_group is set: then it is 0660 with that group, and a peer
// (SO_PEERCRED) that is neither root nor the server's user but is in that
// group may send detail and events only; anything else gets
// PERMISSION_DENIED ("permission denied: fail is read-only for group G
// (uid U)").
//
// Robustness: a malformed request gets an error reply and the connection
// stays usable; a line longer than the limit gets an error reply and the
// connection is closed; a connection that sends nothing for
// idle_timeout_ms is closed. Every connection has its own thread, so a
// slow or silent client never blocks another.

#ifndef URAID_CONTROL_H_
#define URAID_CONTROL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "uraid/array.h"
#include "uraid/export.h"
#include "uraid/member.h"

namespace uraid {

inline constexpr size_t kControlMaxLineBytes = 64 * 1024;
inline constexpr uint64_t kControlMaxSpeedKiBs = 1ull << 30;   // 1 TiB/s
inline constexpr uint64_t kControlMaxCacheBytes = 1ull << 40;  // 1 TiB

// Opens the member named by an add or replace request (a path or an NBD
// URI).
using MemberOpener = std::function<absl::StatusOr<std::unique_ptr<Member>>(
    const std::string& spec)>;

struct ControlServerOptions {
  // How add/replace open members; the plugin passes its own MemberOptions.
  // nullptr = OpenMember(spec) with default options.
  MemberOpener open_member;
  // A connection with no complete request for this long is closed.
  int idle_timeout_ms = 30000;
  // A reply the client does not take within this long closes the
  // connection.
  int write_timeout_ms = 10000;
  // Connections served at once; one more gets an error reply and is closed.
  int max_connections = 16;
  // One line per mutating request and its outcome (notice, or warning
  // when refused), and per server error. Called from the server's threads.
  Logger logger;
  // The group whose members may read (detail, events); the socket is then
  // mode 0660 owned by it. Unset: mode 0600, owner (and root) only.
  std::optional<uint32_t> read_group;
  // Its name, for messages ("permission denied: ... for group NAME").
  std::string read_group_name;
  // Event lines queued for one subscriber before events are dropped (and
  // counted, see Events above).
  size_t max_queued_events = 4096;
};

// Serves one Array on a unix socket. Thread-safe; the Array must outlive
// the server (stop the server first).
//
// Exported member by member, not as a class: a class-wide URAID_EXPORT
// would export the nested Impl (the server's internals) with it, and
// ControlServer has no vtable or typeinfo that embedders need.
class ControlServer {
 public:
  // Creates the socket at `socket_path` with mode 0600 (0660 and the
  // group, with read_group) and starts serving.
  // A stale socket (no server behind it) is replaced; a live one is
  // refused (FailedPrecondition), and so is any other kind of file there
  // (never removed). InvalidArgument for a path too long for a unix socket.
  URAID_EXPORT static absl::StatusOr<std::unique_ptr<ControlServer>> Start(
      const std::string& socket_path, Array* array,
      ControlServerOptions options = {});

  // Stop().
  URAID_EXPORT ~ControlServer();

  // Stops accepting, closes every connection once its current request is
  // answered, joins the threads and removes the socket file. Idempotent.
  URAID_EXPORT void Stop();

  URAID_EXPORT const std::string& socket_path() const;

  class Impl;

 private:
  explicit ControlServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace uraid

#endif  // URAID_CONTROL_H_
