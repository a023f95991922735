// SPDX-License-Identifier: MIT
#include "array_lookup.h"

#include <sys/stat.h>

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "uraid/member.h"
#include "uraid/member_scan.h"
#include "uraid/superblock.h"

namespace uraid::tool {

absl::StatusOr<ConfigFile> LoadToolConfig(const std::string& path) {
  return LoadConfigFile(path.empty() ? DefaultConfigPath() : path);
}

bool LooksLikeArrayRef(const std::string& arg) {
  struct stat st;
  return !IsMemberUri(arg) && lstat(arg.c_str(), &st) != 0;
}

absl::StatusOr<ConfigArray> FindArrayRef(const ConfigFile& config,
                                         const std::string& ref) {
  absl::StatusOr<ArrayRef> r = ResolveArrayRef(config, ref);
  if (!r.ok()) {
    return absl::NotFoundError(absl::StrCat(
        "no ARRAY named '", ref, "' in ", config.path,
        " and no member file of that name (give a member path, an ARRAY "
        "name, or a uuid)"));
  }
  if (r->entry.has_value()) return *r->entry;
  ConfigArray a;
  a.uuid = r->uuid;
  return a;
}

absl::StatusOr<std::vector<std::string>> FindMembers(const ConfigFile& config,
                                                     const ConfigArray& array) {
  const std::string label =
      array.name.empty() ? FormatUuid(array.uuid) : array.name;
  if (config.devices.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(config.path,
                     " has no DEVICE line: nowhere to look for the members "
                     "of ",
                     label));
  }
  size_t candidates = 0;
  absl::StatusOr<MemberSelection> sel =
      FindConfiguredMembers(config, array.uuid, MemberOptions{}, &candidates);
  if (!sel.ok()) {
    return absl::Status(
        sel.status().code(),
        absl::StrCat(label, ": ", sel.status().message(), " (DEVICE ",
                     absl::StrJoin(config.devices, " "), " in ", config.path,
                     ": ", candidates, " candidate(s))"));
  }
  for (const std::string& why : sel->left_out) {
    std::fprintf(stderr, "uraid: %s: leaving out %s\n", label.c_str(),
                 why.c_str());
  }
  return sel->members;
}

std::string ConfigNameFor(const std::string& set_name,
                          const std::array<uint8_t, 16>& uuid) {
  std::string name = set_name.substr(set_name.find_last_of(':') + 1);
  for (char& c : name) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-' &&
        c != '+') {
      c = '_';
    }
  }
  if (!name.empty() && (name[0] == '.' || name[0] == '-')) name[0] = '_';
  if (name.size() > 64) name.resize(64);
  if (name.empty()) {
    name = absl::StrCat(
        "md-", absl::StrReplaceAll(FormatUuid(uuid).substr(0, 8), {{":", ""}}));
  }
  return name;
}

}  // namespace uraid::tool
