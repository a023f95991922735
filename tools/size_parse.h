// Sizes on the command line: "4096", "512K", "1G". Suffixes K/M/G/T are
// binary (1K = 1024) and may be written "k", "KiB" or "KB" because people
// type all of them. Fractions ("1.5M") are rejected, as mdadm does.

#ifndef URAID_TOOLS_SIZE_PARSE_H_
#define URAID_TOOLS_SIZE_PARSE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace uraid::tool {

// Parses a byte count with an optional binary suffix. The error quotes the
// input and says what was expected; overflow is an error, not a wrap.
absl::StatusOr<uint64_t> ParseSize(std::string_view text);

// Formats bytes as the largest exact binary unit: 524288 -> "512K",
// 1073741824 -> "1G", 1000 -> "1000". Round-trips through ParseSize.
std::string FormatSize(uint64_t bytes);

// mdadm's human_size(): " (1022.00 MiB 1071.64 MB)", or "" below 5000 KiB.
// Kept byte-for-byte identical so `uraid examine` lines diff cleanly
// against `mdadm --examine`.
std::string MdHumanSize(uint64_t bytes);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_SIZE_PARSE_H_
