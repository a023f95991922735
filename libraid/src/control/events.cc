// SPDX-License-Identifier: MIT
#include "uraid/events.h"

namespace uraid {

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kNotice:
      return "notice";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
    case LogLevel::kCritical:
      return "critical";
  }
  return "?";
}

const Event::Value* Event::Find(std::string_view key) const {
  for (const auto& [k, v] : details) {
    if (k == key) return &v;
  }
  return nullptr;
}

}  // namespace uraid
