// SPDX-License-Identifier: MIT
#include "nbdkit_supervisor.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common.h"
#include "nbd_probe.h"
#include "sd_notify.h"

namespace uraid::tool {
namespace {

struct Running {
  const NbdkitChild* spec;
  pid_t pid = -1;
  bool ready = false;
  bool done = false;
  int status = 0;
};

bool Connects(const NbdkitChild& c) {
  int fd = -1;
  int rc = -1;
  if (!c.unix_socket.empty()) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    if (c.unix_socket.size() >= sizeof(a.sun_path)) return false;
    std::memcpy(a.sun_path, c.unix_socket.c_str(), c.unix_socket.size() + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    rc = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_storage ss{};
    socklen_t len = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (inet_pton(AF_INET, c.tcp_addr.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(static_cast<uint16_t>(c.tcp_port));
      len = sizeof(*v4);
    } else if (inet_pton(AF_INET6, c.tcp_addr.c_str(), &v6->sin6_addr) == 1) {
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(static_cast<uint16_t>(c.tcp_port));
      len = sizeof(*v6);
    } else {
      // A host name or a wildcard: the pid file is all we can check.
      return true;
    }
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    rc = connect(fd, reinterpret_cast<sockaddr*>(&ss), len);
  }
  const bool serves = rc == 0 && NbdHandshakeAborts(fd);
  close(fd);
  return serves;
}

bool PidfileWritten(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && st.st_size > 0;
}

std::string Describe(int status) {
  if (WIFEXITED(status))
    return absl::StrCat("exit status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return absl::StrCat("signal ", strsignal(WTERMSIG(status)));
  }
  return "unknown status";
}

// The pid in `path`, or 0.
pid_t PidIn(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return 0;
  long pid = 0;
  if (std::fscanf(f, "%ld", &pid) != 1) pid = 0;
  std::fclose(f);
  return static_cast<pid_t>(pid);
}

// Running: a zombie whose reaper is slow has exited all the same.
bool ProcessRunning(pid_t pid) {
  FILE* f = std::fopen(absl::StrCat("/proc/", pid, "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char buf[512] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const char* paren = std::strrchr(buf, ')');
  return n > 0 && paren != nullptr && paren[1] == ' ' && paren[2] != 'Z';
}

// ready_message and the pid of the nbdkit that serves.
void PrintReady(const NbdkitChild& c, pid_t pid) {
  if (c.ready_message.empty()) return;
  std::printf("%s; nbdkit pid %d\n", c.ready_message.c_str(),
              static_cast<int>(pid));
  std::fflush(stdout);
}

}  // namespace

bool NbdkitServes(const NbdkitChild& child) {
  return PidfileWritten(child.pidfile) && Connects(child);
}

int StartNbdkitDaemon(const NbdkitChild& child) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& a : child.argv) {
      argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    execvp("nbdkit", argv.data());
    std::fprintf(stderr,
                 "uraid: cannot run nbdkit: %s (is the nbdkit package "
                 "installed? scripts/setup.sh installs it)\n",
                 std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return 1;
    return Fail(absl::StrCat(child.name, ": nbdkit did not start (",
                             pid < 0 ? std::strerror(errno) : Describe(status),
                             "; its messages are above)"));
  }
  // The daemon writes its pid file once it has forked; it serves once its
  // plugin is ready after the fork.
  for (int waited_ms = 0; waited_ms < 60000; waited_ms += 20) {
    const pid_t daemon = PidIn(child.pidfile);
    if (daemon > 0 && !ProcessRunning(daemon)) {
      return Fail(absl::StrCat(child.name, ": nbdkit (pid ", daemon,
                               ") exited before it served; its messages "
                               "are in the log (syslog or the journal)"));
    }
    if (daemon > 0 && Connects(child)) {
      PrintReady(child, daemon);
      return 0;
    }
    usleep(20 * 1000);
  }
  return Fail(absl::StrCat(child.name,
                           ": nbdkit did not serve within 60 s (pid file ",
                           child.pidfile, ")"));
}

int SuperviseNbdkit(const std::vector<NbdkitChild>& children) {
  sigset_t handled, old;
  sigemptyset(&handled);
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&handled, s);
  // Blocked before the first fork, taken with sigtimedwait: no handler
  // races, and a signal arriving during start-up is not lost.
  sigprocmask(SIG_BLOCK, &handled, &old);

  std::vector<Running> run;
  for (const NbdkitChild& c : children) {
    unlink(c.pidfile.c_str());
    Running r;
    r.spec = &c;
    r.pid = fork();
    if (r.pid == 0) {
      sigprocmask(SIG_SETMASK, &old, nullptr);
      std::vector<char*> argv;
      for (const std::string& a : c.argv)
        argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      std::fprintf(stderr,
                   "uraid: cannot run nbdkit: %s (is the nbdkit "
                   "package installed?)\n",
                   std::strerror(errno));
      _exit(127);
    }
    if (r.pid < 0) {
      Fail(absl::StrCat("fork: ", std::strerror(errno)));
      break;
    }
    run.push_back(r);
  }

  bool stopping = run.size() != children.size();
  bool failed = stopping;
  bool notified = false;
  auto stop_all = [&] {
    if (!stopping) NotifySystemd("STOPPING=1").IgnoreError();
    stopping = true;
    for (Running& r : run) {
      if (!r.done) kill(r.pid, SIGTERM);
    }
  };
  if (stopping) stop_all();

  for (;;) {
    // Reap.
    for (Running& r : run) {
      if (r.done) continue;
      int status = 0;
      if (waitpid(r.pid, &status, WNOHANG) == r.pid) {
        r.done = true;
        r.status = status;
        const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (!r.ready && !stopping) {
          Fail(absl::StrCat(r.spec->name, ": nbdkit exited (", Describe(status),
                            ") before it listened; its messages are above"));
          failed = true;
          stop_all();
        } else if (!clean && !(stopping && WIFSIGNALED(status) &&
                               WTERMSIG(status) == SIGTERM)) {
          Fail(absl::StrCat(r.spec->name, ": nbdkit ended with ",
                            Describe(status)));
          failed = true;
        } else if (!stopping) {
          Fail(absl::StrCat(r.spec->name, ": nbdkit stopped"));
        }
      }
    }
    bool all_done = true;
    bool all_ready = true;
    for (Running& r : run) {
      all_done = all_done && r.done;
      if (!r.done && !r.ready) {
        r.ready = NbdkitServes(*r.spec);
        if (r.ready) PrintReady(*r.spec, r.pid);
      }
      all_ready = all_ready && r.ready;
    }
    if (all_done) break;
    if (all_ready && !notified && !stopping) {
      std::vector<std::string> names;
      for (const Running& r : run) names.push_back(r.spec->name);
      absl::Status s = NotifySystemd(absl::StrCat("READY=1\nMAINPID=", getpid(),
                                                  "\nSTATUS=serving ",
                                                  absl::StrJoin(names, ", ")));
      if (!s.ok()) Fail(s);
      notified = true;
    }
    // Poll readiness every 20 ms until everything listens, then only
    // wake for signals.
    timespec wait =
        notified || stopping ? timespec{1, 0} : timespec{0, 20 * 1000 * 1000};
    const int sig = sigtimedwait(&handled, nullptr, &wait);
    if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) stop_all();
  }
  sigprocmask(SIG_SETMASK, &old, nullptr);
  for (const NbdkitChild& c : children) unlink(c.pidfile.c_str());
  return failed ? 1 : 0;
}

}  // namespace uraid::tool
