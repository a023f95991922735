// SPDX-License-Identifier: MIT
// OpenMember: one entry point for every kind of member spec, so the plugin
// and the tool accept files, block devices and NBD URIs alike.

#include <string>

#include "uraid/member.h"

namespace uraid {

bool IsMemberUri(const std::string& spec) {
  return spec.find("://") != std::string::npos;
}

absl::StatusOr<std::unique_ptr<Member>> OpenMember(
    const std::string& spec, const MemberOptions& options) {
  if (IsMemberUri(spec)) return OpenNbdMember(spec, options);
  FileMemberOptions file_options;
  file_options.direct = options.direct;
  file_options.read_only = options.read_only;
  file_options.lock = options.lock;
  return OpenFileMember(spec, file_options);
}

}  // namespace uraid
