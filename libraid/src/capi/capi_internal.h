// SPDX-License-Identifier: MIT
// What the files of the C API (uraid/uraid.h) share: the handle structs,
// the status -> negative errno conversion with the message copied into the
// caller's buffer, the guard that keeps C++ exceptions out of C, and the
// struct_size rules of the extensible structs. Internal to libraid.

#ifndef URAID_SRC_CAPI_CAPI_INTERNAL_H_
#define URAID_SRC_CAPI_CAPI_INTERNAL_H_

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/uraid.h"

// An open array. Owned by the C caller from create/assemble to close.
struct uraid_array {
  std::unique_ptr<uraid::Array> array;
};

// A caller's reference to a member. `member` is shared with every array it
// was given to (through ShareMember); `faulty` is the same object when it
// is a fault injector. `plan_mu` serialises read-modify-write of its plan.
struct uraid_member {
  std::shared_ptr<uraid::Member> member;
  std::shared_ptr<uraid::FaultyMember> faulty;
  std::mutex plan_mu;
};

namespace uraid::capi {

// Copies `msg` into err (truncated to err_len - 1 bytes, NUL-terminated);
// nothing when err is NULL or err_len is 0.
void CopyMessage(const std::string& msg, char* err, size_t err_len);

// 0 for OK; otherwise the message goes to `err` and -errno comes back
// (StatusToErrno, the one table).
int Report(const absl::Status& st, char* err, size_t err_len);

absl::Status NullArgument(const char* what);

// Runs `fn` (returning absl::Status) with no exception escaping.
template <typename Fn>
int Guarded(char* err, size_t err_len, Fn&& fn) {
  try {
    return Report(fn(), err, err_len);
  } catch (const std::bad_alloc&) {
    CopyMessage("out of memory", err, err_len);
    return -ENOMEM;
  } catch (const std::exception& e) {
    CopyMessage(e.what(), err, err_len);
    return -EIO;
  } catch (...) {
    CopyMessage("unknown C++ exception", err, err_len);
    return -EIO;
  }
}

// The bytes of an extensible struct the caller says it has: struct_size,
// 0 meaning the first version (this library's sizeof: every struct here is
// at its first version).
inline size_t CallerSize(size_t struct_size, size_t ours) {
  return struct_size == 0 ? ours : struct_size;
}

// Checks the caller's struct of `caller_size` bytes at `p` against ours
// (`ours` bytes): too small for struct_size itself is InvalidArgument; a
// larger one (a newer header) is accepted only when every byte we do not
// know is zero (E2BIG otherwise), as Linux's copy_struct_from_user.
absl::Status CheckCallerStruct(const void* p, size_t caller_size, size_t ours,
                               const char* type);

// Reads an options struct: *out = defaults (all zero) overwritten by the
// caller's first min(struct_size, sizeof(T)) bytes. `in` NULL = defaults.
template <typename T>
absl::Status ReadOptions(const T* in, T* out, const char* type) {
  std::memset(static_cast<void*>(out), 0, sizeof(T));
  out->struct_size = sizeof(T);
  if (in == nullptr) return absl::OkStatus();
  size_t n = CallerSize(in->struct_size, sizeof(T));
  if (absl::Status s = CheckCallerStruct(in, n, sizeof(T), type); !s.ok()) {
    return s;
  }
  std::memcpy(static_cast<void*>(out), in, std::min(n, sizeof(T)));
  out->struct_size = sizeof(T);
  return absl::OkStatus();
}

// Writes an info struct: the first min(out->struct_size, sizeof(T)) bytes
// of `full`, and out->struct_size = the bytes written. -EINVAL when
// struct_size cannot hold struct_size itself.
template <typename T>
int WriteInfo(const T& full, T* out) {
  size_t n = CallerSize(out->struct_size, sizeof(T));
  if (n < sizeof(size_t)) return -EINVAL;
  n = std::min(n, sizeof(T));
  T copy = full;
  copy.struct_size = n;
  std::memcpy(static_cast<void*>(out), &copy, n);
  return 0;
}

// The Logger for a C log callback (NULL fn = discard).
Logger CLogger(uraid_log_fn fn, void* user, int min_level);

// Maps the cache_bytes option: 0 keeps `*cache`'s default,
// URAID_CACHE_OFF turns it off.
void ApplyCacheBytes(uint64_t bytes, CacheOptions* cache);

// The option structs as the C++ API's (array_io.cc). On error nothing is
// opened. `mo` gets the member-opening options (create sets only direct).
absl::Status ToOptions(const uraid_create_options* in, CreateOptions* c,
                       Logger* logger, MemberOptions* mo);
absl::Status ToOptions(const uraid_assemble_options* in, AssembleOptions* a,
                       Logger* logger, MemberOptions* mo);

// Array::Create or Array::Assemble, as the options' type says.
inline absl::StatusOr<std::unique_ptr<Array>> OpenArray(
    std::vector<std::unique_ptr<Member>> members, const CreateOptions& o,
    Logger logger) {
  return Array::Create(std::move(members), o, std::move(logger));
}
inline absl::StatusOr<std::unique_ptr<Array>> OpenArray(
    std::vector<std::unique_ptr<Member>> members, const AssembleOptions& o,
    Logger logger) {
  return Array::Assemble(std::move(members), o, std::move(logger));
}

// Starts the opened array's background threads and hands it to the caller
// in *out (array_io.cc).
absl::Status Publish(absl::StatusOr<std::unique_ptr<Array>> array,
                     uraid_array** out);

// The tail that every uraid_create* and uraid_assemble* shares once its
// own arguments are checked, in this order: converts the C options
// (`Options` is CreateOptions or AssembleOptions), gets the members from
// `get_members(mo, &members)` (mo: the member-opening options the C
// options carry), opens the array and hands it to the caller in *out.
// Nothing is opened when the options are bad.
template <typename Options, typename COptions, typename GetMembers>
absl::Status OpenAndPublish(const COptions* in, uraid_array** out,
                            GetMembers&& get_members) {
  Options options;
  Logger logger;
  MemberOptions mo;
  if (absl::Status s = ToOptions(in, &options, &logger, &mo); !s.ok()) {
    return s;
  }
  std::vector<std::unique_ptr<Member>> members;
  if (absl::Status s = get_members(mo, &members); !s.ok()) return s;
  return Publish(OpenArray(std::move(members), options, std::move(logger)),
                 out);
}

// URAID_SLOT_* for a SlotState.
int SlotStateCode(SlotState state);

}  // namespace uraid::capi

#endif  // URAID_SRC_CAPI_CAPI_INTERNAL_H_
