// SPDX-License-Identifier: MIT
// `uraid examine`'s view of a member's bad-block log (md reference §2.11):
// whether mdadm would read it, the read itself through the caller's reader,
// and the output of `mdadm --examine-badblocks` (super1.c,
// examine_badblocks_super1) and of --json.

#ifndef URAID_TOOLS_EXAMINE_BAD_BLOCKS_H_
#define URAID_TOOLS_EXAMINE_BAD_BLOCKS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "uraid/bad_blocks.h"
#include "uraid/superblock.h"

namespace uraid::tool {

// A member's log as examine found it.
struct BadBlockLogView {
  // The area, when mdadm counts one as configured: bblog_size 1..100
  // sectors and bblog_offset non-zero (else "No bad-blocks list
  // configured").
  std::optional<BadBlockLogArea> area;
  // The superblock's BAD_BLOCKS bit: the list is not empty, read it.
  bool present = false;
  // With `present`: the ranges, or why they could not be read or decoded.
  absl::StatusOr<std::vector<BadBlock>> blocks = std::vector<BadBlock>{};
};

// Reads buf.size() bytes at a byte offset of the member, or fails.
using BadBlockReadFn =
    std::function<absl::Status(std::vector<uint8_t>& buf, uint64_t offset)>;

// The log of the member whose superblock is `sb`: reads the area through
// `read_at` only when mdadm would (configured and BAD_BLOCKS set).
BadBlockLogView ReadBadBlockLog(const Superblock& sb,
                                const BadBlockReadFn& read_at);

// Prints what `mdadm --examine-badblocks` prints for the member `path`
// ("Bad-blocks on PATH:" and one "%20llu for %d sectors" line per entry, or
// "Bad-blocks list is empty in PATH", or "No bad-blocks list configured on
// PATH"). Returns 1 (after "uraid: PATH: ..." on stderr) when a present
// list could not be read or is corrupt, else 0.
int PrintBadBlockLog(const std::string& path, const BadBlockLogView& view);

// The log for --json: "bad_block_log" (null, or the area: offset from the
// superblock and on the member, size, entries it holds, shift),
// "bad_blocks_present" (the BAD_BLOCKS bit) and "bad_blocks" (an array of
// {"sector", "sectors"}; null with "bad_blocks_error" when a present list
// could not be read) added to `j`.
void AddBadBlockLogJson(const Superblock& sb, const BadBlockLogView& view,
                        nlohmann::ordered_json& j);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_EXAMINE_BAD_BLOCKS_H_
