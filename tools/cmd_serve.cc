// `uraid serve`: replaces itself with nbdkit running the uraid plugin.
// nbdkit owns the sockets, threads and daemonising; this command only
// resolves paths, checks the members assemble (so a mistake is reported
// here, in the house format, rather than by a daemon that exits) and execs.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "commands.h"
#include "common.h"
#include "plugin_path.h"
#include "size_parse.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::string socket;
  int port = 0;
  std::string pidfile;
  bool direct = false;
  bool force = false;
  bool foreground = false;
  bool readonly = false;
  bool verbose = false;
  std::string control;  // control socket path, empty: none
  std::string bitmap;   // external bitmap file, empty: none
  std::vector<std::string> members;
};

// "demo/uraid.sock" -> "demo/uraid.pid"; anything else gets ".pid" added.
std::string DefaultPidfile(const std::string& socket) {
  if (absl::EndsWith(socket, ".sock")) {
    return absl::StrCat(socket.substr(0, socket.size() - 5), ".pid");
  }
  return absl::StrCat(socket, ".pid");
}

// nbdkit never deletes its socket, and binding over a stale one fails with
// "Address already in use". Remove it only when nothing answers on it, so a
// running server is never cut off.
absl::Status RemoveStaleSocket(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " exists and is not a socket; refusing to replace "
                     "it"));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "socket path %s is too long (%d bytes; unix sockets allow %d)", path,
        path.size(), sizeof(addr.sun_path) - 1));
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  const int rc =
      connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int connect_errno = errno;
  close(fd);
  if (rc == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(path,
                     " is in use by a running server; stop it first or choose "
                     "another --socket"));
  }
  if (connect_errno == ECONNREFUSED && unlink(path.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("unlink stale ", path));
  }
  return absl::OkStatus();
}

int RunServe(const ServeArgs& args) {
  std::vector<std::string> members;
  for (const std::string& m : args.members) {
    // nbdkit, once daemonised, runs from "/": relative paths would break.
    // NBD URIs pass through untouched.
    members.push_back(absl::StrContains(m, "://")
                          ? m
                          : fs::absolute(m).lexically_normal().string());
  }

  // The same for the bitmap file, which the plugin opens after the
  // daemon has changed directory.
  const std::string bitmap =
      args.bitmap.empty()
          ? ""
          : fs::absolute(args.bitmap).lexically_normal().string();

  // Assemble read-only first: a bad member set (or bitmap file) is
  // reported here instead of by a daemon the user never sees. No lock, so
  // it cannot collide with the server this command is about to start.
  uint64_t array_bytes = 0;
  std::string uuid;
  {
    MemberOptions member_options;
    member_options.read_only = true;
    member_options.lock = false;
    absl::StatusOr<std::vector<std::unique_ptr<Member>>> opened =
        OpenMembers(members, member_options);
    if (!opened.ok()) return Fail(opened.status());
    AssembleOptions options;
    options.read_only = true;
    options.force = args.force;
    options.bitmap_file = bitmap;
    absl::StatusOr<std::unique_ptr<Array>> array =
        Array::Assemble(*std::move(opened), options);
    if (!array.ok()) return Fail(array.status());
    array_bytes = (*array)->size();
    uuid = FormatUuid((*array)->Info().uuid);
  }

  std::vector<std::string> argv = {"nbdkit"};
  std::string where;
  std::string pidfile = args.pidfile;
  if (!args.socket.empty()) {
    const std::string socket = fs::absolute(args.socket).string();
    if (absl::Status s = RemoveStaleSocket(socket); !s.ok()) return Fail(s);
    argv.insert(argv.end(), {"-U", socket});
    where = absl::StrCat("unix socket ", socket,
                         " (nbd+unix:///?socket=", socket, ")");
    if (pidfile.empty()) pidfile = DefaultPidfile(socket);
  } else {
    const int port = args.port ? args.port : 10809;  // nbdkit's default
    argv.insert(argv.end(), {"-p", absl::StrCat(port)});
    where = absl::StrCat("TCP port ", port, " (nbd://localhost:", port, ")");
  }
  if (!pidfile.empty()) {
    pidfile = fs::absolute(pidfile).string();
    // nbdkit writes the pid file once it accepts connections; a leftover
    // one would let a waiting script race ahead.
    unlink(pidfile.c_str());
    argv.insert(argv.end(), {"-P", pidfile});
  }
  if (args.readonly) argv.push_back("-r");
  if (args.foreground) argv.push_back("-f");
  if (args.verbose) argv.push_back("-v");
  argv.push_back(PluginPath());
  for (const std::string& m : members) argv.push_back("member=" + m);
  if (args.direct) argv.push_back("direct=true");
  if (args.force) argv.push_back("force=true");
  if (!bitmap.empty()) argv.push_back("bitmap=" + bitmap);
  // Open the members read-only too, so read-only storage can be served.
  if (args.readonly) argv.push_back("readonly=true");
  if (!args.control.empty()) {
    // nbdkit daemonises into /, so the plugin gets an absolute path.
    std::error_code ec;
    std::filesystem::path p = std::filesystem::absolute(args.control, ec);
    argv.push_back("control=" + (ec ? args.control : p.string()));
  }

  std::printf("serving array %s (%llu bytes%s) on %s%s%s\n", uuid.c_str(),
              static_cast<unsigned long long>(array_bytes),
              MdHumanSize(array_bytes).c_str(), where.c_str(),
              pidfile.empty() ? "" : "; pid file ",
              pidfile.empty() ? "" : pidfile.c_str());
  std::fflush(stdout);

  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  execvp("nbdkit", cargv.data());
  return Fail(
      absl::StrFormat("cannot run nbdkit: %s (is the nbdkit package "
                      "installed? scripts/setup.sh installs it)",
                      std::strerror(errno)));
}

}  // namespace

void AddServeCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Serve the array over NBD with nbdkit and the uraid plugin");
  CLI::Option* socket = sub->add_option("--socket,-U", args->socket,
                                        "Listen on this unix socket");
  sub->add_option("--port,-p", args->port, "Listen on this TCP port")
      ->check(CLI::Range(1, 65535))
      ->excludes(socket);
  sub->add_option("--pidfile,-P", args->pidfile,
                  "Where nbdkit writes its pid (default: the socket path "
                  "with .sock replaced by .pid)");
  sub->add_flag("--direct", args->direct, "Open members with O_DIRECT");
  sub->add_flag("--force", args->force,
                "Start an array that is both dirty and degraded (md's "
                "start_dirty_degraded; parity of stripes written at the "
                "crash may be stale)");
  sub->add_flag("--foreground,-f", args->foreground,
                "Stay in the foreground (default: nbdkit daemonises)");
  sub->add_flag("--readonly,-r", args->readonly, "Export read-only");
  sub->add_flag("--verbose,-v", args->verbose, "nbdkit -v");
  sub->add_option("--control,-C", args->control,
                  "Open a control socket here (uraid fail/add/... --control)");
  sub->add_option("--bitmap,-b", args->bitmap,
                  "The array's external bitmap file (uraid create --bitmap "
                  "FILE; md's --assemble --bitmap=FILE). Without it such an "
                  "array runs with no bitmap: a crash means a full resync");
  sub->add_option("MEMBER", args->members, "Member files, devices or NBD URIs")
      ->required();
  sub->final_callback(
      [args, action] { *action = [args] { return RunServe(*args); }; });
}

}  // namespace uraid::tool
