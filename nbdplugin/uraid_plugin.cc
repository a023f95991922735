// nbdkit-uraid-plugin: serves a uraid::Array as an NBD export.
//
// A thin adapter: configuration keys to AssembleOptions, nbdkit callbacks to
// Array methods, absl::Status to errno + nbdkit_error. All array logic lives
// in libraid. One Array per nbdkit process, shared by every connection, so
// a flush on any connection covers writes from all of them (multi-conn).
//
// Keys:
//   member=PATH    (repeated) member file or block device, any order
//   direct=BOOL    open members with O_DIRECT (default false)
//   force=BOOL     start a dirty degraded array (md's start_dirty_degraded)
//   cache=SIZE     stripe cache bound (write gathering), 0 = off
//   cache-age=MS   longest a cached write waits for its stripe to fill

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include <cerrno>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "uraid/array.h"
#include "uraid/member.h"

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

namespace {

struct Config {
  std::vector<std::string> members;
  bool direct = false;
  bool force = false;
  uraid::CacheOptions cache;
};

Config config;
// The array; set in config_complete, destroyed in cleanup.
std::unique_ptr<uraid::Array> array;

int StatusToErrno(const absl::Status& st) {
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return EINVAL;
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kPermissionDenied:
      return EPERM;
    case absl::StatusCode::kResourceExhausted:
      return ENOMEM;
    case absl::StatusCode::kUnimplemented:
      return EOPNOTSUPP;
    default:
      return EIO;  // a member failure, data loss, a failed array
  }
}

// Reports a failed status to nbdkit (message + errno) and returns -1.
int Fail(const char* op, const absl::Status& st) {
  nbdkit_error("uraid: %s: %s", op, std::string(st.message()).c_str());
  errno = StatusToErrno(st);
  return -1;
}

int Config(const char* key, const char* value) {
  std::string k = key;
  if (k == "member") {
    char* abs = nbdkit_realpath(value);
    if (abs == nullptr) return -1;  // nbdkit_realpath reported why
    std::string path(abs);
    free(abs);
    for (const std::string& m : config.members) {
      if (m == path) {
        nbdkit_error("uraid: member %s given twice (same device): give each "
                     "member once",
                     value);
        return -1;
      }
    }
    config.members.push_back(std::move(path));
    return 0;
  }
  if (k == "direct" || k == "force") {
    int b = nbdkit_parse_bool(value);
    if (b == -1) return -1;
    (k == "direct" ? config.direct : config.force) = b;
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
  if (k == "control") {
    nbdkit_error(
        "uraid: 'control=' is not supported yet (the control channel lands "
        "with a later release); remove it");
    return -1;
  }
  nbdkit_error("uraid: unknown parameter '%s' (expected member=, direct=, "
               "force=, cache=, cache-age=)",
               key);
  return -1;
}

int ConfigComplete() {
  if (config.members.empty()) {
    nbdkit_error("uraid: no members: give member=PATH once per member");
    return -1;
  }
  std::vector<std::unique_ptr<uraid::Member>> members;
  uraid::FileMemberOptions fo;
  fo.direct = config.direct;
  for (const std::string& path : config.members) {
    absl::StatusOr<std::unique_ptr<uraid::Member>> m =
        uraid::OpenFileMember(path, fo);
    if (!m.ok()) return Fail("open member", m.status());
    members.push_back(std::move(*m));
  }
  uraid::AssembleOptions ao;
  ao.force = config.force;
  ao.cache = config.cache;
  // Assembly only reads superblocks; nothing runs threads before the fork.
  absl::StatusOr<std::unique_ptr<uraid::Array>> a = uraid::Array::Assemble(
      std::move(members), ao,
      [](const std::string& line) { nbdkit_error("uraid: %s", line.c_str()); });
  if (!a.ok()) return Fail("assemble", a.status());
  array = std::move(*a);
  return 0;
}

int AfterFork() {
  array->StartBackground();
  return 0;
}

void Cleanup() { array.reset(); }

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

int CanWrite(void*) { return 1; }
int CanFlush(void*) { return 1; }
int CanTrim(void*) { return 1; }
int CanZero(void*) { return 1; }
int CanFastZero(void*) { return 0; }
int CanFua(void*) { return NBDKIT_FUA_NATIVE; }
int CanMultiConn(void*) { return 1; }

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
  absl::Status st =
      array->Trim(count, offset, (flags & NBDKIT_FLAG_FUA) != 0);
  return st.ok() ? 0 : Fail("trim", st);
}

int Zero(void*, uint32_t count, uint64_t offset, uint32_t flags) {
  if (flags & NBDKIT_FLAG_FAST_ZERO) {
    errno = ENOTSUP;  // zeroing costs a full write here
    return -1;
  }
  absl::Status st =
      array->Zero(count, offset, (flags & NBDKIT_FLAG_FUA) != 0);
  return st.ok() ? 0 : Fail("zero", st);
}

nbdkit_plugin MakePlugin() {
  nbdkit_plugin p = nbdkit_plugin();
  p.name = "uraid";
  p.longname = "uraid: md-compatible RAID4/5 over files and block devices";
  p.version = "0.1.0";
  p.config = Config;
  p.config_complete = ConfigComplete;
  p.config_help =
      "member=PATH      (repeated) member file or device, any order\n"
      "direct=BOOL      open members with O_DIRECT (default false)\n"
      "force=BOOL       start a dirty degraded array (default false)\n"
      "cache=SIZE       stripe cache for write gathering (default 64M; 0 = "
      "off)\n"
      "cache-age=MS     longest a cached write waits (default 100)";
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
