// SPDX-License-Identifier: MIT
// `uraid monitor`: mdadm --monitor for served arrays. Subscribes to the
// event stream of each --control socket ({"cmd":"events"}), prints every
// event as a line, and raises md's alerts: --program (PROGRAM EVENT ARRAY
// [MEMBER], as mdadm runs it), --mail (md's mail-worthy events through
// sendmail -t), --syslog. Runs in the foreground (systemd's job to
// daemonise) until SIGTERM or SIGINT (exit 0), or with --oneshot reports
// the current problems and exits (for cron).
//
// One thread per socket reads its stream; the alerts run on one worker
// (alert_queue.h) so that a slow program never delays a line. A server that
// goes away after the monitor saw it is reported as DeviceDisappeared and
// the monitor reconnects every --delay seconds; on reconnect the server
// sends the current state again (NewArray, ...), so nothing is missed. A
// socket that has never answered is only warned about and retried: at boot
// the monitor may well start before the servers. A path that is a
// configuration mistake (not a socket, an NBD server's socket, something
// that does not speak the control protocol, a server that refuses events)
// is an error at start (exit 2).

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "alert_queue.h"
#include "commands.h"
#include "event_stream.h"
#include "monitor_event.h"
#include "monitor_reporter.h"
#include "uraid/config_file.h"

namespace uraid::tool {
namespace {

struct MonitorArgs {
  std::vector<std::string> sockets;
  bool scan = false;   // every ARRAY of the config
  std::string config;  // empty: the default path
  std::string program;
  double program_timeout_s = 30;
  std::string mail;
  bool syslog = false;
  bool oneshot = false;
  bool test = false;
  bool json = false;
  double delay_s = 1;
};

// How long the server may take to answer the subscription, and to send
// each current-state line in --oneshot.
constexpr int kReplyTimeoutMs = 10000;

std::string Hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// What the monitor knows of the array behind one socket, from its events.
struct ArrayMemory {
  std::string uuid;
  std::string name;
  std::string state;  // NewArray's "state"

  void Learn(const EventJson& event) {
    const std::string array = EventField(event, "array");
    if (!array.empty()) uuid = array;
    const std::string n = EventField(event, "name");
    if (!n.empty()) name = n;
    if (EventName(event) == "NewArray") state = EventField(event, "state");
  }
};

// Follows one socket until cancelled, reconnecting after every loss.
class Watcher {
 public:
  Watcher(std::string path, Reporter* reporter, int cancel_fd,
          const MonitorArgs& args)
      : path_(std::move(path)),
        reporter_(reporter),
        cancel_fd_(cancel_fd),
        args_(args) {}

  // `stream` is the first connection (null when it failed with
  // `first_error`). Returns when cancel_fd_ becomes readable.
  void Run(std::unique_ptr<EventStream> stream, absl::Status first_error) {
    std::string last_warning;
    if (!stream) last_warning = std::string(first_error.message());
    while (true) {
      if (stream) {
        const absl::Status lost = Follow(*stream);
        stream.reset();
        if (absl::IsCancelled(lost)) return;
        Disappeared(lost);
        last_warning.clear();
      }
      if (Sleep()) return;
      absl::StatusOr<std::unique_ptr<EventStream>> next =
          EventStream::Open(path_, cancel_fd_, kReplyTimeoutMs);
      if (next.ok()) {
        stream = *std::move(next);
        continue;
      }
      if (absl::IsCancelled(next.status())) return;
      // Once per kind of trouble, not once per second.
      const std::string why(next.status().message());
      if (why != last_warning) {
        Warn(absl::StrFormat("%s; retrying every %g s", why, args_.delay_s));
        last_warning = why;
      }
    }
  }

 private:
  // Reports events until the stream ends; returns why it ended.
  absl::Status Follow(EventStream& stream) {
    int initial = stream.initial();
    if (initial == 0) MaybeTestMessage();
    while (true) {
      absl::StatusOr<EventJson> event = stream.Next();
      if (absl::IsInvalidArgument(event.status())) {
        Warn(absl::StrCat(event.status().message(), " (skipped)"));
        continue;
      }
      if (!event.ok()) return event.status();
      memory_.Learn(*event);
      reporter_->Report(*event, path_, memory_.state);
      if (initial > 0 && --initial == 0) MaybeTestMessage();
    }
  }

