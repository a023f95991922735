// SPDX-License-Identifier: MIT
// Array::Create: validate everything first, then write superblocks, then
// make parity consistent. Nothing is written when validation fails.

#include <random>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "array/member_superblock.h"
#include "base/status_macros.h"
#include "format/ppl_format.h"
#include "meta/ppl_log.h"
#include "uraid/bad_blocks.h"

namespace uraid {

std::array<uint8_t, 16> RandomUuid() {
  std::random_device rd;  // /dev/urandom on Linux
  std::array<uint8_t, 16> u;
  for (size_t i = 0; i < u.size(); i += 4) {
    uint32_t v = rd();
    for (int j = 0; j < 4; ++j) u[i + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  return u;
}

namespace {

// The end of the superblock area of a 1.2 member, in bytes: data must start
// past it.
constexpr uint64_t kMinDataOffset = 8192;
constexpr uint64_t kBadBlockLogBytes = uint64_t{kBadBlockLogSectors} * 512;

// Where a new member's bad-block log goes, in sectors from the superblock
// (bblog_offset), or 0 for no log. The rule is mdadm 4.2's
// (super1.c, write_init_super1, metadata 1.1/1.2): the log follows the
// area [area_offset, area_offset + area_sectors) kept after the superblock
// (the internal bitmap's pages, md's 1 MiB PPL area, or else
// choose_bm_space(size) sectors kept for a bitmap added later) when its
// kBadBlockLogSectors end by the data; else mdadm puts it in the last
// sectors before the data when those lie past the superblock's 4 KiB, over
// whatever the area holds. uraid takes that fallback only when the area is
// empty (`area_used` false), and keeps no log otherwise: the log must never
// share a sector with the bitmap or the PPL. mdadm keeps none when neither
// fits either.
int32_t BadBlockLogOffset(uint64_t data_offset_sectors, uint64_t area_offset,
                          uint64_t area_sectors, bool area_used) {
  const uint64_t sb = kSb12OffsetSectors;
  if (data_offset_sectors >=
      sb + area_offset + area_sectors + kBadBlockLogSectors) {
    return static_cast<int32_t>(area_offset + area_sectors);
  }
  if (!area_used && data_offset_sectors >= sb + 2 * kBadBlockLogSectors) {
    return static_cast<int32_t>(data_offset_sectors - kBadBlockLogSectors - sb);
  }
  return 0;
}

}  // namespace

absl::StatusOr<Superblock> ReadSuperblock(Member& member) {
  if (member.Size() < kSb12OffsetBytes + kSbBlockBytes) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: too small to hold an md superblock (%d bytes)",
                        member.Name(), member.Size()));
  }
  std::vector<uint8_t> block(kSbBlockBytes);
  RETURN_IF_ERROR(member.Read(block.data(), block.size(), kSb12OffsetBytes));
  absl::StatusOr<Superblock> sb = DecodeSuperblock(block);
  if (!sb.ok()) {
    return absl::Status(
        sb.status().code(),
        absl::StrFormat("%s: %s", member.Name(), sb.status().message()));
  }
  return sb;
}

