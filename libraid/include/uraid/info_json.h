// SPDX-License-Identifier: MIT
// File: uraid/info_json.h
//
// ArrayInfo <-> JSON text, losslessly: the "detail" of the control
// channel's detail reply. The server encodes Array::Info(); `uraid detail
// --control` decodes it and renders it exactly as an offline `uraid
// detail`. Also the words md and the tool use for states and counters.
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
//           "first_mismatches":[],"located_mismatches":0,
//           "first_located":[],"first_located_slots":[],"result":""},
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
//
// The JSON is text here so that the installed headers need no JSON library
// (the library builds it with nlohmann-json inside).
// Thread-compatible; no state.

#ifndef URAID_INFO_JSON_H_
#define URAID_INFO_JSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "uraid/array.h"
#include "uraid/export.h"

namespace uraid {

// `info` as one JSON object (the shape above), compact, no newline.
// Strings that are not valid UTF-8 (member paths can be anything) are
// written with U+FFFD in place of bad bytes.
URAID_EXPORT std::string InfoToJsonText(const ArrayInfo& info);
// Decodes one JSON object of that shape; InvalidArgument naming the field
// (or "not JSON") otherwise.
URAID_EXPORT absl::StatusOr<ArrayInfo> InfoFromJsonText(std::string_view json);

// The array's state in mdadm --detail's words: "clean" or "active", then
// "degraded" or "failed", "resyncing" ("resyncing (PENDING)" when
// read-only), "reshaping"; comma separated.
URAID_EXPORT std::string ArrayStateText(const ArrayInfo& info);

// "active", "faulty", "missing", "rebuilding", "spare".
URAID_EXPORT const char* SlotStateName(SlotState state);

// Every Counters field with its JSON name, in display order: the list of
// uraid/counters.h as member pointers, for the JSON codec, the tool's
// counter table, its Prometheus metrics and the plugin's stats=FILE.
URAID_EXPORT std::vector<std::pair<const char*, uint64_t Counters::*>>
CounterFields();
URAID_EXPORT std::optional<SlotState> SlotStateFromName(std::string_view name);
// JobKindName's inverse ("idle" -> kNone).
URAID_EXPORT std::optional<JobKind> JobKindFromName(std::string_view name);

}  // namespace uraid

#endif  // URAID_INFO_JSON_H_
