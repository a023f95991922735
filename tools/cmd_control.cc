// SPDX-License-Identifier: MIT
// The commands that change a served array through its control socket
// (uraid/control.h): fail, remove, add, replace, repair, idle, set; and the
// remote half of `check --control`. `stop` is two commands told apart by
// their arguments: `stop ARRAY...` / `stop --scan` stop served arrays
// (md's --stop, array_stop.h); `stop --control SOCKET` alone is the job
// cancel it has always been (the README's contract), now also named
// `idle` (md's sync_action word). `repair MEMBER...` also works offline
// (the array assembled writable, parity rewritten where it is wrong).

#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "array_stop.h"
#include "commands.h"
#include "common.h"
#include "control_client.h"
#include "job_progress.h"
#include "nlohmann/json.hpp"
#include "served_arrays.h"
#include "size_parse.h"
#include "uraid/array.h"
#include "uraid/control.h"
#include "uraid/control_protocol.h"
#include "uraid/geometry.h"

namespace uraid::tool {
namespace {

using control::Cmd;
using control::Request;
using json = nlohmann::ordered_json;

const char* kControlHelp =
    "The served array's control socket (the plugin's control=SOCKET)";

// A rate: plain digits are KiB/s (md's unit for sync_speed_min/max);
// with a K/M/G suffix it is that many bytes per second ("100M").
absl::StatusOr<uint64_t> ParseRate(const std::string& text) {
  bool digits = !text.empty();
  for (char c : text)
    digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) {
    absl::StatusOr<uint64_t> v = ParseSize(text);  // plain number, checked
    if (!v.ok()) return v.status();
    return *v;
  }
  absl::StatusOr<uint64_t> bytes = ParseSize(text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rate \"%s\": give KiB/s (\"50000\") or bytes per second with a "
        "suffix (\"100M\")",
        text));
  }
  if (*bytes < 1024) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rate \"%s\" is below 1 KiB/s", text));
  }
  return *bytes / 1024;
}

CLI::Validator RateValidator() { return StatusValidator(ParseRate, "RATE"); }

// A command's connection to the server, and the last_job it saw before
// starting a job (for FollowJob).
struct Connection {
  std::unique_ptr<ControlClient> client;
  JobInfo before;
};

// Connects and, when the command will follow the job it starts (--wait /
// --watch), reads the last_job first. nullopt after printing why not.
std::optional<Connection> Connect(const std::string& socket,
                                  bool follow = false) {
  absl::StatusOr<std::unique_ptr<ControlClient>> client =
      ControlClient::Connect(socket);
  if (!client.ok()) {
    Fail(client.status());
    return std::nullopt;
  }
  Connection c{.client = *std::move(client)};
  if (follow) {
    absl::StatusOr<ArrayInfo> info = c.client->Detail();
    if (!info.ok()) {
      Fail(info.status());
      return std::nullopt;
    }
    c.before = info->last_job;
  }
  return c;
}

// Follows the job a command just started (--wait / --watch); exit code.
int FollowJob(ControlClient& client, bool watch, const JobInfo& before) {
  absl::StatusOr<ArrayInfo> info = WaitForJobs(client, watch, &before);
  if (!info.ok()) return Fail(info.status());
  if (!JobSucceeded(info->last_job)) {
    return Fail(absl::StrCat("last job: ", JobOutcome(info->last_job)));
  }
  return 0;
}

struct MemberArgs {
  std::string control;
  std::vector<std::string> members;
  bool wait = false;
  bool watch = false;
};

// fail / remove / add: one request per member, in order; stops at the
// first error.
int RunMembers(const MemberArgs& args, Cmd cmd) {
  std::optional<Connection> c = Connect(args.control, args.wait || args.watch);
  if (!c) return 1;
  ControlClient& client = *c->client;
  for (const std::string& m : args.members) {
    Request r{.cmd = cmd};
    r.member =
        cmd == Cmd::kAdd ? MemberPathForServer(m) : MemberNameForServer(m);
    absl::StatusOr<json> reply = client.Call(r);
    if (!reply.ok()) return Fail(reply.status());
    switch (cmd) {
      case Cmd::kFail:
        std::printf("set %s faulty\n", r.member.c_str());
        break;
      case Cmd::kRemove:
        std::printf("removed %s\n", r.member.c_str());
        break;
      default:
        std::printf("added %s\n", r.member.c_str());
        break;
    }
  }
  std::fflush(stdout);
  if (args.wait || args.watch) return FollowJob(client, args.watch, c->before);
  return 0;
}

