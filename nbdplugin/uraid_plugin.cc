// SPDX-License-Identifier: MIT
// nbdkit-uraid-plugin: serves a uraid::Array as an NBD export.
//
// A thin adapter: configuration keys to AssembleOptions, nbdkit callbacks to
// Array methods, absl::Status to errno + nbdkit_error. All array logic lives
// in libraid. One Array per nbdkit process, shared by every connection, so
// a flush on any connection covers writes from all of them (multi-conn).
//
// Keys:
//   member=PATH    (repeated) member file or block device, any order; or
//                  an NBD URI (nbd://, nbds://, nbd+unix://), used as given
//   timeout=MS     NBD members: a member that does not answer within MS
//                  fails (the array carries on degraded); default 30000
//   direct=BOOL    open members with O_DIRECT (default false)
//   force=BOOL     start a dirty degraded array (md's start_dirty_degraded)
//   run=BOOL       start degraded without a member listed as active (--run)
//   readonly=BOOL  open members read-only (never written, even the clean
//                  flag); the export is read-only
//   cache=SIZE     stripe cache bound (write gathering), 0 = off
//   cache-age=MS   longest a cached write waits for its stripe to fill
//   stats=FILE     write the array's counters to FILE as JSON at exit
//   control=SOCKET serve the live control channel (uraid/control.h) on a
//                  unix socket, mode 0600: `uraid detail|fail|add|...
//                  --control SOCKET`
//   bitmap=FILE    the array's external write-intent bitmap file (md's
//                  --assemble --bitmap=FILE; uraid create --bitmap FILE)
//   control-group=GROUP  the control socket is mode 0660 with GROUP (a name
//                  or number), whose members may read (detail, events)
//   spares=N       md's spares=N: fewer spares give SparesMissing
//   safe-mode-delay=MS  md's safe_mode_delay: idle this long, the array is
//                  marked clean (default 200); 0: only at the stop
//   log=auto|stderr|syslog|journal  where log lines go (plugin_log.h)
//   array=NAME|UUID  instead of member=: the array of uraid.conf whose
//                  members are found among its DEVICE candidates by
//                  superblock (config_file.h, member_scan.h); its ARRAY
//                  line's bitmap=, readonly and plugin-key tags
//                  (control=, control-group=, spares=, timeout=, cache=,
//                  cache-age=, log=, run, direct) apply unless given here
//   config=FILE    the config for array= (default $URAID_CONFIG, else
//                  /etc/uraid/uraid.conf)

#define NBDKIT_API_VERSION 2
#include <grp.h>
#include <nbdkit-plugin.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "nbd_errno.h"
#include "plugin_log.h"
#include "uraid/array.h"
#include "uraid/config_file.h"
#include "uraid/control.h"
#include "uraid/events.h"
#include "uraid/info_json.h"
#include "uraid/member.h"
#include "uraid/member_scan.h"
#include "uraid/superblock.h"
#include "uraid/version.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

