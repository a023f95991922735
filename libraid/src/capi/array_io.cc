// SPDX-License-Identifier: MIT
// The C API (uraid/uraid.h), part one: opening and closing arrays, the
// request path and info. A thin shell over uraid::Array. Maps
// absl::Status to a negative errno (uraid/status_errno.h, the table the
// plugin narrows for NBD) plus a message copied into the caller's buffer, and
// keeps every C++ exception (only std::bad_alloc is expected) from crossing
// into C.

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "capi/capi_internal.h"
#include "uraid/array.h"
#include "uraid/geometry.h"
#include "uraid/member.h"
#include "uraid/status_errno.h"
#include "uraid/superblock.h"
#include "uraid/uraid.h"
#include "uraid/version.h"

namespace {

using uraid::capi::CopyMessage;
using uraid::capi::Guarded;
using uraid::capi::NullArgument;

// A Member over the caller's callbacks. Owns the descriptor: its close
// callback runs exactly once, when the member is destroyed.
class CallbackMember final : public uraid::Member {
 public:
  CallbackMember(std::string name, uint64_t size, const uraid_member_ops& ops,
                 void* user)
      : name_(std::move(name)), size_(size), ops_(ops), user_(user) {}
  ~CallbackMember() override {
    if (ops_.close != nullptr) ops_.close(user_);
  }

  absl::Status Read(void* buf, size_t len, uint64_t offset) override {
    if (absl::Status s = Range("read", len, offset); !s.ok()) return s;
    return Result(ops_.read(user_, buf, len, offset), "read", len, offset);
  }
  absl::Status Write(const void* buf, size_t len, uint64_t offset) override {
    if (absl::Status s = Range("write", len, offset); !s.ok()) return s;
    return Result(ops_.write(user_, buf, len, offset), "write", len, offset);
  }
  absl::Status Flush() override {
    if (ops_.flush == nullptr) return absl::OkStatus();
    return Result(ops_.flush(user_), "flush", 0, 0);
  }
  absl::Status Discard(size_t len, uint64_t offset) override {
    if (ops_.discard == nullptr) {
      return absl::UnimplementedError(
          absl::StrFormat("%s: discard is not supported", name_));
    }
    if (absl::Status s = Range("discard", len, offset); !s.ok()) return s;
    return Result(ops_.discard(user_, len, offset), "discard", len, offset);
  }
  bool DiscardZeroes() const override { return ops_.discard != nullptr; }
  uint64_t Size() const override { return size_; }
  const std::string& Name() const override { return name_; }

 private:
  absl::Status Range(const char* op, size_t len, uint64_t offset) const {
    if (offset > size_ || len > size_ - offset) {
      return absl::OutOfRangeError(
          absl::StrFormat("%s: %s of %d bytes at %d is past the end (%d bytes)",
                          name_, op, len, offset, size_));
    }
    return absl::OkStatus();
  }
  absl::Status Result(int rc, const char* op, size_t len,
                      uint64_t offset) const {
    if (rc == 0) return absl::OkStatus();
    // A positive return is a contract violation; report it as EIO.
    int e = rc < 0 ? -rc : EIO;
    return absl::ErrnoToStatus(
        e, absl::StrFormat("%s: %s of %d bytes at %d", name_, op, len, offset));
  }

  const std::string name_;
  const uint64_t size_;
  const uraid_member_ops ops_;
  void* const user_;
};

// Wraps every descriptor first, so that each close callback runs exactly
// once whatever happens next. A NULL ops is a missing slot (nullptr).
absl::Status WrapMembers(const uraid_member_desc* descs, size_t n,
                         std::vector<std::unique_ptr<uraid::Member>>* out) {
  out->clear();
  out->reserve(n);
  absl::Status first;
  for (size_t i = 0; i < n; ++i) {
    const uraid_member_desc& d = descs[i];
    if (d.ops == nullptr) {
      out->push_back(nullptr);
      continue;
    }
    std::string name = d.name != nullptr ? std::string(d.name)
                                         : absl::StrFormat("member%d", i);
    if ((d.ops->read == nullptr || d.ops->write == nullptr) && first.ok()) {
      first = absl::InvalidArgumentError(absl::StrFormat(
          "%s: the read and write callbacks are required", name));
    }
    out->push_back(std::make_unique<CallbackMember>(std::move(name), d.size,
                                                    *d.ops, d.user));
  }
  return first;
}

}  // namespace

