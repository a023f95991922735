// SPDX-License-Identifier: MIT
#include "array_stop.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "control_client.h"
#include "uraid/config_file.h"
#include "uraid/member.h"
#include "uraid/member_scan.h"

namespace uraid::tool {
namespace {

// The process's name as the kernel keeps it (/proc/PID/comm).
std::string ProcessName(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/comm"));
  std::string name;
  std::getline(in, name);
  return name;
}

// Waits until the process `pidfd` refers to has exited; false on timeout.
bool WaitForExit(int pidfd, double timeout_s) {
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p = {pidfd, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

}  // namespace

absl::StatusOr<StoppedArray> StopServedArray(const std::string& control,
                                             double timeout_s) {
  absl::StatusOr<std::unique_ptr<ControlClient>> client =
      ControlClient::Connect(control, 10000);
  if (!client.ok()) return client.status();
  StoppedArray out;
  // Its detail first: the server is a uraid one, and what it serves is
  // known for the report and the superblock check afterwards.
  absl::StatusOr<ArrayInfo> info = (*client)->Detail();
  if (!info.ok()) return info.status();
  out.before = *std::move(info);
  absl::StatusOr<int> pid = (*client)->ServerPid();
  if (!pid.ok()) return pid.status();
  out.pid = *pid;
  client->reset();  // the server's own SIGTERM handling waits for no one
  const std::string comm = ProcessName(out.pid);
  if (comm != "nbdkit") {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the server of %s is pid %d (%s), not nbdkit: stop it the way it was "
        "started",
        control, out.pid, comm.empty() ? "gone" : comm));
  }
  // A pidfd, so that a pid reused after the exit is never waited on.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, out.pid, 0));
  if (pidfd < 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("pidfd_open of nbdkit ", out.pid));
  }
  if (syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, nullptr, 0) != 0) {
    const int err = errno;
    close(pidfd);
    return absl::ErrnoToStatus(
        err, absl::StrFormat("cannot signal nbdkit (pid %d) serving %s%s",
                             out.pid, control,
                             err == EPERM ? " (run as its user or root)" : ""));
  }
  const bool exited = WaitForExit(pidfd, timeout_s);
  close(pidfd);
  if (!exited) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "nbdkit (pid %d) serving %s is still running after %g s (flushing? "
        "run uraid stop again to wait longer)",
        out.pid, control, timeout_s));
  }
  std::vector<std::string> local;
  for (const SlotInfo& s : out.before->slots) {
    if (!s.name.empty() && s.state != SlotState::kFaulty &&
        !IsMemberUri(s.name)) {
      local.push_back(s.name);
    }
  }
  for (const ScannedMember& m : ScanCandidates(local, MemberOptions{})) {
    if (!m.sb.clean()) out.unclean.push_back(m.spec);
  }
  return out;
}

absl::StatusOr<std::string> ControlSocketOf(const std::string& ref,
                                            const std::string& config) {
  const std::string path = config.empty() ? DefaultConfigPath() : config;
  absl::StatusOr<ConfigFile> cf = LoadConfigFile(path);
  if (cf.ok()) {
    if (const ConfigArray* a = FindConfigArray(*cf, ref)) {
      return ConfigControlSocket(*a);
    }
  } else if (!absl::IsNotFound(cf.status()) || !config.empty()) {
    return cf.status();
  }
  struct stat st;
  const std::string in_run_dir =
      absl::StrCat(DefaultRunDir(), "/", ref, ".ctl");
  if (ref.find('/') == std::string::npos &&
      lstat(in_run_dir.c_str(), &st) == 0) {
    return in_run_dir;
  }
  if (lstat(ref.c_str(), &st) == 0) return ref;
  if (ref.find('/') != std::string::npos) {
    return absl::NotFoundError(
        absl::StrFormat("no array '%s': no such control socket", ref));
  }
  return absl::NotFoundError(absl::StrFormat(
      "no array '%s': not an ARRAY of %s, no %s, and no such control socket",
      ref, path, in_run_dir));
}

}  // namespace uraid::tool
