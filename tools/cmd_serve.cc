// SPDX-License-Identifier: MIT
// `uraid serve`: runs nbdkit with the uraid plugin. nbdkit owns the
// sockets, threads and daemonising; this command resolves what to serve
// (members given, or an array of uraid.conf found by uuid among its DEVICE
// candidates), checks the members assemble (so a mistake is reported here,
// in the house format, rather than by a daemon that exits) and then:
// - by default runs nbdkit, which daemonises, and returns once the export
//   answers ("serving array ..." is printed then, never before: nbdkit's
//   own failure, a port in use or a bad option, is reported instead);
// - with --foreground stays nbdkit's parent (nbdkit_supervisor.h): READY=1
//   to systemd once it listens, SIGTERM = a clean stop (the uraid@ unit);
// - with --scan serves every ARRAY of the config, one nbdkit per array on
//   its own socket: daemons started one after the other, or with
//   --foreground children supervised together.
// With neither --socket nor --port the listener is a unix socket,
// /run/uraid/NAME.sock (or the config's socket=): never TCP by default.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array_lookup.h"
#include "commands.h"
#include "common.h"
#include "nbdkit_supervisor.h"
#include "plugin_path.h"
#include "serve_threads.h"
#include "size_parse.h"
#include "uraid/array.h"
#include "uraid/config_file.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::string socket;
  int port = 0;
  std::string ipaddr;  // --ipaddr; default 127.0.0.1 with --port
  std::string tls;     // --tls=off|on|require, passed to nbdkit
  std::string tls_certificates;
  std::string tls_psk;
  std::string config;  // --config; empty: DefaultConfigPath()
  bool scan = false;
  std::vector<std::string> nbdkit_extra;  // after `--`
  std::string pidfile;
  bool direct = false;
  bool force = false;
  bool run = false;
  bool foreground = false;
  bool readonly = false;
  bool verbose = false;
  std::string control;  // control socket path, empty: none
  std::string bitmap;   // external bitmap file, empty: none
  // The plugin keys of the same names; empty / unset: the ARRAY line's,
  // else the plugin's default.
  std::string control_group;
  std::optional<int> spares;
  std::optional<uint32_t> timeout_ms;
  std::string cache;  // a size, checked by SizeValidator
  std::optional<uint32_t> cache_age_ms;
  std::string stats;
  std::string log;
  // Member paths or URIs; or one ARRAY name or uuid of the config.
  std::vector<std::string> members;
};

#define RETURN_IF_ERROR_TOOL(expr)                 \
  do {                                             \
    ::absl::Status uraid_status_ = (expr);         \
    if (!uraid_status_.ok()) return uraid_status_; \
  } while (0)

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

// What one nbdkit serves: members, and the ARRAY line they came from.
struct ServeTarget {
  std::vector<std::string> members;
  ConfigArray entry;         // all empty unless from the config
  bool from_config = false;  // served by name, uuid or --scan
};

std::string Absolute(const std::string& path) {
  return fs::absolute(path).lexically_normal().string();
}

// Creates the socket's directory when missing (the default /run/uraid is a
// tmpfs, empty after boot): 0755, so clients of other users can reach a
// socket whose own mode lets them.
absl::Status MakeSocketDir(const std::string& socket) {
  const fs::path dir = fs::path(socket).parent_path();
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return absl::OkStatus();
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create ", dir.string(), " for the socket: ", ec.message()));
  }
  chmod(dir.c_str(), 0755);
  return absl::OkStatus();
}

// Whether nbdkit's `option` takes the next word as its value.
bool TakesAValue(const std::string& option) {
  static const std::set<std::string> kTakeAValue = {
      "-D",        "--debug",
      "-e",        "--exportname",
      "--filter",  "-g",
      "--group",   "-i",
      "--ipaddr",  "--mask-handshake",
      "-P",        "--pidfile",
      "-p",        "--port",
      "--run",     "--selinux-label",
      "-t",        "--threads",
      "--tls",     "--tls-certificates",
      "--tls-psk", "-U",
      "--unix",    "-u",
      "--user",    "--log"};
  return kTakeAValue.count(option) != 0;
}