void AddMemberCommand(CLI::App& app, Action* action, const char* name, Cmd cmd,
                      const char* help, const char* member_help,
                      bool can_wait) {
  auto args = std::make_shared<MemberArgs>();
  CLI::App* sub = app.add_subcommand(name, help);
  sub->add_option("--control,-C", args->control, kControlHelp)->required();
  sub->add_option("MEMBER", args->members, member_help)->required();
  if (can_wait) {
    CLI::Option* wait = sub->add_flag(
        "--wait,-W", args->wait,
        "Wait until the rebuild ends (exit 1 unless it completed)");
    sub->add_flag("--watch,-w", args->watch,
                  "Draw the rebuild's progress until it ends")
        ->excludes(wait);
  }
  sub->final_callback([args, action, cmd] {
    *action = [args, cmd] { return RunMembers(*args, cmd); };
  });
}

struct ReplaceArgs {
  std::string control;
  std::string old_member;
  std::string new_member;
  bool wait = false;
  bool watch = false;
};

int RunReplace(const ReplaceArgs& args) {
  std::optional<Connection> c = Connect(args.control, args.wait || args.watch);
  if (!c) return 1;
  ControlClient& client = *c->client;
  Request r{.cmd = Cmd::kReplace,
            .member = MemberNameForServer(args.old_member),
            .replacement = MemberPathForServer(args.new_member)};
  absl::StatusOr<json> reply = client.Call(r);
  if (!reply.ok()) return Fail(reply.status());
  std::printf("replacing %s with %s\n", r.member.c_str(),
              r.replacement.c_str());
  std::fflush(stdout);
  if (args.wait || args.watch) return FollowJob(client, args.watch, c->before);
  return 0;
}

// check --control / repair --control.
struct ScrubArgs {
  std::string control;
  bool json = false;
  bool wait = false;
  bool watch = false;
  bool force = false;
  bool run = false;
  std::vector<std::string> members;  // offline repair
};

int RunRemoteScrub(const ScrubArgs& args, bool repair) {
  const bool follow = args.wait || args.watch;
  std::optional<Connection> c = Connect(args.control, follow);
  if (!c) return 1;
  ControlClient& client = *c->client;
  absl::StatusOr<json> reply =
      client.Call({.cmd = repair ? Cmd::kRepair : Cmd::kCheck});
  if (!reply.ok()) return Fail(reply.status());
  const char* what = repair ? "repair" : "check";
  if (!follow) {
    if (args.json) {
      std::printf("%s\n", json({{"started", what}}).dump(2).c_str());
    } else {
      std::printf(
          "%s started; follow it with uraid detail --control %s "
          "--watch\n",
          what, args.control.c_str());
    }
    return 0;
  }
  absl::StatusOr<ArrayInfo> info = WaitForJobs(client, args.watch, &c->before);
  if (!info.ok()) return Fail(info.status());
  const JobInfo& last = info->last_job;
  if (args.json) {
    json j = {{"job", JobKindName(last.kind)},
              {"result", last.result},
              {"stripes", info->geometry.stripe_count()},
              {"mismatches", last.mismatches},
              {"first_mismatched_stripes", last.first_mismatches}};
    std::printf("%s\n", j.dump(2).c_str());
  } else if (!args.watch) {
    std::printf("%s\n", JobOutcome(last).c_str());
  }
  if (!JobSucceeded(last)) {
    return Fail(absl::StrCat("last job: ", JobOutcome(last)));
  }
  // Like the offline check: mismatches found (and not repaired) fail.
  return !repair && last.mismatches > 0 ? 1 : 0;
}