absl::StatusOr<std::unique_ptr<Array>> Array::Create(
    std::vector<std::unique_ptr<Member>> members, const CreateOptions& options,
    Logger logger) {
  const int n = static_cast<int>(members.size());
  const uint64_t chunk = options.chunk_bytes;
  // Validates level, layout, chunk and disk count before touching members.
  RETURN_IF_ERROR(
      Geometry::Make(options.level, options.layout, chunk, n, chunk).status());
  const int max_missing = options.level == 6 ? 2 : 1;
  int missing = 0;
  for (const auto& m : members) missing += m == nullptr;
  if (missing > max_missing) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d members given as missing; RAID%d survives only %s", missing,
        options.level, max_missing == 2 ? "two" : "one"));
  }
  if (options.name.size() > 32) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "name '%s' is longer than md's 32 bytes", options.name));
  }
  uint64_t min_size = ~0ull;
  const Member* smallest = nullptr;
  for (const auto& m : members) {
    if (m == nullptr) continue;
    if (!options.force) {
      absl::StatusOr<Superblock> old = ReadSuperblock(*m);
      if (old.ok()) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s already holds an md superblock (array %s, role %d); use "
            "--force to overwrite it",
            m->Name(), FormatUuid(old->set_uuid), old->role()));
      }
    }
    if (m->Size() < min_size) {
      min_size = m->Size();
      smallest = m.get();
    }
  }
  if (smallest == nullptr) {
    return absl::InvalidArgumentError("no members given");
  }
  uint64_t data_offset = options.data_offset_bytes;
  if (data_offset == 0) {
    data_offset = DefaultDataOffsetSectors(min_size / 512, chunk / 512) * 512;
  }
  // PPL: md's area, 4 KiB after the superblock, 1 MiB long.
  constexpr uint64_t kPplAreaEnd = kSb12OffsetBytes +
                                   kPplDefaultOffsetSectors * 512 +
                                   uint64_t{kPplDefaultSizeSectors} * 512;
  if (options.ppl) {
    if (options.level != 5) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "consistency policy ppl is only supported for RAID level 5, not %d",
          options.level));
    }
    if (options.bitmap != BitmapMode::kNone) {
      return absl::InvalidArgumentError(
          "consistency policy ppl is not compatible with a bitmap (md keeps "
          "the log where the bitmap would be); use bitmap mode none");
    }
    if (options.data_offset_bytes == 0 && data_offset < kPplAreaEnd) {
      // Room for the log, on mdadm's 1 MiB alignment.
      data_offset = (kPplAreaEnd + (1 << 20) - 1) / (1 << 20) * (1 << 20);
    }
    if (data_offset < kPplAreaEnd) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "data offset %d leaves no room for the 1 MiB partial parity log, "
          "which ends at byte %d",
          data_offset, kPplAreaEnd));
    }
  }
  if (data_offset % 4096 != 0 || data_offset < kMinDataOffset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data offset %d must be a multiple of 4096 and at least %d",
        data_offset, kMinDataOffset));
  }
  if (min_size < data_offset + chunk) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "member %s is too small: %d bytes; needs at least %d (data offset %d "
        "+ one %d-byte chunk)",
        smallest->Name(), min_size, data_offset + chunk, data_offset, chunk));
  }
  uint64_t member_bytes = RoundDownToChunk(min_size - data_offset, chunk);
  if (options.member_bytes != 0) {
    if (options.member_bytes > member_bytes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "requested size %d per member exceeds the %d bytes member %s "
          "allows",
          options.member_bytes, member_bytes, smallest->Name()));
    }
    member_bytes = RoundDownToChunk(options.member_bytes, chunk);
    if (member_bytes == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("requested size %d is smaller than one chunk (%d)",
                          options.member_bytes, chunk));
    }
  }
  ASSIGN_OR_RETURN(Geometry geo, Geometry::Make(options.level, options.layout,
                                                chunk, n, member_bytes));
  // The internal bitmap sits 4 KiB after the superblock (mdadm's place for
  // 1.2) and must end before the data.
  constexpr uint64_t kBitmapAreaStart = kSb12OffsetBytes + 4096;
  uint64_t bitmap_chunk = 0;
  const bool bitmap_in_file = options.bitmap == BitmapMode::kFile;
  if (bitmap_in_file && options.bitmap_file.empty()) {
    return absl::InvalidArgumentError(
        "bitmap mode kFile needs the bitmap file's path (bitmap_file)");
  }
  if (!bitmap_in_file && !options.bitmap_file.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bitmap file %s given, but the bitmap mode is not kFile",
        options.bitmap_file));
  }
  if (options.bitmap == BitmapMode::kInternal &&
      data_offset <= kBitmapAreaStart + kBitmapSuperBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data offset %d leaves no room for an internal bitmap (use "
        "--bitmap none, --bitmap FILE or a larger data offset)",
        data_offset));
  }
  if (options.bitmap != BitmapMode::kNone) {
    // A file has no space limit, but it gets the internal default: the
    // chunk trades bitmap writes (one per chunk first written after an
    // idle spell) against resync after a crash, whichever device holds
    // the bits. md's old file default (4 KiB, doubled up to 2^20 bits)
    // would cost up to 16000 times as many bitmap writes.
    const uint64_t space =
        bitmap_in_file ? ~0ull : data_offset - kBitmapAreaStart;
    if (options.bitmap_chunk_bytes == 0) {
      // mdadm sizes the bitmap within 128 KiB unless told otherwise, and
      // at create leaves the bad-block log its room after the bitmap
      // (add_internal_bitmap1) when the space holds both.
      const uint64_t room = !bitmap_in_file && space >= 2 * kBadBlockLogBytes
                                ? space - kBadBlockLogBytes
                                : space;
      ASSIGN_OR_RETURN(bitmap_chunk,
                       DefaultBitmapChunkBytes(
                           member_bytes, std::min<uint64_t>(room, 128 << 10)));
    } else {
      bitmap_chunk = options.bitmap_chunk_bytes;
      if (bitmap_chunk < kBitmapMinChunkBytes ||
          (bitmap_chunk & (bitmap_chunk - 1)) != 0 ||
          bitmap_chunk > (uint64_t{1} << 31)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "bitmap chunk %d must be a power of two from %d to 2 GiB",
            bitmap_chunk, kBitmapMinChunkBytes));
      }
      const uint64_t area =
          BitmapAreaBytes(BitmapChunks(member_bytes / 512, bitmap_chunk));
      if (area > space) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "a bitmap with %d-byte chunks needs %d bytes but only %d fit "
            "before the data; choose a larger bitmap chunk",
            bitmap_chunk, area, space));
      }
    }
  }

  Superblock sb;
  sb.set_uuid = options.uuid.has_value() ? *options.uuid : RandomUuid();
  sb.set_name = options.name;
  sb.ctime = static_cast<uint64_t>(std::time(nullptr));
  sb.utime = sb.ctime;
  sb.level = options.level;
  // mdadm stores layout 0 for RAID4 (it has no layouts; the kernel puts
  // parity on the last disk whatever the field says).
  sb.layout = options.level == 4 ? 0 : static_cast<uint32_t>(options.layout);
  sb.size = member_bytes / 512;
  sb.chunksize = static_cast<uint32_t>(chunk / 512);
  sb.raid_disks = static_cast<uint32_t>(n);
  sb.data_offset = data_offset / 512;
  sb.super_offset = kSb12OffsetSectors;
  sb.events = 0;
  sb.max_dev = 128;
  sb.dev_roles.assign(128, kRoleSpare);
  // An array missing as many members as it has parity has nothing to make
  // consistent: the missing chunks of every stripe are by definition what
  // the others imply. A RAID6 missing one still has P and Q to agree.
  const bool start_clean = options.assume_clean || missing == max_missing;
  sb.resync_offset = start_clean ? kMaxSector : 0;
  // An external bitmap leaves no trace in the superblocks (md's way): it
  // is named again at assembly.
  if (bitmap_chunk != 0 && !bitmap_in_file) {
    sb.feature_map |= kFeatureBitmapOffset;
    sb.bitmap_offset =
        static_cast<int32_t>((kBitmapAreaStart - kSb12OffsetBytes) / 512);
  }

  // The bad-block log: mdadm's 8 sectors after whatever holds the room
  // behind the superblock. Nothing writes the area at create (mdadm does
  // not either): the log is read only once a superblock sets BAD_BLOCKS.
  if (options.bad_block_log) {
    uint64_t area_offset = (kBitmapAreaStart - kSb12OffsetBytes) / 512;
    uint64_t area_sectors = MdadmBitmapSpaceSectors(sb.size);
    bool area_used = false;
    if (sb.feature_map & kFeatureBitmapOffset) {
      area_sectors = BitmapAreaPages(BitmapChunks(sb.size, bitmap_chunk)) * 8;
      area_used = true;
    } else if (options.ppl) {
      area_offset = kPplDefaultOffsetSectors;
      area_sectors = kPplDefaultSizeSectors;
      area_used = true;
    }
    sb.bblog_offset =
        BadBlockLogOffset(sb.data_offset, area_offset, area_sectors, area_used);
    sb.bblog_size = sb.bblog_offset != 0 ? kBadBlockLogSectors : 0;
    sb.bblog_shift = 0;
  }

  std::shared_ptr<PplLog> ppl_log;
  if (options.ppl) {
    sb.feature_map |= kFeaturePpl;
    sb.set_ppl(kPplDefaultOffsetSectors, kPplDefaultSizeSectors);
    ASSIGN_OR_RETURN(ppl_log, PplLog::Make(geo, sb));
    // Validation is over: each member gets its empty log before any
    // superblock names it, as the bitmap does below.
    for (const auto& m : members) {
      if (m == nullptr) continue;
      Superblock mine = sb;
      mine.data_size = (m->Size() - data_offset) / 512;
      RETURN_IF_ERROR(InitPplArea(*m, mine));
    }
  }

  std::vector<std::unique_ptr<Slot>> slots;
  for (int i = 0; i < n; ++i) {
    auto slot = std::make_unique<Slot>();
    DeviceId id{static_cast<uint32_t>(i), RandomUuid(), 0};
    if (members[i] != nullptr) {
      id.data_size_sectors = (members[i]->Size() - data_offset) / 512;
    }
    const SlotState state =
        members[i] != nullptr ? SlotState::kActive : SlotState::kMissing;
    Roster::Seat(*slot, std::shared_ptr<Member>(std::move(members[i])), id,
                 state);
    slots.push_back(std::move(slot));
  }
  auto impl = std::make_unique<ArrayImpl>(
      geo, data_offset, sb, std::move(slots), std::vector<Spare>{}, false,
      options.cache, logger, options.clock);
  if (ppl_log != nullptr) impl->AttachPpl(std::move(ppl_log));
  if (!start_clean) impl->SetResyncStart(0);
  // The bitmap before the superblocks that point at it (or, for a file,
  // that will be assembled with it): a create that fails here has written
  // nothing to the members. Every region starts dirty unless the array
  // starts clean.
  if (bitmap_chunk != 0) {
    RETURN_IF_ERROR(impl->bitmap().Init(sb, data_offset, bitmap_chunk,
                                        !start_clean, options.bitmap_file,
                                        options.force));
    impl->UpdateBitmapDegraded();
  }
  RETURN_IF_ERROR(impl->WriteSuperblocks(start_clean));
  if (!start_clean && !options.defer_resync)
    RETURN_IF_ERROR(impl->jobs().Resync());
  return std::unique_ptr<Array>(new Array(std::move(impl)));
}

}  // namespace uraid
