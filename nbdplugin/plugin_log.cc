// SPDX-License-Identifier: MIT
#include "plugin_log.h"

#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <variant>

#if defined(URAID_HAVE_SYSTEMD)
#include <systemd/sd-journal.h>
#endif

namespace uraid::plugin {
namespace {

// Set at load time (before any thread writes), read by every writer.
std::atomic<LogTarget> target{LogTarget::kStderr};
std::mutex name_mu;  // the array name is a string; lines are rare
std::string array_name;
bool syslog_open = false;

int SyslogPriority(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return LOG_DEBUG;
    case LogLevel::kInfo:
      return LOG_INFO;
    case LogLevel::kNotice:
      return LOG_NOTICE;
    case LogLevel::kWarning:
      return LOG_WARNING;
    case LogLevel::kError:
      return LOG_ERR;
    case LogLevel::kCritical:
      return LOG_CRIT;
  }
  return LOG_INFO;
}

bool SameFile(int fd, const char* path) {
  struct stat a, b;
  return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// $JOURNAL_STREAM is "DEV:INO" of the journal stream systemd gave the
// service; stderr is that stream when they match (systemd.exec(5)).
bool StderrIsJournal() {
  const char* js = getenv("JOURNAL_STREAM");
  if (js == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (sscanf(js, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st;
  return fstat(STDERR_FILENO, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

bool JournalRunning() {
  struct stat st;
  return stat("/run/systemd/journal/socket", &st) == 0 && S_ISSOCK(st.st_mode);
}

std::string NameFor(const LogRecord& r) {
  if (r.event != nullptr && !r.event->array_name.empty()) {
    return r.event->array_name;
  }
  std::lock_guard<std::mutex> lock(name_mu);
  return array_name;
}

}  // namespace

bool ParseLogTarget(const std::string& text, LogTarget* out) {
  if (text == "auto")
    *out = LogTarget::kAuto;
  else if (text == "stderr")
    *out = LogTarget::kStderr;
  else if (text == "syslog")
    *out = LogTarget::kSyslog;
  else if (text == "journal")
    *out = LogTarget::kJournal;
  else
    return false;
  return true;
}

void ChooseLogTarget(LogTarget wanted) {
  LogTarget t = wanted;
  if (t == LogTarget::kAuto) {
    const bool devnull = SameFile(STDERR_FILENO, "/dev/null");
    if (StderrIsJournal()) {
      t = LogTarget::kJournal;
    } else if (devnull) {
      t = JournalRunning() ? LogTarget::kJournal : LogTarget::kSyslog;
    } else {
      t = LogTarget::kStderr;
    }
  }
#if !defined(URAID_HAVE_SYSTEMD)
  // Without libsystemd: a journal stream on stderr takes "<N>" lines,
  // anything else goes to syslog (which journald also collects).
  if (t == LogTarget::kJournal && !StderrIsJournal()) t = LogTarget::kSyslog;
#endif
  if (t == LogTarget::kSyslog && !syslog_open) {
    openlog("uraid", LOG_PID | LOG_NDELAY, LOG_DAEMON);
    syslog_open = true;
  }
  target.store(t);
}

void SetLogArrayName(const std::string& name) {
  std::lock_guard<std::mutex> lock(name_mu);
  array_name = name;
}

const char* LogTargetName() {
  switch (target.load()) {
    case LogTarget::kAuto:
      return "auto";
    case LogTarget::kStderr:
      return "stderr";
    case LogTarget::kSyslog:
      return "syslog";
    case LogTarget::kJournal:
      return "journal";
  }
  return "?";
}

void WriteLog(const LogRecord& r) {
  const std::string name = NameFor(r);
  const std::string who = name.empty() ? std::string() : name + ": ";
  switch (target.load()) {
    case LogTarget::kSyslog:
      syslog(SyslogPriority(r.level), "%s%s", who.c_str(), r.message.c_str());
      return;
    case LogTarget::kJournal: {
#if defined(URAID_HAVE_SYSTEMD)
      const Event* e = r.event;
      std::string slot;
      if (e != nullptr && e->slot.has_value()) slot = std::to_string(*e->slot);
      sd_journal_send(
          "MESSAGE=%s%s", who.c_str(), r.message.c_str(), "PRIORITY=%d",
          SyslogPriority(r.level), "SYSLOG_IDENTIFIER=uraid", "URAID_ARRAY=%s",
          e != nullptr ? e->array.c_str() : "", "URAID_ARRAY_NAME=%s",
          name.c_str(), "URAID_EVENT=%s", e != nullptr ? e->name.c_str() : "",
          "URAID_MEMBER=%s", e != nullptr ? e->member.c_str() : "",
          "URAID_SLOT=%s", slot.c_str(), "URAID_LEVEL=%s",
          LogLevelName(r.level), nullptr);
#else
      std::fprintf(stderr, "<%d>uraid: %s%s\n", SyslogPriority(r.level),
                   who.c_str(), r.message.c_str());
#endif
      return;
    }
    case LogTarget::kAuto:
    case LogTarget::kStderr:
      // One fprintf per line: stdio locks the stream, so lines from
      // different threads do not interleave.
      std::fprintf(stderr, "uraid: %s%s: %s\n", who.c_str(),
                   LogLevelName(r.level), r.message.c_str());
      return;
  }
}

}  // namespace uraid::plugin
