// SPDX-License-Identifier: MIT
// Internal: the read half of the stripe engine. Healthy pieces go straight
// into the caller's buffer; a stripe that lost a chunk is planned once
// (PlanDegradedRead) so every surviving byte is read once; a read error is
// corrected from parity and rewritten (md's rule); newer bytes the stripe
// cache holds are laid over what the members hold. Every routine works in
// the shape it is handed (old and new shapes side by side in a reshape).

#ifndef URAID_SRC_ARRAY_STRIPE_READER_H_
#define URAID_SRC_ARRAY_STRIPE_READER_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "array/atomic_counters.h"
#include "array/engine_part.h"
#include "array/io_executor.h"
#include "array/shape.h"
#include "array/slot_table.h"
#include "control/array_reporter.h"
#include "plan/stripe_plan.h"
#include "stripe/stripe_cache.h"
#include "stripe/stripe_locks.h"
#include "stripe/survivor_cache.h"

namespace uraid {

// Thread-safe: any number of reads at once. Holds references to the
// array's parts, which outlive it (declared before it in ArrayImpl).
class StripeReader : private EnginePart {
 public:
  // `read_only`: read errors are served from parity but not rewritten.
  StripeReader(const EngineContext& ctx, StripeCache& cache,
               SurvivorCache& survivors, const ArrayReporter& reporter,
               bool read_only);

  // A client read of [offset, offset + len) in shape `sh` (checked against
  // its size).
  absl::Status Read(const Shape& sh, void* buf, size_t len, uint64_t offset);

  // The rest REQUIRES the stripe's lock (LockKey(sh, stripe)).
  //
  // Reads `slot`'s bytes, or rebuilds them from the others.
  absl::Status ReadPieceDegraded(const Shape& sh, uint64_t stripe, int slot,
                                 uint64_t chunk_offset, size_t len,
                                 uint8_t* dst);
  // Rebuilds `slot`'s bytes from every other slot.
  absl::Status ReconstructLocked(const Shape& sh, uint64_t stripe, int slot,
                                 uint64_t chunk_offset, size_t len,
                                 uint8_t* dst);
  // A read of a healthy piece failed: rebuild it from parity and rewrite it
  // to its member (md's read-error correction); fails the member when the
  // rewrite fails or it has had too many. `failed` is the member whose read
  // failed (MemberIo::used).
  absl::Status CorrectReadErrorLocked(const Shape& sh, uint64_t stripe,
                                      int slot, uint64_t chunk_offset,
                                      size_t len, uint8_t* dst,
                                      const absl::Status& why,
                                      const Member* failed);

 private:
  // md's max_corr_read_errors: more corrected read errors fail the member.
  static constexpr uint32_t kMaxCorrectedReadErrors = 20;

  // Reads one piece: from its member, or rebuilt from parity, then
  // overlaid with newer cached bytes.
  absl::Status ReadPieceLocked(const Shape& sh, const Location& loc, size_t len,
                               uint8_t* dst);
  // Reads `pieces` of a stripe a member of which cannot serve it, each
  // surviving byte once (PlanDegradedRead), into `client` at each piece's
  // client offset, overlaid with newer cached bytes.
  absl::Status ReadStripeDegradedLocked(const Shape& sh, uint64_t stripe,
                                        std::span<const ReadPiece> pieces,
                                        uint8_t* client);
  static Location PieceLocation(const Shape& sh, uint64_t stripe,
                                const ReadPiece& piece);
  // Lays newer cached bytes of the piece (of shape `sh`) over `dst`. The
  // cache holds only the current shape's stripes and is empty during a
  // reshape.
  void OverlayCacheLocked(const Shape& sh, const Location& loc, size_t len,
                          uint8_t* dst);

  StripeCache& cache_;
  SurvivorCache& survivors_;
  const ArrayReporter& reporter_;
  const bool read_only_;
};

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_STRIPE_READER_H_
