// SPDX-License-Identifier: MIT
#include "control/info_json.h"

#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/enum_names.h"
#include "uraid/geometry.h"
#include "uraid/superblock.h"

namespace uraid {

std::string ArrayStateText(const ArrayInfo& info) {
  std::vector<std::string> words = {info.clean ? "clean" : "active"};
  if (info.failed) {
    words.push_back("failed");
  } else if (info.degraded) {
    words.push_back("degraded");
  }
  // A read-only assembly never resyncs: unfinished parity is only pending
  // (mdadm's word for it) until a writable open picks it up.
  if (info.resyncing) {
    words.push_back(info.read_only ? "resyncing (PENDING)" : "resyncing");
  }
  if (info.reshape.active) words.push_back("reshaping");
  return absl::StrJoin(words, ", ");
}
namespace {

using Json = nlohmann::ordered_json;

// Indexed by the enumerator (base/enum_names.h).
constexpr std::array kSlotStateNames = {"active", "faulty", "missing",
                                        "rebuilding", "spare"};
static_assert(kSlotStateNames.size() ==
              static_cast<size_t>(SlotState::kSpare) + 1);
constexpr std::array kJobKindNames = {"idle",  "resync", "recover", "replace",
                                      "check", "repair", "reshape"};
static_assert(kJobKindNames.size() ==
              static_cast<size_t>(JobKind::kReshape) + 1);

// The five geometry fields, as the top level of the detail carries them.
void GeometryFields(const Geometry& g, Json* j) {
  (*j)["level"] = g.level();
  (*j)["layout"] = static_cast<int>(g.layout());
  (*j)["chunk_bytes"] = g.chunk_bytes();
  (*j)["raid_disks"] = g.raid_disks();
  (*j)["member_bytes"] = g.member_bytes();
}

Json ReshapeToJson(const ReshapeInfo& r) {
  Json j;
  j["active"] = r.active;
  j["position_bytes"] = r.position_bytes;
  j["to_data_offset_bytes"] = r.to_data_offset_bytes;
  // null when unset (no reshape): the shapes exist only while one runs.
  j["from"] = nullptr;
  j["to"] = nullptr;
  if (r.from) GeometryFields(*r.from, &j["from"]);
  if (r.to) GeometryFields(*r.to, &j["to"]);
  return j;
}

Json SlotToJson(const SlotInfo& s) {
  return {{"slot", s.slot},
          {"state", SlotStateName(s.state)},
          {"recovery_bytes", s.recovery_bytes},
          {"name", s.name},
          {"dev_number", s.dev_number},
          {"device_uuid", FormatUuid(s.device_uuid)}};
}

Json JobToJson(const JobInfo& job) {
  return {{"kind", JobKindName(job.kind)},
          {"done_bytes", job.done_bytes},
          {"total_bytes", job.total_bytes},
          {"bytes_per_s", job.bytes_per_s},
          {"slot", job.slot},
          {"target", job.target},
          {"mismatches", job.mismatches},
          {"first_mismatches", job.first_mismatches},
          {"result", job.result}};
}

// Reads typed fields of one JSON object; the first problem sticks and names
// the field by its path ("job.kind").
class Reader {
 public:
  Reader(const Json& j, std::string path, absl::Status* status)
      : j_(j), path_(std::move(path)), status_(status) {
    if (!j_.is_object()) Error("", "an object");
  }

  const Json* Get(const char* key, bool required = false) {
    if (!status_->ok() || !j_.is_object()) return nullptr;
    auto it = j_.find(key);
    if (it == j_.end()) {
      if (required) {
        *status_ = absl::InvalidArgumentError(
            absl::StrCat("detail: missing field ", Name(key)));
      }
      return nullptr;
    }
    return &*it;
  }