namespace {

struct Config {
  std::vector<std::string> members;
  bool direct = false;
  bool force = false;
  bool run = false;
  bool read_only = false;      // readonly=: open members read-only, never write
  int nbd_timeout_ms = 30000;  // timeout=
  uraid::CacheOptions cache;
  std::string stats;  // write counters here as JSON at shutdown
  // The control socket (an absolute path); empty = none.
  std::string control;
  // The external bitmap file (an absolute path); empty = none.
  std::string bitmap;
  // control-group=: may read the control socket.
  std::optional<uint32_t> control_gid;
  std::string control_group;
  int spares = 0;                     // spares=
  uint32_t safe_mode_delay_ms = 200;  // safe-mode-delay=
  uraid::plugin::LogTarget log = uraid::plugin::LogTarget::kAuto;
  std::string array_ref;    // array=: resolved to members at config_complete
  std::string config_file;  // config= (an absolute path); empty: default
  std::set<std::string> given;  // the keys given on the command line
};

Config config;
// The array; set in config_complete, destroyed in cleanup.
std::unique_ptr<uraid::Array> array;
// The control channel; started in after_fork, stopped first in cleanup.
std::unique_ptr<uraid::ControlServer> control;

// Reports a failed status to nbdkit (message + errno) and returns -1.
int Fail(const char* op, const absl::Status& st) {
  nbdkit_error("uraid: %s: %s", op, std::string(st.message()).c_str());
  errno = uraid::plugin::NbdErrno(st);
  return -1;
}

// Stores `value` made absolute (nbdkit changes directory to / when it
// daemonises) in *out; nbdkit's error convention (-1, already reported).
int AbsolutePath(const char* value, std::string* out) {
  char* abs = nbdkit_absolute_path(value);
  if (abs == nullptr) return -1;
  *out = abs;
  free(abs);
  return 0;
}

int ConfigKey(const char* key, const char* value) {
  std::string k = key;
  if (k == "member") {
    // An NBD URI is not a path: it is used exactly as given.
    std::string path = value;
    if (!uraid::IsMemberUri(path)) {
      char* abs = nbdkit_realpath(value);
      if (abs == nullptr) return -1;  // nbdkit_realpath reported why
      path = abs;
      free(abs);
    }
    for (const std::string& m : config.members) {
      if (m == path) {
        nbdkit_error(
            "uraid: member %s given twice (same device): give each "
            "member once",
            value);
        return -1;
      }
    }
    config.members.push_back(std::move(path));
    return 0;
  }
  if (k == "direct" || k == "force" || k == "readonly" || k == "run") {
    int b = nbdkit_parse_bool(value);
    if (b == -1) {
      nbdkit_error("uraid: %s=%s: expected true or false", key, value);
      return -1;
    }
    (k == "direct"  ? config.direct
     : k == "force" ? config.force
     : k == "run"   ? config.run
                    : config.read_only) = b;
    return 0;
  }
  if (k == "cache") {
    int64_t size = nbdkit_parse_size(value);
    if (size == -1) return -1;
    config.cache.bytes = static_cast<uint64_t>(size);
    return 0;
  }
  if (k == "cache-age") {
    if (nbdkit_parse_uint32_t("cache-age", value, &config.cache.max_age_ms) ==
        -1) {
      return -1;
    }
    return 0;
  }
  if (k == "stats") return AbsolutePath(value, &config.stats);
  if (k == "timeout") {
    uint32_t ms;
    if (nbdkit_parse_uint32_t("timeout", value, &ms) == -1) return -1;
    if (ms == 0 || ms > INT32_MAX) {
      nbdkit_error("uraid: timeout=%s: give milliseconds, 1 or more", value);
      return -1;
    }
    config.nbd_timeout_ms = static_cast<int>(ms);
    return 0;
  }
  // The library checks the bitmap file and names it in its errors.
  if (k == "bitmap") return AbsolutePath(value, &config.bitmap);
  if (k == "control") return AbsolutePath(value, &config.control);
  if (k == "control-group") {
    std::string v = value;
    group* g = getgrnam(value);
    if (g != nullptr) {
      config.control_gid = g->gr_gid;
      config.control_group = v;
      return 0;
    }
    uint32_t gid;
    if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos &&
        nbdkit_parse_uint32_t("control-group", value, &gid) == 0) {
      config.control_gid = gid;
      g = getgrgid(gid);
      config.control_group = g != nullptr ? g->gr_name : v;
      return 0;
    }
    nbdkit_error("uraid: control-group=%s: no such group", value);
    return -1;
  }
  if (k == "spares") {
    int n;
    if (nbdkit_parse_int("spares", value, &n) == -1) return -1;
    if (n < 0 || n > 64) {
      nbdkit_error("uraid: spares=%s: give a count from 0 to 64", value);
      return -1;
    }
    config.spares = n;
    return 0;
  }
  if (k == "safe-mode-delay") {
    uint32_t ms;
    if (nbdkit_parse_uint32_t("safe-mode-delay", value, &ms) == -1) return -1;
    if (ms > 3'600'000) {
      nbdkit_error(
          "uraid: safe-mode-delay=%s: give milliseconds up to 3600000 (an "
          "hour), or 0 to mark the array clean only at its stop",
          value);
      return -1;
    }
    config.safe_mode_delay_ms = ms;
    return 0;
  }
  if (k == "log") {
    if (!uraid::plugin::ParseLogTarget(value, &config.log)) {
      nbdkit_error("uraid: log=%s: expected auto, stderr, syslog or journal",
                   value);
      return -1;
    }
    return 0;
  }
  if (k == "array") {
    config.array_ref = value;
    return 0;
  }
  if (k == "config") return AbsolutePath(value, &config.config_file);
  nbdkit_error(
      "uraid: unknown parameter '%s' (expected member=, direct=, force=, run=, "
      "readonly=, cache=, cache-age=, timeout=, stats=, control=, bitmap=, "
      "control-group=, spares=, safe-mode-delay=, log=, array=, config=)",
      key);
  return -1;
}

