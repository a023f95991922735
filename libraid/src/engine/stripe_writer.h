// SPDX-License-Identifier: MIT
// Internal: the write half of the stripe engine. A client write is cut into
// stripes; each piece is gathered in the stripe cache or written through by
// its plan (PlanWrite: full-stripe, read-modify-write or reconstruct-write,
// degraded) under the stripe's lock, after its write-intent bit is durable
// and, with PPL, after its partial parity is logged. Read errors among a
// plan's pre-reads are corrected (StripeReader); a member that fails
// mid-plan is failed and the stripe redone around it. Also flushes (with the
// flush cadence that turns gathering off), trim and write-zeroes. Every
// routine works in the shape it is handed, except the cache's, which holds
// the current shape's stripes only.

#ifndef URAID_SRC_ENGINE_STRIPE_WRITER_H_
#define URAID_SRC_ENGINE_STRIPE_WRITER_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "base/locked_shared_ptr.h"
#include "base/write_epochs.h"
#include "engine/atomic_counters.h"
#include "engine/engine_part.h"
#include "engine/io_executor.h"
#include "engine/shape.h"
#include "engine/shape_set.h"
#include "engine/slot_table.h"
#include "engine/stripe_reader.h"
#include "meta/array_bitmap.h"
#include "meta/ppl_log.h"
#include "plan/stripe_plan.h"
#include "stripe/recent_values.h"
#include "stripe/stripe_cache.h"
#include "stripe/stripe_locks.h"
#include "stripe/write_streams.h"
#include "uraid/clock.h"

namespace uraid {

// Thread-safe: any number of writes, flushes and writebacks at once. Holds
// references to the array's parts, which outlive it (declared before it in
// StripeEngine and ArrayImpl).
class StripeWriter : private EnginePart {
 public:
  // Beyond the engine's common parts: the stripe cache; the reader, which
  // corrects read errors among pre-reads; the bitmap; the PPL log (null
  // unless the policy is ppl; read once per stripe inside a `ppl_epochs`
  // pass, see ArrayImpl::ppl_); the array's shapes (the current one is
  // the cache's; during a reshape the cache is bypassed); the first stripe
  // whose parity is not yet trusted (an unfinished resync); the average
  // time between client flushes (ns) below which the cache stops
  // gathering; and the array's clock, which stamps cache entries (their
  // age is measured on it) and times the flushes.
  StripeWriter(const EngineContext& ctx, StripeCache& cache,
               StripeReader& reader, ArrayBitmap& bitmap,
               const LockedSharedPtr<PplLog>& ppl, WriteEpochs& ppl_epochs,
               const ShapeSet& shapes,
               const std::atomic<uint64_t>& resync_stripe,
               int64_t bypass_flush_ns, Clock& clock);

  // Client requests in shape `sh` (checked against its size). `fua`: the
  // bytes are durable on the members when it returns.
  absl::Status Write(const Shape& sh, const void* buf, size_t len,
                     uint64_t offset, bool fua);
  // Write(sh, data, stripe_data_bytes(), stripe * stripe_data_bytes(),
  // false) with the stripe's parity handed in, as ComputeFullStripeParity
  // makes it from `data` (plan/stripe_plan.h): the writer computes none
  // where it writes the full stripe (its bitmap bit, PPL entry, ordering
  // and retries unchanged), and computes its own where it writes the
  // stripe another way (around bad blocks). `parity` is not checked: wrong
  // parity handed in is wrong parity on the members. The reshape's copy
  // computes it while the data it has just read is in the CPU's cache.
  absl::Status WriteFullStripe(const Shape& sh, uint64_t stripe,
                               const uint8_t* data, const uint8_t* parity);
  absl::Status Trim(const Shape& sh, size_t len, uint64_t offset, bool fua);
  absl::Status Zero(const Shape& sh, size_t len, uint64_t offset, bool fua);
  // Makes stripe `stripe` of `sh` zeros in every chunk, parity included,
  // by discarding it on each member (as Trim does a whole stripe), when
  // every member and replacement reads a discarded range back as zeros and
  // the stripe holds no recorded bad block (a write over one makes it good,
  // a discard would not). Returns false, having done nothing, otherwise:
  // the caller writes the zeros. Not flushed. Takes the stripe lock.
  absl::StatusOr<bool> DiscardStripe(const Shape& sh, uint64_t stripe);
  // A client flush: the cache written back, every member flushed, the
  // bitmap's delayed bits persisted.
  absl::Status Flush();

