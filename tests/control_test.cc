// SPDX-License-Identifier: MIT
// Unit tests of the control channel: the pure request parser (a table of
// valid and hostile lines), reply lines, ArrayInfo <-> JSON, and the server
// end to end over a real unix socket in front of an in-memory array.
//
// Requests that reach Array methods still being written (fail, remove, add,
// replace, scrub) are skipped while those return Unimplemented.

#include "uraid/control.h"

#include <grp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/sync.h"
#include "control/control_protocol.h"
#include "control/info_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/status_errno.h"

namespace uraid {
namespace {

using control::Cmd;
using control::Json;
using control::ParseRequest;
using control::Request;
using ::testing::HasSubstr;

// ------------------------------------------------------------- the parser

TEST(ControlProtocol, ParsesEveryCommand) {
  struct Case {
    const char* line;
    Request want;
  };
  const Case cases[] = {
      {R"({"cmd":"detail"})", {.cmd = Cmd::kDetail}},
      {" {\"cmd\" : \"detail\"} \r", {.cmd = Cmd::kDetail}},
      {R"({"cmd":"fail","member":"/srv/m1.img"})",
       {.cmd = Cmd::kFail, .member = "/srv/m1.img"}},
      {R"({"member":"m1","cmd":"remove"})",
       {.cmd = Cmd::kRemove, .member = "m1"}},
      {R"({"cmd":"add","member":"/srv/m4.img"})",
       {.cmd = Cmd::kAdd, .member = "/srv/m4.img"}},
      {R"({"cmd":"add","member":"nbd+unix:///?socket=/run/m.sock"})",
       {.cmd = Cmd::kAdd, .member = "nbd+unix:///?socket=/run/m.sock"}},
      {R"({"cmd":"replace","old":"m1","new":"/srv/n.img"})",
       {.cmd = Cmd::kReplace, .member = "m1", .replacement = "/srv/n.img"}},
      {R"({"cmd":"check"})", {.cmd = Cmd::kCheck}},
      {R"({"cmd":"repair"})", {.cmd = Cmd::kRepair}},
      {R"({"cmd":"stop"})", {.cmd = Cmd::kStop}},
      {R"({"cmd":"readonly"})", {.cmd = Cmd::kReadOnly}},
      {R"({"cmd":"readwrite"})", {.cmd = Cmd::kReadWrite}},
      {R"({"cmd":"set","cache":0})", {.cmd = Cmd::kSet, .cache_bytes = 0}},
      {R"({"cmd":"set","speed_min":10,"speed_max":20,"cache":1048576})",
       {.cmd = Cmd::kSet,
        .speed_min_kib_s = 10,
        .speed_max_kib_s = 20,
        .cache_bytes = 1048576}},
      {R"({"cmd":"set","speed_max":1073741824})",
       {.cmd = Cmd::kSet, .speed_max_kib_s = 1073741824}},
      {R"({"cmd":"fail","member":"caf\u00e9"})",
       {.cmd = Cmd::kFail, .member = "caf\xc3\xa9"}},
      {R"({"cmd":"grow","raid_devices":5,"add":["/srv/m4.img"]})",
       {.cmd = Cmd::kGrow, .raid_devices = 5, .add = {"/srv/m4.img"}}},
      {R"({"cmd":"grow","add":["/a","nbd://h/x"],"raid_devices":6,)"
       R"("layout":"ra","chunk":131072})",
       {.cmd = Cmd::kGrow,
        .raid_devices = 6,
        .add = {"/a", "nbd://h/x"},
        .layout = Layout::kRightAsymmetric,
        .chunk_bytes = 131072}},
      {R"({"cmd":"grow","level":4,"layout":"5"})",
       {.cmd = Cmd::kGrow, .layout = Layout::kParityLast, .level = 4}},
      {R"({"cmd":"grow","chunk":4096})",
       {.cmd = Cmd::kGrow, .chunk_bytes = 4096}},
      {R"({"cmd":"grow","raid_devices":64,"add":[]})",
       {.cmd = Cmd::kGrow, .raid_devices = 64}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    absl::StatusOr<Request> r = ParseRequest(c.line);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, c.want);
    // The line builder gives back the same request.
    const std::string line = control::RequestLine(*r);
    ASSERT_EQ(line.back(), '\n');
    absl::StatusOr<Request> again =
        ParseRequest(std::string_view(line).substr(0, line.size() - 1));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(*again, c.want);
  }
}

TEST(ControlProtocol, RefusesHostileInput) {
  struct Case {
    std::string line;
    absl::StatusCode code;
    const char* message;  // a substring of the error
  };
  const auto k = absl::StatusCode::kInvalidArgument;
  std::string deep(1000, '[');
  std::string deep_object = R"({"cmd":"detail","x":)" + std::string(5, '[');
  std::string huge_member =
      R"({"cmd":"fail","member":")" + std::string(5000, 'a') + R"("})";
  std::string overlong =
      R"({"cmd":"fail","member":")" + std::string(70000, 'a') + R"("})";
  std::string too_many_adds = R"({"cmd":"grow","raid_devices":64,"add":[)";
  for (int i = 0; i < 65; ++i) {
    too_many_adds += absl::StrFormat("%s\"/m%d\"", i ? "," : "", i);
  }
  too_many_adds += "]}";
  const std::vector<Case> cases = {
      {"", k, "empty request"},
      {"   \r", k, "empty request"},
      {"detail", k, "not valid JSON"},
      {"{", k, "not valid JSON"},
      {R"({"cmd":"detail"} {"cmd":"detail"})", k, "not valid JSON"},
      {R"({"cmd":"detail",})", k, "not valid JSON"},
      {"\xff\xfe{}", k, "not valid JSON"},
      {"{\"cmd\":\"fa\xc0il\"}", k, "not valid JSON"},  // bad UTF-8
      {"null", k, "must be a JSON object"},
      {"42", k, "must be a JSON object"},
      {R"("detail")", k, "must be a JSON object"},
      {R"([{"cmd":"detail"}])", k, "must be a JSON object"},
      {"{}", k, "no \"cmd\""},
      {R"({"command":"detail"})", k, "no \"cmd\""},
      {R"({"cmd":7})", k, "\"cmd\" must be a string, not a number"},
      {R"({"cmd":null})", k, "\"cmd\" must be a string"},
      {R"({"cmd":["detail"]})", k, "\"cmd\" must be a string, not an array"},
      {R"({"cmd":"DETAIL"})", k, "unknown cmd \"DETAIL\""},
      {R"({"cmd":"format-all-disks"})", k, "expected one of detail, fail"},
      {R"({"cmd":"grow"})", k,
       "a grow request needs at least one of raid_devices, add, layout"},
      {R"({"cmd":"grow","add":[]})", k, "needs at least one of"},
      {R"({"cmd":"grow","raid_devices":5,"add":"/srv/m4.img"})", k,
       "\"add\" must be an array of member paths or NBD URIs, not a string"},
      {R"({"cmd":"grow","raid_devices":5,"add":{"m":"/x"}})", k,
       "\"add\" must be an array of member paths or NBD URIs, not an object"},
      {R"({"cmd":"grow","raid_devices":5,"add":[5]})", k,
       "\"add[0]\" must be a string, not a number"},
      {R"({"cmd":"grow","raid_devices":6,"add":["/a",["/b"]]})", k,
       "\"add[1]\" must be a string, not an array"},
      {R"({"cmd":"grow","raid_devices":5,"add":[{"p":"/b"}]})", k,
       "\"add[0]\" must be a string, not an object"},
      {R"({"cmd":"grow","raid_devices":5,"add":[null]})", k,
       "\"add[0]\" must be a string, not null"},
      {R"({"cmd":"grow","raid_devices":5,"add":[""]})", k,
       "\"add[0]\" is empty"},
      {R"({"cmd":"grow","raid_devices":5,"add":["m4.img"]})", k,
       "\"add[0]\" \"m4.img\" must be an absolute path or an NBD URI"},
      {R"({"cmd":"grow","raid_devices":5,"add":[[[[["/x"]]]]]})", k,
       "nests deeper than 4 levels"},
      {too_many_adds, k, "\"add\" lists 65 members; the limit is 64"},
      {R"({"cmd":"grow","add":["/srv/m4.img"]})", k,
       "\"add\" needs \"raid_devices\""},
      {R"({"cmd":"grow","raid_devices":5,"add":["/a"],"add":["/b"]})", k,
       "field \"add\" is given twice"},
      {R"({"cmd":"grow","layout":"diagonal"})", k,
       "\"layout\": unknown layout \"diagonal\" (expected left-asymmetric"},
      {R"({"cmd":"grow","layout":"6"})", k, "unknown layout \"6\""},
      {R"({"cmd":"grow","layout":2})", k,
       "\"layout\" must be a string such as \"left-symmetric\", not a number"},
      {R"({"cmd":"grow","chunk":-65536})", k,
       "\"chunk\" must be between 4096 and 16777216 (bytes)"},
      {R"({"cmd":"grow","chunk":1099511627776})", k,
       "\"chunk\" must be between"},
      {R"({"cmd":"grow","chunk":18446744073709551616})", k, "must be between"},
      {R"({"cmd":"grow","chunk":2048})", k, "must be between"},
      {R"({"cmd":"grow","chunk":100000})", k,
       "\"chunk\" 100000 is not a power of two"},
      {R"({"cmd":"grow","chunk":"64K"})", k,
       "\"chunk\" must be a number (bytes), not a string"},
      {R"({"cmd":"grow","chunk":65536.5})", k, "without a fraction"},
      {R"({"cmd":"grow","level":7})", k, "\"level\" must be between 4 and 6"},
      {R"({"cmd":"grow","level":"5"})", k, "\"level\" must be a number"},
      {R"({"cmd":"grow","raid_devices":2})", k,
       "\"raid_devices\" must be between 3 and 64"},
      {R"({"cmd":"grow","raid_devices":65})", k, "must be between 3 and 64"},
      {R"({"cmd":"grow","raid_devices":5,"force":true})", k,
       "unknown field \"force\" in a grow request (expected raid_devices, "
       "add, layout, chunk, level, consistency_policy)"},
      {R"({"cmd":"detail","verbose":true})", k,
       "unknown field \"verbose\" in a detail request (it takes no fields)"},
      {R"({"cmd":"fail","member":"m1","force":true})", k,
       "unknown field \"force\" in a fail request (expected member)"},
      {R"({"cmd":"detail","cmd":"fail"})", k, "field \"cmd\" is given twice"},
      {R"({"cmd":"fail","member":"a","member":"b"})", k, "given twice"},
      {R"({"cmd":"fail"})", k, "a fail request needs \"member\""},
      {R"({"cmd":"replace","old":"m1"})", k, "needs \"new\""},
      {R"({"cmd":"replace","new":"/x"})", k, "needs \"old\""},
      {R"({"cmd":"fail","member":1})", k, "\"member\" must be a string"},
      {R"({"cmd":"fail","member":{"name":"m1"}})", k,
       "\"member\" must be a string, not an object"},
      {R"({"cmd":"fail","member":""})", k, "\"member\" is empty"},
      {R"({"cmd":"fail","member":"m\u0000x"})", k, "contains a NUL byte"},
      {huge_member, k, "5000 bytes long; the limit is 4096"},
      {R"({"cmd":"add","member":"m4.img"})", k,
       "must be an absolute path or an NBD URI"},
      {R"({"cmd":"replace","old":"m1","new":"new.img"})", k,
       "\"new\" \"new.img\" must be an absolute path"},
      {R"({"cmd":"set"})", k, "at least one of speed_min, speed_max, cache"},
      {R"({"cmd":"set","speed_min":"1000"})", k,
       "\"speed_min\" must be a number (KiB/s), not a string"},
      {R"({"cmd":"set","speed_min":true})", k, "not a boolean"},
      {R"({"cmd":"set","speed_min":-1})", k,
       "\"speed_min\" must be between 0 and 1073741824"},
      {R"({"cmd":"set","speed_max":0})", k,
       "\"speed_max\" must be between 1 and"},
      {R"({"cmd":"set","speed_max":1073741825})", k, "must be between"},
      {R"({"cmd":"set","cache":18446744073709551615})", k,
       "\"cache\" must be between 0 and 1099511627776 (bytes)"},
      {R"({"cmd":"set","cache":18446744073709551616})", k, "must be between"},
      {R"({"cmd":"set","cache":1e400})", k, "not valid JSON"},
      {R"({"cmd":"set","cache":1e300})", k, "must be between"},
      {R"({"cmd":"set","cache":1.5})", k, "without a fraction or exponent"},
      {R"({"cmd":"set","cache":1e3})", k, "without a fraction or exponent"},
      {R"({"cmd":"set","cache":-0.0})", k, "without a fraction"},
      {R"({"cmd":"set","speed_min":-1.0})", k, "must be between"},
      {R"({"cmd":"set","speed_min":20,"speed_max":10})", k,
       "speed_min (20 KiB/s) is above speed_max (10 KiB/s)"},
      {deep, k, "nests deeper than 4 levels"},
      {deep_object, k, "nests deeper than"},
      {std::string("{\"cmd\":\"detail\"}\0", 17), k, "NUL byte at offset 16"},
      {std::string("{\"cmd\":\"de\0tail\"}", 17), k, "NUL byte at offset 10"},
      {overlong, k, "the limit is 65536"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line.substr(0, 100));
    absl::StatusOr<Request> r = ParseRequest(c.line);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.message));
    // Every refusal makes a valid reply line, whatever bytes it quotes.
    const std::string reply = control::ErrorReply(r.status());
    absl::StatusOr<Json> back = control::ParseReply(reply);
    ASSERT_FALSE(back.ok());
    EXPECT_EQ(back.status().code(), c.code);
  }
}

