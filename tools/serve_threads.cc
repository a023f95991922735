// SPDX-License-Identifier: MIT
#include "serve_threads.h"

#include <linux/magic.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "uraid/member.h"

namespace uraid::tool {
namespace {

// The kernel's name of block device `dev` ("ram0", "nvme0n1p2"), from
// sysfs; empty when it cannot be read.
std::string BlockDeviceName(dev_t dev) {
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::read_symlink(
      absl::StrFormat("/sys/dev/block/%u:%u", major(dev), minor(dev)), ec);
  return ec ? "" : target.filename().string();
}

}  // namespace

bool IsMemoryMember(const std::string& member) {
  if (IsMemberUri(member)) return false;
  struct stat st;
  if (stat(member.c_str(), &st) != 0) return false;
  if (S_ISBLK(st.st_mode)) {
    const std::string name = BlockDeviceName(st.st_rdev);
    return absl::StartsWith(name, "ram") || absl::StartsWith(name, "zram") ||
           absl::StartsWith(name, "pmem");
  }
  if (!S_ISREG(st.st_mode)) return false;
  struct statfs fs;
  if (statfs(member.c_str(), &fs) != 0) return false;
  return fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC;
}

int AvailableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) {
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online > 0 ? static_cast<int>(online) : 1;
  }
  return std::max(1, CPU_COUNT(&set));
}

std::optional<int> DefaultThreads(const std::vector<std::string>& members,
                                  int cpus) {
  if (members.empty() ||
      !std::all_of(members.begin(), members.end(), IsMemoryMember)) {
    return std::nullopt;
  }
  return std::max(2, cpus);
}

}  // namespace uraid::tool
