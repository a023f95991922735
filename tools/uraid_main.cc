// `uraid`: an mdadm-like tool for uraid arrays. See README.md for usage.

#include <cstdio>
#include <exception>
#include <string>

#include "CLI/CLI.hpp"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"uraid: userspace RAID4/5 with Linux md's on-disk format"};
  app.name("uraid");
  app.require_subcommand(1);
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
  uraid::tool::AddSetCommand(app, &action);
  uraid::tool::AddGrowCommand(app, &action);
  uraid::tool::AddMonitorCommand(app, &action);

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