// Offline repair: assemble writable, rewrite wrong parity, close clean.
int RunOfflineRepair(const ScrubArgs& args) {
  absl::StatusOr<std::vector<std::unique_ptr<Member>>> members =
      OpenMembers(args.members, MemberOptions{});
  if (!members.ok()) return Fail(members.status());
  AssembleOptions options;
  options.force = args.force;
  options.run = args.run;
  absl::StatusOr<std::unique_ptr<Array>> array =
      Array::Assemble(*std::move(members), options);
  if (!array.ok()) return Fail(array.status());
  if (absl::Status s = (*array)->StartScrub(/*repair=*/true); !s.ok()) {
    return Fail(s);
  }
  const absl::Status done = (*array)->WaitForJob();
  const ArrayInfo info = (*array)->Info();
  if (!done.ok()) return Fail(done);
  const JobInfo& last = info.last_job;
  // RAID6: the stripes whose bad chunk P and Q named (that chunk was
  // rewritten; the others had P and Q recomputed), with its member.
  auto member_of = [&](uint64_t slot) -> std::string {
    for (const SlotInfo& si : info.slots) {
      if (si.slot == static_cast<int>(slot)) return si.name;
    }
    return "?";
  };
  if (args.json) {
    json located = json::array();
    for (size_t i = 0; i < last.first_located.size(); ++i) {
      const uint64_t slot = last.first_located_slots[i];
      located.push_back({{"stripe", last.first_located[i]},
                         {"slot", slot},
                         {"member", member_of(slot)}});
    }
    json j = {{"stripes", info.geometry.stripe_count()},
              {"mismatches", last.mismatches},
              {"first_mismatched_stripes", last.first_mismatches},
              {"result", last.result},
              {"located_mismatches", last.located_mismatches},
              {"first_located", located}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("checked %llu stripes: %llu had wrong parity (rewritten)\n",
                static_cast<unsigned long long>(info.geometry.stripe_count()),
                static_cast<unsigned long long>(last.mismatches));
    if (!last.first_mismatches.empty()) {
      std::printf("first repaired stripes: %s\n",
                  absl::StrJoin(last.first_mismatches, " ").c_str());
    }
    if (last.located_mismatches > 0) {
      std::printf(
          "in %llu of them P and Q named the bad chunk, which was rewritten "
          "(P and Q recomputed in the others):\n",
          static_cast<unsigned long long>(last.located_mismatches));
      for (size_t i = 0; i < last.first_located.size(); ++i) {
        const uint64_t slot = last.first_located_slots[i];
        std::printf("  stripe %llu: slot %llu (%s)\n",
                    static_cast<unsigned long long>(last.first_located[i]),
                    static_cast<unsigned long long>(slot),
                    member_of(slot).c_str());
      }
    }
  }
  return JobSucceeded(last) ? 0 : 1;
}

struct SetArgs {
  std::string control;
  std::string speed_min;
  std::string speed_max;
  int busy_share = -1;  // -1: unchanged
  std::string cache;
};

int RunSet(const SetArgs& args) {
  Request r{.cmd = Cmd::kSet};
  if (!args.speed_min.empty()) r.speed_min_kib_s = *ParseRate(args.speed_min);
  if (!args.speed_max.empty()) r.speed_max_kib_s = *ParseRate(args.speed_max);
  if (args.busy_share >= 0) {
    r.busy_share_pct = static_cast<uint32_t>(args.busy_share);
  }
  if (!args.cache.empty()) r.cache_bytes = *ParseSize(args.cache);
  std::optional<Connection> c = Connect(args.control);
  if (!c) return 1;
  ControlClient& client = *c->client;
  absl::StatusOr<json> reply = client.Call(r);
  if (!reply.ok()) return Fail(reply.status());
  if (r.speed_min_kib_s || r.speed_max_kib_s || r.busy_share_pct) {
    std::printf("speed limits: min %s KiB/s, max %s KiB/s, busy share %s%%\n",
                reply->value("speed_min", json()).dump().c_str(),
                reply->value("speed_max", json()).dump().c_str(),
                reply->value("busy_share", json()).dump().c_str());
  }
  if (r.cache_bytes) {
    std::printf("stripe cache: %s\n", FormatSize(*r.cache_bytes).c_str());
  }
  return 0;
}

int RunIdle(const std::string& socket) {
  std::optional<Connection> c = Connect(socket);
  if (!c) return 1;
  ControlClient& client = *c->client;
  absl::StatusOr<json> reply = client.Call({.cmd = Cmd::kStop});
  if (!reply.ok()) return Fail(reply.status());
  std::printf("stopped the running job, if any\n");
  return 0;
}

struct StopArgs {
  std::string control;  // alone: the job cancel (idle)
  std::vector<std::string> arrays;
  bool scan = false;
  std::string config;
  double timeout_s = 90;
};

// Appends (ARRAY as given, its control socket) for each of `refs`
// (ControlSocketOf); false after printing why one has none.
bool AddSocketsOf(const std::vector<std::string>& refs,
                  const std::string& config,
                  std::vector<std::pair<std::string, std::string>>* sockets) {
  bool ok = true;
  for (const std::string& ref : refs) {
    absl::StatusOr<std::string> socket = ControlSocketOf(ref, config);
    if (!socket.ok()) {
      Fail(socket.status());
      ok = false;
      continue;
    }
    sockets->emplace_back(ref, *socket);
  }
  return ok;
}

// Stops each array; goes on after a failure, exit 1 when one failed.
int RunStopArrays(const StopArgs& args) {
  // (name as the user knows it, control socket)
  std::vector<std::pair<std::string, std::string>> sockets;
  int rc = 0;
  if (args.scan) {
    absl::StatusOr<std::vector<ServedArray>> found =
        FindServedArrays({.config = args.config});
    if (!found.ok()) return Fail(found.status());
    for (const ServedArray& a : *found) {
      if (a.presence == Presence::kServed) {
        sockets.emplace_back(a.name, a.control);
      }
    }
    if (sockets.empty()) std::printf("no array is served\n");
  }
  if (!AddSocketsOf(args.arrays, args.config, &sockets)) rc = 1;
  for (const auto& [name, socket] : sockets) {
    absl::StatusOr<StoppedArray> stopped =
        StopServedArray(socket, args.timeout_s);
    if (!stopped.ok()) {
      rc = Fail(stopped.status());
      continue;
    }
    if (stopped->unclean.empty()) {
      std::printf("stopped %s (nbdkit pid %d, control %s): superblocks clean\n",
                  name.c_str(), stopped->pid, socket.c_str());
    } else {
      // The plugin leaves an array dirty only when it could not finish
      // (a resync still to do, a failed array): say so, never "clean".
      std::printf("stopped %s (nbdkit pid %d, control %s): not clean: %s\n",
                  name.c_str(), stopped->pid, socket.c_str(),
                  absl::StrJoin(stopped->unclean, " ").c_str());
    }
    std::fflush(stdout);
  }
  return rc;
}

// readonly / readwrite: ARRAY... or --control SOCKET (one socket).
struct ReadOnlyArgs {
  std::string control;
  std::vector<std::string> arrays;
  std::string config;
};

// md's --readonly / --readwrite on each array; goes on after a failure,
// exit 1 when one failed.
int RunReadOnly(const ReadOnlyArgs& args, bool read_only) {
  std::vector<std::pair<std::string, std::string>> sockets;
  int rc = 0;
  if (!args.control.empty()) sockets.emplace_back(args.control, args.control);
  if (!AddSocketsOf(args.arrays, args.config, &sockets)) rc = 1;
  for (const auto& [name, socket] : sockets) {
    std::optional<Connection> c = Connect(socket);
    if (!c) {
      rc = 1;
      continue;
    }
    absl::StatusOr<json> reply =
        c->client->Call({.cmd = read_only ? Cmd::kReadOnly : Cmd::kReadWrite});
    if (!reply.ok()) {
      rc = Fail(
          absl::Status(reply.status().code(),
                       absl::StrCat(name, ": ", reply.status().message())));
      continue;
    }
    const bool changed = reply->value("changed", true);
    const bool clean = reply->value("clean", false);
    if (!read_only) {
      std::printf("%s: %s\n", name.c_str(),
                  changed ? "read-write: writes accepted, jobs resume"
                          : "already read-write");
    } else if (!changed) {
      std::printf("%s: already read-only\n", name.c_str());
    } else {
      std::printf("%s: read-only: writes refused, jobs frozen, %s\n",
                  name.c_str(),
                  clean ? "superblocks clean"
                        : "superblocks dirty (a resync is unfinished)");
    }
    std::fflush(stdout);
  }
  return rc;
}

void AddReadOnlyCommand(CLI::App& app, Action* action, bool read_only) {
  auto args = std::make_shared<ReadOnlyArgs>();
  CLI::App* sub = app.add_subcommand(
      read_only ? "readonly" : "readwrite",
      read_only
          ? "Make served arrays read-only (md's --readonly): writes in "
            "flight finish, new ones fail (EROFS; NBD clients see EPERM), "
            "jobs freeze, the superblocks are marked clean; reads go on"
          : "Make read-only served arrays writable again (md's "
            "--readwrite); frozen jobs resume where they stopped");
  CLI::Option* control =
      sub->add_option("--control,-C", args->control, kControlHelp);
  CLI::Option* arrays = sub->add_option(
      "ARRAY", args->arrays,
      "An ARRAY name or uuid of the config, a NAME.ctl of the run "
      "directory, or a control socket's path");
  sub->add_option("--config,-c", args->config,
                  "The config file for ARRAY names (default $URAID_CONFIG, "
                  "else /etc/uraid/uraid.conf)")
      ->excludes(control);
  control->excludes(arrays);
  sub->final_callback([args, action, read_only] {
    *action = [args, read_only] {
      if (args->control.empty() && args->arrays.empty()) {
        std::fprintf(stderr, "uraid: %s needs ARRAY... or --control SOCKET\n",
                     read_only ? "readonly" : "readwrite");
        return 2;
      }
      return RunReadOnly(*args, read_only);
    };
  });
}

}  // namespace

