// SPDX-License-Identifier: MIT
// Offline bad-block log updates (bad_block_update.h).
#include "bad_block_update.h"

#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "common.h"
#include "uraid/bad_blocks.h"
#include "uraid/bitmap.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

// Sectors past the superblock where its metadata ends: the superblock's
// own 4 KiB, then the internal bitmap (whole pages, read from its header)
// or the PPL area.
absl::StatusOr<int64_t> BblMetadataEnd(Member& m, const Superblock& sb) {
  int64_t end = 8;
  if (sb.feature_map & kFeatureBitmapOffset) {
    std::vector<uint8_t> head(kBitmapSuperBytes);
    const uint64_t at = (sb.super_offset + sb.bitmap_offset) * 512;
    if (absl::Status st = m.Read(head.data(), head.size(), at); !st.ok()) {
      return st;
    }
    absl::StatusOr<BitmapSuper> bs = DecodeBitmapSuper(head);
    if (!bs.ok()) return bs.status();
    const uint64_t pages = BitmapAreaPages(BitmapChunks(*bs));
    end = std::max<int64_t>(end,
                            sb.bitmap_offset + static_cast<int64_t>(pages * 8));
  }
  if (sb.feature_map & kFeaturePpl) {
    end = std::max<int64_t>(end, int64_t{sb.ppl_offset()} + sb.ppl_size());
  }
  return end;
}

}  // namespace

bool IsBadBlockUpdate(const std::string& what) {
  return what == "bbl" || what == "no-bbl" || what == "force-no-bbl";
}

int RunBadBlockUpdate(const std::string& what,
                      const std::vector<std::string>& paths) {
  // Writable and locked: a served array's members are refused.
  absl::StatusOr<std::vector<std::unique_ptr<Member>>> members =
      OpenMembers(paths, MemberOptions{});
  if (!members.ok()) return Fail(members.status());
  std::vector<Superblock> sbs;
  for (auto& m : *members) {
    std::vector<uint8_t> block(kSbBlockBytes);
    if (absl::Status st = m->Read(block.data(), block.size(), kSb12OffsetBytes);
        !st.ok()) {
      return Fail(absl::StrFormat("%s: reading its superblock: %s", m->Name(),
                                  st.message()));
    }
    absl::StatusOr<Superblock> sb = DecodeSuperblock(block);
    if (!sb.ok()) {
      return Fail(absl::StrFormat("%s: %s", m->Name(), sb.status().message()));
    }
    if (!sbs.empty() && sb->set_uuid != sbs[0].set_uuid) {
      return Fail(absl::StrFormat(
          "%s belongs to array %s, %s to %s: give the members of one array",
          m->Name(), FormatUuid(sb->set_uuid), (*members)[0]->Name(),
          FormatUuid(sbs[0].set_uuid)));
    }
    sbs.push_back(*sb);
  }
  // Decide for every member before writing any.
  for (size_t i = 0; i < sbs.size(); ++i) {
    Superblock& sb = sbs[i];
    Member& m = *(*members)[i];
    if (what == "no-bbl" && (sb.feature_map & kFeatureBadBlocks)) {
      return Fail(absl::StrFormat(
          "%s: its bad-block log lists entries; not removed (mdadm: \"Cannot "
          "remove active bbl\"). Use --update=force-no-bbl once the disk was "
          "replaced or tested",
          m.Name()));
    }
    if (what != "bbl") {
      sb.feature_map &= ~kFeatureBadBlocks;
      sb.bblog_offset = 0;
      sb.bblog_size = 0;
      sb.bblog_shift = 0;
      continue;
    }
    if (BadBlockLogAreaOf(sb).has_value()) continue;  // has one already
    absl::StatusOr<int64_t> end = BblMetadataEnd(m, sb);
    if (!end.ok()) {
      return Fail(absl::StrFormat("%s: %s", m.Name(), end.status().message()));
    }
    const int64_t start = (*end + 7) / 8 * 8;
    if (sb.super_offset + start + 8 > sb.data_offset) {
      return Fail(absl::StrFormat(
          "%s: no room for a bad-block log: metadata ends %d sectors past the "
          "superblock, the data starts %d sectors past it",
          m.Name(), start, sb.data_offset - sb.super_offset));
    }
    sb.bblog_offset = static_cast<int32_t>(start);
    sb.bblog_size = kBadBlockLogSectors;
    sb.bblog_shift = 0;
  }
  for (size_t i = 0; i < sbs.size(); ++i) {
    Member& m = *(*members)[i];
    const Superblock& sb = sbs[i];
    absl::Status st;
    if (const std::optional<BadBlockLogArea> area = BadBlockLogAreaOf(sb);
        area.has_value() && what == "bbl") {
      absl::StatusOr<std::vector<uint8_t>> empty =
          EncodeBadBlockLog({}, area->shift, area->size_bytes);
      st = empty.ok()
               ? m.Write(empty->data(), empty->size(), area->offset_bytes)
               : empty.status();
    }
    if (st.ok()) {
      const std::vector<uint8_t> bytes = EncodeSuperblock(sb);
      st = m.Write(bytes.data(), bytes.size(), kSb12OffsetBytes);
    }
    if (st.ok()) st = m.Flush();
    if (!st.ok()) {
      return Fail(absl::StrFormat("%s: writing the update: %s", m.Name(),
                                  st.message()));
    }
    std::printf("%s: %s\n", m.Name().c_str(),
                what == "bbl"
                    ? absl::StrFormat("bad-block log at offset %d sectors",
                                      sb.bblog_offset)
                          .c_str()
                    : "no bad-block log");
  }
  return 0;
}

}  // namespace uraid::tool
