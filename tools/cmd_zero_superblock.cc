// SPDX-License-Identifier: MIT
// `uraid zero-superblock MEMBER...` (mdadm --zero-superblock): erases the
// md v1.2 superblock of members that are no longer wanted, so that create,
// add and assembly stop treating them as array members.
//
// What it erases is mdadm's choice: the superblock only (its 4 KiB block
// at byte 4096). The internal bitmap area after it and the data are left
// as they are; without the superblock nothing points at them. A member
// that a running server holds (its flock) is refused, so a served array
// never loses a superblock under it.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "common.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

// md's MD_SB_MAGIC, little-endian at the start of the superblock.
constexpr uint8_t kMdMagic[4] = {0xfc, 0x4e, 0x2b, 0xa9};

struct ZeroArgs {
  bool force = false;
  std::vector<std::string> members;
};

// Erases one member's superblock; the message of a refusal or failure.
absl::Status ZeroOne(const std::string& path, bool force, bool* erased) {
  *erased = false;
  MemberOptions options;  // writable and locked, as every writer
  absl::StatusOr<std::unique_ptr<Member>> member = OpenMember(path, options);
  if (!member.ok()) {
    if (absl::IsFailedPrecondition(member.status()) &&
        absl::StrContains(member.status().message(), "in use")) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s is in use by a running array (its server holds the lock); "
          "stop the array first",
          path));
    }
    return member.status();
  }
  Member& m = **member;
  if (m.Size() < kSb12OffsetBytes + kSbBlockBytes) {
    if (force) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s is too small to hold an md superblock (%d bytes)", path, m.Size()));
  }
  std::vector<uint8_t> block(kSbBlockBytes);
  if (absl::Status s = m.Read(block.data(), block.size(), kSb12OffsetBytes);
      !s.ok()) {
    return s;
  }
  // The magic alone decides: a superblock with a bad checksum is exactly
  // one a user wants gone.
  if (std::memcmp(block.data(), kMdMagic, sizeof(kMdMagic)) != 0) {
    if (force) return absl::OkStatus();  // mdadm: nothing to do is fine
    return absl::NotFoundError(absl::StrFormat(
        "%s holds no md superblock (nothing to erase; --force ignores "
        "this)",
        path));
  }
  std::fill(block.begin(), block.end(), 0);
  if (absl::Status s = m.Write(block.data(), block.size(), kSb12OffsetBytes);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = m.Flush(); !s.ok()) return s;
  *erased = true;
  return absl::OkStatus();
}

int RunZero(const ZeroArgs& args) {
  // Like mdadm: every member is tried; the exit status says whether all
  // went well.
  int rc = 0;
  for (const std::string& path : args.members) {
    bool erased = false;
    absl::Status s = ZeroOne(path, args.force, &erased);
    if (!s.ok()) {
      rc = Fail(s);
    } else {
      std::printf("%s: %s\n", path.c_str(),
                  erased ? "md superblock erased"
                         : "no md superblock (left as it was)");
    }
  }
  return rc;
}

}  // namespace

void AddZeroSuperblockCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<ZeroArgs>();
  CLI::App* sub = app.add_subcommand(
      "zero-superblock",
      "Erase the md superblock of members that are no longer in an array "
      "(mdadm's --zero-superblock); refuses members a running array holds");
  sub->add_flag("--force,-f", args->force,
                "Succeed on members that hold no md superblock");
  sub->add_option("MEMBER", args->members, "Member files, devices or NBD URIs")
      ->required();
  sub->final_callback(
      [args, action] { *action = [args] { return RunZero(*args); }; });
}

}  // namespace uraid::tool