int Config(const char* key, const char* value) {
  config.given.insert(key);
  return ConfigKey(key, value);
}

// array=: the ARRAY line's tags that are plugin keys, for each key not
// given on the command line (which wins), as `uraid serve NAME` passes
// them. Before the members are scanned: timeout= applies to that.
int ApplyArrayTags(const uraid::ConfigArray& a) {
  const auto tag = [](const char* key, const std::string& value) {
    if (value.empty() || config.given.count(key) > 0) return 0;
    return ConfigKey(key, value.c_str());
  };
  const auto number = [](const auto& v) {
    return v.has_value() ? std::to_string(*v) : std::string();
  };
  if (tag("control", a.control) == -1 ||
      tag("control-group", a.control_group) == -1 ||
      tag("spares", number(a.spares)) == -1 ||
      tag("timeout", number(a.timeout_ms)) == -1 ||
      tag("cache", number(a.cache_bytes)) == -1 ||
      tag("cache-age", number(a.cache_age_ms)) == -1 ||
      tag("log", a.log) == -1 || tag("run", a.run ? "true" : "") == -1 ||
      tag("direct", a.direct ? "true" : "") == -1) {
    return -1;
  }
  uraid::plugin::ChooseLogTarget(config.log);
  return 0;
}

// How members are opened, at start and by the control channel's add and
// replace.
uraid::MemberOptions MemberOpts() {
  uraid::MemberOptions mo;
  mo.direct = config.direct;
  mo.read_only = config.read_only;
  mo.nbd_timeout_ms = config.nbd_timeout_ms;
  return mo;
}

// The library's lines, by severity (plugin_log.h). nbdkit_error would make
// every routine line an error.
void LogLine(const uraid::LogRecord& r) { uraid::plugin::WriteLog(r); }

