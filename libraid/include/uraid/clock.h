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
// An array has one clock, and every timer of its core runs on it: md's
// safemode delay (an array is marked clean 200 ms of this clock after its
// last write), the write-back stripe cache's age limit
// (CacheOptions::max_age_ms) and the flush cadence that pauses gathering
// (bypass_flush_interval_ms), and the write-intent bitmap's daemon_sleep
// (a bit is cleared once its region has been idle that long, looked at
// once a second of this clock). The background threads wake on real time
// (every 10 or 100 ms) and compare against this clock, so a test moves a
// simulated clock past a timer and sees it fire at the next wake-up.
// Not on this clock: member I/O latency (MemberStats), which measures
// real time spent by members, and the wall-clock stamps of events.
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
