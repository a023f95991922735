// SPDX-License-Identifier: MIT
#include "common.h"

#include <time.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "size_parse.h"
#include "uraid/geometry.h"

namespace uraid::tool {

int Fail(const absl::Status& status) {
  return Fail(std::string(status.message()));
}

int Fail(std::string_view message) {
  std::fprintf(stderr, "uraid: %.*s\n", static_cast<int>(message.size()),
               message.data());
  return 1;
}

CLI::Validator SizeValidator() { return StatusValidator(ParseSize, "SIZE"); }

CLI::Validator UnitSizeValidator(std::string option) {
  return StatusValidator(
      [option = std::move(option)](std::string_view text) {
        return ParseUnitSizeOption(option, text);
      },
      "SIZE");
}

absl::StatusOr<std::vector<std::unique_ptr<Member>>> OpenMembers(
    const std::vector<std::string>& paths, const MemberOptions& options) {
  std::vector<std::unique_ptr<Member>> members;
  members.reserve(paths.size());
  for (const std::string& path : paths) {
    absl::StatusOr<std::unique_ptr<Member>> member = OpenMember(path, options);
    if (!member.ok()) return member.status();
    members.push_back(*std::move(member));
  }
  return members;
}

absl::StatusOr<std::unique_ptr<Array>> AssembleReadOnly(
    const std::vector<std::string>& paths, bool force) {
  MemberOptions member_options;
  member_options.read_only = true;
  // No lock: a served array's members are locked by nbdkit, and looking at
  // them must still work.
  member_options.lock = false;
  absl::StatusOr<std::vector<std::unique_ptr<Member>>> members =
      OpenMembers(paths, member_options);
  if (!members.ok()) return members.status();
  AssembleOptions options;
  options.read_only = true;
  options.force = force;
  // Looking writes nothing, so a member left out cannot go stale: no --run.
  options.run = true;
  return Array::Assemble(*std::move(members), options);
}

std::string LevelName(int level) {
  switch (level) {
    case 4:
      return "raid4";
    case 5:
      return "raid5";
    case 6:
      return "raid6";
    default:
      return "-unknown-";
  }
}

std::string FormatMdTime(uint64_t md_time) {
  const time_t seconds = static_cast<time_t>(md_time & 0xFFFFFFFFFFull);
  char buf[64];
  if (ctime_r(&seconds, buf) == nullptr) return absl::StrCat(seconds);
  std::string text(buf);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

std::string LayoutNameOrUnknown(uint32_t layout) {
  // md's numbers: 0..5, and RAID6's 8..10 and 16..20.
  const std::string_view name = layout > 20
                                    ? std::string_view("unknown")
                                    : LayoutName(static_cast<Layout>(layout));
  if (name == "unknown") return "-unknown-";
  return std::string(name);
}

}  // namespace uraid::tool