int ConfigComplete() {
  uraid::plugin::ChooseLogTarget(config.log);
  if (!config.array_ref.empty() && !config.members.empty()) {
    nbdkit_error("uraid: array=%s and member=: give one or the other",
                 config.array_ref.c_str());
    return -1;
  }
  if (config.array_ref.empty() && !config.config_file.empty()) {
    nbdkit_error("uraid: config= is only used with array=NAME|UUID");
    return -1;
  }
  if (!config.array_ref.empty()) {
    // Before the fork, so every message reaches the terminal.
    const std::string path = config.config_file.empty()
                                 ? uraid::DefaultConfigPath()
                                 : config.config_file;
    absl::StatusOr<uraid::ConfigFile> cf = uraid::LoadConfigFile(path);
    if (!cf.ok()) return Fail("config", cf.status());
    absl::StatusOr<uraid::ArrayRef> ref =
        uraid::ResolveArrayRef(*cf, config.array_ref);
    if (!ref.ok()) {
      nbdkit_error("uraid: array=%s: no such ARRAY in %s, and not a uuid",
                   config.array_ref.c_str(), path.c_str());
      return -1;
    }
    const std::optional<uraid::ConfigArray>& entry = ref->entry;
    if (entry.has_value() && ApplyArrayTags(*entry) == -1) return -1;
    absl::StatusOr<uraid::MemberSelection> sel =
        uraid::FindConfiguredMembers(*cf, ref->uuid, MemberOpts());
    if (!sel.ok()) {
      nbdkit_error("uraid: array=%s: %s (DEVICE lines of %s)",
                   config.array_ref.c_str(),
                   std::string(sel.status().message()).c_str(), path.c_str());
      return -1;
    }
    for (const std::string& why : sel->left_out) {
      uraid::LogRecord r;
      r.level = uraid::LogLevel::kWarning;
      r.message = "array=" + config.array_ref + ": leaving out " + why;
      LogLine(r);
    }
    config.members = sel->members;
    if (entry.has_value() && config.bitmap.empty() && !entry->bitmap.empty()) {
      if (AbsolutePath(entry->bitmap.c_str(), &config.bitmap) == -1) return -1;
    }
    if (entry.has_value() && entry->readonly) config.read_only = true;
  }
  if (config.members.empty()) {
    nbdkit_error("uraid: no members: give member=PATH once per member");
    return -1;
  }
  if (config.control.empty() && config.control_gid.has_value()) {
    nbdkit_error("uraid: control-group= needs control=SOCKET");
    return -1;
  }
  // The control socket is created after the fork; refuse a path that can
  // never work now, while the error still reaches the terminal.
  if (!config.control.empty()) {
    struct stat st;
    if (lstat(config.control.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      nbdkit_error(
          "uraid: control=%s: a file that is not a socket is in the way; "
          "refusing to replace it",
          config.control.c_str());
      return -1;
    }
    const std::string dir =
        config.control.substr(0, config.control.find_last_of('/') + 1);
    if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      nbdkit_error("uraid: control=%s: no directory %s for the socket",
                   config.control.c_str(), dir.c_str());
      return -1;
    }
    if (config.control.size() >= 108) {
      nbdkit_error(
          "uraid: control=%s: longer than a unix socket path may be (107 "
          "bytes)",
          config.control.c_str());
      return -1;
    }
  }
  std::vector<std::unique_ptr<uraid::Member>> members;
  const uraid::MemberOptions mo = MemberOpts();
  for (const std::string& path : config.members) {
    absl::StatusOr<std::unique_ptr<uraid::Member>> m =
        uraid::OpenMember(path, mo);
    if (!m.ok()) return Fail("open member", m.status());
    members.push_back(std::move(*m));
  }
  uraid::AssembleOptions ao;
  ao.force = config.force;
  ao.run = config.run;
  ao.read_only = config.read_only;
  ao.cache = config.cache;
  ao.bitmap_file = config.bitmap;
  ao.expected_spares = config.spares;
  ao.safe_mode_delay_ms = config.safe_mode_delay_ms;
  // Assembly starts no thread (Array::Assemble), even when it writes:
  // none survives the fork, and with -f nbdkit reopens stdin and stdout
  // on /dev/null after this returns, which fails if a thread has just
  // opened a file in their place.
  absl::StatusOr<std::unique_ptr<uraid::Array>> a =
      uraid::Array::Assemble(std::move(members), ao, LogLine);
  if (!a.ok()) return Fail("assemble", a.status());
  array = std::move(*a);
  uraid::plugin::SetLogArrayName(array->Info().name);
  return 0;
}

int AfterFork() {
  // Daemonised, stderr is now /dev/null: look again.
  uraid::plugin::ChooseLogTarget(config.log);
  nbdkit_debug("uraid: logging to %s", uraid::plugin::LogTargetName());
  array->StartBackground();
  if (!config.control.empty()) {
    uraid::ControlServerOptions co;
    co.open_member = [mo = MemberOpts()](const std::string& spec) {
      return uraid::OpenMember(spec, mo);
    };
    co.logger = LogLine;
    co.read_group = config.control_gid;
    co.read_group_name = config.control_group;
    absl::StatusOr<std::unique_ptr<uraid::ControlServer>> s =
        uraid::ControlServer::Start(config.control, array.get(), std::move(co));
    if (!s.ok()) {
      nbdkit_error("uraid: %s", std::string(s.status().message()).c_str());
      errno = uraid::plugin::NbdErrno(s.status());
      return -1;
    }
    control = std::move(*s);
  }
  return 0;
}