// Whether words[i], after `--`, is a KEY=VALUE parameter (a filter's:
// nbdkit wants those after the plugin, where serve puts them) rather than
// an option or an option's own value ("-D uraid.x=1").
bool IsKeyWord(const std::vector<std::string>& words, size_t i) {
  const std::string& w = words[i];
  const size_t eq = w.find('=');
  if (eq == std::string::npos || eq == 0 || w[0] == '-') return false;
  return i == 0 || !TakesAValue(words[i - 1]);
}

// Whether the nbdkit options given after `--` set its thread count (-t N,
// -tN, --threads N, --threads=N); a word that is another option's value
// ("-e -t1", an export name) is not one.
bool GivesThreads(const std::vector<std::string>& words) {
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0 && TakesAValue(words[i - 1])) continue;
    const std::string& w = words[i];
    if (w == "-t" || w == "--threads" || absl::StartsWith(w, "--threads=") ||
        (w.size() > 2 && absl::StartsWith(w, "-t"))) {
      return true;
    }
  }
  return false;
}

// The uraid plugin's own keys are serve's flags: one given after `--` is
// refused naming the flag (a usage error), rather than passed to the
// plugin beside (or against) what serve sets.
void CheckNoPluginKeys(const std::vector<std::string>& words) {
  static constexpr std::pair<const char*, const char*> kFlags[] = {
      {"member", "MEMBER before --"},
      {"timeout", "--timeout MS"},
      {"direct", "--direct"},
      {"force", "--force"},
      {"run", "--run"},
      {"readonly", "--readonly"},
      {"cache", "--cache SIZE"},
      {"cache-age", "--cache-age MS"},
      {"stats", "--stats FILE"},
      {"control", "--control PATH"},
      {"bitmap", "--bitmap FILE"},
      {"control-group", "--control-group GROUP"},
      {"spares", "--spares N"},
      {"log", "--log WHERE"},
      {"array", "the ARRAY name before --"},
      {"config", "--config FILE"}};
  for (size_t i = 0; i < words.size(); ++i) {
    if (!IsKeyWord(words, i)) continue;
    const std::string& w = words[i];
    const std::string key = w.substr(0, w.find('='));
    for (const auto& [plugin_key, flag] : kFlags) {
      if (key == plugin_key) {
        throw CLI::ValidationError(
            "--", absl::StrCat("'", w,
                               "' after -- is a key of the uraid plugin: "
                               "give it as ",
                               flag));
      }
    }
  }
}

// The plugin keys that are plain values (spares=, timeout=, cache-age=,
// stats=, log=): the command line's, else the ARRAY line's.
void AppendPluginKeys(const ServeArgs& args, const ConfigArray& entry,
                      std::vector<std::string>& argv) {
  if (std::optional<int> n = args.spares ? args.spares : entry.spares) {
    argv.push_back(absl::StrCat("spares=", *n));
  }
  if (std::optional<uint32_t> ms =
          args.timeout_ms ? args.timeout_ms : entry.timeout_ms) {
    argv.push_back(absl::StrCat("timeout=", *ms));
  }
  if (std::optional<uint32_t> ms =
          args.cache_age_ms ? args.cache_age_ms : entry.cache_age_ms) {
    argv.push_back(absl::StrCat("cache-age=", *ms));
  }
  if (!args.stats.empty()) argv.push_back("stats=" + Absolute(args.stats));
  const std::string& log = !args.log.empty() ? args.log : entry.log;
  if (!log.empty()) argv.push_back("log=" + log);
}

