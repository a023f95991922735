// SPDX-License-Identifier: MIT
// libFuzzer target for the control channel's wire format (pure code:
// control_protocol.cc and info_json.cc are compiled into this target).
//
// Properties checked on every input (one request line, as the server would
// see it before the newline):
//  * ParseRequest never crashes, reads out of bounds or hits UB, and fails
//    only with InvalidArgument and a message.
//  * Every refusal becomes a reply line that ParseReply reads back with the
//    same code: whatever bytes the message quotes, the reply is valid JSON.
//  * Whatever it accepts obeys the documented limits, and RequestLine gives
//    a line that parses back to the same request.
//  * ParseReply and, for JSON objects, InfoFromJson (what the tool does with
//    a server's reply) never crash; an accepted ArrayInfo re-encodes to
//    JSON that decodes to the same geometry, slots and job.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "control/control_protocol.h"
#include "control/info_json.h"
#include "fuzz_check.h"
#include "uraid/control.h"
#include "uraid/geometry.h"
#include "uraid/member.h"

namespace {

using uraid::control::Json;
using uraid::control::Request;

void CheckName(const std::string& name, bool server_opens) {
  FUZZ_CHECK(!name.empty());
  FUZZ_CHECK(name.size() <= uraid::control::kMaxNameBytes);
  FUZZ_CHECK(name.find('\0') == std::string::npos);
  if (server_opens) {
    FUZZ_CHECK(name[0] == '/' || uraid::IsMemberUri(name));
  }
}

void CheckRequest(std::string_view line) {
  absl::StatusOr<Request> r = uraid::control::ParseRequest(line);
  if (!r.ok()) {
    const absl::StatusCode code = r.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!r.status().message().empty());
    const std::string reply = uraid::control::ErrorReply(r.status());
    FUZZ_CHECK(!reply.empty() && reply.back() == '\n');
    FUZZ_CHECK(reply.find('\n') == reply.size() - 1);
    absl::StatusOr<Json> back = uraid::control::ParseReply(
        std::string_view(reply).substr(0, reply.size() - 1));
    FUZZ_CHECK(!back.ok());
    FUZZ_CHECK(back.status().code() == code);
    return;
  }
  FUZZ_CHECK(line.size() <= uraid::kControlMaxLineBytes);
  using uraid::control::Cmd;
  switch (r->cmd) {
    case Cmd::kFail:
    case Cmd::kRemove:
      CheckName(r->member, false);
      break;
    case Cmd::kAdd:
      CheckName(r->member, true);
      break;
    case Cmd::kReplace:
      CheckName(r->member, false);
      CheckName(r->replacement, true);
      break;
    case Cmd::kSet:
      FUZZ_CHECK(r->speed_min_kib_s || r->speed_max_kib_s || r->cache_bytes);
      if (r->speed_min_kib_s) {
        FUZZ_CHECK(*r->speed_min_kib_s <= uraid::kControlMaxSpeedKiBs);
      }
      if (r->speed_max_kib_s) {
        FUZZ_CHECK(*r->speed_max_kib_s >= 1 &&
                   *r->speed_max_kib_s <= uraid::kControlMaxSpeedKiBs);
      }
      if (r->speed_min_kib_s && r->speed_max_kib_s) {
        FUZZ_CHECK(*r->speed_min_kib_s <= *r->speed_max_kib_s);
      }
      if (r->cache_bytes) {
        FUZZ_CHECK(*r->cache_bytes <= uraid::kControlMaxCacheBytes);
      }
      break;
    case Cmd::kGrow:
      FUZZ_CHECK(r->raid_devices || !r->add.empty() || r->layout ||
                 r->chunk_bytes || r->level);
      FUZZ_CHECK(r->add.size() <= uraid::control::kMaxGrowAdd);
      FUZZ_CHECK(r->add.empty() || r->raid_devices);
      for (const std::string& m : r->add) CheckName(m, true);
      if (r->raid_devices) {
        FUZZ_CHECK(*r->raid_devices >= uraid::kMinDisks &&
                   *r->raid_devices <= uraid::kMaxDisks);
      }
      // RAID6's layouts too (a grow to or within RAID6): md's names.
      if (r->layout) FUZZ_CHECK(uraid::LayoutName(*r->layout) != "unknown");
      if (r->chunk_bytes) {
        FUZZ_CHECK(*r->chunk_bytes >= uraid::kMinChunkBytes &&
                   *r->chunk_bytes <= uraid::kMaxChunkBytes &&
                   (*r->chunk_bytes & (*r->chunk_bytes - 1)) == 0);
      }
      if (r->level) FUZZ_CHECK(*r->level >= 4 && *r->level <= 6);
      FUZZ_CHECK(r->member.empty() && r->replacement.empty());
      break;
    default:
      FUZZ_CHECK(r->member.empty() && r->replacement.empty());
      FUZZ_CHECK(r->add.empty() && !r->raid_devices && !r->layout &&
                 !r->chunk_bytes && !r->level);
      break;
  }
  const std::string again = uraid::control::RequestLine(*r);
  FUZZ_CHECK(!again.empty() && again.back() == '\n');
  absl::StatusOr<Request> r2 = uraid::control::ParseRequest(
      std::string_view(again).substr(0, again.size() - 1));
  FUZZ_CHECK(r2.ok());
  FUZZ_CHECK(*r2 == *r);
}

void CheckReplyAndInfo(std::string_view line) {
  absl::StatusOr<Json> reply = uraid::control::ParseReply(line);
  if (!reply.ok()) FUZZ_CHECK(!reply.status().message().empty());

  // The detail object, either bare or inside an ok reply.
  Json j = Json::parse(line.begin(), line.end(), nullptr,
                       /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  if (auto it = j.find("detail"); it != j.end()) j = *it;
  absl::StatusOr<uraid::ArrayInfo> info = uraid::InfoFromJson(j);
  if (!info.ok()) {
    FUZZ_CHECK(!info.status().message().empty());
    return;
  }
  const Json enc = uraid::InfoToJson(*info);
  absl::StatusOr<uraid::ArrayInfo> back = uraid::InfoFromJson(Json::parse(
      enc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      nullptr, false));
  FUZZ_CHECK(back.ok());
  FUZZ_CHECK(back->geometry == info->geometry);
  FUZZ_CHECK(back->slots.size() == info->slots.size());
  FUZZ_CHECK(back->spares.size() == info->spares.size());
  FUZZ_CHECK(back->job.kind == info->job.kind);
  FUZZ_CHECK(back->job.done_bytes == info->job.done_bytes);
  FUZZ_CHECK(back->last_job.first_mismatches ==
             info->last_job.first_mismatches);
  FUZZ_CHECK(back->speed.max_kib_s == info->speed.max_kib_s);
  FUZZ_CHECK(back->counters.cache_evictions == info->counters.cache_evictions);
  FUZZ_CHECK(back->reshape.active == info->reshape.active);
  FUZZ_CHECK(back->reshape.from == info->reshape.from);
  FUZZ_CHECK(back->reshape.to == info->reshape.to);
  FUZZ_CHECK(back->reshape.position_bytes == info->reshape.position_bytes);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  CheckRequest(line);
  CheckReplyAndInfo(line);
  return 0;
}
