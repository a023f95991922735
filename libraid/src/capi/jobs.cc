// SPDX-License-Identifier: MIT
// The C API (uraid/uraid.h), part three: background jobs and their
// progress, reshape (grow), event listeners and the control server.

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "capi/capi_internal.h"
#include "control/event_json.h"
#include "uraid/array.h"
#include "uraid/control.h"
#include "uraid/events.h"
#include "uraid/geometry.h"
#include "uraid/uraid.h"

struct uraid_control {
  std::unique_ptr<uraid::ControlServer> server;
};

namespace {

using uraid::capi::CopyMessage;
using uraid::capi::Guarded;
using uraid::capi::NullArgument;

static_assert(uraid::kMaxListedMismatches == URAID_MAX_LISTED);
static_assert(static_cast<int>(uraid::JobKind::kNone) == URAID_JOB_NONE);
static_assert(static_cast<int>(uraid::JobKind::kResync) == URAID_JOB_RESYNC);
static_assert(static_cast<int>(uraid::JobKind::kRecover) == URAID_JOB_RECOVER);
static_assert(static_cast<int>(uraid::JobKind::kReplace) == URAID_JOB_REPLACE);
static_assert(static_cast<int>(uraid::JobKind::kCheck) == URAID_JOB_CHECK);
static_assert(static_cast<int>(uraid::JobKind::kRepair) == URAID_JOB_REPAIR);
static_assert(static_cast<int>(uraid::JobKind::kReshape) == URAID_JOB_RESHAPE);

}  // namespace

extern "C" {

int uraid_get_progress(const uraid_array* array, uraid_progress* out) {
  if (array == nullptr || out == nullptr) return -EINVAL;
  try {
    uraid::ArrayInfo info = array->array->Info();
    const uraid::JobInfo& j = info.job;
    uraid_progress c{};
    c.kind = static_cast<int>(j.kind);
    CopyMessage(uraid::JobKindName(j.kind), c.kind_name, sizeof(c.kind_name));
    c.done_bytes = j.done_bytes;
    c.total_bytes = j.total_bytes;
    c.percent = j.kind != uraid::JobKind::kNone && j.total_bytes > 0
                    ? 100.0 * static_cast<double>(j.done_bytes) /
                          static_cast<double>(j.total_bytes)
                    : 0;
    c.bytes_per_s = j.bytes_per_s;
    c.eta_seconds =
        j.kind != uraid::JobKind::kNone && j.bytes_per_s > 0 &&
                j.total_bytes >= j.done_bytes
            ? static_cast<double>(j.total_bytes - j.done_bytes) / j.bytes_per_s
            : -1;
    c.slot = j.slot;
    c.mismatches = j.mismatches;
    c.last_kind = static_cast<int>(info.last_job.kind);
    CopyMessage(info.last_job.result, c.last_result, sizeof(c.last_result));
    c.last_mismatches = info.last_job.mismatches;
    c.second_slot = j.second_slot;
    c.located_mismatches = j.located_mismatches;
    c.last_located_mismatches = info.last_job.located_mismatches;
    c.last_slot = info.last_job.slot;
    c.last_second_slot = info.last_job.second_slot;
    const size_t listed = std::min({info.last_job.first_located.size(),
                                    info.last_job.first_located_slots.size(),
                                    static_cast<size_t>(URAID_MAX_LISTED)});
    c.last_n_located = static_cast<int>(listed);
    for (size_t i = 0; i < listed; ++i) {
      c.last_located_stripes[i] = info.last_job.first_located[i];
      c.last_located_slots[i] =
          static_cast<int>(info.last_job.first_located_slots[i]);
    }
    return uraid::capi::WriteInfo(c, out);
  } catch (...) {
    return -ENOMEM;
  }
}

int uraid_check(uraid_array* array, int repair, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    return array->array->StartScrub(repair != 0);
  });
}

int uraid_stop_job(uraid_array* array, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    return array->array->StopJob();
  });
}

int uraid_wait_job(uraid_array* array, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    return array->array->WaitForJob();
  });
}