// Checks that `target` assembles and builds its nbdkit command line:
// options from the command line first, then the ARRAY line's, then the
// defaults. `supervised`: nbdkit stays our child (-f --exit-with-parent).
absl::StatusOr<NbdkitChild> PlanServe(const ServeArgs& args,
                                      const ServeTarget& target,
                                      bool supervised) {
  const ConfigArray& entry = target.entry;
  std::vector<std::string> members;
  for (const std::string& m : target.members) {
    // nbdkit, once daemonised, runs from "/": relative paths would break.
    // NBD URIs pass through untouched.
    members.push_back(IsMemberUri(m) ? m : Absolute(m));
  }
  // The same for the bitmap file, which the plugin opens after the
  // daemon has changed directory.
  const std::string bitmap_arg =
      !args.bitmap.empty() ? args.bitmap : entry.bitmap;
  const std::string bitmap = bitmap_arg.empty() ? "" : Absolute(bitmap_arg);
  const bool readonly = args.readonly || entry.readonly;

  // Assemble first, writing nothing: a bad member set (or bitmap file) is
  // reported here instead of by a daemon the user never sees. A writable
  // array's members are opened read-write and locked, as the server will
  // open them, so a member another server holds or one this user may not
  // write is named before "serving" is printed. The lock is released when
  // this scope ends, before nbdkit starts.
  uint64_t array_bytes = 0;
  std::string uuid;
  std::string sb_name;
  std::array<uint8_t, 16> uuid_bytes{};
  // An unclean PPL array: the server's assembly replays the log (md's
  // ppl_recover) instead of a resync, and says so in its own log.
  bool ppl_replay = false;
  {
    MemberOptions member_options;
    member_options.read_only = readonly;
    member_options.lock = !readonly;
    absl::StatusOr<std::vector<std::unique_ptr<Member>>> opened =
        OpenMembers(members, member_options);
    if (!opened.ok()) return opened.status();
    AssembleOptions options;
    options.read_only = true;
    options.force = args.force;
    options.run = args.run;
    options.bitmap_file = bitmap;
    absl::StatusOr<std::unique_ptr<Array>> array =
        Array::Assemble(*std::move(opened), options);
    if (!array.ok()) return array.status();
    array_bytes = (*array)->size();
    uuid_bytes = (*array)->Info().uuid;
    uuid = FormatUuid(uuid_bytes);
    sb_name = (*array)->Info().name;
    const ArrayInfo info = (*array)->Info();
    ppl_replay = info.ppl && !info.clean && !readonly;
  }
  const std::string name =
      !entry.name.empty() ? entry.name : ConfigNameFor(sb_name, uuid_bytes);

  NbdkitChild child;
  child.name = name;
  std::vector<std::string>& argv = child.argv;
  argv = {"nbdkit"};
  std::string where;
  std::string pidfile = args.pidfile.empty() ? "" : Absolute(args.pidfile);
  if (args.port == 0) {
    // The safe default: a unix socket, never TCP.
    const std::string socket =
        !args.socket.empty() ? Absolute(args.socket)
        : !entry.socket.empty()
            ? Absolute(entry.socket)
            : absl::StrCat(DefaultRunDir(), "/", name, ".sock");
    RETURN_IF_ERROR_TOOL(MakeSocketDir(socket));
    RETURN_IF_ERROR_TOOL(RemoveStaleSocket(socket));
    argv.insert(argv.end(), {"-U", socket});
    where = absl::StrCat("unix socket ", socket,
                         " (nbd+unix:///?socket=", socket, ")");
    if (pidfile.empty()) pidfile = DefaultPidfile(socket);
    child.unix_socket = socket;
  } else {
    const std::string addr = args.ipaddr.empty() ? "127.0.0.1" : args.ipaddr;
    argv.insert(argv.end(), {"-i", addr, "-p", absl::StrCat(args.port)});
    where = absl::StrCat(
        "TCP ", addr, " port ", args.port, " (nbd://",
        absl::StrContains(addr, ":") ? absl::StrCat("[", addr, "]") : addr, ":",
        args.port, ")");
    if (pidfile.empty()) {
      // A TCP server has no socket file to name its pid file after: it
      // goes where `uraid stop` and the units look.
      pidfile = absl::StrCat(DefaultRunDir(), "/", name, ".pid");
      if (absl::Status s = MakeSocketDir(pidfile); !s.ok()) {
        return absl::FailedPreconditionError(absl::StrCat(
            s.message(), " (give --pidfile PATH, or set URAID_RUN_DIR)"));
      }
    }
    child.tcp_addr = addr;
    child.tcp_port = args.port;
  }
  if (!pidfile.empty()) {
    // nbdkit writes the pid file once it accepts connections; a leftover
    // one would let a waiting script race ahead.
    unlink(pidfile.c_str());
    argv.insert(argv.end(), {"-P", pidfile});
  }
  child.pidfile = pidfile;
  if (!args.tls.empty()) argv.push_back("--tls=" + args.tls);
  if (!args.tls_certificates.empty()) {
    argv.push_back("--tls-certificates=" + Absolute(args.tls_certificates));
  }
  if (!args.tls_psk.empty())
    argv.push_back("--tls-psk=" + Absolute(args.tls_psk));
  if (readonly) argv.push_back("-r");
  if (supervised) argv.insert(argv.end(), {"-f", "--exit-with-parent"});
  if (args.verbose) argv.push_back("-v");
  // Memory members make every request CPU work: threads beyond the CPUs
  // only take turns (serve_threads.h). A -t given after `--` wins.
  std::optional<int> threads;
  if (!GivesThreads(args.nbdkit_extra)) {
    threads = DefaultThreads(members, AvailableCpus());
    if (threads) argv.insert(argv.end(), {"-t", absl::StrCat(*threads)});
  }
  // Any other nbdkit option, as given after `--` (filters, -u/-g, ...);
  // KEY=VALUE words (a filter's parameters) after the plugin's keys.
  std::vector<std::string> key_words;
  for (size_t i = 0; i < args.nbdkit_extra.size(); ++i) {
    (IsKeyWord(args.nbdkit_extra, i) ? key_words : argv)
        .push_back(args.nbdkit_extra[i]);
  }
  argv.push_back(PluginPath());
  for (const std::string& m : members) argv.push_back("member=" + m);
  if (args.direct || entry.direct) argv.push_back("direct=true");
  if (args.force) argv.push_back("force=true");
  if (args.run || entry.run) argv.push_back("run=true");
  if (!bitmap.empty()) argv.push_back("bitmap=" + bitmap);
  // Open the members read-only too, so read-only storage can be served.
  if (readonly) argv.push_back("readonly=true");
  if (!args.cache.empty()) {
    argv.push_back(absl::StrCat("cache=", *ParseSize(args.cache)));
  } else if (entry.cache_bytes) {
    argv.push_back(absl::StrCat("cache=", *entry.cache_bytes));
  }
  AppendPluginKeys(args, entry, argv);
  // Arrays served from the config get a control socket by default, where
  // the uraid-check@ unit expects it.
  std::string control = !args.control.empty()    ? Absolute(args.control)
                        : !entry.control.empty() ? Absolute(entry.control)
                        : target.from_config
                            ? absl::StrCat(DefaultRunDir(), "/", name, ".ctl")
                            : "";
  if (!control.empty()) {
    RETURN_IF_ERROR_TOOL(MakeSocketDir(control));
    argv.push_back("control=" + control);
  }
  const std::string& group =
      !args.control_group.empty() ? args.control_group : entry.control_group;
  if (!group.empty()) {
    if (control.empty()) {
      return absl::InvalidArgumentError(
          "--control-group needs a control socket (--control PATH)");
    }
    argv.push_back("control-group=" + group);
  }
  argv.insert(argv.end(), key_words.begin(), key_words.end());

  // Said once the export answers (nbdkit_supervisor.h), never before: a
  // port in use or a bad nbdkit option is nbdkit's failure to report.
  child.ready_message = absl::StrFormat(
      "serving array %s%s (%d bytes%s) on %s%s%s%s%s%s%s",
      target.from_config ? absl::StrCat(name, " ") : "", uuid, array_bytes,
      MdHumanSize(array_bytes), where, pidfile.empty() ? "" : "; pid file ",
      pidfile, control.empty() ? "" : "; control ", control,
      threads ? absl::StrFormat("; members in memory: nbdkit -t %d", *threads)
              : "",
      ppl_replay ? "; not shut down cleanly, PPL: log replayed at assembly "
                   "(no resync)"
                 : "");
  return child;
}

