// SPDX-License-Identifier: MIT
// Internal: a reshape's copy. Array bytes are read in the old shape and
// written in the new one as whole new stripes (no pre-reads, fresh parity),
// kJobDepth units at once with reads and writes alternating so both
// directions of every member stay busy. A new stripe of zeros whose rows
// are holes on every member is left a hole, so a sparse array stays
// sparse; a new stripe past the old array's end (zeros) is discarded where
// every member reads discards back as zeros, else written. What is copied when,
// and the checkpoints, are the reshape job's (reshape_job.cc).

#ifndef URAID_SRC_JOBS_RESHAPE_COPIER_H_
#define URAID_SRC_JOBS_RESHAPE_COPIER_H_

#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "base/task_pool.h"
#include "engine/slot_table.h"
#include "engine/stripe_reader.h"
#include "engine/stripe_writer.h"
#include "jobs/reshape_state.h"

namespace uraid {

// Thread-safe (one copy per reshape runs at a time). Holds references to
// the array's parts, which outlive it.
class ReshapeCopier {
 public:
  ReshapeCopier(const SlotTable& slots, StripeReader& reader,
                StripeWriter& writer, TaskPool& pool);

  // One copy step of reshape `r`: writes [wlo, whi) from `wbuf` in the new
  // shape (whole new stripes; stripes of zeros over holes are left holes,
  // the grown part's stripes are discarded where that reads back as zeros)
  // while it reads [rlo, rhi) in the old shape into `rbuf` (zeros past the
  // old array's end), and runs `beside` (if any) on the calling thread
  // meanwhile. Either range may be empty; the writes are not flushed.
  // REQUIRES: r's gate closed over both; [wlo, whi) within the window that
  // the reshape_position recorded in the superblocks allows, [rlo, rhi) at
  // or past whi.
  absl::Status Copy(const ReshapeState& r, uint64_t wlo, uint64_t whi,
                    const uint8_t* wbuf, uint64_t rlo, uint64_t rhi,
                    uint8_t* rbuf, const std::function<absl::Status()>& beside);
  // Copies [lo, hi) (read, then written) through `buf`.
  absl::Status CopyWindow(const ReshapeState& r, uint64_t lo, uint64_t hi,
                          uint8_t* buf);

 private:
  // How far (array bytes, a new-stripe boundary, at most `hi`) every member
  // is a hole over the new shape's rows from the one holding `lo`; at most
  // lo's row start when that row holds data. One probe per member answers
  // for every stripe up to the first data.
  uint64_t NewRowsHoleEnd(const ReshapeState& r, uint64_t lo, uint64_t hi);

  const SlotTable& slots_;
  StripeReader& reader_;
  StripeWriter& writer_;
  TaskPool& pool_;
};

}  // namespace uraid

#endif  // URAID_SRC_JOBS_RESHAPE_COPIER_H_