  // Whether the cache may hold acknowledged writes: the array survives one
  // more member failure (no slot gone, or one of RAID6's). Otherwise one
  // more failure would lose what it holds, where md, which acknowledges a
  // write once its stripe is on the members, loses nothing: a gathered
  // write is then held (its acknowledgment waits for its stripe to reach
  // the members, as md's does), and the writeback thread drains what was
  // gathered before.
  bool CacheSafe() const;
  // Writes back the current shape's `stripe` (takes its lock), or every
  // cached stripe. `unheld_only`: leaves an entry whose writers are held
  // (StripeCache::Entry::held) to them.
  absl::Status WritebackStripe(uint64_t stripe, bool unheld_only = false);
  absl::Status WritebackAll(bool unheld_only = false);
  // Every member durable: with `writeback`, the whole cache written back
  // first, held entries too (what md's clean mark and closing need; a
  // client's Flush leaves held entries to their writers); without it, only
  // what is already on the members.
  absl::Status FlushAll(bool writeback);
  // Flushes the members of the slots marked in `which` (each slot's
  // replacement too), failing those that cannot. `only_dirty`: skips a
  // slot with no data write done since a finished flush of it (the PPL
  // log's batches; a client flush reaches every member).
  absl::Status FlushSlots(const std::vector<bool>& which,
                          bool only_dirty = false);
  // Corrects read errors among a plan's pre-reads on members that still
  // serve the stripe: rebuilt from parity and rewritten, the I/O marked OK.
  // REQUIRES: the stripe lock.
  // Sets *replan (and returns the error) when a pre-read's blocks could not
  // be corrected and were recorded bad: the caller plans the stripe again.
  absl::Status CorrectPreReads(const Shape& sh, uint64_t stripe,
                               std::vector<MemberIo>& reads, bool* replan);

