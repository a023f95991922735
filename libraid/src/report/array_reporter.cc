// SPDX-License-Identifier: MIT
#include "report/array_reporter.h"

#include <chrono>
#include <utility>

namespace uraid {

Event MakeEvent(const char* name, std::string member, std::optional<int> slot) {
  Event e;
  e.name = name;
  e.member = std::move(member);
  e.slot = slot;
  return e;
}

Event SparesMissing(int have, int expected) {
  Event e = MakeEvent("SparesMissing");
  e.details.emplace_back("spares", int64_t{have});
  e.details.emplace_back("expected", int64_t{expected});
  return e;
}

ArrayReporter::ArrayReporter(Logger logger, std::string uuid, std::string name)
    : logger_(std::move(logger)),
      uuid_(std::move(uuid)),
      name_(std::move(name)) {}

void ArrayReporter::Log(LogLevel level, const std::string& line) const {
  if (logger_) logger_(level, line);
}

void ArrayReporter::Stamp(Event& e) const {
  e.time = std::chrono::duration<double>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  e.array = uuid_;
  e.array_name = name_;
}

void ArrayReporter::Report(LogLevel level, Event e,
                           const std::string& line) const {
  Stamp(e);
  if (logger_) logger_(LogRecord{level, line, &e});
  hub_.Publish(e);
}

}  // namespace uraid
