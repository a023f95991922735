// SPDX-License-Identifier: MIT
#include "uraid/events.h"

#include <array>
#include <cstddef>

#include "base/enum_names.h"

namespace uraid {

namespace {

// Indexed by LogLevel (base/enum_names.h).
constexpr std::array kLogLevelNames = {"debug",   "info",  "notice",
                                       "warning", "error", "critical"};
static_assert(kLogLevelNames.size() ==
              static_cast<size_t>(LogLevel::kCritical) + 1);

}  // namespace

const char* LogLevelName(LogLevel level) {
  return EnumName(kLogLevelNames, level, "?");
}

const Event::Value* Event::Find(std::string_view key) const {
  for (const auto& [k, v] : details) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace uraid