int uraid_set_speed(uraid_array* array, uint64_t min_kib_s, uint64_t max_kib_s,
                    char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    uraid::SpeedLimits limits = array->array->Info().speed;
    if (min_kib_s != 0) limits.min_kib_s = min_kib_s;
    if (max_kib_s != 0) limits.max_kib_s = max_kib_s;
    if (limits.min_kib_s > limits.max_kib_s) {
      return absl::InvalidArgumentError(
          absl::StrFormat("speed limits: min %d KiB/s is above max %d KiB/s",
                          limits.min_kib_s, limits.max_kib_s));
    }
    array->array->SetSpeedLimits(limits);
    return absl::OkStatus();
  });
}

int uraid_set_cache_bytes(uraid_array* array, uint64_t bytes) {
  if (array == nullptr) return -EINVAL;
  array->array->SetCacheBytes(bytes);
  return 0;
}

int uraid_grow(uraid_array* array, const uraid_grow_options* options, char* err,
               size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    uraid_grow_options o;
    if (absl::Status s =
            uraid::capi::ReadOptions(options, &o, "uraid_grow_options");
        !s.ok()) {
      return s;
    }
    uraid::GrowOptions g;
    g.raid_devices = o.raid_devices;
    if (o.layout != nullptr) {
      // As mdadm reads --layout: at the level the array will have (a RAID6
      // name is valid only there, and "ddf-N-restart" means another layout
      // at level 5), so the level option if given, else the array's.
      const int level =
          o.level != 0 ? o.level : array->array->Info().geometry.level();
      absl::StatusOr<uraid::Layout> layout =
          uraid::ParseLayout(o.layout, level == 6 ? 6 : 5);
      if (!layout.ok()) return layout.status();
      g.layout = *layout;
    }
    g.chunk_bytes = o.chunk_bytes;
    g.level = o.level;
    if (o.add == nullptr && o.n_add > 0) return NullArgument("add");
    for (size_t i = 0; i < o.n_add; ++i) {
      if (o.add[i] == nullptr) return NullArgument("an add member");
      g.add.push_back(uraid::ShareMember(o.add[i]->member));
    }
    g.start_job = o.manual == 0;
    return array->array->Grow(std::move(g));
  });
}

int uraid_reshape_step(uraid_array* array, int* done, char* err,
                       size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    absl::StatusOr<bool> finished = array->array->StepReshape();
    if (!finished.ok()) return finished.status();
    if (done != nullptr) *done = *finished ? 1 : 0;
    return absl::OkStatus();
  });
}

int uraid_add_event_listener(uraid_array* array, uraid_event_fn fn, void* user,
                             uint64_t* id) {
  if (array == nullptr || fn == nullptr) return -EINVAL;
  try {
    uint64_t got =
        array->array->AddEventListener([fn, user](const uraid::Event& e) {
          std::string json;
          try {
            json = uraid::EventLine(e);
          } catch (...) {
            return;  // out of memory: the event is lost, the array goes on
          }
          if (!json.empty() && json.back() == '\n') json.pop_back();
          uraid_event c{};
          c.struct_size = sizeof(c);
          c.name = e.name.c_str();
          c.time = e.time;
          c.member = e.member.c_str();
          c.slot = e.slot.has_value() ? *e.slot : -2;
          c.json = json.c_str();
          fn(user, &c);
        });
    if (id != nullptr) *id = got;
    return 0;
  } catch (...) {
    return -ENOMEM;
  }
}

void uraid_remove_event_listener(uraid_array* array, uint64_t id) {
  if (array != nullptr) array->array->RemoveEventListener(id);
}

int uraid_control_start(uraid_array* array, const char* socket_path,
                        uraid_control** out, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (out == nullptr) return NullArgument("out");
    *out = nullptr;
    if (array == nullptr) return NullArgument("array");
    if (socket_path == nullptr) return NullArgument("socket_path");
    absl::StatusOr<std::unique_ptr<uraid::ControlServer>> server =
        uraid::ControlServer::Start(socket_path, array->array.get());
    if (!server.ok()) return server.status();
    auto handle = std::make_unique<uraid_control>();
    handle->server = *std::move(server);
    *out = handle.release();
    return absl::OkStatus();
  });
}

void uraid_control_stop(uraid_control* server) {
  if (server == nullptr) return;
  std::unique_ptr<uraid_control> owned(server);
  owned->server->Stop();
}

}  // extern "C"