namespace uraid::capi {

absl::Status ToOptions(const uraid_create_options* in, uraid::CreateOptions* c,
                       Logger* logger, uraid::MemberOptions* mo) {
  uraid_create_options o;
  if (absl::Status s = ReadOptions(in, &o, "uraid_create_options"); !s.ok()) {
    return s;
  }
  if (o.level != 0) c->level = o.level;
  if (o.layout != nullptr) {
    // As mdadm parses --layout for the level: RAID6's names at level 6.
    absl::StatusOr<uraid::Layout> layout =
        uraid::ParseLayout(o.layout, c->level);
    if (!layout.ok()) return layout.status();
    c->layout = *layout;
  } else if (c->level == 4) {
    c->layout = uraid::Layout::kParityLast;
  }
  if (o.chunk_bytes != 0) c->chunk_bytes = o.chunk_bytes;
  if (o.name != nullptr) c->name = o.name;
  c->member_bytes = o.member_bytes;
  c->data_offset_bytes = o.data_offset_bytes;
  c->assume_clean = o.assume_clean != 0;
  c->force = o.force != 0;
  switch (o.bitmap) {
    case URAID_BITMAP_DEFAULT:
    case URAID_BITMAP_INTERNAL:
      c->bitmap = uraid::BitmapMode::kInternal;
      break;
    case URAID_BITMAP_NONE:
      c->bitmap = uraid::BitmapMode::kNone;
      break;
    case URAID_BITMAP_FILE:
      if (o.bitmap_file == nullptr) return NullArgument("bitmap_file");
      c->bitmap = uraid::BitmapMode::kFile;
      c->bitmap_file = o.bitmap_file;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrFormat("bitmap %d is not a URAID_BITMAP_ value", o.bitmap));
  }
  c->bitmap_chunk_bytes = o.bitmap_chunk_bytes;
  ApplyCacheBytes(o.cache_bytes, &c->cache);
  *logger = CLogger(o.log, o.log_user, o.log_level);
  mo->direct = o.direct != 0;
  return absl::OkStatus();
}

absl::Status ToOptions(const uraid_assemble_options* in,
                       uraid::AssembleOptions* a, Logger* logger,
                       uraid::MemberOptions* mo) {
  uraid_assemble_options o;
  if (absl::Status s = ReadOptions(in, &o, "uraid_assemble_options"); !s.ok()) {
    return s;
  }
  a->force = o.force != 0;
  a->read_only = o.read_only != 0;
  a->run = o.run != 0;
  if (o.bitmap_file != nullptr) a->bitmap_file = o.bitmap_file;
  ApplyCacheBytes(o.cache_bytes, &a->cache);
  *logger = CLogger(o.log, o.log_user, o.log_level);
  mo->direct = o.direct != 0;
  mo->read_only = o.read_only != 0;
  mo->lock = o.no_lock == 0;
  return absl::OkStatus();
}

// Takes ownership of an opened array and hands it to the caller.
absl::Status Publish(absl::StatusOr<std::unique_ptr<uraid::Array>> array,
                     uraid_array** out) {
  if (!array.ok()) return array.status();
  (*array)->StartBackground();
  auto handle = std::make_unique<uraid_array>();
  handle->array = *std::move(array);
  *out = handle.release();
  return absl::OkStatus();
}

}  // namespace uraid::capi

