// SPDX-License-Identifier: MIT
#include "control/control_protocol.h"

#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "uraid/control.h"
#include "uraid/member.h"

namespace uraid::control {
namespace {

constexpr size_t kMaxQuoted = 64;  // bytes of user input quoted in errors

struct CmdSpec {
  Cmd cmd;
  const char* name;
  std::vector<const char*> fields;  // allowed besides "cmd"
};

const std::vector<CmdSpec>& Specs() {
  static const std::vector<CmdSpec>* specs = new std::vector<CmdSpec>{
      {Cmd::kDetail, "detail", {}},
      {Cmd::kFail, "fail", {"member"}},
      {Cmd::kRemove, "remove", {"member"}},
      {Cmd::kAdd, "add", {"member"}},
      {Cmd::kReplace, "replace", {"old", "new"}},
      {Cmd::kCheck, "check", {}},
      {Cmd::kRepair, "repair", {}},
      {Cmd::kStop, "stop", {}},
      {Cmd::kSet, "set", {"speed_min", "speed_max", "busy_share", "cache"}},
      {Cmd::kGrow,
       "grow",
       {"raid_devices", "add", "layout", "chunk", "level",
        "consistency_policy"}},
      {Cmd::kEvents, "events", {}},
      {Cmd::kReadOnly, "readonly", {}},
      {Cmd::kReadWrite, "readwrite", {}},
  };
  return *specs;
}

std::string CmdList() {
  std::vector<std::string> names;
  for (const CmdSpec& s : Specs()) names.push_back(s.name);
  return absl::StrJoin(names, ", ");
}

// User input for an error message: quoted, cut short, NULs made visible.
std::string Quote(std::string_view text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size() && i < kMaxQuoted; ++i) {
    out += text[i] == '\0' ? std::string("\\0") : std::string(1, text[i]);
  }
  out += text.size() > kMaxQuoted ? "...\"" : "\"";
  return out;
}

const char* TypeName(const Json& j) {
  return j.is_number()    ? "a number"
         : j.is_string()  ? "a string"
         : j.is_boolean() ? "a boolean"
         : j.is_null()    ? "null"
         : j.is_array()   ? "an array"
         : j.is_object()  ? "an object"
                          : "?";
}

// Cheap checks before the JSON parser sees the line: size, NUL bytes and
// nesting (counted outside strings), so hostile input costs nothing.
absl::Status PreScan(std::string_view line) {
  if (line.size() > kControlMaxLineBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("request line is %d bytes; the limit is %d",
                        line.size(), kControlMaxLineBytes));
  }
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  bool blank = true;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\0') {
      return absl::InvalidArgumentError(
          absl::StrFormat("request contains a NUL byte at offset %d", i));
    }
    if (c != ' ' && c != '\t' && c != '\r') blank = false;
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxDepth) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "request nests deeper than %d levels (a request is one flat "
            "JSON object)",
            kMaxDepth));
      }
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  if (blank) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty request line (expected a JSON object such as "
                     "{\"cmd\":\"detail\"})"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> GetName(const Json& j, const std::string& field,
                                    bool server_opens) {
  if (!j.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("\"%s\" must be a string, not %s", field, TypeName(j)));
  }
  const std::string& s = j.get_ref<const std::string&>();
  if (s.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("\"%s\" is empty: give a member name", field));
  }
  if (s.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("\"%s\" is %d bytes long; the limit is %d", field,
                        s.size(), kMaxNameBytes));
  }
  if (s.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrFormat("\"%s\" contains a NUL byte", field));
  }
  if (server_opens && !IsMemberUri(s) && s[0] != '/') {
    return absl::InvalidArgumentError(absl::StrFormat(
        "\"%s\" %s must be an absolute path or an NBD URI (the server "
        "opens it, from its own working directory)",
        field, Quote(s)));
  }
  return s;
}

absl::StatusOr<uint64_t> GetNumber(const Json& j, const char* field,
                                   uint64_t min, uint64_t max,
                                   const char* unit) {
  const auto range = [&] {
    return absl::InvalidArgumentError(absl::StrFormat(
        "\"%s\" must be between %d and %d (%s)", field, min, max, unit));
  };
  if (j.is_number_integer()) {  // signed or unsigned
    if (!j.is_number_unsigned() && j.get<int64_t>() < 0) return range();
    const uint64_t v = j.get<uint64_t>();
    if (v < min || v > max) return range();
    return v;
  }
  if (j.is_number_float()) {
    const double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) &&
        (d < 0 || d > static_cast<double>(max))) {
      return range();  // e.g. too large for 64 bits
    }
    return absl::InvalidArgumentError(absl::StrFormat(
        "\"%s\" must be a whole number of %s written without a fraction or "
        "exponent",
        field, unit));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "\"%s\" must be a number (%s), not %s", field, unit, TypeName(j)));
}

