// SPDX-License-Identifier: MIT
// `uraid check`: offline parity scrub (md's "check" action): reads every
// stripe and counts those whose parity does not match their data; at
// level 6, with every member present, it also names the chunk P and Q
// locate as the one bad chunk of a stripe (mdadm's raid6check). Nothing
// is written. With --control SOCKET it starts the check on a served array
// instead (cmd_control.cc); `repair` rewrites wrong parity.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "commands.h"
#include "common.h"
#include "nlohmann/json.hpp"
#include "uraid/array.h"

namespace uraid::tool {
namespace {

struct CheckArgs {
  bool json = false;
  bool force = false;
  bool wait = false;
  bool watch = false;
  std::string control;
  std::vector<std::string> members;
};

int RunCheck(const CheckArgs& args) {
  if (!args.control.empty()) {
    return RunControlScrub(args.control, /*repair=*/false, args.wait,
                           args.watch, args.json);
  }
  if (args.members.empty()) {
    std::fprintf(stderr, "uraid: check needs MEMBER... or --control SOCKET\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Array>> array =
      AssembleReadOnly(args.members, args.force);
  if (!array.ok()) return Fail(array.status());
  const ArrayInfo info = (*array)->Info();
  absl::StatusOr<JobInfo> report = (*array)->CheckParityReport();
  if (!report.ok()) return Fail(report.status());
  const uint64_t mismatches = report->mismatches;
  // RAID6: the chunks P and Q locate, with the member holding each.
  auto member_of = [&](uint64_t slot) -> std::string {
    for (const SlotInfo& si : info.slots) {
      if (si.slot == static_cast<int>(slot)) return si.name;
    }
    return "?";
  };

  if (args.json) {
    nlohmann::ordered_json located = nlohmann::ordered_json::array();
    for (size_t i = 0; i < report->first_located.size(); ++i) {
      const uint64_t slot = report->first_located_slots[i];
      located.push_back({{"stripe", report->first_located[i]},
                         {"slot", slot},
                         {"member", member_of(slot)}});
    }
    nlohmann::ordered_json j = {
        {"stripes", info.geometry.stripe_count()},
        {"mismatches", mismatches},
        {"first_mismatched_stripes", report->first_mismatches},
        {"degraded", info.degraded},
        {"located_mismatches", report->located_mismatches},
        {"first_located", located}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("checked %llu stripes%s: %llu mismatches\n",
                static_cast<unsigned long long>(info.geometry.stripe_count()),
                info.degraded ? " (degraded: parity cannot be verified "
                                "where a member is missing)"
                              : "",
                static_cast<unsigned long long>(mismatches));
    if (!report->first_mismatches.empty()) {
      std::printf("first mismatched stripes: %s\n",
                  absl::StrJoin(report->first_mismatches, " ").c_str());
    }
    if (report->located_mismatches > 0) {
      std::printf("P and Q name the bad chunk in %llu of them:\n",
                  static_cast<unsigned long long>(report->located_mismatches));
      for (size_t i = 0; i < report->first_located.size(); ++i) {
        const uint64_t slot = report->first_located_slots[i];
        std::printf("  stripe %llu: slot %llu (%s)\n",
                    static_cast<unsigned long long>(report->first_located[i]),
                    static_cast<unsigned long long>(slot),
                    member_of(slot).c_str());
      }
    }
  }
  return mismatches > 0 ? 1 : 0;
}

}  // namespace

void AddCheckCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* sub = app.add_subcommand(
      "check",
      "Offline parity check: count stripes whose parity is wrong "
      "(exit 1 if any)");
  sub->add_flag("--json", args->json, "Print one JSON object");
  CLI::Option* force =
      sub->add_flag("--force,-f", args->force,
                    "Check an array that is both dirty and degraded");
  CLI::Option* control = sub->add_option(
      "--control,-C", args->control,
      "Start the check on a served array through its control socket");
  CLI::Option* wait = sub->add_flag(
      "--wait,-W", args->wait,
      "With --control: wait for the check's end (exit 1 on mismatches)");
  CLI::Option* watch =
      sub->add_flag("--watch,-w", args->watch,
                    "With --control: draw the check's progress until it ends");
  wait->needs(control)->excludes(watch);
  watch->needs(control);
  sub->add_option("MEMBER", args->members, "Member files, devices or NBD URIs")
      ->excludes(control);
  force->excludes(control);
  sub->final_callback(
      [args, action] { *action = [args] { return RunCheck(*args); }; });
}

}  // namespace uraid::tool
