// SPDX-License-Identifier: MIT
#include "size_parse.h"

#include <algorithm>
#include <cctype>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uraid::tool {
namespace {

absl::Status BadSize(std::string_view text, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrFormat("bad size '%s': %s (expected bytes, or a number with "
                      "K, M, G or T)",
                      std::string(text), std::string(why)));
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(std::string_view text) {
  size_t i = 0;
  uint64_t value = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const uint64_t digit = text[i] - '0';
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return BadSize(text, "too large");
    }
    value = value * 10 + digit;
    ++i;
  }
  if (i == 0) return BadSize(text, "no digits");
  if (i < text.size() && (text[i] == '.' || text[i] == ',')) {
    return BadSize(text, "fractions are not accepted");
  }

  std::string_view suffix = text.substr(i);
  int shift = 0;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'B':
        shift = 0;
        break;
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      case 'T':
        shift = 40;
        break;
      default:
        return BadSize(text, "unknown suffix");
    }
    // "B" alone, or a unit letter followed by nothing, "B", "iB".
    std::string_view rest = suffix.substr(1);
    const bool unit_letter =
        std::toupper(static_cast<unsigned char>(suffix[0])) != 'B';
    if (!(rest.empty() || (unit_letter && (rest == "B" || rest == "b" ||
                                           rest == "iB" || rest == "ib")))) {
      return BadSize(text, "unknown suffix");
    }
  }
  if (shift > 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return BadSize(text, "too large");
  }
  return value << shift;
}

absl::StatusOr<uint64_t> ParseUnitSizeOption(std::string_view option,
                                             std::string_view text) {
  absl::StatusOr<uint64_t> bytes = ParseSize(text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s: %s", std::string(option), std::string(text),
                        std::string(bytes.status().message())));
  }
  const bool bare =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      });
  if (!bare || *bytes == 0) return bytes;
  // Both readings of the number: as uraid read it (bytes), when that is a
  // whole number of KiB, and as mdadm reads it (KiB).
  std::string meant;
  if (*bytes % 1024 == 0) {
    meant = absl::StrFormat("%s (%s bytes) or ", FormatSize(*bytes),
                            std::string(text));
  }
  absl::StrAppend(&meant, std::string(text), "K");
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s %s has no unit: give K, M, G or T (mdadm reads a bare number as "
      "KiB, uraid used to read bytes); did you mean %s?",
      std::string(option), std::string(text), meant));
}

std::string FormatSize(uint64_t bytes) {
  static constexpr struct {
    int shift;
    char letter;
  } kUnits[] = {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}};
  if (bytes != 0) {
    for (const auto& unit : kUnits) {
      const uint64_t scale = uint64_t{1} << unit.shift;
      if (bytes % scale == 0) {
        return absl::StrFormat("%d%c", bytes / scale, unit.letter);
      }
    }
  }
  return absl::StrFormat("%d", bytes);
}

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return absl::StrFormat("%d bytes", bytes);
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (unit < 3 && value >= 1024) {
    value /= 1024;
    ++unit;
  }
  std::string text = absl::StrFormat("%.1f", value);
  if (absl::EndsWith(text, ".0")) text.resize(text.size() - 2);
  return absl::StrCat(text, " ", kUnits[unit]);
}

std::string MdHumanSize(uint64_t bytes) {
  // Same integer arithmetic as mdadm's util.c: centi-units rounded half up.
  const long long b = static_cast<long long>(bytes);
  if (b < 5000LL * 1024) return "";
  if (b < 2LL * 1024 * 1024 * 1024) {
    const long long cmib = (b * 200LL / (1LL << 20) + 1) / 2;
    const long long cmb = (b / (1000000LL / 200LL) + 1) / 2;
    return absl::StrFormat(" (%d.%02d MiB %d.%02d MB)", cmib / 100, cmib % 100,
                           cmb / 100, cmb % 100);
  }
  if (b < 2LL * 1024 * 1024 * 1024 * 1024) {
    const long long cgib = (b * 200LL / (1LL << 30) + 1) / 2;
    const long long cgb = (b / (1000000000LL / 200LL) + 1) / 2;
    return absl::StrFormat(" (%d.%02d GiB %d.%02d GB)", cgib / 100, cgib % 100,
                           cgb / 100, cgb % 100);
  }
  const long long ctib = (b * 200LL / (1LL << 40) + 1) / 2;
  const long long ctb = (b / (1000000000000LL / 200LL) + 1) / 2;
  return absl::StrFormat(" (%d.%02d TiB %d.%02d TB)", ctib / 100, ctib % 100,
                         ctb / 100, ctb % 100);
}

}  // namespace uraid::tool