// The fields of a grow request (each optional, at least one). "add" is the
// one array a request may carry: of member paths or URIs, which the server
// opens, so each is checked like add's "member".
absl::Status ParseGrow(const Json& j, Request* r) {
  if (auto it = j.find("raid_devices"); it != j.end()) {
    absl::StatusOr<uint64_t> v =
        GetNumber(*it, "raid_devices", kMinDisks, kMaxDisks, "devices");
    if (!v.ok()) return v.status();
    r->raid_devices = static_cast<int>(*v);
  }
  if (auto it = j.find("add"); it != j.end()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "\"add\" must be an array of member paths or NBD URIs, not %s",
          TypeName(*it)));
    }
    if (it->size() > kMaxGrowAdd) {
      return absl::InvalidArgumentError(
          absl::StrFormat("\"add\" lists %d members; the limit is %d",
                          it->size(), kMaxGrowAdd));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      absl::StatusOr<std::string> name =
          GetName((*it)[i], absl::StrFormat("add[%d]", i), true);
      if (!name.ok()) return name.status();
      r->add.push_back(*std::move(name));
    }
    if (!r->add.empty() && !r->raid_devices) {
      return absl::InvalidArgumentError(
          "\"add\" needs \"raid_devices\" (the new member count, the added "
          "members included)");
    }
  }
  if (auto it = j.find("layout"); it != j.end()) {
    if (!it->is_string()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "\"layout\" must be a string such as \"left-symmetric\", not %s",
          TypeName(*it)));
    }
    // Level 6's parser: it takes every RAID5 name too, and the canonical
    // names clients send (LayoutName) include RAID6's.
    absl::StatusOr<Layout> layout =
        ParseLayout(it->get_ref<const std::string&>(), 6);
    if (!layout.ok()) {
      // Not ParseLayout's message: that quotes the input uncut.
      return absl::InvalidArgumentError(absl::StrCat(
          "\"layout\": unknown layout ",
          Quote(it->get_ref<const std::string&>()),
          " (expected left-asymmetric, right-asymmetric, left-symmetric, "
          "right-symmetric, parity-first, parity-last, ddf-zero-restart, "
          "ddf-N-restart, ddf-N-continue, "
          "left-asymmetric-6, right-asymmetric-6, left-symmetric-6, "
          "right-symmetric-6, parity-first-6)"));
    }
    r->layout = *layout;
  }
  if (auto it = j.find("chunk"); it != j.end()) {
    absl::StatusOr<uint64_t> v =
        GetNumber(*it, "chunk", kMinChunkBytes, kMaxChunkBytes, "bytes");
    if (!v.ok()) return v.status();
    if ((*v & (*v - 1)) != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "\"chunk\" %d is not a power of two (md's chunk sizes are)", *v));
    }
    r->chunk_bytes = *v;
  }
  if (auto it = j.find("level"); it != j.end()) {
    absl::StatusOr<uint64_t> v = GetNumber(*it, "level", 4, 6, "RAID level");
    if (!v.ok()) return v.status();
    r->level = static_cast<int>(*v);
  }
  const bool reshape = r->raid_devices || !r->add.empty() || r->layout ||
                       r->chunk_bytes || r->level;
  if (auto it = j.find("consistency_policy"); it != j.end()) {
    if (!it->is_string()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "\"consistency_policy\" must be a string (resync, bitmap or ppl), "
          "not %s",
          TypeName(*it)));
    }
    absl::StatusOr<ConsistencyPolicy> p =
        ParseConsistencyPolicy(it->get_ref<const std::string&>());
    if (!p.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"consistency_policy\": unknown policy ",
                       Quote(it->get_ref<const std::string&>()),
                       " (expected resync, bitmap or ppl)"));
    }
    if (reshape) {
      // md's --grow does one thing at a time; a policy switch is no
      // reshape.
      return absl::InvalidArgumentError(
          "\"consistency_policy\" cannot be combined with a reshape "
          "(raid_devices, add, layout, chunk, level)");
    }
    r->consistency_policy = *p;
  }
  if (!reshape && !r->consistency_policy) {
    return absl::InvalidArgumentError(
        "a grow request needs at least one of raid_devices, add, layout, "
        "chunk, level, or consistency_policy alone");
  }
  return absl::OkStatus();
}

}  // namespace

const char* CmdName(Cmd cmd) {
  for (const CmdSpec& s : Specs()) {
    if (s.cmd == cmd) return s.name;
  }
  return "?";
}