void AddReadOnlyCommands(CLI::App& app, Action* action) {
  AddReadOnlyCommand(app, action, true);
  AddReadOnlyCommand(app, action, false);
}

int RunControlScrub(const std::string& socket, bool repair, bool wait,
                    bool watch, bool json_output) {
  return RunRemoteScrub(
      {.control = socket, .json = json_output, .wait = wait, .watch = watch},
      repair);
}

void AddFailCommand(CLI::App& app, Action* action) {
  AddMemberCommand(app, action, "fail", Cmd::kFail,
                   "Mark members of a served array faulty (md's --fail); "
                   "the array carries on degraded",
                   "Members, by the name `detail --control` shows (or "
                   "another path to the same file)",
                   false);
}

void AddRemoveCommand(CLI::App& app, Action* action) {
  AddMemberCommand(app, action, "remove", Cmd::kRemove,
                   "Remove faulty members or spares from a served array "
                   "(md's --remove); an active member must be failed first",
                   "Members, by the name `detail --control` shows", false);
}

void AddAddCommand(CLI::App& app, Action* action) {
  AddMemberCommand(app, action, "add", Cmd::kAdd,
                   "Add members to a served array as spares (md's --add); "
                   "a degraded array rebuilds onto the first at once",
                   "Member files, devices or NBD URIs (opened by the server)",
                   true);
}

void AddReplaceCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<ReplaceArgs>();
  CLI::App* sub = app.add_subcommand(
      "replace",
      "Copy an active member of a served array onto a new one while it "
      "keeps serving (md's --replace); when the copy ends the new one takes "
      "the slot and the old one is released (faulty in the superblocks, "
      "nothing to remove). If the old one fails first, the copy finishes "
      "as a rebuild from parity");
  sub->add_option("--control,-C", args->control, kControlHelp)->required();
  sub->add_option("OLD", args->old_member, "The member to replace")->required();
  sub->add_option("NEW", args->new_member,
                  "The replacement: a file, device or NBD URI (opened by "
                  "the server)")
      ->required();
  CLI::Option* wait =
      sub->add_flag("--wait,-W", args->wait,
                    "Wait until the copy ends (exit 1 unless it "
                    "completed)");
  sub->add_flag("--watch,-w", args->watch,
                "Draw the copy's progress until it ends")
      ->excludes(wait);
  sub->final_callback(
      [args, action] { *action = [args] { return RunReplace(*args); }; });
}

void AddRepairCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<ScrubArgs>();
  CLI::App* sub = app.add_subcommand(
      "repair",
      "Rewrite parity where it does not match the data (md's repair): on "
      "a served array with --control, or offline on MEMBER...");
  CLI::Option* control =
      sub->add_option("--control,-C", args->control, kControlHelp);
  sub->add_flag("--json", args->json, "Print one JSON object");
  CLI::Option* wait = sub->add_flag(
      "--wait,-W", args->wait,
      "With --control: wait until the repair ends (exit 1 unless it "
      "completed)");
  CLI::Option* watch =
      sub->add_flag("--watch,-w", args->watch,
                    "With --control: draw the repair's progress until it "
                    "ends");
  wait->needs(control)->excludes(watch);
  watch->needs(control);
  CLI::Option* force =
      sub->add_flag("--force,-f", args->force,
                    "Offline: repair an array that is dirty and "
                    "degraded");
  CLI::Option* run = sub->add_flag(
      "--run,-R", args->run,
      "Offline: assemble although a member listed as active was not given "
      "(md's --run)");
  sub->add_option("MEMBER", args->members,
                  "Offline: member files, devices or NBD URIs")
      ->excludes(control);
  force->excludes(control);
  run->excludes(control);
  sub->final_callback([args, action] {
    *action = [args] {
      if (!args->control.empty()) return RunRemoteScrub(*args, true);
      if (args->members.empty()) {
        std::fprintf(stderr,
                     "uraid: repair needs MEMBER... or --control SOCKET\n");
        return 2;
      }
      return RunOfflineRepair(*args);
    };
  });
}