  void U64(const char* key, uint64_t* out, bool required = false) {
    if (const Json* v = Get(key, required)) {
      if (!v->is_number_integer() ||
          (!v->is_number_unsigned() && v->get<int64_t>() < 0)) {
        return Error(key, "an unsigned integer");
      }
      *out = v->get<uint64_t>();
    }
  }
  void Int(const char* key, int* out, bool required = false) {
    if (const Json* v = Get(key, required)) {
      if (!v->is_number_integer() || v->get<int64_t>() < -(1ll << 31) ||
          v->get<int64_t>() >= (1ll << 31)) {
        return Error(key, "an integer");
      }
      *out = static_cast<int>(v->get<int64_t>());
    }
  }
  void U32(const char* key, uint32_t* out) {
    uint64_t v = *out;
    U64(key, &v);
    if (v > UINT32_MAX) return Error(key, "a 32-bit unsigned integer");
    *out = static_cast<uint32_t>(v);
  }
  void Double(const char* key, double* out) {
    if (const Json* v = Get(key)) {
      if (!v->is_number()) return Error(key, "a number");
      *out = v->get<double>();
    }
  }
  void Bool(const char* key, bool* out) {
    if (const Json* v = Get(key)) {
      if (!v->is_boolean()) return Error(key, "a boolean");
      *out = v->get<bool>();
    }
  }
  void Str(const char* key, std::string* out) {
    if (const Json* v = Get(key)) {
      if (!v->is_string()) return Error(key, "a string");
      *out = v->get<std::string>();
    }
  }
  void Uuid(const char* key, std::array<uint8_t, 16>* out) {
    std::string text;
    Str(key, &text);
    if (text.empty() || !status_->ok()) return;
    absl::StatusOr<std::array<uint8_t, 16>> u = ParseUuid(text);
    if (!u.ok())
      return Error(key, "a uuid (xxxxxxxx:xxxxxxxx:xxxxxxxx:xxxxxxxx)");
    *out = *u;
  }

  // An enumerator by its name; absent or "" leaves *out as it is.
  // `expected` lists the names for the error.
  template <typename E>
  void Enum(const char* key, std::optional<E> (*from_name)(std::string_view),
            const char* expected, E* out) {
    std::string name;
    Str(key, &name);
    if (name.empty()) return;
    if (std::optional<E> e = from_name(name)) {
      *out = *e;
    } else {
      Error(key, expected);
    }
  }

  void Error(const char* key, const char* what) {
    if (status_->ok()) {
      *status_ = absl::InvalidArgumentError(
          absl::StrCat("detail: field ", Name(key), " must be ", what));
    }
  }
  std::string Name(const char* key) const {
    if (path_.empty()) return key;
    return *key ? absl::StrCat(path_, ".", key) : path_;
  }

 private:
  const Json& j_;
  std::string path_;
  absl::Status* status_;
};

void ReadSlot(const Json& j, const std::string& path, SlotInfo* s,
              absl::Status* status) {
  Reader r(j, path, status);
  r.Int("slot", &s->slot);
  r.Enum("state", SlotStateFromName,
         "active, faulty, missing, rebuilding or spare", &s->state);
  r.U64("recovery_bytes", &s->recovery_bytes);
  r.Str("name", &s->name);
  r.U32("dev_number", &s->dev_number);
  r.Uuid("device_uuid", &s->device_uuid);
}

void ReadSlots(const Json* list, const std::string& path,
               std::vector<SlotInfo>* out, absl::Status* status) {
  if (list == nullptr || !status->ok()) return;
  if (!list->is_array() || list->size() > 4 * kMaxDisks) {
    *status = absl::InvalidArgumentError(
        absl::StrFormat("detail: field %s must be an array of at most %d slots",
                        path, 4 * kMaxDisks));
    return;
  }
  for (size_t i = 0; i < list->size() && status->ok(); ++i) {
    SlotInfo s;
    ReadSlot((*list)[i], absl::StrFormat("%s[%d]", path, i), &s, status);
    out->push_back(std::move(s));
  }
}

void ReadJob(const Json* j, const std::string& path, JobInfo* job,
             absl::Status* status) {
  if (j == nullptr || !status->ok()) return;
  Reader r(*j, path, status);
  r.Enum("kind", JobKindFromName,
         "idle, resync, recover, replace, check, repair or reshape",
         &job->kind);
  r.U64("done_bytes", &job->done_bytes);
  r.U64("total_bytes", &job->total_bytes);
  r.Double("bytes_per_s", &job->bytes_per_s);
  r.Int("slot", &job->slot);
  r.Str("target", &job->target);
  r.U64("mismatches", &job->mismatches);
  r.Str("result", &job->result);
  if (const Json* list = r.Get("first_mismatches")) {
    if (!list->is_array() || list->size() > kMaxListedMismatches) {
      return r.Error("first_mismatches",
                     "an array of at most 16 stripe numbers");
    }
    for (const Json& v : *list) {
      if (!v.is_number_integer() ||
          (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
        return r.Error("first_mismatches", "an array of stripe numbers");
      }
      job->first_mismatches.push_back(v.get<uint64_t>());
    }
  }
}

// The five geometry fields of `j` (the detail itself, or a reshape shape
// at `path`), all required.
absl::StatusOr<Geometry> ReadGeometry(const Json& j, const std::string& path) {
  absl::Status status;
  Reader r(j, path, &status);
  int level = 0;
  int layout = -1;
  uint64_t chunk = 0;
  int disks = 0;
  uint64_t member_bytes = 0;
  r.Int("level", &level, true);
  r.Int("layout", &layout, true);
  r.U64("chunk_bytes", &chunk, true);
  r.Int("raid_disks", &disks, true);
  r.U64("member_bytes", &member_bytes, true);
  if (!status.ok()) return status;
  const std::string where = path.empty() ? "" : path + ": ";
  if (layout < 0 || layout > static_cast<int>(Layout::kParityLast)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "detail: %slayout %d is not one of md's 0-5", where, layout));
  }
  absl::StatusOr<Geometry> g = Geometry::Make(
      level, static_cast<Layout>(layout), chunk, disks, member_bytes);
  if (!g.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "detail: ", where, "bad geometry: ", g.status().message()));
  }
  return *g;
}