  // --test: one TestMessage per array, once its first current state is in
  // (so that it names the array).
  void MaybeTestMessage() {
    if (!args_.test || test_sent_) return;
    test_sent_ = true;
    reporter_->Report(MakeEvent("TestMessage", ArrayId(), memory_.name, path_),
                      path_, memory_.state);
  }

  void Disappeared(const absl::Status& why) {
    EventJson event =
        MakeEvent("DeviceDisappeared", ArrayId(), memory_.name, path_);
    event["error"] = std::string(why.message());
    reporter_->Report(event, path_, memory_.state);
  }

  std::string ArrayId() const {
    return memory_.uuid.empty() ? path_ : memory_.uuid;
  }

  // Waits --delay; true when cancelled meanwhile.
  bool Sleep() {
    pollfd p = {cancel_fd_, POLLIN, 0};
    return poll(&p, 1, static_cast<int>(args_.delay_s * 1000)) > 0;
  }

  const std::string path_;
  Reporter* const reporter_;
  const int cancel_fd_;
  const MonitorArgs& args_;
  ArrayMemory memory_;
  bool test_sent_ = false;
};

AlertOptions AlertsFor(const MonitorArgs& args) {
  return {.program = args.program,
          .mail_to = args.mail,
          .timeout_s = args.program_timeout_s,
          .hostname = Hostname()};
}

// --oneshot: 0 no problem, 1 a problem reported, 2 a socket not read.
int RunOneshot(const MonitorArgs& args) {
  AlertQueue alerts(AlertsFor(args));
  Reporter reporter({.json = args.json, .syslog = args.syslog}, &alerts);
  bool problem = false;
  bool unreadable = false;
  for (const std::string& path : args.sockets) {
    absl::StatusOr<std::unique_ptr<EventStream>> stream =
        EventStream::Open(path, -1, kReplyTimeoutMs);
    if (!stream.ok()) {
      std::fprintf(stderr, "uraid: %s\n",
                   std::string(stream.status().message()).c_str());
      unreadable = true;
      continue;
    }
    ArrayMemory memory;
    bool complete = true;
    for (int i = 0; i < (*stream)->initial(); ++i) {
      absl::StatusOr<EventJson> event = (*stream)->Next(kReplyTimeoutMs);
      if (absl::IsInvalidArgument(event.status())) {
        Warn(absl::StrCat(event.status().message(), " (skipped)"));
        continue;
      }
      if (!event.ok()) {
        std::fprintf(stderr, "uraid: %s (while reading the current state)\n",
                     std::string(event.status().message()).c_str());
        unreadable = true;
        complete = false;
        break;
      }
      memory.Learn(*event);
      if (IsProblem(*event)) {
        reporter.Report(*event, path, memory.state);
        problem = true;
      }
    }
    if (complete && args.test) {
      reporter.Report(
          MakeEvent("TestMessage", memory.uuid.empty() ? path : memory.uuid,
                    memory.name, path),
          path, memory.state);
      problem = true;
    }
  }
  alerts.Drain();
  if (unreadable) return 2;
  return problem ? 1 : 0;
}

// --scan: every configured array's control socket is watched; the
// config's MAILADDR and PROGRAM apply unless given on the command line
// (mdadm --monitor --scan reads mdadm.conf the same way).
absl::Status AddScanned(MonitorArgs& args) {
  const std::string path =
      args.config.empty() ? DefaultConfigPath() : args.config;
  absl::StatusOr<ConfigFile> config = LoadConfigFile(path);
  if (!config.ok()) return config.status();
  if (config->arrays.empty()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: no ARRAY lines to monitor", path));
  }
  for (const ConfigArray& a : config->arrays) {
    args.sockets.push_back(ConfigControlSocket(a));
  }
  if (args.mail.empty() && !config->mailaddr.empty()) {
    args.mail = config->mailaddr.front();
  }
  if (args.program.empty()) args.program = config->program;
  return absl::OkStatus();
}

int RunMonitor(MonitorArgs args) {
  if (args.scan || !args.config.empty()) {
    if (absl::Status st = AddScanned(args); !st.ok()) {
      std::fprintf(stderr, "uraid: %s\n", std::string(st.message()).c_str());
      return 2;
    }
  }
  if (args.sockets.empty()) {
    std::fprintf(stderr,
                 "uraid: monitor needs at least one --control SOCKET\n");
    return 2;
  }
  // A reader whose server vanished must get EPIPE, not die.
  signal(SIGPIPE, SIG_IGN);
  if (args.oneshot) return RunOneshot(args);

  // SIGTERM and SIGINT are taken by sigwait below, in this thread only:
  // block them before any thread starts (threads inherit the mask).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // Readable once the monitor stops: every wait of every watcher polls it.
  const int cancel_fd = eventfd(0, EFD_CLOEXEC);
  if (cancel_fd < 0) {
    std::perror("uraid: eventfd");
    return 1;
  }

  // First connections in order, before anything is reported: a
  // configuration mistake must stop the monitor at once.
  std::vector<std::unique_ptr<EventStream>> first(args.sockets.size());
  std::vector<absl::Status> first_error(args.sockets.size());
  for (size_t i = 0; i < args.sockets.size(); ++i) {
    absl::StatusOr<std::unique_ptr<EventStream>> stream =
        EventStream::Open(args.sockets[i], cancel_fd, kReplyTimeoutMs);
    if (stream.ok()) {
      first[i] = *std::move(stream);
      continue;
    }
    if (absl::IsFailedPrecondition(stream.status())) {
      std::fprintf(stderr, "uraid: %s\n",
                   std::string(stream.status().message()).c_str());
      close(cancel_fd);
      return 2;
    }
    first_error[i] = stream.status();
    Warn(absl::StrFormat("%s; retrying every %g s", stream.status().message(),
                         args.delay_s));
  }

  int code = 0;
  {
    AlertQueue alerts(AlertsFor(args));
    Reporter reporter({.json = args.json, .syslog = args.syslog}, &alerts);
    std::vector<std::unique_ptr<Watcher>> watchers;
    std::vector<std::thread> threads;
    for (size_t i = 0; i < args.sockets.size(); ++i) {
      watchers.push_back(std::make_unique<Watcher>(args.sockets[i], &reporter,
                                                   cancel_fd, args));
      threads.emplace_back(
          [w = watchers.back().get(), s = std::move(first[i]),
           e = first_error[i]]() mutable { w->Run(std::move(s), e); });
    }
    int sig = 0;
    while (sigwait(&stop_signals, &sig) != 0) {
    }
    const uint64_t one = 1;
    if (write(cancel_fd, &one, sizeof one) != sizeof one) code = 1;
    for (std::thread& t : threads) t.join();
    // ~AlertQueue runs what was queued before the signal (each bounded by
    // --program-timeout), so no alert of a reported event is lost.
  }
  close(cancel_fd);
  return code;
}

}  // namespace

void AddMonitorCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<MonitorArgs>();
  CLI::App* sub = app.add_subcommand(
      "monitor",
      "Follow served arrays' events and raise md's alerts (like mdadm "
      "--monitor); runs in the foreground");
  sub->add_option("--control,-C", args->sockets,
                  "A served array's control socket (the plugin's "
                  "control=SOCKET); repeat for several arrays");
  sub->add_flag("--scan,-s", args->scan,
                "Watch every ARRAY of the config (its control=, or "
                "/run/uraid/NAME.ctl as uraid serve makes it); MAILADDR and "
                "PROGRAM from it unless --mail/--program are given");
  sub->add_option(
      "--config,-c", args->config,
      "The config file for --scan (default " + DefaultConfigPath() + ")");
  sub->add_option("--program,-p", args->program,
                  "Run PROGRAM EVENT ARRAY_UUID [MEMBER] for every event "
                  "(argv, no shell; the event's JSON in $URAID_EVENT_JSON)");
  sub->add_option("--program-timeout", args->program_timeout_s,
                  "Kill a program (and sendmail) still running after this "
                  "many seconds")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--mail,-m", args->mail,
                  "Mail Fail, FailSpare, DegradedArray, SparesMissing, "
                  "ArrayFailed and TestMessage events to ADDR via sendmail -t");
  sub->add_flag("--syslog,-y", args->syslog,
                "Log every event via syslog (ident uraid-monitor, LOG_DAEMON)");
  sub->add_flag("--oneshot,-1", args->oneshot,
                "Report the arrays' current problems and exit: 0 none, 1 "
                "some, 2 a socket could not be read");
  sub->add_flag("--test,-t", args->test,
                "Send a TestMessage for each array first (alerts included)");
  sub->add_flag("--json", args->json,
                "Print each event as its JSON object, one per line");
  sub->add_option("--delay,-d", args->delay_s,
                  "Seconds between reconnection attempts to a server that "
                  "went away")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->final_callback(
      [args, action] { *action = [args] { return RunMonitor(*args); }; });
}

}  // namespace uraid::tool