void AddIdleCommand(CLI::App& app, Action* action) {
  auto control = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "idle",
      "Stop the running background job of a served array (md's "
      "sync_action idle); a rebuild resumes at the next start. The array "
      "keeps serving");
  sub->add_option("--control,-C", *control, kControlHelp)->required();
  sub->final_callback(
      [control, action] { *action = [control] { return RunIdle(*control); }; });
}

void AddStopCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<StopArgs>();
  CLI::App* sub = app.add_subcommand(
      "stop",
      "Stop served arrays (md's --stop): `stop ARRAY...` or `stop --scan` "
      "flushes, marks the superblocks clean and ends the server. `stop "
      "--control SOCKET` alone stops only the running job (as `idle`)");
  CLI::Option* control = sub->add_option(
      "--control,-C", args->control,
      "Alone: stop the running job of this array, which keeps serving (as "
      "`uraid idle --control`). To stop the array on a control socket, "
      "give the socket as ARRAY");
  CLI::Option* arrays = sub->add_option(
      "ARRAY", args->arrays,
      "An ARRAY name or uuid of the config, a NAME.ctl of the run "
      "directory, or a control socket's path");
  CLI::Option* scan =
      sub->add_flag("--scan,-s", args->scan, "Stop every served array");
  sub->add_option("--config,-c", args->config,
                  "The config file for ARRAY names (default $URAID_CONFIG, "
                  "else /etc/uraid/uraid.conf)")
      ->excludes(control);
  sub->add_option("--timeout", args->timeout_s,
                  "Seconds to wait for each server to exit")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->excludes(control);
  control->excludes(arrays)->excludes(scan);
  sub->final_callback([args, action] {
    *action = [args] {
      if (!args->control.empty()) return RunIdle(args->control);
      if (args->arrays.empty() && !args->scan) {
        std::fprintf(stderr,
                     "uraid: stop needs ARRAY..., --scan, or --control "
                     "SOCKET (the running job only)\n");
        return 2;
      }
      return RunStopArrays(*args);
    };
  });
}

void AddSetCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<SetArgs>();
  CLI::App* sub = app.add_subcommand(
      "set",
      "Change a served array's rebuild/check speed limits (md's "
      "sync_speed_min/max, per member) or its stripe cache size");
  sub->add_option("--control,-C", args->control, kControlHelp)->required();
  sub->add_option("--speed-min", args->speed_min,
                  "Lowest rate a job keeps while clients are busy: KiB/s, "
                  "or bytes/s with a suffix (100M)")
      ->check(RateValidator());
  sub->add_option("--speed-max", args->speed_max,
                  "Highest rate of a job: KiB/s, or bytes/s with a suffix")
      ->check(RateValidator());
  sub->add_option("--busy-share", args->busy_share,
                  "Share of its time (percent, 0-90; default 25) a job keeps "
                  "while clients are busy, above --speed-min and never "
                  "above --speed-max; 0 is md's plain minimum")
      ->check(CLI::Range(0, 90));
  sub->add_option("--cache", args->cache,
                  "Stripe cache bound (0 turns it off), e.g. 256M")
      ->check(SizeValidator());
  sub->final_callback([args, action] {
    *action = [args] {
      if (args->speed_min.empty() && args->speed_max.empty() &&
          args->busy_share < 0 && args->cache.empty()) {
        std::fprintf(stderr,
                     "uraid: set needs --speed-min, --speed-max, --busy-share "
                     "or --cache\n");
        return 2;
      }
      return RunSet(*args);
    };
  });
}

}  // namespace uraid::tool
