// SPDX-License-Identifier: MIT
// `uraid status` (and `uraid detail --scan`): every array served on this
// machine at a glance, one /proc/mdstat block each (mdstat_format.h), from
// the config's ARRAYs and the run directory's control sockets
// (served_arrays.h). The exit status is mdadm --detail --test's for the
// worst array served (array_health.h): 0 all healthy, 1 one degraded, 2
// one failed, 4 a control socket that did not answer as uraid does. An
// array of the config that nobody serves is listed ("not served") but is
// no fault: a configured array may be stopped on purpose. --watch redraws
// every --delay seconds until SIGINT or SIGTERM, like watch(1) over
// /proc/mdstat.

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array_health.h"
#include "commands.h"
#include "job_progress.h"
#include "mdstat_format.h"
#include "nlohmann/json.hpp"
#include "served_arrays.h"
#include "uraid/config_file.h"
#include "uraid/info_json.h"

namespace uraid::tool {
namespace {

using ojson = nlohmann::ordered_json;

struct StatusCmdArgs {
  bool json = false;
  bool watch = false;
  double delay_s = 2;
  FindOptions find;  // --config, --control
};

// md's verdict on one entry: served arrays by their state, a socket that
// did not answer 4, an array nobody serves none (nullopt).
std::optional<Health> EntryHealth(const ServedArray& a) {
  switch (a.presence) {
    case Presence::kServed:
      return HealthOf(*a.info);
    case Presence::kUnreadable:
      return Health::kUnreadable;
    case Presence::kNotServed:
      break;
  }
  return std::nullopt;
}

int WorstHealth(const std::vector<ServedArray>& arrays) {
  int worst = 0;
  for (const ServedArray& a : arrays) {
    if (std::optional<Health> h = EntryHealth(a)) {
      worst = std::max(worst, static_cast<int>(*h));
    }
  }
  return worst;
}

const char* PresenceWord(Presence p) {
  switch (p) {
    case Presence::kServed:
      return "served";
    case Presence::kUnreadable:
      return "unreadable";
    case Presence::kNotServed:
      break;
  }
  return "not served";
}

ojson EntryJson(const ServedArray& a) {
  ojson j = {{"name", a.name},
             {"control", a.control},
             {"configured", a.configured},
             {"presence", PresenceWord(a.presence)}};
  const std::optional<Health> h = EntryHealth(a);
  j["health"] = h ? ojson(static_cast<int>(*h)) : ojson();
  if (a.presence != Presence::kServed) {
    j["error"] = std::string(a.error.message());
    return j;
  }
  const ArrayInfo& info = *a.info;
  j["state"] = ArrayStateText(info);
  j["slot_map"] = MdstatSlotMap(info);
  ojson detail = ojson::parse(InfoToJsonText(info));
  detail["job"]["percent"] = JobPercent(info.job);
  detail["job"]["eta_seconds"] = JobEtaSeconds(info.job);
  j["detail"] = std::move(detail);
  return j;
}

// One round: the arrays found, printed; returns the exit code.
int StatusRound(const StatusCmdArgs& args) {
  absl::StatusOr<std::vector<ServedArray>> arrays = FindServedArrays(args.find);
  if (!arrays.ok()) {
    std::fprintf(stderr, "uraid: %s\n",
                 std::string(arrays.status().message()).c_str());
    return static_cast<int>(Health::kUnreadable);
  }
  const int worst = WorstHealth(*arrays);
  if (args.json) {
    ojson out = {{"arrays", ojson::array()}, {"health", worst}};
    for (const ServedArray& a : *arrays) out["arrays"].push_back(EntryJson(a));
    std::printf(
        "%s\n",
        out.dump(2, ' ', false, ojson::error_handler_t::replace).c_str());
    return worst;
  }
  if (arrays->empty()) {
    std::printf("no array is served (none in %s, no control socket in %s)\n",
                args.find.config.empty() ? DefaultConfigPath().c_str()
                                         : args.find.config.c_str(),
                DefaultRunDir().c_str());
  }
  bool first = true;
  for (const ServedArray& a : *arrays) {
    if (!first) std::printf("\n");
    first = false;
    if (a.presence == Presence::kServed) {
      std::fputs(MdstatBlock(a.name, a.control, *a.info).c_str(), stdout);
    } else {
      std::printf("%s : %s (%s)\n", a.name.c_str(), PresenceWord(a.presence),
                  std::string(a.error.message()).c_str());
    }
  }
  return worst;
}

int RunStatusCommand(const StatusCmdArgs& args) {
  if (!args.watch) return StatusRound(args);
  // SIGINT and SIGTERM end the watch between rounds, taken by sigtimedwait
  // (no handler races with printing).
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  const bool tty = isatty(STDOUT_FILENO) == 1;
  int code = 0;
  while (true) {
    if (tty) std::printf("\033[H\033[2J");
    const time_t now = time(nullptr);
    char when[64] = "";
    strftime(when, sizeof when, "%F %T", localtime(&now));
    std::printf("Every %gs: uraid status%*s%s\n\n", args.delay_s, 4, "", when);
    code = StatusRound(args);
    std::printf("\n");
    std::fflush(stdout);
    const timespec wait = {
        static_cast<time_t>(args.delay_s),
        static_cast<long>((args.delay_s - static_cast<time_t>(args.delay_s)) *
                          1e9)};
    const int sig = sigtimedwait(&stop, nullptr, &wait);
    if (sig == SIGINT || sig == SIGTERM) return code;
  }
}

}  // namespace

int RunStatusScan(bool json, const std::string& config) {
  return RunStatusCommand({.json = json, .find = {.config = config}});
}

void AddStatusCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<StatusCmdArgs>();
  CLI::App* sub = app.add_subcommand(
      "status",
      "Every array served on this machine, one /proc/mdstat block each "
      "(also `detail --scan`): the config's ARRAYs and the control sockets "
      "in " +
          DefaultRunDir() +
          ". Exit status as detail --test for the worst array: 0 healthy, 1 "
          "degraded, 2 failed, 4 a server that cannot be read");
  CLI::Option* json =
      sub->add_flag("--json", args->json, "Print one JSON object");
  sub->add_flag("--watch,-w", args->watch,
                "Redraw every --delay seconds until interrupted")
      ->excludes(json);
  sub->add_option("--delay,-d", args->delay_s,
                  "Seconds between redraws with --watch")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  AddFindOptions(sub, &args->find);
  sub->final_callback(
      [args, action] { *action = [args] { return RunStatusCommand(*args); }; });
}

}  // namespace uraid::tool
