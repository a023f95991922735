// SPDX-License-Identifier: MIT
#include "report/event_hub.h"

#include <algorithm>

namespace uraid {

uint64_t EventHub::Add(EventListener listener) {
  MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  listeners_.emplace_back(id, std::move(listener));
  return id;
}

void EventHub::Remove(uint64_t id) {
  MutexLock lock(&mu_);
  std::erase_if(listeners_, [id](const auto& l) { return l.first == id; });
}

void EventHub::Publish(const Event& event) const {
  MutexLock lock(&mu_);
  for (const auto& [id, listener] : listeners_) {
    if (listener) listener(event);
  }
}

}  // namespace uraid
