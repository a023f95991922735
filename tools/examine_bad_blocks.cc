// SPDX-License-Identifier: MIT
// `uraid examine`'s bad-block log: mdadm's rules for when a log is
// configured and read, and its --examine-badblocks wording (mdadm 4.2,
// super1.c, examine_badblocks_super1).

#include "examine_bad_blocks.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common.h"

namespace uraid::tool {
namespace {

// mdadm ignores a log it would not read in one go: more than 100 sectors
// is "not configured" (examine_badblocks_super1, copy_metadata1).
constexpr uint16_t kMdadmMaxLogSectors = 100;

}  // namespace

BadBlockLogView ReadBadBlockLog(const Superblock& sb,
                                const BadBlockReadFn& read_at) {
  BadBlockLogView view;
  view.present = (sb.feature_map & kFeatureBadBlocks) != 0;
  if (sb.bblog_size <= kMdadmMaxLogSectors) view.area = BadBlockLogAreaOf(sb);
  if (!view.present) return view;
  if (!view.area.has_value()) {
    view.blocks = absl::DataLossError(absl::StrFormat(
        "the superblock sets BAD_BLOCKS but configures no bad-block log "
        "mdadm reads (bblog_offset %d, bblog_size %d)",
        sb.bblog_offset, sb.bblog_size));
    return view;
  }
  std::vector<uint8_t> bytes(view.area->size_bytes);
  if (absl::Status st = read_at(bytes, view.area->offset_bytes); !st.ok()) {
    view.blocks = absl::Status(
        st.code(),
        absl::StrFormat("reading the bad-block log (%d bytes at "
                        "byte %d): %s",
                        bytes.size(), view.area->offset_bytes, st.message()));
    return view;
  }
  absl::StatusOr<std::vector<BadBlock>> blocks =
      DecodeBadBlockLog(bytes, view.area->shift);
  if (!blocks.ok()) {
    view.blocks = absl::Status(
        blocks.status().code(),
        absl::StrFormat("the bad-block log at byte %d: %s",
                        view.area->offset_bytes, blocks.status().message()));
    return view;
  }
  view.blocks = std::move(blocks);
  return view;
}

int PrintBadBlockLog(const std::string& path, const BadBlockLogView& view) {
  if (!view.area.has_value()) {
    std::printf("No bad-blocks list configured on %s\n", path.c_str());
    return 0;
  }
  if (!view.present) {
    std::printf("Bad-blocks list is empty in %s\n", path.c_str());
    return 0;
  }
  if (!view.blocks.ok()) {
    return Fail(absl::StrCat(path, ": ", view.blocks.status().message()));
  }
  std::printf("Bad-blocks on %s:\n", path.c_str());
  for (const BadBlock& b : *view.blocks) {
    std::printf("%20llu for %llu sectors\n",
                static_cast<unsigned long long>(b.sector),
                static_cast<unsigned long long>(b.sectors));
  }
  return 0;
}

void AddBadBlockLogJson(const Superblock& sb, const BadBlockLogView& view,
                        nlohmann::ordered_json& j) {
  using json = nlohmann::ordered_json;
  if (view.area.has_value()) {
    j["bad_block_log"] = {{"offset_sectors", sb.bblog_offset},
                          {"offset_bytes", view.area->offset_bytes},
                          {"size_sectors", sb.bblog_size},
                          {"entries_available", view.area->size_bytes / 8},
                          {"shift", view.area->shift}};
  } else {
    j["bad_block_log"] = nullptr;
  }
  j["bad_blocks_present"] = view.present;
  if (!view.blocks.ok()) {
    j["bad_blocks"] = nullptr;
    j["bad_blocks_error"] = std::string(view.blocks.status().message());
    return;
  }
  json list = json::array();
  // Without BAD_BLOCKS the list is empty whatever the area holds.
  if (view.present) {
    for (const BadBlock& b : *view.blocks) {
      list.push_back({{"sector", b.sector}, {"sectors", b.sectors}});
    }
  }
  j["bad_blocks"] = std::move(list);
}

}  // namespace uraid::tool