 private:
  // Whether every present member and replacement reads a discarded range
  // back as zeros (Trim and DiscardStripe keep parity only then).
  bool EveryMemberDiscardsToZeros() const;
  // Discards every usable chunk of stripe `s`, parity included, with its
  // write-intent bit and PPL entry as a full-stripe write has; marks the
  // slots in `touched`. REQUIRES: the stripe lock.
  absl::Status DiscardStripeLocked(const Shape& sh, uint64_t s,
                                   std::vector<bool>* touched);
  // One stripe's share of a write: bytes [a, b) of the stripe's data space
  // (0 .. chunk * data disks), new contents at `src`. Gathers it in the
  // cache or writes it through. Takes the stripe lock. `parity`: null, or
  // for a whole stripe its parity (WriteFullStripe).
  // `client`: what the client write the piece belongs to looks like.
  // `held`: set when the piece was gathered but may not be acknowledged
  // yet (the array cannot spare a member, or a client flushes often): the
  // caller passes it to AwaitHeld before it acknowledges the write.
  struct ClientWrite {
    bool stream = false;    // it continues a recent write (WriteStreams)
    bool large = false;     // it is at least half a stripe long
    bool unfilled = false;  // it continues a writer that fills no stripe
  };
  absl::Status WritePiece(const Shape& sh, uint64_t stripe, uint64_t a,
                          uint64_t b, const uint8_t* src, bool fua,
                          ClientWrite client, std::vector<bool>* touched,
                          const uint8_t* parity = nullptr,
                          std::shared_ptr<absl::Notification>* held = nullptr);
  // Waits until the held piece's stripe is on the members: another piece
  // filled it (a full-stripe write) or it went out otherwise; after
  // kHoldNs without that, writes it out itself (RMW/RCW), sets *ran_out
  // and stops holding for kHoldOffNs, since the client's queue evidently
  // does not span a stripe. Takes the stripe lock only then.
  absl::Status AwaitHeld(const Shape& sh, uint64_t stripe,
                         const std::shared_ptr<absl::Notification>& held,
                         std::vector<bool>* touched, bool* ran_out);
  // Whether gathered pieces may be held now (see AwaitHeld).
  bool Holding() const;
  // Drops the entry `e` of `stripe` before a write that replaces all of
  // it: at once, or, when writers are held on it, once its bytes are on
  // the members (they are told then; StripeCache::Erase). REQUIRES: the
  // stripe lock.
  absl::Status DropEntryLocked(const Shape& sh, StripeCache::Entry* e,
                               std::vector<bool>* touched);
  // Writes [a, b) of a stripe to the members, retrying around members that
  // fail. `parity` as for WritePiece. `chunks` instead of `src` (then null):
  // the whole stripe ([a, b) = [0, stripe_data_bytes())), one pointer per
  // data chunk in data index order, each to chunk_bytes() bytes; a cache
  // entry completed by a piece is written from both without copying the
  // piece into the entry first. REQUIRES: the stripe lock.
  absl::Status WriteStripeLocked(const Shape& sh, uint64_t stripe, uint64_t a,
                                 uint64_t b, const uint8_t* src,
                                 std::vector<bool>* touched,
                                 const uint8_t* parity = nullptr,
                                 const uint8_t* const* chunks = nullptr);
  // Writes a cache entry's dirty ranges (stripes of `sh`, the current
  // shape) and drops it. REQUIRES: its lock.
  absl::Status WritebackLocked(const Shape& sh, StripeCache::Entry* e,
                               std::vector<bool>* touched);
  // `missing` is the slot to write around, or -1 (RAID6: `second_missing`
  // a second one). `force_rcw`: never
  // read-modify-write (a retry after a partly applied attempt: RMW would
  // fold the new bytes into parity twice). `parity`: null, or the whole
  // stripe's parity (FullStripeParityBytes), written instead of computed
  // when the plan is a full-stripe write. `chunks`: as for
  // WriteStripeLocked; used as they are by a RAID5 full-stripe plan
  // without PPL, copied into one buffer for any other.
  absl::Status PlanAndWriteStripe(const Shape& sh, uint64_t stripe, uint64_t a,
                                  uint64_t b, const uint8_t* src, int missing,
                                  int second_missing, const SlotGens& gens,
                                  bool force_rcw, bool* slot_failed,
                                  std::vector<bool>* touched,
                                  const uint8_t* parity = nullptr,
                                  const uint8_t* const* chunks = nullptr);
  // WriteStripeLocked for a stripe some slot has bad blocks in: each data
  // chunk's share cut where a bad range starts or ends, each piece written
  // around the slots that cannot take it there (the missing member and
  // those with bad blocks in its rows). One such slot: planned as a
  // degraded write (PlanWrite with it missing); a bad data chunk the piece
  // covers is then written and its entry cleared (MakeGoodLocked). More:
  // WriteLossyRowsLocked. REQUIRES: the stripe lock.
  absl::Status WriteAroundBadLocked(const Shape& sh, uint64_t stripe,
                                    uint64_t a, uint64_t b, const uint8_t* src,
                                    const SlotGens& gens, bool force_rcw,
                                    bool* slot_failed,
                                    std::vector<bool>* touched);
  // A piece [x, x + len) of data slot `d`'s chunk whose rows have lost two
  // or more slots (`lost`): parity cannot make every block good again.
  // The piece goes to `d` (RMW of parity when `d` and parity are readable;
  // else parity is recorded bad there first, since it no longer matches),
  // and a bad entry of `d` it covers is cleared once the write is durable.
  // DataLoss when `d` has no member to take it.
  absl::Status WriteLossyRowsLocked(const Shape& sh, uint64_t stripe, int d,
                                    uint64_t x, size_t len, const uint8_t* data,
                                    const std::vector<int>& lost,
                                    const SlotGens& gens, bool* slot_failed,
                                    std::vector<bool>* touched);
  // After a plan's `writes` were issued: md's rule for a write error on a
  // member that still answers is a bad block, not a failed member. The
  // failed range is written again in 4 KiB blocks; those that still fail
  // are recorded bad (RecordBadBlocks, which fails the member when it
  // cannot keep them) and the member is asked to be replaced
  // (WantReplacement). Then AbsorbFailures for what is left. When any
  // block was recorded, sets *slot_failed and returns Aborted: the stripe
  // is planned again around the new entries, which tells whether the
  // client's bytes are still held (a lone bad block of the row is implied
  // by the others) or not (two lost in a row: DataLoss, never an ack).
  // REQUIRES: the stripe lock.
  absl::Status FinishWritesLocked(const Shape& sh, uint64_t stripe,
                                  std::vector<MemberIo>& writes,
                                  bool* slot_failed);
  // The member ranges (absolute bytes) of a failed write `io` that fail
  // again when written in 4 KiB blocks, or an error when the member
  // answers nothing (its superblock is read as a probe) or changed hands.
  absl::StatusOr<std::vector<std::pair<uint64_t, size_t>>> RewriteBlocksLocked(
      const Shape& sh, const MemberIo& io);
  // Writes `data` over `slot`'s [x, x + len) with FUA and, once durable,
  // clears the bad entries it covered. A failure leaves them.
  void MakeGoodLocked(const Shape& sh, uint64_t stripe, int slot, uint64_t x,
                      size_t len, const uint8_t* data, const SlotGens& gens);
  // Logs stripe bytes [a, b) of `plan` to `ppl` (null: no PPL) on the
  // plan's parity member (ppl_log.h's LogStripe; batch flushes through
  // FlushSlots), or returns an empty hold when there is nothing to log (no
  // PPL, parity gone). `reads`: the plan's reads, done (null: none), which
  // say whether the parity member was just read (LogStripe's
  // `parity_read`). The caller holds a ppl_epochs_ pass for as long as the
  // hold. REQUIRES: the stripe lock.
  absl::StatusOr<PplLog::Hold> LogToPpl(const std::shared_ptr<PplLog>& ppl,
                                        uint64_t stripe, uint64_t a, uint64_t b,
                                        const WritePlan& plan,
                                        const uint8_t* scratch,
                                        const uint8_t* client,
                                        const std::vector<MemberIo>* reads);
  const Shape& CurrentShape() const { return shapes_.current(); }

