// SPDX-License-Identifier: MIT
// Internal: what every part of the stripe engine (StripeReader,
// StripeWriter) and of the jobs' stripe work (StripeRebuilder,
// StripeScanner) works on: the array through EngineHost, its slots, the
// member-I/O executor, the stripe locks and the counters. StripeEngine
// (stripe_engine.h) builds one EngineContext and hands it to each part.

#ifndef URAID_SRC_ENGINE_ENGINE_PART_H_
#define URAID_SRC_ENGINE_ENGINE_PART_H_

#include "engine/atomic_counters.h"
#include "engine/engine_host.h"
#include "engine/io_executor.h"
#include "engine/slot_table.h"
#include "stripe/stripe_locks.h"

namespace uraid {

// References to the array's common parts; they outlive every part that
// holds them (declared before the parts in StripeEngine and ArrayImpl).
struct EngineContext {
  EngineHost& host;
  const SlotTable& slots;
  IoExecutor& io;
  StripeLocks& locks;
  AtomicCounters& counters;
};

// The common wiring of a part, as the members its code uses. Each of them
// is thread-safe, so a part adds no locking of its own for them.
class EnginePart {
 protected:
  explicit EnginePart(const EngineContext& ctx)
      : host_(ctx.host),
        slots_(ctx.slots),
        io_(ctx.io),
        locks_(ctx.locks),
        counters_(ctx.counters) {}

  EngineHost& host_;
  const SlotTable& slots_;
  IoExecutor& io_;
  StripeLocks& locks_;
  AtomicCounters& counters_;
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_ENGINE_PART_H_
