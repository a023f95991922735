// SPDX-License-Identifier: MIT
#include "child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <string_view>

#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

extern char** environ;

namespace uraid::tool {
namespace {

// environ with `extra` set on top (extra wins), as "KEY=VALUE" strings.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  absl::flat_hash_set<std::string> overridden;
  for (const auto& [key, value] : extra) overridden.insert(key);
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string_view::npos &&
        overridden.contains(std::string(entry.substr(0, eq)))) {
      continue;
    }
    out.emplace_back(entry);
  }
  for (const auto& [key, value] : extra) out.push_back(key + "=" + value);
  return out;
}

std::vector<char*> Pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

std::string ExitText(int wstatus) {
  if (WIFEXITED(wstatus)) {
    return absl::StrCat("exited with status ", WEXITSTATUS(wstatus));
  }
  if (WIFSIGNALED(wstatus)) {
    return absl::StrCat("killed by signal ", WTERMSIG(wstatus), " (",
                        strsignal(WTERMSIG(wstatus)), ")");
  }
  return absl::StrCat("ended with wait status ", wstatus);
}

}  // namespace

absl::Status RunChild(const ChildSpec& spec) {
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings = ChildEnvironment(spec.env);
  std::vector<char*> argv = Pointers(argv_strings);
  std::vector<char*> envp = Pointers(env_strings);

  int in_pipe[2] = {-1, -1};
  if (!spec.stdin_data.empty() && pipe2(in_pipe, O_CLOEXEC) != 0) {
    return absl::ErrnoToStatus(errno, "pipe");
  }
  absl::Cleanup close_pipe = [&] {
    for (int fd : in_pipe) {
      if (fd >= 0) close(fd);
    }
  };

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  absl::Cleanup destroy_actions = [&] {
    posix_spawn_file_actions_destroy(&actions);
  };
  if (in_pipe[0] >= 0) {
    posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, 2, 1);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  absl::Cleanup destroy_attr = [&] { posix_spawnattr_destroy(&attr); };
  sigset_t none;
  sigemptyset(&none);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETSIGDEF |
                                      POSIX_SPAWN_SETPGROUP);

  pid_t pid = -1;
  const int err =
      posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  if (err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat("cannot run ", spec.argv[0]));
  }
  if (in_pipe[0] >= 0) {
    close(in_pipe[0]);
    in_pipe[0] = -1;
    fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  }

  // The raw syscall: glibc 2.36's <sys/pidfd.h> declares pidfd_open
  // without C linkage, so C++ cannot link against it.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  absl::Cleanup close_pidfd = [&] {
    if (pidfd >= 0) close(pidfd);
  };
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(spec.timeout_s * 1000));
  std::string_view left_to_write = spec.stdin_data;
  bool timed_out = false;
  int wstatus = 0;
  while (true) {
    const pid_t done = waitpid(pid, &wstatus, WNOHANG);
    if (done == pid) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      timed_out = true;
      kill(-pid, SIGKILL);  // the whole group: what it started dies too
      kill(pid, SIGKILL);   // in case it left its group
      while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    if (in_pipe[1] >= 0 && left_to_write.empty()) {
      close(in_pipe[1]);  // EOF: the child has it all
      in_pipe[1] = -1;
    }
    pollfd p[2];
    int n = 0;
    // Without a pidfd (old kernels), poll in 20 ms steps.
    if (pidfd >= 0) p[n++] = {pidfd, POLLIN, 0};
    if (in_pipe[1] >= 0) p[n++] = {in_pipe[1], POLLOUT, 0};
    const int wait_ms = static_cast<int>(std::min<int64_t>(
        pidfd >= 0 ? INT32_MAX : 20,
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now)
                .count() +
            1));
    if (poll(p, n, wait_ms) < 0 && errno != EINTR) {
      return absl::ErrnoToStatus(errno, "poll");
    }
    if (in_pipe[1] >= 0 && !left_to_write.empty()) {
      const ssize_t w =
          write(in_pipe[1], left_to_write.data(), left_to_write.size());
      if (w > 0) {
        left_to_write.remove_prefix(static_cast<size_t>(w));
      } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
        // EPIPE: the child does not read its stdin; its exit status says
        // whether that is a failure.
        left_to_write = {};
      }
    }
  }
  if (timed_out) {
    return absl::DeadlineExceededError(
        absl::StrFormat("did not finish within %g s (killed)", spec.timeout_s));
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return absl::OkStatus();
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127) {
    // posix_spawnp reports exec failures as status 127 on some libcs.
    return absl::NotFoundError("exited with status 127 (could not be run?)");
  }
  return absl::InternalError(ExitText(wstatus));
}

}  // namespace uraid::tool