// Counters as one JSON object (for scripts/bench.sh), written after the
// array is closed so the final writeback is included.
void WriteStats(const uraid::Counters& c, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    nbdkit_error("uraid: stats=%s: %m", path.c_str());
    return;
  }
  // Every counter (uraid/counters.h), as one line of JSON in Python's
  // json.dumps spacing (the form this file has always had).
  const char* sep = "{";
  for (const auto& [name, field] : uraid::CounterFields()) {
    std::fprintf(f, "%s\"%s\": %llu", sep, name,
                 static_cast<unsigned long long>(c.*field));
    sep = ", ";
  }
  std::fputs("}\n", f);
  std::fclose(f);
}

void Cleanup() {
  // No control request may run once the array goes.
  if (control != nullptr) {
    control->Stop();
    control.reset();
  }
  if (array == nullptr) return;
  // Write the cache back first so the counters include it, then close.
  std::string stats = config.stats;
  std::unique_ptr<uraid::Array> a = std::move(array);
  a->Flush().IgnoreError();
  uraid::Counters c = a->Info().counters;
  a.reset();
  if (!stats.empty()) WriteStats(c, stats);
}

void* Open(int readonly) { return NBDKIT_HANDLE_NOT_NEEDED; }

int64_t GetSize(void*) { return static_cast<int64_t>(array->size()); }

int BlockSize(void*, uint32_t* minimum, uint32_t* preferred,
              uint32_t* maximum) {
  *minimum = 4096;
  // A power of two (nbdkit insists) that full-stripe writes divide into.
  uint64_t pref = array->geometry().PreferredIoBytes();
  if (pref > (32u << 20)) pref = 32u << 20;
  *preferred = static_cast<uint32_t>(pref);
  *maximum = 32u << 20;
  return 0;
}

int CanWrite(void*) { return config.read_only ? 0 : 1; }
int CanFlush(void*) { return 1; }
int CanTrim(void*) { return 1; }
int CanZero(void*) { return 1; }
int CanFastZero(void*) { return 0; }
int CanFua(void*) { return NBDKIT_FUA_NATIVE; }
int CanMultiConn(void*) { return 1; }
int CanExtents(void*) { return 1; }

int Pread(void*, void* buf, uint32_t count, uint64_t offset, uint32_t) {
  absl::Status st = array->Read(buf, count, offset);
  return st.ok() ? 0 : Fail("read", st);
}

int Pwrite(void*, const void* buf, uint32_t count, uint64_t offset,
           uint32_t flags) {
  absl::Status st =
      array->Write(buf, count, offset, (flags & NBDKIT_FLAG_FUA) != 0);
  return st.ok() ? 0 : Fail("write", st);
}

int Flush(void*, uint32_t) {
  absl::Status st = array->Flush();
  return st.ok() ? 0 : Fail("flush", st);
}

int Trim(void*, uint32_t count, uint64_t offset, uint32_t flags) {
  absl::Status st = array->Trim(count, offset, (flags & NBDKIT_FLAG_FUA) != 0);
  return st.ok() ? 0 : Fail("trim", st);
}

int Zero(void*, uint32_t count, uint64_t offset, uint32_t flags) {
  if (flags & NBDKIT_FLAG_FAST_ZERO) {
    errno = ENOTSUP;  // zeroing costs a full write here
    return -1;
  }
  absl::Status st = array->Zero(count, offset, (flags & NBDKIT_FLAG_FUA) != 0);
  return st.ok() ? 0 : Fail("zero", st);
}

// NBD block status: holes (zero) where no member holds data, mapped through
// the layout (Array::Extents), so nbdcopy and qemu-img skip them.
int Extents(void*, uint32_t count, uint64_t offset, uint32_t flags,
            nbdkit_extents* extents) {
  absl::StatusOr<std::vector<uraid::Extent>> e = array->Extents(offset, count);
  if (!e.ok()) return Fail("extents", e.status());
  for (const uraid::Extent& x : *e) {
    const uint32_t type = x.zero ? NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO : 0;
    if (nbdkit_add_extent(extents, x.offset, x.length, type) == -1) return -1;
    if (flags & NBDKIT_FLAG_REQ_ONE) break;
  }
  return 0;
}

