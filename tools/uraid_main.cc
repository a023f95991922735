// SPDX-License-Identifier: MIT
// `uraid`: an mdadm-like tool for uraid arrays. See README.md for usage.

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "commands.h"
#include "suggest.h"
#include "uraid/version.h"

namespace {

// The first word that is not an option names the command. An unknown one
// is refused here, with the closest command's name, rather than by CLI11's
// "The following arguments were not expected". Returns 0 to go on, or the
// exit code (2, a usage error).
int CheckCommandName(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') {
      if (std::strcmp(argv[i], "--") == 0) return 0;
      // A top-level option that takes a value ("--config FILE") skips it.
      const std::string arg = argv[i];
      if (arg.find('=') == std::string::npos) {
        const CLI::Option* opt = app.get_option_no_throw(arg);
        if (opt != nullptr && opt->get_type_size_max() > 0) ++i;
      }
      continue;
    }
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->check_name(argv[i])) return 0;
      names.push_back(sub->get_name());
    }
    const std::string best = uraid::tool::ClosestName(argv[i], names);
    std::fprintf(stderr, "uraid: unknown command '%s'%s\n", argv[i],
                 best.empty() ? "" : (" (did you mean " + best + "?)").c_str());
    std::fprintf(stderr, "Run with --help for the list of commands.\n");
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"uraid: userspace RAID4/5 with Linux md's on-disk format"};
  app.name("uraid");
  app.require_subcommand(1);
  app.set_version_flag("--version,-V",
                       std::string("uraid ") + URAID_VERSION_STRING,
                       "Print the version and exit");
  app.failure_message([](const CLI::App*, const CLI::Error& e) -> std::string {
    // House format for errors, usage errors included.
    return "uraid: " + std::string(e.what()) +
           "\nRun with --help for more information.\n";
  });

  uraid::tool::Action action;
  uraid::tool::AddCreateCommand(app, &action);
  uraid::tool::AddExamineCommand(app, &action);
  uraid::tool::AddDetailCommand(app, &action);
  uraid::tool::AddCheckCommand(app, &action);
  uraid::tool::AddMapCommand(app, &action);
  uraid::tool::AddServeCommand(app, &action);
  uraid::tool::AddFailCommand(app, &action);
  uraid::tool::AddRemoveCommand(app, &action);
  uraid::tool::AddAddCommand(app, &action);
  uraid::tool::AddReplaceCommand(app, &action);
  uraid::tool::AddRepairCommand(app, &action);
  uraid::tool::AddStopCommand(app, &action);
  uraid::tool::AddIdleCommand(app, &action);
  uraid::tool::AddSetCommand(app, &action);
  uraid::tool::AddReadOnlyCommands(app, &action);
  uraid::tool::AddGrowCommand(app, &action);
  uraid::tool::AddZeroSuperblockCommand(app, &action);
  uraid::tool::AddMonitorCommand(app, &action);
  uraid::tool::AddStatusCommand(app, &action);
  uraid::tool::AddMetricsCommand(app, &action);

  if (int rc = CheckCommandName(app, argc, argv)) return rc;
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (!action) return 2;  // unreachable: require_subcommand(1)
  try {
    return action();
  } catch (const std::exception& e) {
    // The library reports through absl::Status; this is only for the
    // standard library (bad_alloc, JSON encoding of odd names, ...).
    std::fprintf(stderr, "uraid: %s\n", e.what());
    return 1;
  }
}