absl::StatusOr<Request> ParseRequest(std::string_view line) {
  if (absl::Status s = PreScan(line); !s.ok()) return s;

  // Duplicate keys are refused: the parser would silently keep the last.
  std::string duplicate;
  std::vector<std::string> seen;
  Json::parser_callback_t callback = [&](int depth, Json::parse_event_t event,
                                         Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && parsed.is_string()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      for (const std::string& k : seen) {
        if (k == key && duplicate.empty()) duplicate = key;
      }
      if (seen.size() < 64) seen.push_back(key);
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(line.begin(), line.end(), callback);
  } catch (const std::exception& e) {
    std::string why = e.what();
    // "[json.exception.parse_error.101] parse error at ..." -> "parse
    // error at ..."
    if (size_t p = why.find("] "); p != std::string::npos) {
      why = why.substr(p + 2);
    }
    if (why.size() > 200) why = why.substr(0, 200) + "...";
    return absl::InvalidArgumentError(
        absl::StrCat("request is not valid JSON: ", why));
  }
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "request must be a JSON object such as {\"cmd\":\"detail\"}, not %s",
        TypeName(j)));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("field %s is given twice", Quote(duplicate)));
  }
  auto cmd_it = j.find("cmd");
  if (cmd_it == j.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request has no \"cmd\" (expected one of ", CmdList(), ")"));
  }
  if (!cmd_it->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("\"cmd\" must be a string, not %s", TypeName(*cmd_it)));
  }
  const std::string& name = cmd_it->get_ref<const std::string&>();
  const CmdSpec* spec = nullptr;
  for (const CmdSpec& s : Specs()) {
    if (name == s.name) spec = &s;
  }
  if (spec == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown cmd ", Quote(name), " (expected one of ", CmdList(), ")"));
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == "cmd") continue;
    bool known = false;
    for (const char* f : spec->fields) known = known || it.key() == f;
    if (!known) {
      std::vector<std::string> fields;
      for (const char* f : spec->fields) fields.push_back(f);
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown field ", Quote(it.key()), " in a ", spec->name, " request (",
          fields.empty() ? "it takes no fields"
                         : "expected " + absl::StrJoin(fields, ", "),
          ")"));
    }
  }
  const auto need = [&](const char* field) -> absl::StatusOr<const Json*> {
    auto it = j.find(field);
    if (it == j.end()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("a %s request needs \"%s\"", spec->name, field));
    }
    return &*it;
  };

  Request r;
  r.cmd = spec->cmd;
  switch (spec->cmd) {
    case Cmd::kFail:
    case Cmd::kRemove:
    case Cmd::kAdd: {
      absl::StatusOr<const Json*> m = need("member");
      if (!m.ok()) return m.status();
      absl::StatusOr<std::string> s =
          GetName(**m, "member", spec->cmd == Cmd::kAdd);
      if (!s.ok()) return s.status();
      r.member = *std::move(s);
      break;
    }
    case Cmd::kReplace: {
      absl::StatusOr<const Json*> o = need("old");
      if (!o.ok()) return o.status();
      absl::StatusOr<const Json*> n = need("new");
      if (!n.ok()) return n.status();
      absl::StatusOr<std::string> old_name = GetName(**o, "old", false);
      if (!old_name.ok()) return old_name.status();
      absl::StatusOr<std::string> new_name = GetName(**n, "new", true);
      if (!new_name.ok()) return new_name.status();
      r.member = *std::move(old_name);
      r.replacement = *std::move(new_name);
      break;
    }
    case Cmd::kSet: {
      if (auto it = j.find("speed_min"); it != j.end()) {
        absl::StatusOr<uint64_t> v =
            GetNumber(*it, "speed_min", 0, kControlMaxSpeedKiBs, "KiB/s");
        if (!v.ok()) return v.status();
        r.speed_min_kib_s = *v;
      }
      if (auto it = j.find("speed_max"); it != j.end()) {
        absl::StatusOr<uint64_t> v =
            GetNumber(*it, "speed_max", 1, kControlMaxSpeedKiBs, "KiB/s");
        if (!v.ok()) return v.status();
        r.speed_max_kib_s = *v;
      }
      if (auto it = j.find("busy_share"); it != j.end()) {
        absl::StatusOr<uint64_t> v = GetNumber(*it, "busy_share", 0, 90, "%");
        if (!v.ok()) return v.status();
        r.busy_share_pct = static_cast<uint32_t>(*v);
      }
      if (auto it = j.find("cache"); it != j.end()) {
        absl::StatusOr<uint64_t> v =
            GetNumber(*it, "cache", 0, kControlMaxCacheBytes, "bytes");
        if (!v.ok()) return v.status();
        r.cache_bytes = *v;
      }
      if (!r.speed_min_kib_s && !r.speed_max_kib_s && !r.busy_share_pct &&
          !r.cache_bytes) {
        return absl::InvalidArgumentError(
            "a set request needs at least one of speed_min, speed_max, "
            "cache or busy_share");
      }
      if (r.speed_min_kib_s && r.speed_max_kib_s &&
          *r.speed_min_kib_s > *r.speed_max_kib_s) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "speed_min (%d KiB/s) is above speed_max (%d KiB/s)",
            *r.speed_min_kib_s, *r.speed_max_kib_s));
      }
      break;
    }
    case Cmd::kGrow: {
      absl::Status s = ParseGrow(j, &r);
      if (!s.ok()) return s;
      break;
    }
    case Cmd::kDetail:
    case Cmd::kCheck:
    case Cmd::kRepair:
    case Cmd::kStop:
    case Cmd::kEvents:
    case Cmd::kReadOnly:
    case Cmd::kReadWrite:
      break;
  }
  return r;
}

