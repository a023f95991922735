// SPDX-License-Identifier: MIT
// The C API (uraid/uraid.h), part four: md's pure arithmetic, with no
// array: layout names, the logical <-> member map, and the v1.2
// superblock codec.

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "capi/capi_internal.h"
#include "uraid/geometry.h"
#include "uraid/superblock.h"
#include "uraid/uraid.h"

namespace {

using uraid::capi::CopyMessage;
using uraid::capi::Guarded;
using uraid::capi::NullArgument;

static_assert(URAID_SB_BYTES == uraid::kSbBlockBytes);
static_assert(URAID_SB_MAX_DEV == uraid::kSbMaxDevLimit);
static_assert(URAID_ROLE_SPARE == uraid::kRoleSpare);
static_assert(URAID_ROLE_FAULTY == uraid::kRoleFaulty);
static_assert(URAID_LAYOUT_PARITY_LAST ==
              static_cast<int>(uraid::Layout::kParityLast));
static_assert(URAID_LAYOUT_LEFT_SYMMETRIC ==
              static_cast<int>(uraid::Layout::kLeftSymmetric));
static_assert(URAID_LAYOUT_DDF_ZERO_RESTART ==
              static_cast<int>(uraid::Layout::kDdfZeroRestart));
static_assert(URAID_LAYOUT_DDF_N_CONTINUE ==
              static_cast<int>(uraid::Layout::kDdfNContinue));
static_assert(URAID_LAYOUT_LEFT_ASYMMETRIC_6 ==
              static_cast<int>(uraid::Layout::kLeftAsymmetric6));
static_assert(URAID_LAYOUT_PARITY_FIRST_6 ==
              static_cast<int>(uraid::Layout::kParityFirst6));

// Member bytes when the caller gives none: large enough for any offset a
// test asks about, and a multiple of every valid chunk.
constexpr uint64_t kUnboundedMemberBytes = 1ull << 50;

absl::StatusOr<uraid::Geometry> ToGeometry(const uraid_geometry* in) {
  if (in == nullptr) return NullArgument("geometry");
  uraid_geometry g;
  if (absl::Status s = uraid::capi::ReadOptions(in, &g, "uraid_geometry");
      !s.ok()) {
    return s;
  }
  // Which numbers a level takes is Geometry::Make's to say (with the
  // numbers in its message); negative ones are no md layout at all.
  if (g.layout < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layout %d is not one of md's", g.layout));
  }
  return uraid::Geometry::Make(
      g.level == 0 ? 5 : g.level, static_cast<uraid::Layout>(g.layout),
      g.chunk_bytes, g.raid_disks,
      g.member_bytes == 0 ? kUnboundedMemberBytes : g.member_bytes);
}

}  // namespace

extern "C" {

int uraid_parse_layout(const char* name) {
  if (name == nullptr) return -EINVAL;
  try {
    absl::StatusOr<uraid::Layout> l = uraid::ParseLayout(name);
    return l.ok() ? static_cast<int>(*l) : -EINVAL;
  } catch (...) {
    return -ENOMEM;
  }
}

int uraid_parse_layout_level(const char* name, int level) {
  if (name == nullptr) return -EINVAL;
  try {
    absl::StatusOr<uraid::Layout> l =
        uraid::ParseLayout(name, level == 0 ? 5 : level);
    return l.ok() ? static_cast<int>(*l) : -EINVAL;
  } catch (...) {
    return -ENOMEM;
  }
}

int uraid_map(const uraid_geometry* geometry, uint64_t offset,
              uraid_location* out, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (out == nullptr) return NullArgument("out");
    absl::StatusOr<uraid::Geometry> g = ToGeometry(geometry);
    if (!g.ok()) return g.status();
    if (offset >= g->array_bytes()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("offset %d is past the end of the array (%d bytes)",
                          offset, g->array_bytes()));
    }
    uraid::Location l = g->Map(offset);
    out->stripe = l.stripe;
    out->data_index = l.data_index;
    out->disk = l.disk;
    out->parity_disk = l.parity_disk;
    out->member_offset = l.member_offset;
    return absl::OkStatus();
  });
}

int uraid_unmap(const uraid_geometry* geometry, int disk,
                uint64_t member_offset, uint64_t* offset, char* err,
                size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (offset == nullptr) return NullArgument("offset");
    absl::StatusOr<uraid::Geometry> g = ToGeometry(geometry);
    if (!g.ok()) return g.status();
    if (disk < 0 || disk >= g->raid_disks()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "disk %d is not one of the %d slots", disk, g->raid_disks()));
    }
    if (member_offset >= g->member_bytes()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "member offset %d is past the member's data (%d bytes)",
          member_offset, g->member_bytes()));
    }
    std::optional<uint64_t> o = g->Unmap(disk, member_offset);
    if (!o.has_value()) {
      return absl::NotFoundError(absl::StrFormat(
          "byte %d of disk %d is parity (stripe %d)", member_offset, disk,
          member_offset / g->chunk_bytes()));
    }
    *offset = *o;
    return absl::OkStatus();
  });
}

