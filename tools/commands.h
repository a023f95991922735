// SPDX-License-Identifier: MIT
// The `uraid` subcommands. Each Add*Command registers one CLI11 subcommand
// on `app`; when the user picks it, CLI11 stores the command's action in
// `*action` and uraid_main runs it after parsing, so that parse errors (exit
// 2) and run-time errors (exit 1) stay apart.

#ifndef URAID_TOOLS_COMMANDS_H_
#define URAID_TOOLS_COMMANDS_H_

#include <functional>
#include <string>

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

// On a served array, through its control socket (cmd_control.cc).
void AddFailCommand(CLI::App& app, Action* action);
void AddRemoveCommand(CLI::App& app, Action* action);
void AddAddCommand(CLI::App& app, Action* action);
void AddReplaceCommand(CLI::App& app, Action* action);
void AddRepairCommand(CLI::App& app, Action* action);
// `stop ARRAY...|--scan` stops served arrays; `stop --control S` alone
// and `idle --control S` stop the running job.
void AddStopCommand(CLI::App& app, Action* action);
void AddIdleCommand(CLI::App& app, Action* action);
void AddSetCommand(CLI::App& app, Action* action);
// readonly / readwrite (md's --readonly / --readwrite on a live array).
void AddReadOnlyCommands(CLI::App& app, Action* action);

// Every array served on this machine, mdstat-style (cmd_status.cc);
// RunStatusScan is `detail --scan [--json]`.
void AddStatusCommand(CLI::App& app, Action* action);
int RunStatusScan(bool json, const std::string& config);

// The served arrays in Prometheus's text format (cmd_metrics.cc).
void AddMetricsCommand(CLI::App& app, Action* action);

// Follows served arrays' event streams and raises alerts (cmd_monitor.cc).
void AddMonitorCommand(CLI::App& app, Action* action);

// Reshape (cmd_grow.cc): on a served array with --control, or offline.
void AddGrowCommand(CLI::App& app, Action* action);

// Erases members' md superblocks (cmd_zero_superblock.cc).
void AddZeroSuperblockCommand(CLI::App& app, Action* action);

// `check --control SOCKET` (and `repair --control`): starts a scrub on a
// served array; with `wait` or `watch` follows it to the end. Exit code.
int RunControlScrub(const std::string& socket, bool repair, bool wait,
                    bool watch, bool json_output);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_COMMANDS_H_
