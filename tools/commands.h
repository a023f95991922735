// The `uraid` subcommands. Each Add*Command registers one CLI11 subcommand
// on `app`; when the user picks it, CLI11 stores the command's action in
// `*action` and uraid_main runs it after parsing, so that parse errors (exit
// 2) and run-time errors (exit 1) stay apart.

#ifndef URAID_TOOLS_COMMANDS_H_
#define URAID_TOOLS_COMMANDS_H_

#include <functional>

#include "CLI/CLI.hpp"

namespace uraid::tool {

// Runs a parsed command; returns the process exit code.
using Action = std::function<int()>;

void AddCreateCommand(CLI::App& app, Action* action);
void AddExamineCommand(CLI::App& app, Action* action);
void AddDetailCommand(CLI::App& app, Action* action);
void AddCheckCommand(CLI::App& app, Action* action);
void AddMapCommand(CLI::App& app, Action* action);
void AddServeCommand(CLI::App& app, Action* action);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_COMMANDS_H_
