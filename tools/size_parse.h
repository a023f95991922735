// SPDX-License-Identifier: MIT
// Sizes on the command line: "4096", "512K", "1G". Suffixes K/M/G/T are
// binary (1K = 1024) and may be written "k", "KiB" or "KB" because people
// type all of them. Fractions ("1.5M") are rejected, as mdadm does.
//
// A bare number is bytes, everywhere and as it always was here (mdadm
// reads a bare --chunk as KiB; we keep bytes so that existing scripts
// passing --chunk 65536 keep working). Where a bare number is too small to
// be meant as bytes, options refuse it with BareNumberHint's question.

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

// For an option whose sensible values start at `min_bytes` (a chunk: 4K):
// when `text` is a bare number below that, "did you mean 64K?" (the number
// read as KiB, as mdadm would); otherwise "".
std::string BareNumberHint(std::string_view text, uint64_t min_bytes);

// ParseSize for --chunk: a bare number below 4K is refused with the hint
// ("--chunk 64 is 64 bytes; did you mean 64K?"). The range and power-of-two
// checks are the library's (Geometry).
absl::StatusOr<uint64_t> ParseChunkOption(std::string_view text);

// Formats bytes as the largest exact binary unit: 524288 -> "512K",
// 1073741824 -> "1G", 1000 -> "1000". Round-trips through ParseSize.
std::string FormatSize(uint64_t bytes);

// For messages: "253 MiB", "1.5 GiB", "512 bytes" (one decimal, dropped
// when it is 0; binary units).
std::string HumanBytes(uint64_t bytes);

// mdadm's human_size(): " (1022.00 MiB 1071.64 MB)", or "" below 5000 KiB.
// Kept byte-for-byte identical so `uraid examine` lines diff cleanly
// against `mdadm --examine`.
std::string MdHumanSize(uint64_t bytes);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_SIZE_PARSE_H_
