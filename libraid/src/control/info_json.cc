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
  // (mdadm's word for it) until a writable open picks it up. A PPL array
  // left dirty is not resynced at all: the writable assembly replays its
  // log (md's ppl_recover), which makes the stripes being written whole.
  if (info.resyncing && info.read_only && info.ppl) {
    words.push_back("PPL: log replayed at assembly");
  } else if (info.resyncing) {
    words.push_back(info.read_only ? "resyncing (PENDING)" : "resyncing");
  }
  if (info.reshape.active) words.push_back("reshaping");
  // md's array_state "readonly" (uraid readonly on a live array; an
  // array opened read-only shows as such in /proc/mdstat's form only).
  if (info.switched_read_only) words.push_back("read-only");
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

// How the detail names an enum, in both directions, and the names as an
// error lists them.
template <typename E>
struct JsonEnum {
  const char* (*name)(E);
  std::optional<E> (*from_name)(std::string_view);
  const char* expected;
};
constexpr JsonEnum<SlotState> kSlotStateJson = {
    SlotStateName, SlotStateFromName,
    "active, faulty, missing, rebuilding or spare"};
constexpr JsonEnum<JobKind> kJobKindJson = {
    JobKindName, JobKindFromName,
    "idle, resync, recover, replace, check, repair or reshape"};

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

// Writes typed fields into one JSON object, in call order. The field
// lists below take a Writer (to JSON) or a Reader (from JSON), so that both
// directions come from one list.
class Writer {
 public:
  explicit Writer(Json* j) : j_(*j) {}

  void U64(const char* key, const uint64_t* v) { j_[key] = *v; }
  void Int(const char* key, const int* v) { j_[key] = *v; }
  void U32(const char* key, const uint32_t* v) { j_[key] = *v; }
  void Double(const char* key, const double* v) { j_[key] = *v; }
  void Bool(const char* key, const bool* v) { j_[key] = *v; }
  void Str(const char* key, const std::string* v) { j_[key] = *v; }
  void Uuid(const char* key, const std::array<uint8_t, 16>* v) {
    j_[key] = FormatUuid(*v);
  }
  template <typename E>
  void Enum(const char* key, const JsonEnum<E>& e, const E* v) {
    j_[key] = e.name(*v);
  }
  void Stripes(const char* key, const std::vector<uint64_t>* v) {
    j_[key] = *v;
  }

 private:
  Json& j_;
};

// One field list per struct: `io` is a Writer (S const) or a Reader.
template <typename Io, typename S>
void SlotFields(Io& io, S& s) {
  io.Int("slot", &s.slot);
  io.Enum("state", kSlotStateJson, &s.state);
  io.U64("recovery_bytes", &s.recovery_bytes);
  io.Str("name", &s.name);
  io.U32("dev_number", &s.dev_number);
  io.Uuid("device_uuid", &s.device_uuid);
  io.U64("bad_blocks", &s.bad_blocks);
  io.U64("bad_sectors", &s.bad_sectors);
  io.Bool("want_replacement", &s.want_replacement);
  // Error counts and latency (absent from older servers: zero).
  io.U64("read_errors", &s.read_errors);
  io.U64("write_errors", &s.write_errors);
  io.U64("corrected_read_errors", &s.corrected_read_errors);
  io.U64("bad_block_records", &s.bad_block_records);
  io.U64("ios", &s.ios);
  io.U64("io_ns", &s.io_ns);
  io.U64("latency_ns", &s.latency_ns);
}

template <typename Io, typename J>
void JobFields(Io& io, J& job) {
  io.Enum("kind", kJobKindJson, &job.kind);
  io.U64("done_bytes", &job.done_bytes);
  io.U64("total_bytes", &job.total_bytes);
  io.Double("bytes_per_s", &job.bytes_per_s);
  io.Int("slot", &job.slot);
  io.Str("target", &job.target);
  io.Int("second_slot", &job.second_slot);
  io.Str("second_target", &job.second_target);
  io.U64("mismatches", &job.mismatches);
  io.Stripes("first_mismatches", &job.first_mismatches);
  io.U64("located_mismatches", &job.located_mismatches);
  io.Stripes("first_located", &job.first_located);
  io.Stripes("first_located_slots", &job.first_located_slots);
  io.U64("unrecovered_bytes", &job.unrecovered_bytes);
  io.Stripes("first_unrecovered", &job.first_unrecovered);
  io.U64("unchecked_bytes", &job.unchecked_bytes);
  io.Stripes("first_unchecked", &job.first_unchecked);
  io.Str("result", &job.result);
}