// Called once, before any other callback (so before the array and its
// mutexes exist).
void Load() {
#ifdef NDEBUG
  // Debian's libabsl is built without NDEBUG, so its Mutex keeps absl's
  // debug-mode deadlock detection on: every Lock and Unlock records the
  // lock in a process-wide graph under one global spinlock, every thread
  // contending on it (issue 35: a fifth of a random 4K write's user-space
  // instructions, and it aborts the server on a lock-order cycle it
  // suspects). An absl built for release has it off; so does a plugin
  // built with NDEBUG. Builds without NDEBUG and the unit tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

nbdkit_plugin MakePlugin() {
  nbdkit_plugin p = nbdkit_plugin();
  p.load = Load;
  p.name = "uraid";
  p.longname = "uraid: md-compatible RAID4/5 over files and block devices";
  p.version = URAID_VERSION_STRING;  // uraid/version.h: project(VERSION)
  p.config = Config;
  p.config_complete = ConfigComplete;
  // A bare path on the command line is a member.
  p.magic_config_key = "member";
  p.config_help =
      "member=PATH      (repeated) member file or device, any order\n"
      "member=URI       (repeated) member NBD export: nbd://HOST[:PORT]/NAME,\n"
      "                 nbd+unix:///NAME?socket=SOCK, nbds://... (TLS)\n"
      "timeout=MS       fail an NBD member that does not answer in MS "
      "(30000)\n"
      "direct=BOOL      open members with O_DIRECT (default false)\n"
      "force=BOOL       start a dirty degraded array (default false)\n"
      "run=BOOL         start degraded although a member listed as active\n"
      "                 was not given (md's --run; default false)\n"
      "readonly=BOOL    open members read-only and export read-only\n"
      "cache=SIZE       stripe cache for write gathering (default 64M; 0 = "
      "off)\n"
      "cache-age=MS     longest a cached write waits (default 100)\n"
      "stats=FILE       write member-I/O counters to FILE (JSON) at exit\n"
      "control=SOCKET   live control channel on a unix socket (mode 0600)\n"
      "                 for uraid detail|fail|add|... --control SOCKET\n"
      "bitmap=FILE      the array's external write-intent bitmap file\n"
      "                 (uraid create --bitmap FILE); without it such an\n"
      "                 array runs with no bitmap (a crash: full resync)\n"
      "control-group=GROUP  control socket mode 0660 with GROUP; its\n"
      "                 members may read (detail, events), not change\n"
      "spares=N         expected spares (fewer: SparesMissing event)\n"
      "safe-mode-delay=MS  idle this long, the array is marked clean\n"
      "                 (md's safe_mode_delay; default 200, 0 = at stop)\n"
      "array=NAME|UUID  instead of member=: find the members of this\n"
      "                 array of the config among its DEVICE candidates\n"
      "config=FILE      the config for array= (/etc/uraid/uraid.conf)\n"
      "log=auto|stderr|syslog|journal  where log lines go (auto: stderr\n"
      "                 in the foreground, else the journal or syslog)";
  p.after_fork = AfterFork;
  p.cleanup = Cleanup;
  p.open = Open;
  p.get_size = GetSize;
  p.block_size = BlockSize;
  p.can_write = CanWrite;
  p.can_flush = CanFlush;
  p.can_trim = CanTrim;
  p.can_zero = CanZero;
  p.can_fast_zero = CanFastZero;
  p.can_fua = CanFua;
  p.can_multi_conn = CanMultiConn;
  p.can_extents = CanExtents;
  p.extents = Extents;
  p.pread = Pread;
  p.pwrite = Pwrite;
  p.flush = Flush;
  p.trim = Trim;
  p.zero = Zero;
  p.errno_is_preserved = 1;
  return p;
}

}  // namespace

static nbdkit_plugin plugin = MakePlugin();
NBDKIT_REGISTER_PLUGIN(plugin)