std::string RequestLine(const Request& request) {
  Json j;
  j["cmd"] = CmdName(request.cmd);
  switch (request.cmd) {
    case Cmd::kFail:
    case Cmd::kRemove:
    case Cmd::kAdd:
      j["member"] = request.member;
      break;
    case Cmd::kReplace:
      j["old"] = request.member;
      j["new"] = request.replacement;
      break;
    case Cmd::kSet:
      if (request.speed_min_kib_s) j["speed_min"] = *request.speed_min_kib_s;
      if (request.busy_share_pct) j["busy_share"] = *request.busy_share_pct;
      if (request.speed_max_kib_s) j["speed_max"] = *request.speed_max_kib_s;
      if (request.cache_bytes) j["cache"] = *request.cache_bytes;
      break;
    case Cmd::kGrow:
      if (request.raid_devices) j["raid_devices"] = *request.raid_devices;
      if (!request.add.empty()) j["add"] = request.add;
      if (request.layout) {
        j["layout"] = std::string(LayoutName(*request.layout));
      }
      if (request.chunk_bytes) j["chunk"] = *request.chunk_bytes;
      if (request.level) j["level"] = *request.level;
      if (request.consistency_policy) {
        j["consistency_policy"] =
            ConsistencyPolicyName(*request.consistency_policy);
      }
      break;
    default:
      break;
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

std::string OkReply(const Json& fields) {
  Json j;
  j["ok"] = true;
  if (fields.is_object()) {
    for (auto it = fields.begin(); it != fields.end(); ++it) {
      if (it.key() != "ok") j[it.key()] = it.value();
    }
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

std::string ErrorReply(const absl::Status& status) {
  Json j;
  j["ok"] = false;
  if (status.ok()) {
    j["error"] = "internal error: an error reply without an error";
    j["code"] = CodeName(absl::StatusCode::kInternal);
  } else {
    j["error"] = std::string(status.message());
    j["code"] = CodeName(status.code());
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         "\n";
}

absl::StatusOr<Json> ParseReply(std::string_view line) {
  Json j = Json::parse(line.begin(), line.end(), nullptr,
                       /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InternalError(
        "malformed reply from the control server (not JSON)");
  }
  if (!j.is_object()) {
    return absl::InternalError(
        "malformed reply from the control server (not a JSON object)");
  }
  auto ok = j.find("ok");
  if (ok == j.end() || !ok->is_boolean()) {
    return absl::InternalError(
        "malformed reply from the control server (no boolean \"ok\")");
  }
  if (ok->get<bool>()) return j;
  auto error = j.find("error");
  if (error == j.end() || !error->is_string() ||
      error->get_ref<const std::string&>().empty()) {
    return absl::InternalError(
        "malformed reply from the control server (an error without a "
        "message)");
  }
  absl::StatusCode code = absl::StatusCode::kUnknown;
  if (auto c = j.find("code"); c != j.end() && c->is_string()) {
    code = CodeFromName(c->get_ref<const std::string&>());
  }
  if (code == absl::StatusCode::kOk) code = absl::StatusCode::kUnknown;
  return absl::Status(code, error->get_ref<const std::string&>());
}

absl::Status ReplyStatus(std::string_view line) {
  return ParseReply(line).status();
}

std::string CodeName(absl::StatusCode code) {
  return absl::StatusCodeToString(code);
}

absl::StatusCode CodeFromName(std::string_view name) {
  for (int c = 0; c <= 16; ++c) {
    const auto code = static_cast<absl::StatusCode>(c);
    if (absl::StatusCodeToString(code) == name) return code;
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace uraid::control