namespace {

using uraid::capi::OpenAndPublish;
using Members = std::vector<std::unique_ptr<uraid::Member>>;

absl::Status CheckPathList(const char* const* paths, size_t n,
                           uraid_array** out) {
  if (out == nullptr) return NullArgument("out");
  *out = nullptr;
  if (paths == nullptr && n > 0) return NullArgument("paths");
  return absl::OkStatus();
}

// Opens each path with `mo`. A NULL path is a missing slot when
// `allow_missing` (create) and an error otherwise (assemble).
absl::Status OpenPaths(const char* const* paths, size_t n,
                       const uraid::MemberOptions& mo, bool allow_missing,
                       Members* out) {
  for (size_t i = 0; i < n; ++i) {
    if (paths[i] == nullptr) {
      if (!allow_missing) return NullArgument("a member path");
      out->push_back(nullptr);
      continue;
    }
    absl::StatusOr<std::unique_ptr<uraid::Member>> m =
        uraid::OpenMember(paths[i], mo);
    if (!m.ok()) return m.status();
    out->push_back(*std::move(m));
  }
  return absl::OkStatus();
}

// uraid_create and uraid_assemble: the members opened from paths.
template <typename Options, typename COptions>
int FromPaths(bool allow_missing, const char* const* paths, size_t n,
              const COptions* options, uraid_array** out, char* err,
              size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (absl::Status s = CheckPathList(paths, n, out); !s.ok()) return s;
    return OpenAndPublish<Options>(
        options, out, [&](const uraid::MemberOptions& mo, Members* members) {
          return OpenPaths(paths, n, mo, allow_missing, members);
        });
  });
}

// Wraps the descriptors (first: every close callback must run, even on a
// bad argument), then checks `out`.
absl::Status WrapAll(const uraid_member_desc* descs, size_t n,
                     uraid_array** out, Members* members) {
  if (descs == nullptr && n > 0) return NullArgument("members");
  if (absl::Status s = WrapMembers(descs, n, members); !s.ok()) return s;
  if (out == nullptr) return NullArgument("out");
  *out = nullptr;
  return absl::OkStatus();
}

// OpenAndPublish's get_members for members wrapped already.
auto Given(Members& members) {
  return [&members](const uraid::MemberOptions&, Members* out) {
    *out = std::move(members);
    return absl::OkStatus();
  };
}

}  // namespace

extern "C" {

int uraid_create(const char* const* paths, size_t n,
                 const uraid_create_options* options, uraid_array** out,
                 char* err, size_t err_len) {
  return FromPaths<uraid::CreateOptions>(/*allow_missing=*/true, paths, n,
                                         options, out, err, err_len);
}

int uraid_assemble(const char* const* paths, size_t n,
                   const uraid_assemble_options* options, uraid_array** out,
                   char* err, size_t err_len) {
  return FromPaths<uraid::AssembleOptions>(/*allow_missing=*/false, paths, n,
                                           options, out, err, err_len);
}

int uraid_create_members(const uraid_member_desc* descs, size_t n,
                         const uraid_create_options* options, uraid_array** out,
                         char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    Members members;
    if (absl::Status s = WrapAll(descs, n, out, &members); !s.ok()) return s;
    return OpenAndPublish<uraid::CreateOptions>(options, out, Given(members));
  });
}

int uraid_assemble_members(const uraid_member_desc* descs, size_t n,
                           const uraid_assemble_options* options,
                           uraid_array** out, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    Members members;
    if (absl::Status s = WrapAll(descs, n, out, &members); !s.ok()) return s;
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i] == nullptr) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "member %d has no ops (leave a missing member out instead)", i));
      }
    }
    return OpenAndPublish<uraid::AssembleOptions>(options, out, Given(members));
  });
}

int uraid_close(uraid_array* array, char* err, size_t err_len) {
  if (array == nullptr) return 0;
  std::unique_ptr<uraid_array> owned(array);
  return Guarded(err, err_len, [&]() -> absl::Status {
    absl::Status st;
    uraid::ArrayInfo info = owned->array->Info();
    if (!info.read_only && !info.failed) st = owned->array->Flush();
    owned->array.reset();  // stops background work, marks clean
    return st;
  });
}

