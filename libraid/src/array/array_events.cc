// SPDX-License-Identifier: MIT
// The array's side of uraid/events.h: its listeners, the spares it was
// told to expect, and the current state as events for a new subscriber
// (stamping and delivering them is report/array_reporter.h's).

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "control/info_json.h"
#include "uraid/array.h"
#include "uraid/events.h"

namespace uraid {

std::vector<Event> ArrayImpl::StateEvents() const {
  const ArrayInfo info = Info();
  std::vector<Event> out;
  const auto stamp = [&](Event e) {
    reporter_.Stamp(e);
    out.push_back(std::move(e));
  };
  std::vector<uint64_t> gone;
  for (const SlotInfo& s : info.slots) {
    if (s.state != SlotState::kActive) gone.push_back(s.slot);
  }
  Event a = MakeEvent("NewArray");
  a.details.emplace_back("state", ArrayStateText(info));
  a.details.emplace_back("level", int64_t{info.geometry.level()});
  a.details.emplace_back("raid_devices", int64_t{info.geometry.raid_disks()});
  a.details.emplace_back("degraded", info.degraded);
  a.details.emplace_back("failed", info.failed);
  a.details.emplace_back("spares", static_cast<int64_t>(info.spares.size()));
  a.details.emplace_back("read_only", info.read_only);
  stamp(std::move(a));
  if (info.failed || info.degraded) {
    Event d = MakeEvent(info.failed ? "ArrayFailed" : "DegradedArray");
    d.details.emplace_back("gone_slots", gone);
    stamp(std::move(d));
  }
  const int expected = roster_.expected_spares();
  if (expected > 0 && static_cast<int>(info.spares.size()) < expected) {
    stamp(SparesMissing(static_cast<int>(info.spares.size()), expected));
  }
  const JobInfo& job = info.job;
  switch (job.kind) {
    case JobKind::kRecover:
    case JobKind::kReplace: {
      Event e = MakeEvent("RebuildStarted", job.target, job.slot);
      e.details.emplace_back("kind", std::string(JobKindName(job.kind)));
      e.details.emplace_back(
          "percent",
          job.total_bytes
              ? static_cast<int64_t>(job.done_bytes * 100 / job.total_bytes)
              : int64_t{0});
      stamp(std::move(e));
      break;
    }
    case JobKind::kReshape:
      stamp(MakeEvent("ReshapeStarted"));
      break;
    case JobKind::kCheck:
    case JobKind::kRepair:
    case JobKind::kResync:
    case JobKind::kNone:
      break;
  }
  if (info.resyncing && !info.read_only) stamp(MakeEvent("ResyncStarted"));
  return out;
}

uint64_t Array::AddEventListener(EventListener listener) {
  return impl_->events().Add(std::move(listener));
}

void Array::RemoveEventListener(uint64_t id) { impl_->events().Remove(id); }

std::vector<Event> Array::StateEvents() const { return impl_->StateEvents(); }

}  // namespace uraid
