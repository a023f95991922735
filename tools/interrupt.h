// SPDX-License-Identifier: MIT
// Ctrl-C for the tool's long offline commands (create's initial parity,
// grow's reshape): the first SIGINT or SIGTERM asks for a clean stop, which
// the command polls for; a second one kills (SA_RESETHAND), which is safe
// too because progress is in the superblocks.
//
// Thread-safety: Interrupted() may be called from any thread; the flag is
// set only by the signal handler.

#ifndef URAID_TOOLS_INTERRUPT_H_
#define URAID_TOOLS_INTERRUPT_H_

namespace uraid::tool {

// Installs the handlers for SIGINT and SIGTERM (once per command).
void CatchInterrupts();

// Whether a SIGINT or SIGTERM has arrived since CatchInterrupts().
bool Interrupted();

}  // namespace uraid::tool

#endif  // URAID_TOOLS_INTERRUPT_H_