TEST(ControlProtocol, BracketsInsideStringsDoNotCountAsNesting) {
  absl::StatusOr<Request> r =
      ParseRequest(R"({"cmd":"fail","member":"[[[[[[[[{{{{{{\"]]"})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->member, "[[[[[[[[{{{{{{\"]]");
}

TEST(ControlProtocol, Replies) {
  Json fields;
  fields["speed_min"] = 5;
  fields["ok"] = false;  // cannot override "ok"
  const std::string ok = control::OkReply(fields);
  EXPECT_EQ(ok, "{\"ok\":true,\"speed_min\":5}\n");
  absl::StatusOr<Json> j = control::ParseReply(ok);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["speed_min"], 5);

  const std::string err = control::ErrorReply(
      absl::FailedPreconditionError("m1: would fail the array \xff"));
  EXPECT_EQ(err.find('\n'), err.size() - 1);
  absl::StatusOr<Json> e = control::ParseReply(err);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(e.status().message()),
              HasSubstr("m1: would fail the array"));

  for (const char* bad :
       {"", "nope", "[]", "{}", R"({"ok":1})", R"({"ok":false})",
        R"({"ok":false,"error":""})", R"({"ok":false,"error":5})"}) {
    SCOPED_TRACE(bad);
    absl::StatusOr<Json> r = control::ParseReply(bad);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(std::string(r.status().message()), HasSubstr("malformed"));
  }
  absl::StatusOr<Json> unknown =
      control::ParseReply(R"({"ok":false,"error":"x","code":"BOGUS"})");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(control::CodeFromName("NOT_FOUND"), absl::StatusCode::kNotFound);
}

// ------------------------------------------------------ ArrayInfo <-> JSON

ArrayInfo SampleInfo() {
  ArrayInfo info{.geometry = *Geometry::Make(5, Layout::kRightAsymmetric, 65536,
                                             4, 65536 * 100)};
  for (int i = 0; i < 16; ++i) info.uuid[i] = static_cast<uint8_t>(i * 17);
  info.name = "tank";
  info.data_offset_bytes = 1 << 20;
  info.events = 42;
  info.ctime = 1700000000;
  info.utime = (7ull << 40) | 1700000100;
  info.clean = false;
  info.degraded = true;
  info.read_only = true;
  info.switched_read_only = true;
  info.resyncing = true;
  info.resync_bytes = 65536 * 3;
  for (int i = 0; i < 4; ++i) {
    SlotInfo s;
    s.slot = i;
    s.name = absl::StrFormat("/srv/m%d.img", i);
    s.dev_number = i;
    s.device_uuid[15] = static_cast<uint8_t>(i);
    info.slots.push_back(s);
  }
  info.slots[1].state = SlotState::kFaulty;
  info.slots[2].state = SlotState::kRebuilding;
  info.slots[2].recovery_bytes = 65536 * 7;
  info.slots[3].state = SlotState::kMissing;
  info.slots[3].name = "";
  SlotInfo spare;
  spare.slot = -1;
  spare.state = SlotState::kSpare;
  spare.name = "nbd://host/spare";
  spare.dev_number = 9;
  info.spares.push_back(spare);
  info.job.kind = JobKind::kRecover;
  info.job.done_bytes = 65536 * 7;
  info.job.total_bytes = 65536 * 100;
  info.job.bytes_per_s = 12345678.5;
  info.job.slot = 2;
  info.job.target = "/srv/m2.img";
  info.last_job.kind = JobKind::kCheck;
  info.last_job.mismatches = 3;
  info.last_job.first_mismatches = {1, 5, 99};
  info.last_job.located_mismatches = 2;
  info.last_job.first_located = {5, 99};
  info.last_job.first_located_slots = {3, 0};
  info.last_job.result = "completed";
  info.speed = {.min_kib_s = 5, .max_kib_s = 6};
  info.counters.member_reads = 1;
  info.counters.cache_evictions = 15;
  info.reshape.active = true;
  info.reshape.from = info.geometry;
  info.reshape.to =
      *Geometry::Make(4, Layout::kParityLast, 131072, 5, 65536 * 100);
  info.reshape.position_bytes = 131072 * 4 * 7;
  info.reshape.to_data_offset_bytes = (1 << 20) - 393216;
  return info;
}

void ExpectSameReshape(const ReshapeInfo& a, const ReshapeInfo& b) {
  EXPECT_EQ(a.active, b.active);
  EXPECT_EQ(a.from, b.from);
  EXPECT_EQ(a.to, b.to);
  EXPECT_EQ(a.position_bytes, b.position_bytes);
  EXPECT_EQ(a.to_data_offset_bytes, b.to_data_offset_bytes);
}

void ExpectSameSlot(const SlotInfo& a, const SlotInfo& b) {
  EXPECT_EQ(a.slot, b.slot);
  EXPECT_EQ(a.state, b.state);
  EXPECT_EQ(a.recovery_bytes, b.recovery_bytes);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.dev_number, b.dev_number);
  EXPECT_EQ(a.device_uuid, b.device_uuid);
}

void ExpectSameJob(const JobInfo& a, const JobInfo& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.done_bytes, b.done_bytes);
  EXPECT_EQ(a.total_bytes, b.total_bytes);
  EXPECT_EQ(a.bytes_per_s, b.bytes_per_s);
  EXPECT_EQ(a.slot, b.slot);
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.mismatches, b.mismatches);
  EXPECT_EQ(a.first_mismatches, b.first_mismatches);
  EXPECT_EQ(a.located_mismatches, b.located_mismatches);
  EXPECT_EQ(a.first_located, b.first_located);
  EXPECT_EQ(a.first_located_slots, b.first_located_slots);
  EXPECT_EQ(a.result, b.result);
}

TEST(InfoJson, RoundTripsEveryField) {
  const ArrayInfo a = SampleInfo();
  // Through text, as on the wire.
  const std::string text = InfoToJson(a).dump();
  absl::StatusOr<ArrayInfo> b = InfoFromJson(Json::parse(text));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->geometry, a.geometry);
  EXPECT_EQ(b->uuid, a.uuid);
  EXPECT_EQ(b->name, a.name);
  EXPECT_EQ(b->data_offset_bytes, a.data_offset_bytes);
  EXPECT_EQ(b->events, a.events);
  EXPECT_EQ(b->ctime, a.ctime);
  EXPECT_EQ(b->utime, a.utime);
  EXPECT_EQ(b->clean, a.clean);
  EXPECT_EQ(b->degraded, a.degraded);
  EXPECT_EQ(b->failed, a.failed);
  EXPECT_EQ(b->read_only, a.read_only);
  EXPECT_EQ(b->switched_read_only, a.switched_read_only);
  EXPECT_EQ(b->resyncing, a.resyncing);
  EXPECT_EQ(b->resync_bytes, a.resync_bytes);
  ASSERT_EQ(b->slots.size(), a.slots.size());
  for (size_t i = 0; i < a.slots.size(); ++i) {
    ExpectSameSlot(b->slots[i], a.slots[i]);
  }
  ASSERT_EQ(b->spares.size(), 1u);
  ExpectSameSlot(b->spares[0], a.spares[0]);
  ExpectSameJob(b->job, a.job);
  ExpectSameJob(b->last_job, a.last_job);
  EXPECT_EQ(b->speed.min_kib_s, 5u);
  EXPECT_EQ(b->speed.max_kib_s, 6u);
  EXPECT_EQ(b->counters.member_reads, 1u);
  EXPECT_EQ(b->counters.cache_evictions, 15u);
  ExpectSameReshape(b->reshape, a.reshape);
}

// The counters' names and order are the wire format (clients, the fuzz
// corpus, bench.py and Prometheus queries name them): pinned here as text,
// not through CounterFields(), so a renamed, dropped or moved counter in
// uraid/counters.h fails.
TEST(InfoJson, CountersKeepTheirNamesAndOrder) {
  const std::string text = InfoToJsonText(SampleInfo());
  EXPECT_THAT(
      text,
      HasSubstr("\"counters\":{\"member_reads\":1,\"member_read_bytes\":0,"
                "\"member_writes\":0,\"member_write_bytes\":0,"
                "\"member_flushes\":0,\"member_fua_writes\":0,"
                "\"full_stripe_writes\":0,\"rmw_writes\":0,\"rcw_writes\":0,"
                "\"degraded_writes\":0,\"reconstructions\":0,"
                "\"resynced_stripes\":0,\"resync_repairs\":0,"
                "\"cached_writes\":0,\"cache_writebacks\":0,"
                "\"cache_evictions\":15,\"read_errors_corrected\":0,"
                "\"recovered_stripes\":0,\"scrubbed_stripes\":0,"
                "\"resync_bitmap_chunks\":0,\"resync_bytes\":0,"
                "\"cache_full_writes\":0,\"cache_held_writes\":0,"
                "\"cache_hold_timeouts\":0}"));
}

TEST(InfoJson, RoundTripsAReshapeJobAndNoReshape) {
  ArrayInfo a = SampleInfo();
  a.job.kind = JobKind::kReshape;
  a.last_job.kind = JobKind::kReshape;
  Json j = InfoToJson(a);
  EXPECT_EQ(j["job"]["kind"], "reshape");
  EXPECT_EQ(j["reshape"]["to"]["raid_disks"], 5);
  EXPECT_EQ(j["reshape"]["to"]["layout"], 5);
  absl::StatusOr<ArrayInfo> b = InfoFromJson(Json::parse(j.dump()));
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->job.kind, JobKind::kReshape);
  EXPECT_EQ(b->last_job.kind, JobKind::kReshape);
  ExpectSameReshape(b->reshape, a.reshape);

  // No reshape: the shapes are null and come back unset.
  a.reshape = ReshapeInfo{};
  j = InfoToJson(a);
  EXPECT_TRUE(j["reshape"]["from"].is_null());
  EXPECT_TRUE(j["reshape"]["to"].is_null());
  EXPECT_EQ(j["reshape"]["active"], false);
  b = InfoFromJson(Json::parse(j.dump()));
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectSameReshape(b->reshape, a.reshape);
  EXPECT_FALSE(b->reshape.from.has_value());

  // An older server sends no reshape object: no reshape.
  j.erase("reshape");
  b = InfoFromJson(j);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_FALSE(b->reshape.active);
  EXPECT_FALSE(b->reshape.to.has_value());
}

TEST(InfoJson, RefusesWrongTypesNamingTheField) {
  const Json good = InfoToJson(SampleInfo());
  struct Case {
    const char* pointer;
    Json value;
    const char* message;
  };
  const Case cases[] = {
      {"/level", "5", "field level must be an integer"},
      // 9 is a RAID6 layout; the sample is a RAID5.
      {"/layout", 9, "bad geometry: layout 9 not supported (0-5)"},
      {"/layout", 21, "layout 21 is not one of md's (0-5, 8-10, 16-20)"},
      {"/chunk_bytes", 1000, "bad geometry"},
      {"/events", -1, "field events must be an unsigned integer"},
      {"/slots/2/state", "exploded", "field slots[2].state must be active"},
      {"/slots/0/device_uuid", "xyz", "slots[0].device_uuid must be a uuid"},
      {"/job/kind", 3, "field job.kind must be a string"},
      {"/last_job/first_mismatches", Json::array({"a"}),
       "last_job.first_mismatches must be an array of stripe numbers"},
      {"/speed", 5, "field speed must be an object"},
      {"/counters/rmw_writes", 1.5, "counters.rmw_writes must be"},
      {"/slots", "none", "field slots must be an array"},
      {"/job/kind", "grow", "or reshape"},
      {"/reshape", 1, "field reshape must be an object"},
      {"/reshape/active", "yes", "field reshape.active must be a boolean"},
      {"/reshape/position_bytes", -5,
       "field reshape.position_bytes must be an unsigned integer"},
      {"/reshape/to/layout", 21, "reshape.to: layout 21 is not one of md's"},
      {"/reshape/from/chunk_bytes", 1000, "reshape.from: bad geometry"},
      {"/reshape/to", "5 disks", "field reshape.to must be an object"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pointer);
    Json j = good;
    j[Json::json_pointer(c.pointer)] = c.value;
    absl::StatusOr<ArrayInfo> info = InfoFromJson(j);
    ASSERT_FALSE(info.ok());
    EXPECT_THAT(std::string(info.status().message()), HasSubstr(c.message));
  }
  Json missing = good;
  missing.erase("raid_disks");
  EXPECT_THAT(std::string(InfoFromJson(missing).status().message()),
              HasSubstr("missing field raid_disks"));
  missing = good;
  missing["reshape"]["from"].erase("member_bytes");
  EXPECT_THAT(std::string(InfoFromJson(missing).status().message()),
              HasSubstr("missing field reshape.from.member_bytes"));
  EXPECT_FALSE(InfoFromJson(Json::array()).ok());
  // Fields a newer or older server lacks keep their defaults.
  Json sparse = good;
  sparse.erase("job");
  sparse.erase("counters");
  ASSERT_TRUE(InfoFromJson(sparse).ok());
}

TEST(InfoJson, Uuid) {
  auto u = ParseUuid("00112233:44556677:8899aabb:CCDDEEFF");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(FormatUuid(*u), "00112233:44556677:8899aabb:ccddeeff");
  EXPECT_FALSE(ParseUuid("0011").ok());
  EXPECT_FALSE(ParseUuid("00112233:44556677:8899aabb:ccddeeff00").ok());
  EXPECT_FALSE(ParseUuid("0:0112233:44556677:8899aabb:ccddeeff").ok());
}

// ------------------------------------------------------------ the server

constexpr uint64_t kChunk = 64 * 1024;
constexpr uint64_t kOffset = 1 << 20;
constexpr uint64_t kMemberBytes = 32 * kChunk;

// A connected client with a line reader and a timeout.
class Client {
 public:
  explicit Client(const std::string& path) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    connected_ =
        connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Client() { close(fd_); }
  bool connected() const { return connected_; }

  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(n);
    }
    return true;
  }
  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }

  // The next line (without "\n"); "" on EOF or timeout (eof() tells).
  std::string ReadLine(int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(timeout_ms);
    while (true) {
      size_t nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      const int left = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(
              deadline - std::chrono::steady_clock::now())
              .count());
      if (left <= 0) return "";
      pollfd p = {fd_, POLLIN, 0};
      if (poll(&p, 1, left) <= 0) return "";
      char chunk[65536];
      ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) {
        eof_ = true;
        return "";
      }
      buf_.append(chunk, n);
    }
  }
  bool eof() const { return eof_; }

  // One request, its reply parsed.
  Json Call(std::string_view line) {
    EXPECT_TRUE(Send(std::string(line) + "\n"));
    const std::string reply = ReadLine();
    Json j = Json::parse(reply, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "reply: " << reply;
    return j;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool eof_ = false;
  std::string buf_;
};

class ControlServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/uraid-control-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/ctl.sock";
    std::vector<std::unique_ptr<Member>> members;
    for (int i = 0; i < 4; ++i) {
      members.push_back(
          NewMemoryMember(absl::StrFormat("m%d", i), kOffset + kMemberBytes));
    }
    CreateOptions o;
    o.chunk_bytes = kChunk;
    o.data_offset_bytes = kOffset;
    o.member_bytes = kMemberBytes;
    o.assume_clean = true;
    absl::StatusOr<std::unique_ptr<Array>> a =
        Array::Create(std::move(members), o);
    ASSERT_TRUE(a.ok()) << a.status();
    array_ = std::move(*a);
  }

  void TearDown() override {
    server_.reset();
    array_.reset();
    std::string cmd = "rm -rf " + dir_;
    ASSERT_EQ(system(cmd.c_str()), 0);
  }

  void StartServer(ControlServerOptions options = {}) {
    if (!options.open_member) {
      // Add/replace open in-memory members named "/mem/NAME".
      options.open_member = [](const std::string& spec)
          -> absl::StatusOr<std::unique_ptr<Member>> {
        if (spec.rfind("/mem/", 0) != 0) {
          return absl::NotFoundError(spec + ": no such member");
        }
        return NewMemoryMember(spec, kOffset + kMemberBytes);
      };
    }
    options.logger = [this](const std::string& line) {
      MutexLock lock(&log_mu_);
      log_.push_back(line);
    };
    absl::StatusOr<std::unique_ptr<ControlServer>> s =
        ControlServer::Start(path_, array_.get(), std::move(options));
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  // The detail reply's ArrayInfo.
  ArrayInfo Detail(Client& c) {
    Json reply = c.Call(R"({"cmd":"detail"})");
    EXPECT_EQ(reply["ok"], true) << reply.dump();
    absl::StatusOr<ArrayInfo> info = InfoFromJson(reply["detail"]);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : array_->Info();
  }

  std::string dir_;
  std::string path_;
  std::unique_ptr<Array> array_;
  std::unique_ptr<ControlServer> server_;
  Mutex log_mu_;
  std::vector<std::string> log_;
};

// Skips the rest of a test while the Array method behind a request is not
// written yet.
#define SKIP_IF_UNIMPLEMENTED(reply)                                          \
  do {                                                                        \
    if ((reply).value("code", "") == "UNIMPLEMENTED") {                       \
      GTEST_SKIP() << "Array method not implemented yet: " << (reply).dump(); \
    }                                                                         \
  } while (0)

TEST_F(ControlServerTest, SocketIsMode0600AndRemovedAtStop) {
  StartServer();
  struct stat st;
  ASSERT_EQ(lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(server_->socket_path(), path_);
  server_->Stop();
  server_->Stop();  // idempotent
  EXPECT_NE(lstat(path_.c_str(), &st), 0);
}

TEST_F(ControlServerTest, DetailCarriesTheArrayInfo) {
  StartServer();
  Client c(path_);
  ASSERT_TRUE(c.connected());
  const ArrayInfo info = Detail(c);
  const ArrayInfo want = array_->Info();
  EXPECT_EQ(info.geometry, want.geometry);
  EXPECT_EQ(info.uuid, want.uuid);
  ASSERT_EQ(info.slots.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(info.slots[i].name, absl::StrFormat("m%d", i));
    EXPECT_EQ(info.slots[i].state, SlotState::kActive);
  }
  EXPECT_FALSE(info.degraded);
  // Several requests on one connection, and pipelined in one write.
  ASSERT_TRUE(
      c.Send("{\"cmd\":\"detail\"}\n{\"cmd\":\"bogus\"}\n"
             "{\"cmd\":\"detail\"}\n"));
  EXPECT_THAT(c.ReadLine(), HasSubstr("\"ok\":true"));
  EXPECT_THAT(c.ReadLine(), HasSubstr("unknown cmd"));
  EXPECT_THAT(c.ReadLine(), HasSubstr("\"ok\":true"));
}

TEST_F(ControlServerTest, LastLineWithoutNewlineIsAnsweredAtEof) {
  StartServer();
  Client c(path_);
  ASSERT_TRUE(c.Send(R"({"cmd":"detail"})"));
  c.ShutdownWrite();
  EXPECT_THAT(c.ReadLine(), HasSubstr("\"ok\":true"));
  EXPECT_EQ(c.ReadLine(), "");
  EXPECT_TRUE(c.eof());
}

TEST_F(ControlServerTest, MalformedRequestsGetErrorsAndTheConnectionLives) {
  StartServer();
  Client c(path_);
  const char* bad[] = {"not json",
                       "{}",
                       R"({"cmd":5})",
                       R"({"cmd":"zap"})",
                       R"({"cmd":"set","cache":-5})",
                       R"({"cmd":"detail","x":[[[[[[[1]]]]]]]})",
                       "[]",
                       "\xff\xff",
                       R"({"cmd":"grow"})",
                       R"({"cmd":"grow","raid_devices":5,"add":"/mem/x"})",
                       R"({"cmd":"grow","raid_devices":5,"add":[7]})",
                       R"({"cmd":"grow","layout":"zigzag"})",
                       R"({"cmd":"grow","chunk":-4096})"};
  for (const char* line : bad) {
    SCOPED_TRACE(line);
    Json reply = c.Call(line);
    EXPECT_EQ(reply["ok"], false);
    EXPECT_FALSE(reply["error"].get<std::string>().empty());
  }
  // A NUL byte in the middle of a line.
  const char with_nul[] = "{\"cmd\":\0\"detail\"}\n";
  ASSERT_TRUE(c.Send(std::string(with_nul, sizeof with_nul - 1)));
  EXPECT_THAT(c.ReadLine(), HasSubstr("NUL byte"));
  EXPECT_EQ(c.Call(R"({"cmd":"detail"})")["ok"], true);
}

TEST_F(ControlServerTest, OverlongLineGetsAnErrorAndIsClosed) {
  StartServer();
  Client c(path_);
  // Sent from a thread: the server stops reading once the limit is passed.
  // The newline pushed, not appended with +: gcc 12 warned -Warray-bounds
  // inside char_traits::copy on the + (a false positive).
  std::thread sender([&] {
    std::string line(kControlMaxLineBytes + 10, 'x');
    line.push_back('\n');
    c.Send(line);
  });
  EXPECT_THAT(c.ReadLine(), HasSubstr("longer than 65536 bytes"));
  EXPECT_EQ(c.ReadLine(), "");
  EXPECT_TRUE(c.eof());
  sender.join();
  Client d(path_);
  EXPECT_EQ(d.Call(R"({"cmd":"detail"})")["ok"], true);
}

TEST_F(ControlServerTest, SilentClientDoesNotBlockOthers) {
  StartServer();
  Client silent(path_);
  Client partial(path_);
  ASSERT_TRUE(partial.Send(R"({"cmd":"det)"));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 3; ++i) {
    Client c(path_);
    EXPECT_EQ(c.Call(R"({"cmd":"detail"})")["ok"], true);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // The partial line completes later and is answered.
  ASSERT_TRUE(partial.Send("ail\"}\n"));
  EXPECT_THAT(partial.ReadLine(), HasSubstr("\"ok\":true"));
}

TEST_F(ControlServerTest, IdleConnectionIsClosed) {
  StartServer({.idle_timeout_ms = 200});
  Client c(path_);
  EXPECT_THAT(c.ReadLine(3000), HasSubstr("no complete request within 200"));
  EXPECT_EQ(c.ReadLine(3000), "");
  EXPECT_TRUE(c.eof());
}

TEST_F(ControlServerTest, ConnectionLimit) {
  StartServer({.max_connections = 2});
  Client a(path_);
  Client b(path_);
  EXPECT_EQ(a.Call(R"({"cmd":"detail"})")["ok"], true);
  EXPECT_EQ(b.Call(R"({"cmd":"detail"})")["ok"], true);
  Client c(path_);
  EXPECT_THAT(c.ReadLine(), HasSubstr("too many control connections"));
}

TEST_F(ControlServerTest, ManyClientsAtOnce) {
  StartServer();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      Client c(path_);
      for (int i = 0; i < 30; ++i) {
        if (c.Call(R"({"cmd":"detail"})")["ok"] == true) ++ok;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 180);
}

TEST_F(ControlServerTest, StopReturnsWithClientsConnected) {
  StartServer();
  Client idle(path_);
  Client partial(path_);
  ASSERT_TRUE(partial.Send("{\"cmd\""));
  EXPECT_EQ(Client(path_).Call(R"({"cmd":"detail"})")["ok"], true);
  const auto start = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(idle.ReadLine(2000), "");
  EXPECT_TRUE(idle.eof());
}

TEST_F(ControlServerTest, SetCacheAndSpeedLimits) {
  StartServer();
  Client c(path_);
  Json reply = c.Call(R"({"cmd":"set","cache":1048576})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  EXPECT_EQ(reply["cache"], 1048576);
  reply = c.Call(R"({"cmd":"set","cache":0})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();

  reply = c.Call(R"({"cmd":"set","speed_min":2000,"speed_max":50000})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  EXPECT_EQ(reply["speed_min"], 2000);
  EXPECT_EQ(reply["speed_max"], 50000);
  EXPECT_FALSE(reply.contains("cache"));
  const ArrayInfo info = Detail(c);
  EXPECT_EQ(info.speed.min_kib_s, 2000u);
  EXPECT_EQ(info.speed.max_kib_s, 50000u);

  // One limit alone merges with the other; min above max is refused.
  reply = c.Call(R"({"cmd":"set","speed_min":60000})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_THAT(reply["error"].get<std::string>(),
              HasSubstr("speed_min (60000 KiB/s) would be above speed_max "
                        "(50000 KiB/s)"));
  reply = c.Call(R"({"cmd":"set","speed_max":70000})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  EXPECT_EQ(reply["speed_min"], 2000);
  EXPECT_EQ(Detail(c).speed.max_kib_s, 70000u);
  {
    MutexLock lock(&log_mu_);
    EXPECT_THAT(log_, testing::Contains(
                          "control: set speed_min=2000 speed_max=70000: done"));
  }
}

TEST_F(ControlServerTest, FailMemberDegradesTheArray) {
  StartServer();
  Client c(path_);
  Json reply = c.Call(R"({"cmd":"fail","member":"m2"})");
  SKIP_IF_UNIMPLEMENTED(reply);
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  ArrayInfo info = Detail(c);
  EXPECT_TRUE(info.degraded);
  EXPECT_EQ(info.slots[2].state, SlotState::kFaulty);
  // Reads still work from parity.
  std::vector<uint8_t> buf(kChunk * 3);
  EXPECT_TRUE(array_->Read(buf.data(), buf.size(), 0).ok());
  // A second failure would fail the array: refused, like md.
  reply = c.Call(R"({"cmd":"fail","member":"m0"})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(reply["code"], "FAILED_PRECONDITION") << reply.dump();
  EXPECT_FALSE(Detail(c).failed);
  {
    MutexLock lock(&log_mu_);
    EXPECT_THAT(log_, testing::Contains("control: fail m2: done"));
  }
}

TEST_F(ControlServerTest, FailUnknownMemberNamesIt) {
  StartServer();
  Client c(path_);
  Json reply = c.Call(R"({"cmd":"fail","member":"/nowhere/m9.img"})");
  SKIP_IF_UNIMPLEMENTED(reply);
  EXPECT_EQ(reply["ok"], false);
  EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("m9.img"));
}

TEST_F(ControlServerTest, RemoveAndAddRebuild) {
  StartServer();
  Client c(path_);
  Json reply = c.Call(R"({"cmd":"fail","member":"m1"})");
  SKIP_IF_UNIMPLEMENTED(reply);
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  reply = c.Call(R"({"cmd":"remove","member":"m1"})");
  SKIP_IF_UNIMPLEMENTED(reply);
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  reply = c.Call(R"({"cmd":"add","member":"/mem/new"})");
  SKIP_IF_UNIMPLEMENTED(reply);
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  ASSERT_TRUE(array_->WaitForJob().ok());
  const ArrayInfo info = Detail(c);
  EXPECT_FALSE(info.degraded);
  EXPECT_EQ(info.slots[1].name, "/mem/new");
  EXPECT_EQ(info.slots[1].state, SlotState::kActive);
  EXPECT_EQ(info.last_job.kind, JobKind::kRecover);
  EXPECT_EQ(info.last_job.result, "completed");
}

TEST_F(ControlServerTest, AddOpenErrorsAreReported) {
  StartServer();
  Client c(path_);
  Json reply = c.Call(R"({"cmd":"add","member":"/nope/m5.img"})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(reply["code"], "NOT_FOUND");
  EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("/nope/m5.img"));
  reply = c.Call(R"({"cmd":"replace","old":"m0","new":"/nope/m6.img"})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("/nope/m6.img"));
  reply = c.Call(R"({"cmd":"add","member":"relative.img"})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("absolute path"));
}

// A member of the array given again to add, replace or grow is named as
// such, not opened (a file member would meet the server's own lock: "in
// use by another uraid process").
TEST_F(ControlServerTest, AddingAMemberAgainNamesIt) {
  StartServer();
  Client c(path_);
  Json reply = c.Call(R"({"cmd":"add","member":"/mem/s1"})");
  SKIP_IF_UNIMPLEMENTED(reply);
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  for (const char* line :
       {R"({"cmd":"add","member":"/mem/s1"})",
        R"({"cmd":"replace","old":"m0","new":"/mem/s1"})",
        R"({"cmd":"grow","raid_devices":5,"add":["/mem/s1"]})"}) {
    reply = c.Call(line);
    EXPECT_EQ(reply["ok"], false) << line;
    EXPECT_EQ(reply["code"], "FAILED_PRECONDITION") << line;
    EXPECT_EQ(reply["error"], "/mem/s1 is already a spare of this array")
        << line;
  }
  EXPECT_EQ(array_->Info().spares.size(), 1u);
}

// md's --readonly / --readwrite over the socket: writes refused with
// EROFS while read-only, detail and the reply say so, the superblocks are
// clean; a field, or readwrite twice, gets a clear answer.
TEST_F(ControlServerTest, ReadOnlyAndReadWrite) {
  StartServer();
  Client c(path_);
  std::vector<uint8_t> buf(kChunk, 0x5a);
  ASSERT_TRUE(array_->Write(buf.data(), buf.size(), 0).ok());
  Json reply = c.Call(R"({"cmd":"readonly"})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  EXPECT_EQ(reply["changed"], true);
  EXPECT_EQ(reply["read_only"], true);
  EXPECT_EQ(reply["clean"], true);
  ArrayInfo info = Detail(c);
  EXPECT_TRUE(info.read_only);
  EXPECT_TRUE(info.switched_read_only);
  EXPECT_TRUE(info.clean);
  EXPECT_EQ(ArrayStateText(info), "clean, read-only");
  const absl::Status w = array_->Write(buf.data(), buf.size(), 0);
  EXPECT_EQ(StatusToErrno(w), EROFS) << w;
  EXPECT_THAT(std::string(w.message()), HasSubstr("uraid readwrite"));
  reply = c.Call(R"({"cmd":"check"})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("read-only"));
  reply = c.Call(R"({"cmd":"readonly"})");
  EXPECT_EQ(reply["ok"], true);
  EXPECT_EQ(reply["changed"], false);
  reply = c.Call(R"({"cmd":"readonly","member":"m1"})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(reply["error"],
            "unknown field \"member\" in a readonly request (it takes no "
            "fields)");
  reply = c.Call(R"({"cmd":"readwrite"})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  EXPECT_EQ(reply["changed"], true);
  EXPECT_EQ(reply["read_only"], false);
  EXPECT_FALSE(Detail(c).read_only);
  EXPECT_TRUE(array_->Write(buf.data(), buf.size(), 0).ok());
  EXPECT_EQ(c.Call(R"({"cmd":"readwrite"})")["changed"], false);
}

TEST_F(ControlServerTest, CheckAndStop) {
  StartServer();
  Client c(path_);
  Json reply = c.Call(R"({"cmd":"check"})");
  SKIP_IF_UNIMPLEMENTED(reply);
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  EXPECT_EQ(c.Call(R"({"cmd":"stop"})")["ok"], true);
  array_->WaitForJob().IgnoreError();  // "interrupted" is not OK
  const ArrayInfo info = Detail(c);
  EXPECT_EQ(info.job.kind, JobKind::kNone);
  EXPECT_EQ(info.last_job.kind, JobKind::kCheck);
}

// Grow over the socket: the reshape starts (slowed down so that detail
// sees it running), detail shows the job and both shapes, and once it ends
// the array has the new shape and still holds what was written.
TEST_F(ControlServerTest, GrowReshapesTheArray) {
  StartServer();
  Client c(path_);
  std::vector<uint8_t> pattern(array_->size());
  for (size_t i = 0; i < pattern.size(); ++i) {
    pattern[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  }
  ASSERT_TRUE(array_->Write(pattern.data(), pattern.size(), 0).ok());
  ASSERT_TRUE(array_->Flush().ok());
  const Geometry before = array_->geometry();

  Json reply = c.Call(R"({"cmd":"set","speed_min":1,"speed_max":64})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  reply = c.Call(R"({"cmd":"grow","raid_devices":5,"add":["/mem/m4"]})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  EXPECT_EQ(reply.size(), 1u) << reply.dump();  // just {"ok":true}

  Json raw = c.Call(R"({"cmd":"detail"})");
  EXPECT_EQ(raw["detail"]["job"]["kind"], "reshape") << raw.dump();
  EXPECT_EQ(raw["detail"]["reshape"]["active"], true);
  EXPECT_EQ(raw["detail"]["reshape"]["to"]["raid_disks"], 5);
  ArrayInfo info = Detail(c);
  EXPECT_EQ(info.job.kind, JobKind::kReshape);
  EXPECT_TRUE(info.reshape.active);
  ASSERT_TRUE(info.reshape.from.has_value());
  ASSERT_TRUE(info.reshape.to.has_value());
  EXPECT_EQ(*info.reshape.from, before);
  EXPECT_EQ(info.reshape.to->raid_disks(), 5);
  EXPECT_LT(info.reshape.to_data_offset_bytes, kOffset);
  EXPECT_EQ(info.geometry, before);  // the old shape until the end
  ASSERT_EQ(info.slots.size(), 5u);
  EXPECT_EQ(info.slots[4].name, "/mem/m4");

  // A second grow while one runs is refused, naming the reason.
  reply = c.Call(R"({"cmd":"grow","layout":"right-symmetric"})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(reply["code"], "FAILED_PRECONDITION") << reply.dump();

  reply = c.Call(R"({"cmd":"set","speed_max":1000000})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  ASSERT_TRUE(array_->WaitForJob().ok());
  info = Detail(c);
  EXPECT_EQ(info.job.kind, JobKind::kNone);
  EXPECT_EQ(info.last_job.kind, JobKind::kReshape);
  EXPECT_EQ(info.last_job.result, "completed");
  EXPECT_FALSE(info.reshape.active);
  EXPECT_EQ(info.geometry.raid_disks(), 5);
  EXPECT_EQ(info.geometry.layout(), before.layout());
  EXPECT_EQ(info.geometry.chunk_bytes(), before.chunk_bytes());
  EXPECT_GT(array_->size(), pattern.size());

  std::vector<uint8_t> back(pattern.size());
  ASSERT_TRUE(array_->Read(back.data(), back.size(), 0).ok());
  EXPECT_TRUE(back == pattern);
  {
    MutexLock lock(&log_mu_);
    EXPECT_THAT(log_, testing::Contains(
                          "control: grow raid_devices=5 add=/mem/m4: done"));
  }
}

TEST_F(ControlServerTest, GrowLayoutAndChunkWithoutNewMembers) {
  StartServer();
  Client c(path_);
  Json reply =
      c.Call(R"({"cmd":"grow","layout":"right-asymmetric","chunk":32768})");
  ASSERT_EQ(reply["ok"], true) << reply.dump();
  ASSERT_TRUE(array_->WaitForJob().ok());
  const ArrayInfo info = Detail(c);
  EXPECT_EQ(info.geometry.layout(), Layout::kRightAsymmetric);
  EXPECT_EQ(info.geometry.chunk_bytes(), 32768u);
  EXPECT_EQ(info.geometry.raid_disks(), 4);
}

TEST_F(ControlServerTest, GrowErrorsChangeNothing) {
  StartServer();
  Client c(path_);
  const Geometry before = array_->geometry();
  // A new member that does not open: its error, naming it.
  Json reply = c.Call(R"({"cmd":"grow","raid_devices":5,"add":["/nope/m4"]})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(reply["code"], "NOT_FOUND") << reply.dump();
  EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("/nope/m4"));
  // The wrong number of new members: the array's answer.
  reply = c.Call(R"({"cmd":"grow","raid_devices":6,"add":["/mem/m4"]})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_EQ(reply["code"], "INVALID_ARGUMENT") << reply.dump();
  EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("new member"));
  // A shrink, and no change at all.
  reply = c.Call(R"({"cmd":"grow","raid_devices":3})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_THAT(reply["error"].get<std::string>(), HasSubstr("shrinking"));
  reply = c.Call(R"({"cmd":"grow","level":5})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_THAT(reply["error"].get<std::string>(),
              HasSubstr("nothing to change"));
  // Malformed: refused by the parser before anything opens.
  reply = c.Call(R"({"cmd":"grow","raid_devices":5,"add":["/mem/a",3]})");
  EXPECT_EQ(reply["ok"], false);
  EXPECT_THAT(reply["error"].get<std::string>(),
              HasSubstr("\"add[1]\" must be a string"));
  const ArrayInfo info = Detail(c);
  EXPECT_EQ(info.geometry, before);
  EXPECT_FALSE(info.reshape.active);
  EXPECT_EQ(info.slots.size(), 4u);
  EXPECT_EQ(info.job.kind, JobKind::kNone);
}

// ------------------------------------------------------- socket creation

TEST_F(ControlServerTest, ReplacesAStaleSocket) {
  StartServer();
  server_->Stop();
  // A socket file with nothing behind it, as a killed server leaves.
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(fd);
  StartServer();
  EXPECT_EQ(Client(path_).Call(R"({"cmd":"detail"})")["ok"], true);
}

TEST_F(ControlServerTest, RefusesALiveSocket) {
  StartServer();
  absl::StatusOr<std::unique_ptr<ControlServer>> second =
      ControlServer::Start(path_, array_.get());
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("in use"));
  // The first still serves.
  EXPECT_EQ(Client(path_).Call(R"({"cmd":"detail"})")["ok"], true);
}

TEST_F(ControlServerTest, RefusesToReplaceAFile) {
  FILE* f = fopen(path_.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("precious", f);
  fclose(f);
  absl::StatusOr<std::unique_ptr<ControlServer>> s =
      ControlServer::Start(path_, array_.get());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("not a socket is in the way"));
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8);
}

TEST_F(ControlServerTest, RefusesBadPaths) {
  absl::StatusOr<std::unique_ptr<ControlServer>> s =
      ControlServer::Start(dir_ + "/" + std::string(120, 'x'), array_.get());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("at most 107"));
  s = ControlServer::Start(dir_ + "/no/such/dir/ctl.sock", array_.get());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("no/such/dir"));
  s = ControlServer::Start("", array_.get());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

namespace events {

// The next line as JSON (null on timeout or EOF).
Json NextEvent(Client& c, int timeout_ms = 10000) {
  const std::string line = c.ReadLine(timeout_ms);
  if (line.empty()) return Json();
  Json j = Json::parse(line, nullptr, false);
  EXPECT_TRUE(j.is_object()) << line;
  return j;
}

}  // namespace events

TEST_F(ControlServerTest, EventsStreamTheStateThenWhatHappens) {
  StartServer();
  Client sub(path_);
  ASSERT_TRUE(sub.Send("{\"cmd\":\"events\"}\n"));
  Json head = events::NextEvent(sub);
  ASSERT_EQ(head["ok"], true) << head.dump();
  ASSERT_EQ(head["initial"], 1) << head.dump();
  Json first = events::NextEvent(sub);
  EXPECT_EQ(first["event"], "NewArray") << first.dump();
  EXPECT_EQ(first["array"], FormatUuid(array_->Info().uuid));
  EXPECT_EQ(first["state"], "clean");
  // Another client fails a member: the subscriber hears of it.
  Client admin(path_);
  ASSERT_EQ(admin.Call(R"({"cmd":"fail","member":"m2"})")["ok"], true);
  Json fail = events::NextEvent(sub);
  EXPECT_EQ(fail["event"], "Fail") << fail.dump();
  EXPECT_EQ(fail["member"], "m2");
  EXPECT_EQ(fail["slot"], 2);
  EXPECT_TRUE(fail["time"].is_number());
  EXPECT_EQ(events::NextEvent(sub)["event"], "DegradedArray");
  // A second subscriber starts with the degraded state.
  Client late(path_);
  ASSERT_TRUE(late.Send("{\"cmd\":\"events\"}\n"));
  ASSERT_EQ(events::NextEvent(late)["initial"], 2);
  EXPECT_EQ(events::NextEvent(late)["event"], "NewArray");
  Json deg = events::NextEvent(late);
  EXPECT_EQ(deg["event"], "DegradedArray") << deg.dump();
  EXPECT_EQ(deg["gone_slots"], Json::array({2}));
  // Stopping the server ends every stream (EOF), promptly.
  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_EQ(sub.ReadLine(5000), "");
  EXPECT_TRUE(sub.eof());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
}

TEST_F(ControlServerTest, MalformedEventsRequestGetsAnError) {
  StartServer();
  Client c(path_);
  Json reply = c.Call(R"({"cmd":"events","since":3})");
  EXPECT_EQ(reply["ok"], false) << reply.dump();
  EXPECT_EQ(reply["code"], "INVALID_ARGUMENT");
  EXPECT_THAT(reply["error"].get<std::string>(), testing::HasSubstr("since"));
  EXPECT_EQ(c.Call(R"({"cmd":"detail"})")["ok"], true) << "connection lives";
}

TEST_F(ControlServerTest, SlowSubscriberLosesEventsNeverBlocksTheArray) {
  ControlServerOptions o;
  o.max_queued_events = 8;
  // The loop below may take longer than the default write timeout under
  // sanitizers; this test is about the queue, not about stalled sockets.
  o.write_timeout_ms = 300000;
  StartServer(std::move(o));
  Client sub(path_);
  ASSERT_TRUE(sub.Send("{\"cmd\":\"events\"}\n"));
  ASSERT_EQ(events::NextEvent(sub)["ok"], true);
  ASSERT_EQ(events::NextEvent(sub)["event"], "NewArray");
  // Far more event lines than the sockets buffer, while the subscriber
  // reads nothing: the array's calls must all go through regardless.
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int kRounds = 1500;
  for (int i = 0; i < kRounds; ++i) {
    ASSERT_TRUE(
        array_->AddMember(NewMemoryMember("/mem/s", kOffset + kMemberBytes))
            .ok());
    ASSERT_TRUE(array_->RemoveMember("/mem/s").ok());
  }
  (void)t0;  // a blocked array would hang here (ctest's timeout), not slow
  // Catching up: every event is either delivered or counted in an
  // EventsLost line, and each such line is followed by the state.
  int seen = 0, lost = 0, gaps = 0;
  Json j;
  while (!(j = events::NextEvent(sub, 2000)).is_null()) {
    if (j["event"] == "EventsLost") {
      ++gaps;
      lost += j["count"].get<int>();
      EXPECT_GT(j["count"].get<int>(), 0);
      EXPECT_EQ(events::NextEvent(sub)["event"], "NewArray")
          << "the state follows the gap";
    } else {
      ++seen;
    }
  }
  EXPECT_GT(gaps, 0) << "the subscriber should have been cut short";
  EXPECT_GT(lost, 0);
  EXPECT_EQ(seen + lost, 2 * kRounds) << "every event delivered or counted";
  // And the stream is live again.
  ASSERT_TRUE(
      array_->AddMember(NewMemoryMember("/mem/s", kOffset + kMemberBytes))
          .ok());
  EXPECT_EQ(events::NextEvent(sub)["event"], "SpareAdded");
}

// A peer that is neither root nor the server's user, in the read group:
// detail and events work, changes are refused naming the group; without
// the group the socket does not even open. Needs root (to become others).
TEST_F(ControlServerTest, ReadGroupMayReadButNotChange) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
  constexpr gid_t kGroup = 4321;
  constexpr uid_t kUser = 4321;
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
  ControlServerOptions o;
  o.read_group = kGroup;
  o.read_group_name = "raidwatch";
  StartServer(std::move(o));
  struct stat st;
  ASSERT_EQ(lstat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, kGroup);
  // Runs `body` as kUser (with or without the group) in a child; its exit
  // code is the result (0 = as expected).
  const auto as_user = [&](bool in_group, auto body) {
    const pid_t pid = fork();
    if (pid == 0) {
      const gid_t groups[1] = {kGroup};
      const gid_t primary = in_group ? kGroup : 65534;
      if (setgroups(in_group ? 1 : 0, groups) != 0 || setgid(primary) != 0 ||
          setuid(kUser) != 0) {
        _exit(90);
      }
      _exit(body());
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
  };
  EXPECT_EQ(
      as_user(true,
              [&] {
                Client c(path_);
                if (!c.connected()) return 1;
                if (c.Send("{\"cmd\":\"detail\"}\n") &&
                    c.ReadLine().find("\"ok\":true") == std::string::npos) {
                  return 2;
                }
                c.Send("{\"cmd\":\"fail\",\"member\":\"m1\"}\n");
                const std::string r = c.ReadLine();
                if (r.find("PERMISSION_DENIED") == std::string::npos ||
                    r.find("fail is read-only for group raidwatch "
                           "(uid 4321)") == std::string::npos) {
                  return 3;
                }
                Client s(path_);
                s.Send("{\"cmd\":\"events\"}\n");
                if (s.ReadLine().find("\"ok\":true") == std::string::npos) {
                  return 4;
                }
                return 0;
              }),
      0);
  EXPECT_EQ(as_user(false, [&] { return Client(path_).connected() ? 5 : 0; }),
            0);
  EXPECT_FALSE(array_->Info().degraded) << "the refused fail changed nothing";
}

}  // namespace
}  // namespace uraid