int uraid_read(uraid_array* array, void* buf, size_t len, uint64_t offset,
               char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    if (buf == nullptr && len > 0) return NullArgument("buf");
    return array->array->Read(buf, len, offset);
  });
}

int uraid_write(uraid_array* array, const void* buf, size_t len,
                uint64_t offset, unsigned flags, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    if (buf == nullptr && len > 0) return NullArgument("buf");
    return array->array->Write(buf, len, offset, (flags & URAID_FUA) != 0);
  });
}

int uraid_flush(uraid_array* array, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    return array->array->Flush();
  });
}

int uraid_trim(uraid_array* array, size_t len, uint64_t offset, unsigned flags,
               char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    return array->array->Trim(len, offset, (flags & URAID_FUA) != 0);
  });
}

int uraid_zero(uraid_array* array, size_t len, uint64_t offset, unsigned flags,
               char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    return array->array->Zero(len, offset, (flags & URAID_FUA) != 0);
  });
}

uint64_t uraid_size(const uraid_array* array) {
  return array != nullptr ? array->array->size() : 0;
}

int uraid_get_info(const uraid_array* array, uraid_info* out) {
  if (array == nullptr || out == nullptr) return -EINVAL;
  if (uraid::capi::CallerSize(out->struct_size, sizeof(uraid_info)) <
      offsetof(uraid_info, spares)) {
    return -EINVAL;  // older than the first version: not a uraid_info
  }
  try {
    uraid::ArrayInfo info = array->array->Info();
    uraid_info c{};
    const uraid::Geometry& g = info.geometry;
    c.level = g.level();
    c.layout = static_cast<int>(g.layout());
    CopyMessage(std::string(uraid::LayoutName(g.layout())), c.layout_name,
                sizeof(c.layout_name));
    c.chunk_bytes = g.chunk_bytes();
    c.raid_disks = g.raid_disks();
    c.member_bytes = g.member_bytes();
    c.array_bytes = g.array_bytes();
    c.data_offset_bytes = info.data_offset_bytes;
    std::memcpy(c.uuid, info.uuid.data(), sizeof(c.uuid));
    CopyMessage(uraid::FormatUuid(info.uuid), c.uuid_string,
                sizeof(c.uuid_string));
    CopyMessage(info.name, c.name, sizeof(c.name));
    c.events = info.events;
    c.clean = info.clean;
    c.degraded = info.degraded;
    c.failed = info.failed;
    c.read_only = info.read_only;
    c.resyncing = info.resyncing;
    c.resync_bytes = info.resync_bytes;
    for (const uraid::SlotInfo& s : info.slots) {
      if (s.slot < 0 || s.slot >= URAID_MAX_DISKS) continue;
      c.slot_state[s.slot] = uraid::capi::SlotStateCode(s.state);
    }
    c.member_reads = info.counters.member_reads;
    c.member_writes = info.counters.member_writes;
    c.reconstructions = info.counters.reconstructions;
    c.spares = static_cast<int>(info.spares.size());
    c.bitmap = info.bitmap.present;
    c.bitmap_chunk_bytes = info.bitmap.chunk_bytes;
    c.bitmap_dirty_chunks = info.bitmap.dirty_chunks;
    c.reshaping = info.reshape.active;
    c.reshape_position_bytes = info.reshape.position_bytes;
    c.job = static_cast<int>(info.job.kind);
    return uraid::capi::WriteInfo(c, out);
  } catch (...) {
    return -ENOMEM;  // Info() only allocates
  }
}

int uraid_fail_slot(uraid_array* array, int slot, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (array == nullptr) return NullArgument("array");
    return array->array->FailSlot(slot);
  });
}

const char* uraid_version(void) { return URAID_VERSION_STRING; }

}  // extern "C"
