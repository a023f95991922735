// SPDX-License-Identifier: MIT
// Internal: a reshape's copy. Array bytes are read in the old shape and
// written in the new one as whole new stripes (no pre-reads, fresh parity),
// kJobDepth units at once with reads and writes alternating so both
// directions of every member stay busy. A new stripe of zeros whose rows
// are holes on every member is left a hole, so a sparse array stays
// sparse; a new stripe past the old array's end (zeros) is discarded where
// every member reads discards back as zeros, else written. Each new
// stripe's parity is computed as soon as its data is read, while those
// bytes are still in the CPU's cache, and handed to the writer with the
// data a step later (StripeWriter::WriteFullStripe): computed at the
// write, a window of data read earlier came back from memory, and the
// grow's XOR cost 2.5x a rebuild's per byte (issue 35). What is copied
// when, and the checkpoints, are the reshape job's (reshape_job.cc).

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

// A window's buffers: its array bytes, and the parity of each whole new
// stripe read into them (ParityBytes), which travels with the bytes from
// the read to the write. Either may be null (nothing read or written; no
// parity kept, the writer computes it).
struct ReshapeWindowBuf {
  uint8_t* data = nullptr;
  uint8_t* parity = nullptr;
};

// Thread-safe (one copy per reshape runs at a time). Holds references to
// the array's parts, which outlive it.
class ReshapeCopier {
 public:
  ReshapeCopier(const SlotTable& slots, StripeReader& reader,
                StripeWriter& writer, TaskPool& pool);

  // Bytes of a window buffer's parity for `window` array bytes of `r`.
  static uint64_t ParityBytes(const ReshapeState& r, uint64_t window);

  // One copy step of reshape `r`: writes [wlo, whi) from `wbuf` in the new
  // shape (whole new stripes; stripes of zeros over holes are left holes,
  // the grown part's stripes are discarded where that reads back as zeros)
  // while it reads [rlo, rhi) in the old shape into `rbuf` (zeros past the
  // old array's end; with rbuf.parity, each whole new stripe read from the
  // old array gets its parity there), and runs `beside` (if any) on the
  // calling thread meanwhile. Either range may be empty; the writes are
  // not flushed.
  // REQUIRES: r's gate closed over both; [wlo, whi) within the window that
  // the reshape_position recorded in the superblocks allows, [rlo, rhi) at
  // or past whi; wbuf as the step that read [wlo, whi) into it left it
  // (its parity, if any, from that step's rbuf.parity).
  absl::Status Copy(const ReshapeState& r, uint64_t wlo, uint64_t whi,
                    ReshapeWindowBuf wbuf, uint64_t rlo, uint64_t rhi,
                    ReshapeWindowBuf rbuf,
                    const std::function<absl::Status()>& beside);
  // Copies [lo, hi) (read, then written) through `buf`.
  absl::Status CopyWindow(const ReshapeState& r, uint64_t lo, uint64_t hi,
                          ReshapeWindowBuf buf);

 private:
  // Whether Copy keeps the parity of the new stripe holding [at, next)
  // when it reads it: a whole new stripe inside the old array (the rest
  // are partly or wholly zeros, and rare).
  static bool ParityKept(const ReshapeState& r, uint64_t at, uint64_t next);

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