  StripeCache& cache_;
  StripeReader& reader_;
  ArrayBitmap& bitmap_;
  const LockedSharedPtr<PplLog>& ppl_;
  WriteEpochs& ppl_epochs_;
  const ShapeSet& shapes_;
  const std::atomic<uint64_t>& resync_stripe_;
  const int64_t bypass_flush_ns_;
  Clock& clock_;
  // Flush cadence (see WritePiece): the last client flush and the moving
  // average of the time between them, in ns of clock_.
  std::atomic<int64_t> last_flush_ns_{0};
  std::atomic<int64_t> flush_interval_ns_{int64_t{1} << 40};
  // The recent client writes' ends: which writes belong to a stream.
  WriteStreams streams_;
  // The ends of writes whose hold ran out, and of the writes that
  // continued them exactly: a writer that waits for each write before the
  // next (queue depth 1, a database's log) never fills a stripe, so none
  // of its pieces is held again while it goes on in sequence. The pause
  // after a timeout (hold_off_*) is the array's, and a stream beside that
  // fills its stripes ends it within kHoldOffNs, so without this such a
  // writer waited out a hold every ~30 ms (1M qd1 write+fsync beside a 1M
  // qd8 stream, 4 pairs on the same members: its p99 3.7 ms before holds
  // under frequent flushes, 12.8 ms with them, 4.7 ms with this ring; its
  // MB/s 601, 402, 577). A deep queue's next requests entered before its
  // timeout, so its chain rarely forms, and any chain ends where its
  // writer jumps.
  RecentValues<16> unfilled_ends_;
  // Holding a gathered piece (see AwaitHeld), in real time: a client's
  // deep queue fills a stripe within microseconds of its first piece, so
  // the wait is short; a queue too shallow to fill one waits this long
  // once, then writes through for kHoldOffNs (doubling while holds keep
  // timing out). Not the array's clock: a simulated clock would never end
  // the wait.
  static constexpr int64_t kHoldNs = 10'000'000;
  static constexpr int64_t kHoldOffNs = 20'000'000;
  static constexpr int64_t kMaxHoldOffNs = 3'200'000'000;
  // steady_clock ns before which pieces are not held; the pause the last
  // timeout set; whether a held piece was filled since it (true before the
  // first timeout, which therefore pauses kHoldOffNs).
  std::atomic<int64_t> hold_off_until_ns_{0};
  std::atomic<int64_t> hold_off_ns_{kHoldOffNs};
  std::atomic<bool> held_filled_{true};
  // Stripes written in part while the array could not spare a member
  // (the last 64, as stripe + 1): no piece is held there, since the rest
  // of such a stripe may be on the members already and a piece held for
  // it to fill would wait its whole hold for nothing (see WritePiece).
  RecentValues<64> written_through_;
  void NoteWrittenThrough(uint64_t stripe) {
    written_through_.Record(stripe + 1);
  }
  bool WrittenThroughLately(uint64_t stripe) const {
    return written_through_.Any([&](uint64_t v) { return v == stripe + 1; });
  }
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_STRIPE_WRITER_H_