template <typename Io, typename B>
void BitmapFields(Io& io, B& b) {
  io.Bool("present", &b.present);
  io.U64("offset_bytes", &b.offset_bytes);
  io.U64("chunk_bytes", &b.chunk_bytes);
  io.U64("chunks", &b.chunks);
  io.U64("dirty_chunks", &b.dirty_chunks);
  io.U64("events", &b.events);
  io.U64("events_cleared", &b.events_cleared);
  io.U64("sync_size_bytes", &b.sync_size_bytes);
  io.U32("daemon_sleep_s", &b.daemon_sleep_s);
}

// The detail's top-level scalars, after the geometry.
template <typename Io, typename I>
void InfoFields(Io& io, I& info) {
  io.Uuid("uuid", &info.uuid);
  io.Str("name", &info.name);
  io.U64("data_offset_bytes", &info.data_offset_bytes);
  io.U64("events", &info.events);
  io.U64("ctime", &info.ctime);
  io.U64("utime", &info.utime);
  io.Bool("clean", &info.clean);
  io.Bool("ppl", &info.ppl);  // absent from older servers
  io.Bool("degraded", &info.degraded);
  io.Bool("failed", &info.failed);
  io.Bool("read_only", &info.read_only);
  io.Bool("switched_read_only", &info.switched_read_only);  // absent: false
  io.Bool("resyncing", &info.resyncing);
  io.U64("resync_bytes", &info.resync_bytes);
}

// `fields(writer, v)` as a JSON object.
template <typename T, typename Fields>
Json ToJson(const T& v, Fields fields) {
  Json j = Json::object();
  Writer w(&j);
  fields(w, v);
  return j;
}

Json SlotToJson(const SlotInfo& s) {
  return ToJson(s, [](Writer& w, const SlotInfo& v) { SlotFields(w, v); });
}

Json JobToJson(const JobInfo& job) {
  return ToJson(job, [](Writer& w, const JobInfo& v) { JobFields(w, v); });
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
  template <typename E>
  void Enum(const char* key, const JsonEnum<E>& e, E* out) {
    std::string name;
    Str(key, &name);
    if (name.empty()) return;
    if (std::optional<E> v = e.from_name(name)) {
      *out = *v;
    } else {
      Error(key, e.expected);
    }
  }
  // A job's first mismatched stripes: at most kMaxListedMismatches.
  void Stripes(const char* key, std::vector<uint64_t>* out) {
    const Json* list = Get(key);
    if (list == nullptr) return;
    if (!list->is_array() || list->size() > kMaxListedMismatches) {
      return Error(key, "an array of at most 16 stripe numbers");
    }
    for (const Json& v : *list) {
      if (!v.is_number_integer() ||
          (!v.is_number_unsigned() && v.get<int64_t>() < 0)) {
        return Error(key, "an array of stripe numbers");
      }
      out->push_back(v.get<uint64_t>());
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
  SlotFields(r, *s);
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
  JobFields(r, *job);
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
  // md's numbers: 0-5, and at level 6 also 8-10 and 16-20 (Make checks
  // the layout against the level).
  if (layout < 0 || layout > static_cast<int>(Layout::kParityFirst6)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "detail: %slayout %d is not one of md's (0-5, 8-10, 16-20)", where,
        layout));
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
#define URAID_COUNTER_ENTRY(name, help) {#name, &Counters::name},
      URAID_COUNTERS(URAID_COUNTER_ENTRY)
#undef URAID_COUNTER_ENTRY
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
  Writer w(&j);
  InfoFields(w, info);
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
  j["bitmap"] = ToJson(
      info.bitmap, [](Writer& w, const BitmapInfo& v) { BitmapFields(w, v); });
  j["reshape"] = ReshapeToJson(info.reshape);
  return j;
}

absl::StatusOr<ArrayInfo> InfoFromJson(const Json& j) {
  absl::StatusOr<Geometry> g = ReadGeometry(j, "");
  if (!g.ok()) return g.status();
  absl::Status status;
  Reader r(j, "", &status);
  ArrayInfo info{.geometry = *g};
  InfoFields(r, info);
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
    BitmapFields(br, info.bitmap);
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
