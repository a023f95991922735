// SPDX-License-Identifier: MIT
// The listeners of one array's events (Array::AddEventListener): a list
// guarded by a mutex that is held while an event is delivered, so that a
// listener removed is never called again once Remove returns.

#ifndef URAID_SRC_REPORT_EVENT_HUB_H_
#define URAID_SRC_REPORT_EVENT_HUB_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "base/sync.h"
#include "uraid/events.h"

namespace uraid {

// Thread-safe. Publish calls each listener in the order they were added,
// on the publishing thread; listeners must not call Add or Remove (the
// mutex is held) nor block.
class EventHub {
 public:
  // Returns the listener's id for Remove (never 0).
  uint64_t Add(EventListener listener);
  // Waits out a delivery in progress; unknown ids are ignored.
  void Remove(uint64_t id);
  void Publish(const Event& event) const;

 private:
  mutable Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::vector<std::pair<uint64_t, EventListener>> listeners_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace uraid

#endif  // URAID_SRC_REPORT_EVENT_HUB_H_
