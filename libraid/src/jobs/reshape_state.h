// SPDX-License-Identifier: MIT
// Internal: one reshape in progress, as the array's router and the reshape
// job share it (array/reshape_router.cc, jobs/reshape_job.h).
//
// Array bytes below `front` are in `to`, the rest in `from`; `front` moves
// only while the gate's window covers the bytes it passes, and is durable
// in the superblocks when it moves.
//
// Thread-safety: `from`, `to` and `end` are set before the state is
// published and never change; `front` is atomic; the gate is thread-safe;
// `resync_moved` and `dirty_at_resume` belong to the reshape job.
// Ownership: ReshapeJob keeps every state (and ShapeSet every Shape) until
// the array goes, because requests routed by an old state may still be
// finishing.

#ifndef URAID_SRC_JOBS_RESHAPE_STATE_H_
#define URAID_SRC_JOBS_RESHAPE_STATE_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "engine/shape.h"
#include "jobs/reshape_gate.h"

namespace uraid {

struct ReshapeState {
  const Shape* from = nullptr;
  const Shape* to = nullptr;
  std::atomic<uint64_t> front{0};
  uint64_t end = 0;  // array bytes of `to`: where the reshape ends
  ReshapeGate gate;
  bool resync_moved = false;              // set by assembly after a crash
  std::vector<uint64_t> dirty_at_resume;  // bitmap chunks to clear at end
};

}  // namespace uraid

#endif  // URAID_SRC_JOBS_RESHAPE_STATE_H_
