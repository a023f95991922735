// SPDX-License-Identifier: MIT
// File: uraid/config_file.h
//
// uraid.conf: the array configuration file, in mdadm.conf's words.
//
//   # comment (from '#' at the start of a word to the end of the line)
//   DEVICE /dev/disk/by-id/* /srv/raid/*.img     several globs per line,
//   DEVICE nbd://host/export                     several lines; NBD URIs
//                                                as they are
//   DEVICE partitions                            mdadm's word: every
//                                                device of /proc/partitions
//   ARRAY NAME uuid=UUID [bitmap=FILE] [socket=PATH] [control=PATH]
//         [cache=SIZE] [readonly] [control-group=GROUP] [spares=N]
//         [timeout=MS] [cache-age=MS] [log=WHERE] [run] [direct]
//         [metadata=1.2] [name=MD_NAME]
//
// NAME may also be written as mdadm does, /dev/md/NAME (or /dev/mdN, taken
// as "mdN"), so that mdadm --detail --scan lines are accepted. mdadm's
// metadata= must be 1.2 (the only format uraid reads; 1.x counts, as
// mdadm writes "1.2" for it); name= is md's array name (host:name), kept
// for reference. The other tags are the plugin's keys of the same names
// (see nbdkit-uraid-plugin(1)), passed on by `uraid serve NAME` (and so
// the uraid@ unit) and applied by the plugin's own array= (a key given on
// either command line wins).
//   MAILADDR root@example.org
//   PROGRAM /usr/local/sbin/raid-alert
//
// As in mdadm.conf, keywords are case-insensitive and may be shortened to
// their first three letters or more ("dev", "ARR"), and a line that starts
// with whitespace continues the previous line. UUIDs are 32 hex digits,
// any of ':', '-', '.' between them (mdadm's and blkid's spellings).
// NAME is what `uraid serve NAME` and the systemd units (uraid@NAME) use:
// letters, digits, '.', '_', '-' and '+', not starting with '.' or '-'.
//
// Parsing is pure (text in, struct out); LoadConfigFile reads the file.
// Errors are InvalidArgument "FILE:LINE: what", e.g.
// "uraid.conf:7: unknown keyword 'ARRY'".
//
// Used by the `uraid` tool (serve, examine --scan, monitor --scan) and the
// nbdkit plugin (array= config=); public so that they, and embedders that
// want mdadm.conf-style discovery, need only the installed headers.
// Thread-compatible; no state.

#ifndef URAID_CONFIG_FILE_H_
#define URAID_CONFIG_FILE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "uraid/export.h"

namespace uraid {

// One ARRAY line.
struct ConfigArray {
  std::string name;
  std::array<uint8_t, 16> uuid{};
  // Paths as written (the tool and plugin make them absolute); empty: not
  // given.
  std::string bitmap;
  std::string socket;
  std::string control;
  std::optional<uint64_t> cache_bytes;  // cache=SIZE, K/M/G/T binary
  bool readonly = false;
  // The plugin's keys of the same names, as written; empty/unset: not
  // given.
  std::string control_group;             // control-group=GROUP (name or gid)
  std::optional<int> spares;             // spares=N, 0..64
  std::optional<uint32_t> timeout_ms;    // timeout=MS, 1 or more
  std::optional<uint32_t> cache_age_ms;  // cache-age=MS
  std::string log;                       // log=auto|stderr|syslog|journal
  bool run = false;                      // run: start degraded (md's --run)
  bool direct = false;                   // direct: O_DIRECT
  std::string md_name;                   // name= (mdadm's), for reference
  int line = 0;                          // where the ARRAY line starts
};

struct ConfigFile {
  std::string path;                   // as given to the parser, for messages
  std::vector<std::string> devices;   // every DEVICE word, in order
  std::vector<ConfigArray> arrays;    // in order
  std::vector<std::string> mailaddr;  // MAILADDR words
  std::string program;                // PROGRAM, empty: none
};

// Where the tool and the units look without --config: $URAID_CONFIG when
// set and not empty (tests, staged installs), else /etc/uraid/uraid.conf.
URAID_EXPORT std::string DefaultConfigPath();

// Where served arrays' sockets, control sockets and pid files go by
// default (`uraid serve`, the units) and where `uraid status`, `metrics`
// and `stop` look for them: $URAID_RUN_DIR when set and not empty (tests,
// a server run without root), else /run/uraid.
URAID_EXPORT std::string DefaultRunDir();

// Parses `text`; `path` only names the file in messages, as given
// ("/etc/uraid/uraid.conf:7: ..."), so the user finds the file.
// Refuses unknown keywords and ARRAY tags, ARRAY lines without uuid= or
// with a bad one, bad names and sizes, a second array with the same name
// or uuid (naming both lines), and a second PROGRAM.
URAID_EXPORT absl::StatusOr<ConfigFile> ParseConfig(absl::string_view text,
                                                    const std::string& path);

// Reads and parses `path`. A missing file is NotFound naming it.
URAID_EXPORT absl::StatusOr<ConfigFile> LoadConfigFile(const std::string& path);

// True when `name` is a valid ARRAY name (see above).
URAID_EXPORT bool ValidArrayName(absl::string_view name);

// The array called `name_or_uuid` (an ARRAY name, or its uuid in any
// spelling ParseUuid takes), or nullptr.
URAID_EXPORT const ConfigArray* FindConfigArray(const ConfigFile& config,
                                                absl::string_view name_or_uuid);

// The control socket of a configured array: its control= or, as
// `uraid serve` gives every array it serves from the config,
// DefaultRunDir()/NAME.ctl (/run/uraid/NAME.ctl).
URAID_EXPORT std::string ConfigControlSocket(const ConfigArray& array);

}  // namespace uraid

#endif  // URAID_CONFIG_FILE_H_
