// SPDX-License-Identifier: MIT
// Sizes on the command line: "4096", "512K", "1G". Suffixes K/M/G/T are
// binary (1K = 1024) and may be written "k", "KiB" or "KB" because people
// type all of them. Fractions ("1.5M") are rejected, as mdadm does.
//
// ParseSize reads a bare number as bytes (offsets, cache sizes). The
// options mdadm reads in KiB when no unit is given (--chunk, --size,
// --bitmap-chunk, --data-offset) take ParseUnitSizeOption instead, which
// refuses a bare number other than 0: it used to be bytes here and is KiB
// in mdadm, so either reading would surprise someone.

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

// ParseSize for an option mdadm reads in KiB: a number without a unit
// (other than 0) is refused, naming the option and what it may have meant:
// "--chunk 64 has no unit ...; did you mean 64K?", and for a byte count as
// uraid used to read it, "did you mean 64K (65536 bytes) or 65536K?". The
// range checks are the callers' (Geometry, Array::Create).
absl::StatusOr<uint64_t> ParseUnitSizeOption(std::string_view option,
                                             std::string_view text);

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
