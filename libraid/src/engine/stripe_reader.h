// SPDX-License-Identifier: MIT
// Internal: the read half of the stripe engine. Healthy pieces go straight
// into the caller's buffer; a stripe that lost a chunk is planned once
// (PlanDegradedRead) so every surviving byte is read once; a read error is
// corrected from parity and rewritten (md's rule); newer bytes the stripe
// cache holds are laid over what the members hold. Every routine works in
// the shape it is handed (old and new shapes side by side in a reshape).

#ifndef URAID_SRC_ENGINE_STRIPE_READER_H_
#define URAID_SRC_ENGINE_STRIPE_READER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/atomic_counters.h"
#include "engine/engine_part.h"
#include "engine/io_executor.h"
#include "engine/shape.h"
#include "engine/slot_table.h"
#include "plan/stripe_plan.h"
#include "report/array_reporter.h"
#include "stripe/stripe_cache.h"
#include "stripe/stripe_locks.h"
#include "stripe/survivor_cache.h"

namespace uraid {

// Thread-safe: any number of reads at once. Holds references to the
// array's parts, which outlive it (declared before it in StripeEngine).
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
  // Rebuilds `slot`'s bytes from every other slot. A row another slot's
  // bad-block list covers cannot be rebuilt (DataLoss). With
  // `record_sources`, a source that fails to read is narrowed to the 4 KiB
  // blocks that still fail, which are recorded in its bad-block list (they
  // cannot be corrected: the row's other copy is the one being rebuilt);
  // without, the caller narrows (CorrectReadErrorLocked's first try).
  absl::Status ReconstructLocked(const Shape& sh, uint64_t stripe, int slot,
                                 uint64_t chunk_offset, size_t len,
                                 uint8_t* dst, bool record_sources = true);
  // Fills slots `a` and `b` together, every slot read at most once (a
  // recovery writing two targets in one pass): a's bytes into `dst`, b's
  // into `dst + b_at` (b_at >= len). RAID6: both rebuilt from every other
  // slot. Levels 4 and 5: the one whose member serves the stripe (a
  // replace's old member) is read, and the other rebuilt from every slot
  // but itself, that read among them. Records nothing and fails nothing:
  // FailedPrecondition when it cannot be done in one read (another slot
  // cannot help in these rows, a recorded bad block there; at level 5,
  // neither or both of a and b serving), else the first error of the
  // reads (a member changing hands included); the caller then fills one
  // slot at a time, which corrects or records.
  absl::Status ReconstructPairLocked(const Shape& sh, uint64_t stripe, int a,
                                     int b, uint64_t chunk_offset, size_t len,
                                     uint8_t* dst, size_t b_at);
  // Whether any slot of the stripe has a bad block in its rows.
  bool StripeHasBadBlocks(const Shape& sh, uint64_t stripe) const;
  // A read of a healthy piece failed: rebuild it from parity and rewrite it
  // to its member (md's read-error correction). Where the rebuild is not
  // possible (degraded, or another error in the row) the piece is narrowed
  // to the 4 KiB blocks that still fail; those are recorded in the member's
  // bad-block list and the read fails with DataLoss (EIO for those blocks
  // only: the array stays up). A rewrite that fails records the range
  // too. The member is failed where md fails it: no room to record, too
  // many corrected errors, a member that no longer answers at all, or one
  // that lost the range (OutOfRange). `failed` is the member whose read
  // failed (MemberIo::used).
  absl::Status CorrectReadErrorLocked(const Shape& sh, uint64_t stripe,
                                      int slot, uint64_t chunk_offset,
                                      size_t len, uint8_t* dst,
                                      const absl::Status& why,
                                      const Member* failed);

  // REQUIRES the stripe lock, as the above.
  // The 4 KiB blocks of `slot`'s [chunk_offset, + len) whose read failed
  // (`why`) are read again one by one (the good ones land in `dst`); those
  // that still fail are recorded bad on the member, which is failed instead
  // when it cannot record them or answers nothing (its superblock is read
  // as a probe). OK when every block read the second time, else DataLoss
  // naming the blocks lost (or the member's failure).
  absl::Status RecordUnreadableLocked(const Shape& sh, uint64_t stripe,
                                      int slot, uint64_t chunk_offset,
                                      size_t len, uint8_t* dst,
                                      const absl::Status& why,
                                      const Member* failed);

