// SPDX-License-Identifier: MIT
// File: plan/ppl_plan.h
//
// Internal: what md's partial parity log (format/ppl_format.h) records for
// one stripe write, and what its replay recomputes. Pure: no I/O, no
// threads, no array state (the stripe engine and the assembly do the I/O).
//
// md logs a write as entries, each a rectangle of the stripe: consecutive
// data indexes [first, last] starting at the entry's data_sector, the same
// rows (bytes into their chunks) [row_lo, row_hi) on each; the entry's
// partial parity is the XOR of the stripe's data the rectangle does not
// cover, over those rows (P xor Dold for read-modify-write). A full-stripe
// write is one entry without partial parity. Replay after a crash:
// parity rows = XOR(the rectangle's data as now on disk) xor partial parity
// (or, without partial parity, XOR of every data chunk).
//
// Units: bytes, except PplEntry's fields, which are md's (data_sector in
// 512-byte array sectors, pp_size and data_size in bytes).

#ifndef URAID_SRC_PLAN_PPL_PLAN_H_
#define URAID_SRC_PLAN_PPL_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "format/ppl_format.h"
#include "plan/stripe_plan.h"
#include "uraid/geometry.h"

namespace uraid {

// One rectangle of a stripe.
struct PplRect {
  uint64_t stripe = 0;
  int first = 0, last = 0;          // data indexes, inclusive
  uint64_t row_lo = 0, row_hi = 0;  // bytes into each chunk
  bool full_stripe = false;         // no partial parity (every data index)

  bool operator==(const PplRect&) const = default;
};

// The rectangles of a write of the stripe's data bytes [a, b) (offsets into
// the stripe's data, as PlanWrite takes them), in row order: at most three
// (the first chunk's tail rows, the rows every chunk shares, the last
// chunk's head rows). A whole-stripe write is one full_stripe rectangle.
// REQUIRES: 0 <= a < b <= geo.stripe_data_bytes().
std::vector<PplRect> PplRects(const Geometry& geo, uint64_t stripe, uint64_t a,
                              uint64_t b);

// md's entry for `rect` (checksum left 0: it covers the partial parity).
PplEntry PplEntryFor(const Geometry& geo, const PplRect& rect);

// The inverse: the rectangle an entry read from a log describes, checked
// as a replay needs it. DataLoss naming the field for an entry that does
// not fit this array: data_sector past the end, pp_size or data_size not
// in whole sectors, data_size not a multiple of pp_size, rows or data
// indexes beyond the stripe, parity_disk not the stripe's parity slot.
absl::StatusOr<PplRect> PplRectOf(const Geometry& geo, const PplEntry& entry);

// One stripe write's log: its entries (checksums filled) and their partial
// parity, concatenated in entry order.
struct PplStripeLog {
  std::vector<PplEntry> entries;
  std::vector<uint8_t> partial_parity;
};

// The log of `plan` (PlanWrite(geo, stripe, a, b, ...)) once ComputeWrite
// has put the new parity in `scratch`; `client` holds the new data, read
// only for a partial stripe (null is fine for the whole stripe, which md
// logs without partial parity). Each rectangle's partial parity is new
// parity xor the rectangle's new data, which equals the XOR of the data
// the write leaves alone. InvalidArgument
// when [a, b) is not in whole 512-byte sectors (md's entries cannot say
// it); Internal error for a plan without a parity write
// (WriteMode::kParityGone: nothing to log, the caller skips it).
absl::StatusOr<PplStripeLog> BuildPplStripeLog(
    const Geometry& geo, uint64_t stripe, uint64_t a, uint64_t b,
    const WritePlan& plan, const uint8_t* scratch, const uint8_t* client);

}  // namespace uraid

#endif  // URAID_SRC_PLAN_PPL_PLAN_H_