// A reshape shape: null (unset) or a geometry object.
void ReadShape(const Json* j, const std::string& path,
               std::optional<Geometry>* out, absl::Status* status) {
  if (j == nullptr || j->is_null() || !status->ok()) return;
  absl::StatusOr<Geometry> g = ReadGeometry(*j, path);
  if (!g.ok()) {
    *status = g.status();
    return;
  }
  *out = *g;
}

void ReadReshape(const Json* j, ReshapeInfo* out, absl::Status* status) {
  if (j == nullptr || !status->ok()) return;
  Reader r(*j, "reshape", status);
  r.Bool("active", &out->active);
  r.U64("position_bytes", &out->position_bytes);
  r.U64("to_data_offset_bytes", &out->to_data_offset_bytes);
  ReadShape(r.Get("from"), "reshape.from", &out->from, status);
  ReadShape(r.Get("to"), "reshape.to", &out->to, status);
}

}  // namespace

// Every counter by name, for both directions.
std::vector<std::pair<const char*, uint64_t Counters::*>> CounterFields() {
  return {
      {"member_reads", &Counters::member_reads},
      {"member_read_bytes", &Counters::member_read_bytes},
      {"member_writes", &Counters::member_writes},
      {"member_write_bytes", &Counters::member_write_bytes},
      {"member_flushes", &Counters::member_flushes},
      {"full_stripe_writes", &Counters::full_stripe_writes},
      {"rmw_writes", &Counters::rmw_writes},
      {"rcw_writes", &Counters::rcw_writes},
      {"degraded_writes", &Counters::degraded_writes},
      {"reconstructions", &Counters::reconstructions},
      {"resynced_stripes", &Counters::resynced_stripes},
      {"resync_repairs", &Counters::resync_repairs},
      {"cached_writes", &Counters::cached_writes},
      {"cache_writebacks", &Counters::cache_writebacks},
      {"cache_evictions", &Counters::cache_evictions},
      {"read_errors_corrected", &Counters::read_errors_corrected},
      {"recovered_stripes", &Counters::recovered_stripes},
      {"scrubbed_stripes", &Counters::scrubbed_stripes},
      {"resync_bitmap_chunks", &Counters::resync_bitmap_chunks},
      {"resync_bytes", &Counters::resync_bytes},
  };
}

const char* SlotStateName(SlotState state) {
  return EnumName(kSlotStateNames, state, "?");
}

std::optional<SlotState> SlotStateFromName(std::string_view name) {
  return EnumFromName<SlotState>(kSlotStateNames, name);
}

const char* JobKindName(JobKind kind) {
  return EnumName(kJobKindNames, kind, "unknown");
}

std::optional<JobKind> JobKindFromName(std::string_view name) {
  return EnumFromName<JobKind>(kJobKindNames, name);
}