// The ARRAY lines to serve: every one (--scan), or the one `ref` names.
absl::StatusOr<std::vector<ServeTarget>> ConfiguredTargets(
    const ServeArgs& args, int* skipped) {
  absl::StatusOr<ConfigFile> config = LoadToolConfig(args.config);
  if (!config.ok()) return config.status();
  std::vector<ConfigArray> wanted;
  if (args.scan) {
    if (config->arrays.empty()) {
      return absl::NotFoundError(
          absl::StrCat("no ARRAY line in ", config->path,
                       " (uraid examine --scan prints them)"));
    }
    wanted = config->arrays;
  } else {
    absl::StatusOr<ConfigArray> a = FindArrayRef(*config, args.members[0]);
    if (!a.ok()) return a.status();
    wanted.push_back(*a);
  }
  std::vector<ServeTarget> targets;
  for (const ConfigArray& a : wanted) {
    absl::StatusOr<std::vector<std::string>> members = FindMembers(*config, a);
    if (!members.ok()) {
      // --scan serves what it can, as mdadm --assemble --scan does.
      if (!args.scan) return members.status();
      Fail(members.status());
      ++*skipped;
      continue;
    }
    targets.push_back(ServeTarget{*members, a, true});
  }
  return targets;
}

int RunServe(const ServeArgs& args) {
  std::vector<ServeTarget> targets;
  int skipped = 0;
  if (args.scan ||
      (args.members.size() == 1 && LooksLikeArrayRef(args.members[0]))) {
    absl::StatusOr<std::vector<ServeTarget>> t =
        ConfiguredTargets(args, &skipped);
    if (!t.ok()) return Fail(t.status());
    targets = *std::move(t);
  } else {
    targets.push_back(ServeTarget{args.members, {}, false});
  }
  std::vector<NbdkitChild> children;
  for (const ServeTarget& target : targets) {
    absl::StatusOr<NbdkitChild> child =
        PlanServe(args, target, args.foreground);
    if (!child.ok()) {
      const std::string label =
          target.entry.name.empty() ? "" : target.entry.name + ": ";
      if (!args.scan) return Fail(child.status());
      Fail(absl::StrCat(label, child.status().message()));
      ++skipped;
      continue;
    }
    children.push_back(*std::move(child));
  }
  if (children.empty()) return Fail("no array to serve");
  if (args.foreground) {
    const int rc = SuperviseNbdkit(children);
    return skipped > 0 ? 1 : rc;
  }
  // Daemons, one after the other; each is announced once it serves.
  int rc = skipped > 0 ? 1 : 0;
  for (const NbdkitChild& child : children) {
    if (StartNbdkitDaemon(child) != 0) rc = 1;
  }
  return rc;
}