int uraid_superblock_decode(const void* bytes, size_t len,
                            uraid_superblock* out, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (out == nullptr) return NullArgument("out");
    if (bytes == nullptr) return NullArgument("bytes");
    if (uraid::capi::CallerSize(out->struct_size, sizeof(*out)) <
        sizeof(*out)) {
      return absl::InvalidArgumentError(
          "uraid_superblock: struct_size too "
          "small");
    }
    absl::StatusOr<uraid::Superblock> sb = uraid::DecodeSuperblock(
        std::span<const uint8_t>(static_cast<const uint8_t*>(bytes), len));
    if (!sb.ok()) return sb.status();
    auto c = std::make_unique<uraid_superblock>();
    std::memset(c.get(), 0, sizeof(*c));
    c->struct_size = sizeof(*c);
    c->feature_map = sb->feature_map;
    std::memcpy(c->set_uuid, sb->set_uuid.data(), 16);
    CopyMessage(sb->set_name, c->set_name, sizeof(c->set_name));
    c->ctime = sb->ctime;
    c->level = sb->level;
    c->layout = sb->layout;
    c->size = sb->size;
    c->chunksize = sb->chunksize;
    c->raid_disks = sb->raid_disks;
    c->bitmap_offset = sb->bitmap_offset;
    c->new_level = sb->new_level;
    c->reshape_position = sb->reshape_position;
    c->delta_disks = sb->delta_disks;
    c->new_layout = sb->new_layout;
    c->new_chunk = sb->new_chunk;
    c->new_offset = sb->new_offset;
    c->data_offset = sb->data_offset;
    c->data_size = sb->data_size;
    c->super_offset = sb->super_offset;
    c->recovery_offset = sb->recovery_offset;
    c->dev_number = sb->dev_number;
    c->cnt_corrected_read = sb->cnt_corrected_read;
    std::memcpy(c->device_uuid, sb->device_uuid.data(), 16);
    c->devflags = sb->devflags;
    c->bblog_shift = sb->bblog_shift;
    c->bblog_size = sb->bblog_size;
    c->bblog_offset = sb->bblog_offset;
    c->utime = sb->utime;
    c->events = sb->events;
    c->resync_offset = sb->resync_offset;
    c->sb_csum = sb->sb_csum;
    c->max_dev = sb->max_dev;
    size_t roles = std::min<size_t>(sb->dev_roles.size(), URAID_SB_MAX_DEV);
    c->n_roles = static_cast<uint32_t>(roles);
    std::memcpy(c->dev_roles, sb->dev_roles.data(), roles * sizeof(uint16_t));
    std::memcpy(out, c.get(), sizeof(*c));
    return absl::OkStatus();
  });
}

int uraid_superblock_encode(const uraid_superblock* in, void* out,
                            size_t out_len, char* err, size_t err_len) {
  return Guarded(err, err_len, [&]() -> absl::Status {
    if (in == nullptr) return NullArgument("sb");
    if (out == nullptr) return NullArgument("out");
    if (out_len < URAID_SB_BYTES) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "output of %d bytes is smaller than a superblock (%d)", out_len,
          URAID_SB_BYTES));
    }
    auto c = std::make_unique<uraid_superblock>();
    if (absl::Status s =
            uraid::capi::ReadOptions(in, c.get(), "uraid_superblock");
        !s.ok()) {
      return s;
    }
    size_t name_len = strnlen(c->set_name, sizeof(c->set_name));
    if (name_len > 32) {
      return absl::InvalidArgumentError("set_name is longer than 32 bytes");
    }
    if (c->n_roles > URAID_SB_MAX_DEV) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "n_roles %d is more than %d", c->n_roles, URAID_SB_MAX_DEV));
    }
    uraid::Superblock sb;
    sb.feature_map = c->feature_map;
    std::memcpy(sb.set_uuid.data(), c->set_uuid, 16);
    sb.set_name.assign(c->set_name, name_len);
    sb.ctime = c->ctime;
    sb.level = c->level;
    sb.layout = c->layout;
    sb.size = c->size;
    sb.chunksize = c->chunksize;
    sb.raid_disks = c->raid_disks;
    sb.bitmap_offset = c->bitmap_offset;
    sb.new_level = c->new_level;
    sb.reshape_position = c->reshape_position;
    sb.delta_disks = c->delta_disks;
    sb.new_layout = c->new_layout;
    sb.new_chunk = c->new_chunk;
    sb.new_offset = c->new_offset;
    sb.data_offset = c->data_offset;
    sb.data_size = c->data_size;
    sb.super_offset = c->super_offset;
    sb.recovery_offset = c->recovery_offset;
    sb.dev_number = c->dev_number;
    sb.cnt_corrected_read = c->cnt_corrected_read;
    std::memcpy(sb.device_uuid.data(), c->device_uuid, 16);
    sb.devflags = c->devflags;
    sb.bblog_shift = c->bblog_shift;
    sb.bblog_size = c->bblog_size;
    sb.bblog_offset = c->bblog_offset;
    sb.utime = c->utime;
    sb.events = c->events;
    sb.resync_offset = c->resync_offset;
    sb.max_dev = c->max_dev;
    sb.dev_roles.assign(c->dev_roles, c->dev_roles + c->n_roles);
    std::vector<uint8_t> bytes = uraid::EncodeSuperblock(sb);
    std::memcpy(out, bytes.data(), std::min(bytes.size(), out_len));
    return absl::OkStatus();
  });
}

}  // extern "C"