 private:
  // md's max_corr_read_errors: more corrected read errors fail the member.
  static constexpr uint32_t kMaxCorrectedReadErrors = 20;

  // A range of a slot's chunk: offset in the chunk, length.
  struct Block {
    uint64_t offset = 0;
    size_t len = 0;
  };
  static constexpr uint64_t kBlock = kMdBlockBytes;
  // Reads `slot`'s [chunk_offset, + len) again in 4 KiB member blocks into
  // `dst`; returns those that still fail. When none reads, probes the
  // member's superblock: a member that answers nothing is failed (error).
  absl::StatusOr<std::vector<Block>> RereadBlocksLocked(
      const Shape& sh, uint64_t stripe, int slot, uint64_t chunk_offset,
      size_t len, uint8_t* dst, const Member* failed);
  // Records `blocks` of `slot` bad (RecordBadBlocks) and returns the
  // DataLoss their reader gets (LostError), or the error of the member's
  // failure when they could not be recorded.
  absl::Status RecordBlocksLocked(const Shape& sh, uint64_t stripe, int slot,
                                  const std::vector<Block>& blocks,
                                  const absl::Status& why,
                                  const Member* failed);
  // The DataLoss a client gets for `bad` blocks of `slot`.
  absl::Status LostError(const Shape& sh, uint64_t stripe, int slot,
                         const std::vector<Block>& bad,
                         const absl::Status& why) const;
  // CorrectReadErrorLocked's second try, when the piece as a whole cannot
  // be rebuilt: block by block.
  absl::Status NarrowReadErrorLocked(const Shape& sh, uint64_t stripe, int slot,
                                     uint64_t chunk_offset, size_t len,
                                     uint8_t* dst, const absl::Status& why,
                                     const Member* failed);
  // Rewrites `data` (rebuilt from parity) over `slot`'s range, md's read
  // error correction; a failed rewrite records the range bad.
  absl::Status RewriteLocked(const Shape& sh, uint64_t stripe, int slot,
                             uint64_t chunk_offset, size_t len,
                             const uint8_t* data, const absl::Status& why,
                             const Member* failed);
  // A piece of `slot` that its bad-block list covers in part: the listed
  // ranges rebuilt from the others, the rest read from the member.
  absl::Status ReadAroundBadLocked(const Shape& sh, uint64_t stripe, int slot,
                                   uint64_t chunk_offset, size_t len,
                                   uint8_t* dst);
  // Reads one piece: from its member, or rebuilt from parity, then
  // overlaid with newer cached bytes.
  absl::Status ReadPieceLocked(const Shape& sh, const Location& loc, size_t len,
                               uint8_t* dst);
  // Reads `pieces` of a stripe a member of which cannot serve it, each
  // surviving byte once (PlanDegradedRead), into `client` at each piece's
  // client offset, overlaid with newer cached bytes. `have[k]`: piece k
  // is in `client` already, as the members hold it now (read unlocked
  // while no write was in flight or has started since): not read again,
  // a source of the rebuild as it is. Survivor rows the cache holds are
  // taken from it; rows another request is reading are awaited.
  absl::Status ReadStripeDegradedLocked(const Shape& sh, uint64_t stripe,
                                        std::span<const ReadPiece> pieces,
                                        std::span<const bool> have,
                                        uint8_t* client);
  // Rows another request was reading (claimed) when this one wanted them:
  // each `ios[j]` (a read of survivor rows in the plan's terms, unsubmitted)
  // waits for the claim's release, then hands the rows the claimant kept
  // to `take` (which copies them into its buffer, or keeps the hold).
  // Left in `ios` (with their `tags`, kept parallel, when given) are those
  // it could not keep (an error, a write began), to be read. The caller
  // REQUIRES to hold no claim (survivor_cache.h: no cycle).
  void TakeAwaited(
      const Shape& sh, uint64_t started, std::vector<MemberIo>& ios,
      std::vector<size_t>* tags,
      absl::FunctionRef<void(const MemberIo&, SurvivorCache::Held)> take);
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

#endif  // URAID_SRC_ENGINE_STRIPE_READER_H_