// The words after `--` on our own command line. CLI11 2.1 puts them into
// the positional list (MEMBER) and keeps no record of where `--` was, so
// they are read back from /proc/self/cmdline.
std::vector<std::string> WordsAfterDoubleDash() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> words;
  std::string word;
  while (std::getline(in, word, '\0')) words.push_back(word);
  std::vector<std::string> after;
  bool serve = false;
  for (size_t i = 1; i < words.size(); ++i) {
    if (!serve) {
      serve = words[i] == "serve";
      continue;
    }
    if (words[i] == "--") {
      after.assign(words.begin() + static_cast<long>(i) + 1, words.end());
      break;
    }
  }
  return after;
}

}  // namespace

void AddServeCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* sub = app.add_subcommand(
      "serve", "Serve the array over NBD with nbdkit and the uraid plugin");
  CLI::Option* socket = sub->add_option("--socket,-U", args->socket,
                                        "Listen on this unix socket");
  CLI::Option* port =
      sub->add_option("--port,-p", args->port,
                      "Listen on this TCP port (on 127.0.0.1 unless --ipaddr "
                      "says otherwise). Default: a unix socket, "
                      "/run/uraid/NAME.sock or the config's socket=")
          ->check(CLI::Range(1, 65535))
          ->excludes(socket);
  CLI::Option* pidfile =
      sub->add_option("--pidfile,-P", args->pidfile,
                      "Where nbdkit writes its pid (default: the socket path "
                      "with .sock replaced by .pid)");
  sub->add_flag("--direct", args->direct, "Open members with O_DIRECT");
  sub->add_flag("--force,-f", args->force,
                "Start an array that is both dirty and degraded (md's "
                "start_dirty_degraded; parity of stripes written at the "
                "crash may be stale), or one that lost two members at once "
                "(mdadm --assemble --force): the member that failed last is "
                "taken back when the superblocks show it missed no write");
  sub->add_flag("--run,-R", args->run,
                "Start degraded although a member the superblocks list as "
                "active was not given (md's --run; that member becomes "
                "stale at the first write)");
  sub->add_flag("--foreground", args->foreground,
                "Stay in the foreground as nbdkit's parent: READY=1 to "
                "systemd once it listens, SIGTERM stops it cleanly "
                "(default: nbdkit daemonises)");
  sub->add_flag("--readonly,-r", args->readonly, "Export read-only");
  sub->add_flag("--verbose,-v", args->verbose, "nbdkit -v");
  CLI::Option* control = sub->add_option(
      "--control,-C", args->control,
      "Open a control socket here (uraid fail/add/... --control; default "
      "for arrays of the config: /run/uraid/NAME.ctl)");
  CLI::Option* bitmap = sub->add_option(
      "--bitmap,-b", args->bitmap,
      "The array's external bitmap file (uraid create --bitmap FILE; md's "
      "--assemble --bitmap=FILE). Without it such an array runs with no "
      "bitmap: a crash means a full resync");
  sub->add_option(
      "--control-group,-G", args->control_group,
      "The control socket is mode 0660 with this group (a name "
      "or gid), whose members may read it (detail, status, "
      "monitor); plugin key control-group=. Needs a control socket: "
      "--control, or an array of the config");
  sub->add_option("--spares", args->spares,
                  "Expected spares (md's spares=N): fewer raise "
                  "SparesMissing")
      ->check(CLI::Range(0, 64));
  sub->add_option("--timeout", args->timeout_ms,
                  "NBD members: fail one that does not answer within this "
                  "many milliseconds (plugin default 30000)")
      ->check(CLI::Range(1u, UINT32_MAX));
  sub->add_option("--cache", args->cache,
                  "Stripe cache bound (write gathering), e.g. 256M; 0 "
                  "turns it off")
      ->check(SizeValidator());
  sub->add_option("--cache-age", args->cache_age_ms,
                  "Longest a gathered write waits for its stripe to fill, "
                  "in milliseconds");
  sub->add_option("--stats", args->stats,
                  "Write the member-I/O counters to this file as JSON at "
                  "exit");
  sub->add_option("--log", args->log,
                  "Where the plugin logs: auto, stderr, syslog or journal")
      ->check(CLI::IsMember({"auto", "stderr", "syslog", "journal"}));
  CLI::Option* ipaddr = sub->add_option(
      "--ipaddr,-i", args->ipaddr,
      "With --port: the address to listen on (default 127.0.0.1; 0.0.0.0 "
      "or :: for every interface)");
  ipaddr->needs(port);
  sub->add_option("--tls", args->tls, "nbdkit --tls: off, on or require")
      ->check(CLI::IsMember({"off", "on", "require"}));
  sub->add_option("--tls-certificates", args->tls_certificates,
                  "nbdkit --tls-certificates=DIR");
  sub->add_option("--tls-psk", args->tls_psk, "nbdkit --tls-psk=FILE");
  sub->add_option("--config,-c", args->config,
                  "The config file for NAME|UUID and --scan (default "
                  "$URAID_CONFIG, else /etc/uraid/uraid.conf)");
  CLI::Option* scan = sub->add_flag(
      "--scan,-s", args->scan,
      "Serve every ARRAY of the config, one nbdkit each on its own socket");
  scan->excludes(socket)->excludes(pidfile)->excludes(control)->excludes(
      bitmap);
  CLI::Option* members = sub->add_option(
      "MEMBER", args->members,
      "Member files, devices or NBD URIs; or one ARRAY name or uuid of the "
      "config, whose members are found among its DEVICE candidates. "
      "Arguments after -- go to nbdkit as options");
  scan->excludes(members);
  // Words after `--` are nbdkit's. CLI11 2.1 hands them back to the main
  // app (an error there) once no positional of this subcommand still needs
  // a value; this one does, so they stay here: in MEMBER or in it.
  sub->add_option("NBDKIT_OPTION", args->nbdkit_extra,
                  "After --: options passed to nbdkit as they are")
      ->expected(1, 64);
  sub->final_callback([args, action] {
    const std::vector<std::string> words = WordsAfterDoubleDash();
    std::vector<std::string>& m = args->members;
    if (!words.empty() && words.size() <= m.size() &&
        std::equal(words.begin(), words.end(), m.end() - words.size())) {
      m.resize(m.size() - words.size());
    }
    args->nbdkit_extra = words;
    CheckNoPluginKeys(words);
    if (args->members.empty() && !args->scan) {
      throw CLI::RequiredError(
          "MEMBER (members, an ARRAY name or uuid) or --scan");
    }
    *action = [args] { return RunServe(*args); };
  });
}

}  // namespace uraid::tool
