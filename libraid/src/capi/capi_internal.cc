// SPDX-License-Identifier: MIT
// Helpers of the C API files (capi_internal.h).

#include "capi/capi_internal.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "uraid/events.h"
#include "uraid/status_errno.h"

namespace uraid::capi {

static_assert(static_cast<int>(LogLevel::kDebug) == URAID_LOG_DEBUG);
static_assert(static_cast<int>(LogLevel::kCritical) == URAID_LOG_CRITICAL);

void CopyMessage(const std::string& msg, char* err, size_t err_len) {
  if (err == nullptr || err_len == 0) return;
  size_t n = std::min(msg.size(), err_len - 1);
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

int Report(const absl::Status& st, char* err, size_t err_len) {
  if (st.ok()) return 0;
  CopyMessage(std::string(st.message()), err, err_len);
  return -StatusToErrno(st);
}

absl::Status NullArgument(const char* what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s is NULL", what));
}

absl::Status CheckCallerStruct(const void* p, size_t caller_size, size_t ours,
                               const char* type) {
  if (caller_size < sizeof(size_t)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: struct_size %d is too small", type, caller_size));
  }
  const auto* bytes = static_cast<const unsigned char*>(p);
  for (size_t i = ours; i < caller_size; ++i) {
    if (bytes[i] != 0) {
      return WithErrno(
          absl::InvalidArgumentError(absl::StrFormat(
              "%s: struct_size %d is larger than this library's %d and byte "
              "%d (a field it does not know) is set; link a newer liburaid",
              type, caller_size, ours, i)),
          E2BIG);
    }
  }
  return absl::OkStatus();
}

Logger CLogger(uraid_log_fn fn, void* user, int min_level) {
  if (fn == nullptr) return nullptr;
  return Logger([fn, user, min_level](const LogRecord& r) {
    int level = static_cast<int>(r.level);
    if (level >= min_level) fn(user, level, r.message.c_str());
  });
}

void ApplyCacheBytes(uint64_t bytes, CacheOptions* cache) {
  if (bytes == URAID_CACHE_OFF) {
    cache->bytes = 0;
  } else if (bytes != 0) {
    cache->bytes = bytes;
  }
}

int SlotStateCode(SlotState state) {
  switch (state) {
    case SlotState::kActive:
      return URAID_SLOT_ACTIVE;
    case SlotState::kFaulty:
      return URAID_SLOT_FAULTY;
    case SlotState::kRebuilding:
      return URAID_SLOT_REBUILDING;
    case SlotState::kSpare:
      return URAID_SLOT_SPARE;
    case SlotState::kMissing:
      break;
  }
  return URAID_SLOT_MISSING;
}

}  // namespace uraid::capi
