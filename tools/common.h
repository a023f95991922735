// SPDX-License-Identifier: MIT
// Helpers shared by the `uraid` subcommands: error reporting in the house
// format, opening members, and md-style formatting of times and roles.

#ifndef URAID_TOOLS_COMMON_H_
#define URAID_TOOLS_COMMON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "uraid/array.h"
#include "uraid/member.h"

namespace uraid::tool {

// Prints "uraid: <message>" to stderr and returns 1, the exit code for a
// command that failed at run time.
int Fail(const absl::Status& status);
int Fail(std::string_view message);

// A CLI11 validator named `name` accepting what `parse` (text ->
// absl::StatusOr<T>) accepts; otherwise parse's message is the usage error
// (exit 2), caught before anything is opened.
template <typename Parse>
CLI::Validator StatusValidator(Parse parse, std::string name) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        auto parsed = parse(text);
        return parsed.ok() ? std::string()
                           : std::string(parsed.status().message());
      },
      std::move(name));
}

// StatusValidator of ParseSize: a bad size is a usage error.
CLI::Validator SizeValidator();

// StatusValidator of ParseUnitSizeOption(option, ...): for the options mdadm
// reads in KiB (--chunk, --size, ...), where a number without a unit is a
// usage error that asks what was meant.
CLI::Validator UnitSizeValidator(std::string option);

// Opens every member (a path or an NBD URI) with `options`; the first
// failure is returned and the members opened so far are closed.
absl::StatusOr<std::vector<std::unique_ptr<Member>>> OpenMembers(
    const std::vector<std::string>& paths, const MemberOptions& options);

// Assembles `paths` without writing to them or locking them, for commands
// that only look (detail, check). Safe beside a running server. `force` is
// md's: accept an array that is both dirty and degraded.
absl::StatusOr<std::unique_ptr<Array>> AssembleReadOnly(
    const std::vector<std::string>& paths, bool force = false);

// md's "raid5" / "raid4" / "-unknown-".
std::string LevelName(int level);

// ctime(3) without the newline, as mdadm prints creation and update times
// (local time). `md_time` is md's encoding: low 40 bits are seconds.
std::string FormatMdTime(uint64_t md_time);

// "left-symmetric", or mdadm's "-unknown-" for a number md does not define.
std::string LayoutNameOrUnknown(uint32_t layout);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_COMMON_H_
