// SPDX-License-Identifier: MIT
// File: uraid/clock.h
//
// The time source an array's background jobs run on: their speed limits
// (md's speed_limit_min/max and uraid's busy share), their rate samples
// (JobInfo::bytes_per_s), how recently clients were busy, and the recovery
// checkpoint cadence. The default is the real monotonic clock; a test or
// a simulator passes its own (CreateOptions::clock, AssembleOptions::clock)
// to step a throttled job without waiting for real time: SleepForNs of a
// simulated clock moves its time on and returns at once.
//
// Also on it: md's safemode delay (an array is marked clean 200 ms of this
// clock after its last write; the array looks every 100 ms of real time).
// Not on this clock: the stripe cache's age limit, the bitmap's
// daemon_sleep and member I/O latency, which measure real time spent by
// members and clients.
//
// Thread-safety: an implementation must allow NowNs and SleepForNs from
// any number of threads at once (the job thread, client threads noting
// their I/O, Info callers).

#ifndef URAID_CLOCK_H_
#define URAID_CLOCK_H_

#include <cstdint>
#include <memory>

#include "uraid/export.h"

namespace uraid {

class URAID_EXPORT Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time in nanoseconds from an arbitrary origin.
  virtual int64_t NowNs() = 0;
  // Blocks the calling thread for `ns` nanoseconds (> 0) of this clock.
  virtual void SleepForNs(int64_t ns) = 0;
};

// The real monotonic clock (std::chrono::steady_clock, and real sleeps).
// Shared; never null.
URAID_EXPORT std::shared_ptr<Clock> RealClock();

}  // namespace uraid

#endif  // URAID_CLOCK_H_
