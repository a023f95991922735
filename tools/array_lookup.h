// SPDX-License-Identifier: MIT
// Finding configured arrays for `uraid serve NAME|UUID`, `serve --scan`
// and `examine --scan`: the config file (uraid.conf, libraid's
// config_file.h) and the members among its DEVICE candidates
// (member_scan.h), with the tool's messages on stderr.

#ifndef URAID_TOOLS_ARRAY_LOOKUP_H_
#define URAID_TOOLS_ARRAY_LOOKUP_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "uraid/config_file.h"
#include "uraid/superblock.h"

namespace uraid::tool {

// Loads `path`, or DefaultConfigPath() when it is empty.
absl::StatusOr<ConfigFile> LoadToolConfig(const std::string& path);

// True when `arg` names an array rather than a member: not an NBD URI and
// no file of that name exists (a member path that does not exist is then
// reported as "no ARRAY ... and no such file").
bool LooksLikeArrayRef(const std::string& arg);

// The array `ref` (an ARRAY name, or a uuid: configured or not) of
// `config`. A uuid that no ARRAY line has is still looked for among the
// DEVICE candidates (its name then is the superblock's). NotFound names
// the config file.
absl::StatusOr<ConfigArray> FindArrayRef(const ConfigFile& config,
                                         const std::string& ref);

// The members of `array` among the DEVICE candidates of `config`, freshest
// superblocks first (member_scan.h). Each candidate left out is reported on
// stderr as "uraid: NAME: leaving out PATH: why". Errors name the array
// and the config file.
absl::StatusOr<std::vector<std::string>> FindMembers(const ConfigFile& config,
                                                     const ConfigArray& array);

// A config name for an array from its superblock's name: md's
// "host:name" loses the host, characters ValidArrayName refuses become
// '_', and an empty name becomes "md-" and the uuid's first 8 digits.
std::string ConfigNameFor(const std::string& set_name,
                          const std::array<uint8_t, 16>& uuid);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_ARRAY_LOOKUP_H_
