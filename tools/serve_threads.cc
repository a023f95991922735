// SPDX-License-Identifier: MIT
#include "serve_threads.h"

#include <limits.h>
#include <linux/magic.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "uraid/member.h"

namespace uraid::tool {
namespace {

// The kernel's name of block device `dev` ("ram0", "nvme0n1p2"), from
// sysfs; empty when it cannot be read.
std::string BlockDeviceName(dev_t dev) {
  const std::string link =
      absl::StrFormat("/sys/dev/block/%u:%u", major(dev), minor(dev));
  char target[PATH_MAX];
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return "";
  const std::string_view path(target, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path
                                                     : path.substr(slash + 1));
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
  if (members.empty()) return std::nullopt;
  for (const std::string& m : members) {
    if (!IsMemoryMember(m)) return std::nullopt;
  }
  return std::max(2, cpus);
}

}  // namespace uraid::tool
