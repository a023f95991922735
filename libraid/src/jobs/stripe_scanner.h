// SPDX-License-Identifier: MIT
// Internal: the jobs' parity scan. One stripe at a time (ScanStripe, under
// its lock: every member read, parity checked and with `repair` rewritten),
// a window of stripes at once on the job pool (ScanWindow, for check,
// repair and resync), and SkipHoles, which lets a scan pass stripes that are
// holes on every member. Works in the shape it is handed.

#ifndef URAID_SRC_JOBS_STRIPE_SCANNER_H_
#define URAID_SRC_JOBS_STRIPE_SCANNER_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "base/task_pool.h"
#include "engine/engine_part.h"
#include "engine/io_executor.h"
#include "engine/shape.h"
#include "engine/slot_table.h"
#include "engine/stripe_writer.h"
#include "jobs/job_runner.h"
#include "stripe/stripe_locks.h"

namespace uraid {

// A scan's window (scrub, resync) may hold more stripes than run at once:
// each holds its lock only while it is scanned and uses its thread's
// scratch buffer, so only kJobDepth are in flight, and the window's end,
// where every member drains while the last stripes finish, comes a quarter
// as often.
inline constexpr uint64_t kScanWindowStripes = 4 * kJobDepth;

// Thread-safe. Holds references to the array's parts, which outlive it.
class StripeScanner : private EnginePart {
 public:
  // `writer` corrects read errors the scan meets; `pool` is the jobs'
  // window pool.
  StripeScanner(const EngineContext& ctx, StripeWriter& writer, TaskPool& pool);

  // Checks (and with `repair` fixes) the parity of `stripe` of shape `sh`,
  // under its lock. A read error is corrected like any other; a degraded
  // stripe cannot be checked (FailedPrecondition). Rows some member lists
  // in its bad-block log are skipped (neither checked nor rewritten from
  // it); `*skipped` (optional) gets their bytes per member.
  //
  // `bad_slot` (optional) asks RAID6 to locate (mdadm's raid6check): with
  // every member present, P and Q name the stripe's one bad chunk when all
  // its mismatched rows agree on one slot (data, P's or Q's), and
  // *bad_slot gets that slot, or -1 when they name none (or nothing
  // mismatched, or below level 6, or a member is missing). With `repair`
  // a named chunk is rewritten (a data chunk from P and the other data, P
  // or Q recomputed), else P and Q are recomputed from the data (md's
  // repair). Without `bad_slot`, md's repair throughout: resync and
  // reshape must not locate, since after a crash data newer than P and Q
  // looks exactly like one bad data chunk and must win.
  absl::Status ScanStripe(const Shape& sh, uint64_t stripe, bool repair,
                          bool* mismatch, uint64_t* skipped = nullptr,
                          int* bad_slot = nullptr);
  // Scans stripes [from, from + count) at once (ScanStripe, each under its
  // own lock; a scan moves no front, so they are not held together).
  // Returns how many from `from` were scanned in an unbroken run; fewer
  // than `count` sets `*error` to the status of the first that was not.
  // Appends the scanned stripes whose parity did not match to
  // `*mismatched`, in order, and those with rows skipped for bad blocks to
  // `*skipped_stripes` (optional), adding their bytes to `*skipped_bytes`.
  // `mismatched_slots` (optional) asks RAID6 to locate, as ScanStripe's
  // `bad_slot`, and gets each mismatched stripe's bad slot or -1, parallel
  // to `*mismatched`.
  uint64_t ScanWindow(const Shape& sh, uint64_t from, uint64_t count,
                      bool repair, std::vector<uint64_t>* mismatched,
                      absl::Status* error,
                      std::vector<uint64_t>* skipped_stripes = nullptr,
                      uint64_t* skipped_bytes = nullptr,
                      std::vector<int>* mismatched_slots = nullptr);
  // The first stripe of `sh` at or after `stripe` that is not a hole on
  // every member (`stripe` itself when unknown).
  uint64_t SkipHoles(const Shape& sh, uint64_t stripe);

 private:
  // RAID6's share of ScanStripe for one window of rows at `member_offset`
  // (read into `rows`, `win` bytes a slot by slot number, two spare rows
  // after them): P and Q computed from the data (a lost data slot's rows
  // from P first) and compared; `repair` writes whichever differs.
  // `missing` is the one slot that cannot serve the stripe, or -1. With
  // `located` (and no member missing) it only locates: *located gets the
  // slot P and Q name as bad, -1 when none, and nothing is written (the
  // caller repairs with RepairRows6 once the whole chunk is seen).
  absl::Status ScanRows6(const Shape& sh, uint64_t stripe,
                         uint64_t member_offset, uint64_t win, int missing,
                         uint8_t* rows, bool repair, bool* mismatch,
                         int* located = nullptr);
  // Repairs one window of rows read as for ScanRows6 with no member
  // missing: rewrites slot `bad` (a data chunk from P and the other data,
  // or P or Q from the data), or with `bad` -1 recomputes P and Q and
  // writes whichever differs (md's repair).
  absl::Status RepairRows6(const Shape& sh, uint64_t stripe,
                           uint64_t member_offset, uint64_t win, int bad,
                           uint8_t* rows);

  StripeWriter& writer_;
  TaskPool& pool_;
};

}  // namespace uraid

#endif  // URAID_SRC_JOBS_STRIPE_SCANNER_H_
