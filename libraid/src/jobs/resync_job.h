// SPDX-License-Identifier: MIT
// Internal: resync after an unclean shutdown (and a new array's initial
// parity) as a job object over the parts it uses: the jobs' parity scan
// (StripeScanner), the write-intent bitmap (with one, only regions under
// set bits are resynced, each bit released once its region is in sync),
// the job runner (the window loop and md's speed limits) and the counters.
// What it needs of the array's state (the resync front the writer trusts
// parity below, the superblock checkpoint without a bitmap, whether the
// array is closing, marking it clean at the end) it asks of ResyncHost.

#ifndef URAID_SRC_JOBS_RESYNC_JOB_H_
#define URAID_SRC_JOBS_RESYNC_JOB_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "engine/atomic_counters.h"
#include "engine/shape.h"
#include "jobs/job_runner.h"
#include "jobs/stripe_scanner.h"
#include "meta/array_bitmap.h"
#include "uraid/events.h"

namespace uraid {

// What a resync needs of its array.
class ResyncHost {
 public:
  virtual ~ResyncHost() = default;
  // The first stripe whose parity is not yet known good; writes at or past
  // it treat parity as untrusted.
  virtual uint64_t ResyncFront() const = 0;
  // Stripes below `stripe` are in sync (release order: the writer may
  // trust their parity from now on).
  virtual void SetResyncFront(uint64_t stripe) = 0;
  // Without a bitmap: records the front in the superblocks
  // (resync_offset), when no client has written since assembly.
  virtual absl::Status CheckpointResync() = 0;
  // The array is closing: the pass stops (StopJob does not stop a resync,
  // because parity must become trustworthy; a restart resumes it).
  virtual bool Closing() const = 0;
  // The pass reached the end: the array may be marked clean.
  virtual absl::Status ResyncDone() = 0;
  virtual void Report(LogLevel level, Event e,
                      const std::string& line) const = 0;
};

// Thread-safe: Run is refused (returns OK at once) while another Run is
// on. Holds references to parts that outlive it.
class ResyncJob {
 public:
  ResyncJob(ResyncHost& host, StripeScanner& scanner, ArrayBitmap& bitmap,
            JobRunner& runner, AtomicCounters& counters)
      : host_(host),
        scanner_(scanner),
        bitmap_(bitmap),
        runner_(runner),
        counters_(counters) {}

  // Recomputes the parity of `sh`'s stripes from the host's resync front
  // on (with a bitmap, of those under set bits). `as_job`: on the runner's
  // job thread, reporting progress to it; else on the caller's thread
  // (create, Array::Resync). REQUIRES: the front is below the end and the
  // array is writable; no reshape runs.
  absl::Status Run(const Shape& sh, bool as_job);
  // A Run is on.
  bool running() const { return running_.load(); }

 private:
  ResyncHost& host_;
  StripeScanner& scanner_;
  ArrayBitmap& bitmap_;
  JobRunner& runner_;
  AtomicCounters& counters_;
  std::atomic<bool> running_{false};
};

}  // namespace uraid

#endif  // URAID_SRC_JOBS_RESYNC_JOB_H_