Json InfoToJson(const ArrayInfo& info) {
  Json j;
  GeometryFields(info.geometry, &j);
  j["uuid"] = FormatUuid(info.uuid);
  j["name"] = info.name;
  j["data_offset_bytes"] = info.data_offset_bytes;
  j["events"] = info.events;
  j["ctime"] = info.ctime;
  j["utime"] = info.utime;
  j["clean"] = info.clean;
  j["ppl"] = info.ppl;
  j["degraded"] = info.degraded;
  j["failed"] = info.failed;
  j["read_only"] = info.read_only;
  j["resyncing"] = info.resyncing;
  j["resync_bytes"] = info.resync_bytes;
  Json slots = Json::array();
  for (const SlotInfo& s : info.slots) slots.push_back(SlotToJson(s));
  j["slots"] = std::move(slots);
  Json spares = Json::array();
  for (const SlotInfo& s : info.spares) spares.push_back(SlotToJson(s));
  j["spares"] = std::move(spares);
  j["job"] = JobToJson(info.job);
  j["last_job"] = JobToJson(info.last_job);
  j["speed"] = {{"min_kib_s", info.speed.min_kib_s},
                {"max_kib_s", info.speed.max_kib_s},
                {"busy_share_pct", info.speed.busy_share_pct}};
  Json counters = Json::object();
  for (const auto& [name, field] : CounterFields()) {
    counters[name] = info.counters.*field;
  }
  j["counters"] = std::move(counters);
  const BitmapInfo& b = info.bitmap;
  j["bitmap"] = {{"present", b.present},
                 {"offset_bytes", b.offset_bytes},
                 {"chunk_bytes", b.chunk_bytes},
                 {"chunks", b.chunks},
                 {"dirty_chunks", b.dirty_chunks},
                 {"events", b.events},
                 {"events_cleared", b.events_cleared},
                 {"sync_size_bytes", b.sync_size_bytes},
                 {"daemon_sleep_s", b.daemon_sleep_s}};
  j["reshape"] = ReshapeToJson(info.reshape);
  return j;
}

absl::StatusOr<ArrayInfo> InfoFromJson(const Json& j) {
  absl::StatusOr<Geometry> g = ReadGeometry(j, "");
  if (!g.ok()) return g.status();
  absl::Status status;
  Reader r(j, "", &status);
  ArrayInfo info{.geometry = *g};
  r.Uuid("uuid", &info.uuid);
  r.Str("name", &info.name);
  r.U64("data_offset_bytes", &info.data_offset_bytes);
  r.U64("events", &info.events);
  r.U64("ctime", &info.ctime);
  r.U64("utime", &info.utime);
  r.Bool("clean", &info.clean);
  r.Bool("ppl", &info.ppl);  // absent from older servers
  r.Bool("degraded", &info.degraded);
  r.Bool("failed", &info.failed);
  r.Bool("read_only", &info.read_only);
  r.Bool("resyncing", &info.resyncing);
  r.U64("resync_bytes", &info.resync_bytes);
  ReadSlots(r.Get("slots"), "slots", &info.slots, &status);
  ReadSlots(r.Get("spares"), "spares", &info.spares, &status);
  ReadJob(r.Get("job"), "job", &info.job, &status);
  ReadJob(r.Get("last_job"), "last_job", &info.last_job, &status);
  if (const Json* speed = r.Get("speed"); speed != nullptr && status.ok()) {
    Reader s(*speed, "speed", &status);
    s.U64("min_kib_s", &info.speed.min_kib_s);
    s.U64("max_kib_s", &info.speed.max_kib_s);
    uint64_t pct = info.speed.busy_share_pct;
    s.U64("busy_share_pct", &pct);  // absent from older servers
    info.speed.busy_share_pct =
        static_cast<uint32_t>(std::min<uint64_t>(pct, 90));
  }
  if (const Json* c = r.Get("counters"); c != nullptr && status.ok()) {
    Reader cr(*c, "counters", &status);
    for (const auto& [name, field] : CounterFields()) {
      cr.U64(name, &(info.counters.*field));
    }
  }
  if (const Json* bm = r.Get("bitmap"); bm != nullptr && status.ok()) {
    Reader br(*bm, "bitmap", &status);
    br.Bool("present", &info.bitmap.present);
    br.U64("offset_bytes", &info.bitmap.offset_bytes);
    br.U64("chunk_bytes", &info.bitmap.chunk_bytes);
    br.U64("chunks", &info.bitmap.chunks);
    br.U64("dirty_chunks", &info.bitmap.dirty_chunks);
    br.U64("events", &info.bitmap.events);
    br.U64("events_cleared", &info.bitmap.events_cleared);
    br.U64("sync_size_bytes", &info.bitmap.sync_size_bytes);
    uint64_t sleep = 0;
    br.U64("daemon_sleep_s", &sleep);
    info.bitmap.daemon_sleep_s = static_cast<uint32_t>(sleep);
  }
  ReadReshape(r.Get("reshape"), &info.reshape, &status);
  if (!status.ok()) return status;
  return info;
}

std::string InfoToJsonText(const ArrayInfo& info) {
  return InfoToJson(info).dump(-1, ' ', false,
                               nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<ArrayInfo> InfoFromJsonText(std::string_view json) {
  const Json j = Json::parse(json.begin(), json.end(), nullptr,
                             /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError("array detail: not JSON");
  }
  return InfoFromJson(j);
}

}  // namespace uraid
