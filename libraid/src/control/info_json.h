// SPDX-License-Identifier: MIT
// ArrayInfo <-> JSON, losslessly: the "detail" of the control channel's
// detail reply. The server encodes Array::Info(); `uraid detail --control`
// decodes it and renders it exactly as an offline `uraid detail`.
//
// Shape (every field of ArrayInfo, snake_case; uuids in mdadm's
// "xxxxxxxx:xxxxxxxx:xxxxxxxx:xxxxxxxx"; states and job kinds as words):
//   {"level":5,"layout":2,"chunk_bytes":524288,"raid_disks":4,
//    "member_bytes":...,"uuid":"...","name":"...","data_offset_bytes":...,
//    "events":...,"ctime":...,"utime":...,"clean":true,"degraded":false,
//    "failed":false,"read_only":false,"resyncing":false,"resync_bytes":0,
//    "slots":[{"slot":0,"state":"active","recovery_bytes":0,"name":"...",
//              "dev_number":0,"device_uuid":"..."}, ...],
//    "spares":[...same...],
//    "job":{"kind":"recover","done_bytes":...,"total_bytes":...,
//           "bytes_per_s":...,"slot":1,"target":"...","mismatches":0,
//           "first_mismatches":[],"result":""},
//    "last_job":{...same...},
//    "speed":{"min_kib_s":1000,"max_kib_s":200000},
//    "counters":{"member_reads":...,...},
//    "bitmap":{"present":true,...},
//    "reshape":{"active":true,"position_bytes":...,
//               "to_data_offset_bytes":...,
//               "from":{"level":5,"layout":2,"chunk_bytes":...,
//                       "raid_disks":4,"member_bytes":...},
//               "to":{...same...}}}
// ("from" and "to" are null when no reshape runs; job kind "reshape" while
// one does.)
// Decoding needs the five geometry fields (and all five of a non-null
// reshape shape); any other missing field keeps
// its default (a server of another version), a field of the wrong type is
// an error naming it.

#ifndef URAID_SRC_INFO_JSON_H_
#define URAID_SRC_INFO_JSON_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "uraid/array.h"

namespace uraid {

nlohmann::ordered_json InfoToJson(const ArrayInfo& info);
absl::StatusOr<ArrayInfo> InfoFromJson(const nlohmann::ordered_json& j);

// The array's state in mdadm --detail's words: "clean" or "active", then
// "degraded" or "failed", "resyncing" ("resyncing (PENDING)" when
// read-only), "reshaping"; comma separated.
std::string ArrayStateText(const ArrayInfo& info);

// "active", "faulty", "missing", "rebuilding", "spare".
const char* SlotStateName(SlotState state);

// Every Counters field with its JSON name, in display order: the one list
// the JSON codec and the tool's counter table both use.
std::vector<std::pair<const char*, uint64_t Counters::*>> CounterFields();
std::optional<SlotState> SlotStateFromName(std::string_view name);
// JobKindName's inverse ("idle" -> kNone).
std::optional<JobKind> JobKindFromName(std::string_view name);

}  // namespace uraid

#endif  // URAID_SRC_INFO_JSON_H_
