// SPDX-License-Identifier: MIT
// Where the plugin's log lines go, by severity (uraid/events.h):
//   - stderr when nbdkit runs in the foreground with a real stderr:
//     "uraid: NAME: LEVEL: message" (routine lines too: an admin running
//     it by hand wants to see them);
//   - the systemd journal when stderr is the journal's stream (a unit in
//     the foreground: $JOURNAL_STREAM matches stderr) or nbdkit has
//     daemonised and the journal is running, with the fields
//     URAID_ARRAY=, URAID_MEMBER=, URAID_SLOT=, URAID_EVENT= (built with
//     libsystemd; without it the stream gets "<N>"-prefixed lines, which
//     journald reads as priorities);
//   - syslog otherwise once daemonised (nbdkit then points stderr at
//     /dev/null): ident "uraid", LOG_DAEMON, the array's name in each line.
// The plugin key log=auto|stderr|syslog|journal overrides the choice.
//
// Thread-safety: Write may be called from any thread; Choose and
// SetArrayName are called by the plugin's load-time callbacks only.

#ifndef URAID_NBDPLUGIN_PLUGIN_LOG_H_
#define URAID_NBDPLUGIN_PLUGIN_LOG_H_

#include <string>

#include "uraid/events.h"

namespace uraid::plugin {

enum class LogTarget { kAuto, kStderr, kSyslog, kJournal };

// "auto", "stderr", "syslog", "journal" -> target; false for anything else.
bool ParseLogTarget(const std::string& text, LogTarget* out);

// Decides where lines go now (call again after nbdkit forks: stderr may
// have become /dev/null). kJournal without a journal falls back to syslog.
void ChooseLogTarget(LogTarget wanted);
// The array's name for lines that carry no event (after assembly).
void SetLogArrayName(const std::string& name);
// Sends one record where ChooseLogTarget decided.
void WriteLog(const LogRecord& record);
// The target in force (for the plugin's own debug line).
const char* LogTargetName();

}  // namespace uraid::plugin

#endif  // URAID_NBDPLUGIN_PLUGIN_LOG_H_
