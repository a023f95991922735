// SPDX-License-Identifier: MIT
// The write half of the stripe engine (stripe_writer.h).
#include "engine/stripe_writer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "meta/ppl_log.h"
#include "parity/parity.h"

namespace uraid {
namespace {

// A stripe's data given chunk by chunk (StripeWriter::WriteStripeLocked's
// `chunks`) copied into one stripe-sized buffer, for the paths that
// address it as one (RAID6's syndrome, writes around bad blocks, plans
// that read).
AlignedBuffer FlattenChunks(const Geometry& geo, const uint8_t* const* chunks) {
  const uint64_t C = geo.chunk_bytes();
  AlignedBuffer flat(geo.stripe_data_bytes());
  for (int k = 0; k < geo.data_disks(); ++k) {
    std::memcpy(flat.data() + k * C, chunks[k], C);
  }
  return flat;
}

}  // namespace

StripeWriter::StripeWriter(const EngineContext& ctx, StripeCache& cache,
                           StripeReader& reader, ArrayBitmap& bitmap,
                           const LockedSharedPtr<PplLog>& ppl,
                           WriteEpochs& ppl_epochs, const ShapeSet& shapes,
                           const std::atomic<uint64_t>& resync_stripe,
                           int64_t bypass_flush_ns, Clock& clock)
    : EnginePart(ctx),
      cache_(cache),
      reader_(reader),
      bitmap_(bitmap),
      ppl_(ppl),
      ppl_epochs_(ppl_epochs),
      shapes_(shapes),
      resync_stripe_(resync_stripe),
      bypass_flush_ns_(bypass_flush_ns),
      clock_(clock) {}

absl::Status StripeWriter::Write(const Shape& sh, const void* buf, size_t len,
                                 uint64_t offset, bool fua) {
  RETURN_IF_ERROR(CheckRange(sh, "write", len, offset));
  if (len == 0) return host_.CheckUsable(true);
  RETURN_IF_ERROR(host_.BeginWrite());
  const auto* src = static_cast<const uint8_t*>(buf);
  const uint64_t sd = sh.geo.stripe_data_bytes();
  std::vector<bool> touched(sh.geo.raid_disks(), false);
  // A write that starts where a write whose hold ran out ended (or one of
  // its successors) is not held: see unfilled_ends_.
  const bool unfilled =
      unfilled_ends_.Any([&](uint64_t end) { return end == offset; });
  if (unfilled) unfilled_ends_.Record(offset + len);
  const ClientWrite client{.stream = streams_.Continues(offset, len),
                           .large = 2 * len >= sd,
                           .unfilled = unfilled};
  streams_.Record(offset, len);
  absl::Status st;
  // Pieces held for their stripes (see WritePiece), awaited once every
  // piece is placed: a request's later piece may be what fills the stripe
  // of an earlier one's neighbour, and a wait per piece would hold it back.
  absl::InlinedVector<std::pair<uint64_t, std::shared_ptr<absl::Notification>>,
                      2>
      held;
  for (uint64_t done = 0; done < len && st.ok();) {
    uint64_t pos = offset + done;
    uint64_t stripe = pos / sd;
    uint64_t a = pos % sd;
    uint64_t b = std::min<uint64_t>(sd, a + (len - done));
    std::shared_ptr<absl::Notification> h;
    st = WritePiece(sh, stripe, a, b, src + done, fua, client, &touched,
                    nullptr, &h);
    if (h != nullptr) held.emplace_back(stripe, std::move(h));
    done += b - a;
  }
  // Awaited even after an error: a held entry left behind would sit in
  // the cache unwritten, since the writeback thread leaves held entries
  // to their writers.
  bool ran_out = false;
  for (const auto& [stripe, h] : held) {
    absl::Status hs = AwaitHeld(sh, stripe, h, &touched, &ran_out);
    if (st.ok()) st = hs;
  }
  if (ran_out) unfilled_ends_.Record(offset + len);
  if (st.ok() && fua) st = FlushSlots(touched);
  host_.EndWrite();
  return st;
}

absl::Status StripeWriter::WriteFullStripe(const Shape& sh, uint64_t stripe,
                                           const uint8_t* data,
                                           const uint8_t* parity) {
  const uint64_t sd = sh.geo.stripe_data_bytes();
  RETURN_IF_ERROR(CheckRange(sh, "write", sd, stripe * sd));
  RETURN_IF_ERROR(host_.BeginWrite());
  std::vector<bool> touched(sh.geo.raid_disks(), false);
  absl::Status st = WritePiece(sh, stripe, 0, sd, data, /*fua=*/false,
                               ClientWrite{}, &touched, parity);
  host_.EndWrite();
  return st;
}

absl::Status StripeWriter::WritePiece(
    const Shape& sh, uint64_t stripe, uint64_t a, uint64_t b,
    const uint8_t* src, bool fua, ClientWrite client,
    std::vector<bool>* touched, const uint8_t* parity,
    std::shared_ptr<absl::Notification>* held) {
  const uint64_t sd = sh.geo.stripe_data_bytes();
  const bool full = a == 0 && b == sd;
  // Gather only what looks like a stream: a piece that starts or ends a
  // stripe (a sequential writer crossing a stripe boundary), lands in a
  // stripe already being gathered, or belongs to a write that continues a
  // recent one (`client.stream`: with a deep queue a stream's pieces arrive out
  // of order, one in the middle of a stripe before the piece that starts
  // it). A random small write gains nothing from waiting, so it goes
  // straight to RMW/RCW. The rule was "in or beside a gathered stripe",
  // which erred both ways: random 4K writes fed the cache (each new entry
  // put two more stripes beside one, until 8% of them were gathered, each
  // for a new entry and an RMW later all the same), and a stream's early
  // piece whose neighbour had just gone out was written through (254 RMWs
  // in 5 s of a 64K qd8 stream).
  // While the array has no member to spare (CacheSafe) a gathered piece is
  // held: it is acknowledged only once its stripe is on the members
  // (AwaitHeld), md's rule, so a second failure cannot strand it; a client
  // queue that spans a stripe still fills it into one full-stripe write.
  // While some client flushes every few milliseconds a gathered piece is
  // held too: acknowledged, each flush would write the half-gathered
  // stripes back as partial stripes, and the flushing client would wait
  // for them (the latency-isolation case: a 4K write+flush beside a
  // stream); held, it is not the flush's to make durable (Flush leaves
  // it), and a stream's next request fills its stripe. Only pieces of
  // writes of half a stripe or more are held then: a smaller write costs
  // little written through, and a client that writes a few small blocks
  // before each flush (a journal) never fills a stripe, so its hold would
  // only run out (kHoldNs) each time holding resumed. Such writes go
  // through at once, as every write under frequent flushes once did; so
  // does a writer whose hold ran out, while it goes on in sequence
  // (`client.unfilled`). docs/architecture.md has the A/B (the stream
  // beside a 4K write+flush client +11 to +13%).
  // The cache is keyed by stripes of one shape, the current one: a reshape
  // writes it back and runs without it (jobs/reshape_job.cc), so outside a
  // reshape `sh` is the current shape.
  const bool safe = CacheSafe();
  const bool flushing =
      flush_interval_ns_.load(std::memory_order_relaxed) < bypass_flush_ns_;
  const bool gather =
      cache_.enabled() && !shapes_.reshaping() && !full && !fua &&
      (!flushing || client.large) &&
      (a == 0 || b == sd || client.stream || cache_.MayContain(stripe));
  // Not where part of the stripe went out lately (WrittenThroughLately).
  const bool must_hold = !safe || flushing;
  const bool hold = gather && must_hold && held != nullptr && Holding() &&
                    !client.unfilled && !WrittenThroughLately(stripe);
  const bool cache = gather && (!must_hold || hold);
  if (cache) {
    // Make room before taking our stripe lock (never hold one stripe lock
    // while waiting for another). Concurrent writers may pick the same
    // victim, so this only makes room likely; the bound itself is
    // Create's, below.
    for (int i = 0; i < 4 && cache_.over_capacity(); ++i) {
      // Not a held entry: its writers put it out within kHoldNs, and
      // taking its lock would wait behind the write that fills it.
      std::vector<uint64_t> victims =
          cache_.Oldest(1, std::nullopt, /*unheld_only=*/true);
      if (victims.empty() || victims[0] == stripe) break;
      RETURN_IF_ERROR(WritebackStripe(victims[0]));
      counters_.cache_evictions.fetch_add(1, std::memory_order_relaxed);
    }
  }
  StripeLock lock(&locks_, LockKey(sh, stripe));
  StripeCache::Entry* e = cache_.Find(stripe);
  if (e != nullptr && !safe && !full && !(hold && e->held != nullptr)) {
    // Gathered before a member failed (the writeback thread drains the
    // rest), or this piece may not wait in it: out first, and this piece
    // after it.
    NoteWrittenThrough(stripe);
    RETURN_IF_ERROR(WritebackLocked(sh, e, touched));
    e = nullptr;
  }
  // A cache still full after the eviction above takes no new entry: the
  // piece is written through (RMW/RCW now instead of a full-stripe write
  // later), which keeps memory within the cache's bound however many
  // clients write at once.
  if (cache && e == nullptr) {
    e = cache_.Create(stripe, clock_.NowNs(), hold);
    if (e == nullptr) {
      counters_.cache_full_writes.fetch_add(1, std::memory_order_relaxed);
    }
  }
  if (e != nullptr && !full && !fua && e->dirty.CoversWith(a, b, sd)) {
    // The piece completes the stripe: it goes out as a full-stripe write
    // at once, each chunk from where its bytes are. Only a chunk the
    // piece covers in part is copied into the entry; a sequential writer
    // whose requests end on chunk boundaries copies nothing but the
    // stripe's first piece (the copy was 12% of a 1M stream's CPU).
    const uint64_t C = sh.geo.chunk_bytes();
    std::vector<const uint8_t*> chunks(sh.geo.data_disks());
    for (int k = 0; k < sh.geo.data_disks(); ++k) {
      const uint64_t x = k * C, y = x + C;
      if (a <= x && y <= b) {
        chunks[k] = src + (x - a);
        continue;
      }
      const uint64_t lo = std::max(a, x), hi = std::min(b, y);
      if (lo < hi) std::memcpy(e->data.data() + lo, src + (lo - a), hi - lo);
      chunks[k] = e->data.data() + x;
    }
    counters_.cached_writes.fetch_add(1, std::memory_order_relaxed);
    absl::Status st = WriteStripeLocked(sh, stripe, 0, sd, nullptr, touched,
                                        nullptr, chunks.data());
    if (!st.ok()) {
      // The entry keeps what it held, and the piece too: a later
      // writeback (or the caller's retry) finds the stripe whole.
      std::memcpy(e->data.data() + a, src, b - a);
      e->dirty.Add(a, b);
      return st;
    }
    counters_.cache_writebacks.fetch_add(1, std::memory_order_relaxed);
    cache_.Erase(stripe);
    return absl::OkStatus();
  }
  if (e != nullptr && !full) {
    // Gather: the bytes join the stripe's entry; a stripe that becomes
    // fully dirty goes out at once as a full-stripe write (no reads).
    std::memcpy(e->data.data() + a, src, b - a);
    e->dirty.Add(a, b);
    counters_.cached_writes.fetch_add(1, std::memory_order_relaxed);
    if (!fua && !e->dirty.Covers(sd)) {
      if (e->held != nullptr && held != nullptr) {
        counters_.cache_held_writes.fetch_add(1, std::memory_order_relaxed);
        *held = e->held;
      }
      return absl::OkStatus();
    }
    return WritebackLocked(sh, e, touched);
  }
  // A full-stripe write supersedes anything cached for the stripe.
  if (e != nullptr) RETURN_IF_ERROR(DropEntryLocked(sh, e, touched));
  if (must_hold && !full) NoteWrittenThrough(stripe);
  return WriteStripeLocked(sh, stripe, a, b, src, touched,
                           full ? parity : nullptr);
}

bool StripeWriter::CacheSafe() const {
  return slots_.CanLoseOne(CurrentShape().geo.parity_disks());
}

namespace {
int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

bool StripeWriter::Holding() const {
  return SteadyNs() >= hold_off_until_ns_.load(std::memory_order_relaxed);
}

absl::Status StripeWriter::AwaitHeld(
    const Shape& sh, uint64_t stripe,
    const std::shared_ptr<absl::Notification>& held, std::vector<bool>* touched,
    bool* ran_out) {
  if (held->WaitForNotificationWithTimeout(absl::Nanoseconds(kHoldNs))) {
    if (!held_filled_.load(std::memory_order_relaxed)) {
      held_filled_.store(true, std::memory_order_relaxed);
    }
    return absl::OkStatus();
  }
  *ran_out = true;
  counters_.cache_hold_timeouts.fetch_add(1, std::memory_order_relaxed);
  // A client whose queue never fills a stripe times out again each time
  // holding resumes: the pause doubles while no held piece was filled in
  // between, up to kMaxHoldOffNs, so that it costs such a client at most
  // kHoldNs in kMaxHoldOffNs.
  int64_t off = hold_off_ns_.load(std::memory_order_relaxed);
  off = held_filled_.exchange(false, std::memory_order_relaxed)
            ? kHoldOffNs
            : std::min(2 * off, kMaxHoldOffNs);
  hold_off_ns_.store(off, std::memory_order_relaxed);
  hold_off_until_ns_.store(SteadyNs() + off, std::memory_order_relaxed);
  StripeLock lock(&locks_, LockKey(sh, stripe));
  StripeCache::Entry* e = cache_.Find(stripe);
  // Gone, or another entry since: Erase notified this one, under the lock
  // we now hold, once its bytes were on the members.
  if (e == nullptr || e->held != held) return absl::OkStatus();
  NoteWrittenThrough(stripe);
  // Still there: not yet written, or its writeback failed (then this
  // writer gets the error, and the bytes stay for a later writeback).
  return WritebackLocked(sh, e, touched);
}

absl::Status StripeWriter::DropEntryLocked(const Shape& sh,
                                           StripeCache::Entry* e,
                                           std::vector<bool>* touched) {
  // Held writers learn only that their bytes are on the members, so
  // theirs go out first (an RMW the replacing write then overwrites; rare:
  // held entries exist only while the array cannot spare a member).
  if (e->held != nullptr) return WritebackLocked(sh, e, touched);
  cache_.Erase(e->stripe);
  return absl::OkStatus();
}

absl::Status StripeWriter::WritebackLocked(const Shape& sh,
                                           StripeCache::Entry* e,
                                           std::vector<bool>* touched) {
  const uint64_t stripe = e->stripe;
  for (const auto& [a, b] : e->dirty.ranges()) {
    RETURN_IF_ERROR(
        WriteStripeLocked(sh, stripe, a, b, e->data.data() + a, touched));
  }
  counters_.cache_writebacks.fetch_add(1, std::memory_order_relaxed);
  cache_.Erase(stripe);
  return absl::OkStatus();
}

absl::Status StripeWriter::WritebackStripe(uint64_t stripe, bool unheld_only) {
  // The cache holds the current shape's stripes (see WritePiece).
  const Shape& sh = CurrentShape();
  StripeLock lock(&locks_, LockKey(sh, stripe));
  StripeCache::Entry* e = cache_.Find(stripe);
  if (e == nullptr || (unheld_only && e->held != nullptr)) {
    return absl::OkStatus();
  }
  std::vector<bool> touched(sh.geo.raid_disks(), false);
  return WritebackLocked(sh, e, &touched);
}

absl::Status StripeWriter::WritebackAll(bool unheld_only) {
  absl::Status first;
  for (uint64_t stripe : cache_.Oldest(SIZE_MAX, std::nullopt, unheld_only)) {
    absl::Status st = WritebackStripe(stripe, unheld_only);
    if (first.ok()) first = st;
  }
  return first;
}

absl::Status StripeWriter::WriteStripeLocked(const Shape& sh, uint64_t stripe,
                                             uint64_t a, uint64_t b,
                                             const uint8_t* src,
                                             std::vector<bool>* touched,
                                             const uint8_t* parity,
                                             const uint8_t* const* chunks) {
  // A write over the end of one chunk and the start of the next touches
  // disjoint rows when it is shorter than a chunk: two small updates (as
  // md's per-row choice would make) instead of one over the whole chunk.
  const uint64_t C = sh.geo.chunk_bytes();
  if (a / C + 1 == (b - 1) / C && b % C != 0 && b % C <= a % C) {
    uint64_t mid = (a / C + 1) * C;
    RETURN_IF_ERROR(WriteStripeLocked(sh, stripe, a, mid, src, touched));
    return WriteStripeLocked(sh, stripe, mid, b, src + (mid - a), touched);
  }
  // md's write-intent rule: the region's bit is durable before the first
  // member write into it, and is released when the write is done.
  RETURN_IF_ERROR(bitmap_.StartWrite(stripe * C, C));
  // Set by every attempt (there is at least one). Not an error Status made
  // up front: that is a heap allocation on every write (issue 35).
  absl::Status st;
  bool whole = true;  // every member got its share (else keep the bit)
  // `chunks` copied into one buffer, once a write around bad blocks needs
  // it; `src` points here for the attempts after.
  AlignedBuffer flat;
  for (int attempt = 0; attempt <= sh.geo.raid_disks(); ++attempt) {
    st = host_.CheckUsable(true);
    if (!st.ok()) break;
    bool slot_failed = false;
    const SlotGens gens = slots_.CaptureGens();
    int missing, second;
    slots_.MissingAt(sh.geo.raid_disks(), stripe, &missing, &second);
    whole = whole && missing < 0;
    if (slots_.AnyBad() && reader_.StripeHasBadBlocks(sh, stripe)) {
      // Rows with bad blocks are written around them (and a write that
      // covers one makes it good); the bits stay, as for a degraded stripe.
      whole = false;
      if (chunks != nullptr) {
        flat = FlattenChunks(sh.geo, chunks);
        src = flat.data();
        chunks = nullptr;
      }
      st = WriteAroundBadLocked(sh, stripe, a, b, src, gens,
                                /*force_rcw=*/attempt > 0, &slot_failed,
                                touched);
    } else {
      st = PlanAndWriteStripe(sh, stripe, a, b, src, missing, second, gens,
                              /*force_rcw=*/attempt > 0, &slot_failed, touched,
                              parity, chunks);
    }
    if (st.ok() || !slot_failed) break;
    whole = false;
    // A member failed mid-plan: it is now marked faulty. Redo the stripe
    // around it; every plan is idempotent (it rewrites the same data and
    // parity from scratch), so partial writes of the failed attempt are
    // harmless.
  }
  if (bitmap_.intent() != nullptr)
    bitmap_.intent()->EndWrite(stripe * C, C, st.ok() && whole);
  return st;
}

absl::Status StripeWriter::PlanAndWriteStripe(
    const Shape& sh, uint64_t stripe, uint64_t a, uint64_t b,
    const uint8_t* src, int missing, int second_missing, const SlotGens& gens,
    bool force_rcw, bool* slot_failed, std::vector<bool>* touched,
    const uint8_t* parity, const uint8_t* const* chunks) {
  // Parity of a stripe the resync has not reached is not trusted yet, and a
  // retry's may already hold part of this write: never carry it forward.
  const StripeHealth health{
      missing,
      !force_rcw && stripe < resync_stripe_.load(std::memory_order_acquire),
      second_missing};
  const WritePlan plan = PlanWrite(sh.geo, stripe, a, b, health);
  // Chunk by chunk only where the plan reads nothing into the client's
  // bytes and addresses them a chunk at a time: RAID5's full-stripe plans
  // (P from the data, or none when P is lost). RAID6's syndrome takes one
  // buffer.
  AlignedBuffer flat;
  if (chunks != nullptr && (plan.q_slot >= 0 || !plan.reads.empty() ||
                            (plan.mode != WriteMode::kFull &&
                             plan.mode != WriteMode::kParityGone))) {
    flat = FlattenChunks(sh.geo, chunks);
    src = flat.data();
    chunks = nullptr;
  }
  // A full-stripe plan's scratch is its parity alone, in the layout
  // ComputeFullStripeParity makes (plan/stripe_plan.h): one handed in is
  // written as it is, and no scratch is allocated or computed.
  const bool ready = parity != nullptr && plan.mode == WriteMode::kFull &&
                     plan.scratch_bytes == FullStripeParityBytes(sh.geo);
  AlignedBuffer own(ready ? 0 : plan.scratch_bytes);
  // Only written from when `ready`.
  uint8_t* scratch = ready ? const_cast<uint8_t*>(parity) : own.data();
  auto* client = const_cast<uint8_t*>(src);  // only written from
  std::vector<MemberIo> reads;
  if (!plan.reads.empty()) {
    reads = PlannedMemberIos(sh, MemberIo::kRead, stripe, plan.reads, scratch,
                             client);
    io_.Submit(sh, reads, &gens);
    RETURN_IF_ERROR(CorrectPreReads(sh, stripe, reads, slot_failed));
    RETURN_IF_ERROR(host_.AbsorbFailures(reads, slot_failed));
  }
  if (!ready) {
    if (chunks != nullptr) {
      ComputeFullWriteFromChunks(plan, sh.geo.chunk_bytes(), chunks, scratch);
    } else {
      ComputeWrite(plan, scratch, src);
    }
  }
  // PPL hook (meta/ppl_log.h): the partial parity is durable on the parity
  // member before any data or parity goes out, and that member's log stays
  // held until these writes are done and durable (with FUA, or flushed by
  // the next batch before its header replaces this one's). The log is read
  // once, inside a pass held until the writes are done (a policy switch
  // waits those out: array/ppl_switch.cc); the lock goes before the log it
  // belongs to.
  const WriteEpochs::Pass ppl_pass = ppl_epochs_.Enter();
  // With `chunks` (a whole stripe) `src` is null: md logs a full-stripe
  // write without partial parity, so the log reads no client bytes.
  ASSIGN_OR_RETURN(PplLog::Hold ppl_hold, LogToPpl(ppl_.load(), stripe, a, b,
                                                   plan, scratch, src, &reads));
  std::vector<MemberIo> writes = PlannedMemberIos(
      sh, MemberIo::kWrite, stripe, plan.writes, scratch, client, chunks);
  MarkRewrites(reads, writes);
  std::atomic<uint64_t>* counter = &counters_.degraded_writes;
  if (!plan.degraded) {
    counter = plan.mode == WriteMode::kFull  ? &counters_.full_stripe_writes
              : plan.mode == WriteMode::kRmw ? &counters_.rmw_writes
                                             : &counters_.rcw_writes;
  }
  counter->fetch_add(1, std::memory_order_relaxed);
  // Durable before the hold goes: with FUA when the stripe was logged
  // alone (each member written once, as the flush would be; a client's FUA
  // then needs no flush of them either), else flushed by the log's next
  // batch before its header replaces this one's.
  const bool fua = ppl_hold.held() && ppl_hold.alone();
  for (MemberIo& io : writes) {
    io.fua = fua;
    if (fua) continue;
    (*touched)[io.slot] = true;
    if (ppl_hold.held()) ppl_hold.Wrote(io.slot);
  }
  io_.Submit(sh, writes, &gens);
  return FinishWritesLocked(sh, stripe, writes, slot_failed);
}

absl::Status StripeWriter::FinishWritesLocked(const Shape& sh, uint64_t stripe,
                                              std::vector<MemberIo>& writes,
                                              bool* slot_failed) {
  bool recorded = false;
  for (MemberIo& io : writes) {
    // A member that shrank under the array (OutOfRange) has lost its data
    // past the end: failed, as before.
    if (io.status.ok() || io.stale || io.to_replacement ||
        io.kind != MemberIo::kWrite || absl::IsOutOfRange(io.status) ||
        !slots_.UsableAt(io.slot, stripe)) {
      continue;
    }
    absl::StatusOr<std::vector<std::pair<uint64_t, size_t>>> still =
        RewriteBlocksLocked(sh, io);
    if (!still.ok()) continue;  // answers nothing: AbsorbFailures fails it
    const std::string why = absl::StrCat("write error: ", io.status.message());
    bool kept = true;
    for (const auto& [at, len] : *still) {
      // Not OK: the member was failed instead (no log, log full) or left
      // the slot; AbsorbFailures below sees the slot gone and replans.
      if (!host_.RecordBadBlocks(io.slot, false, io.used, at, len, why).ok()) {
        kept = false;
        break;
      }
    }
    if (!kept) continue;
    io.status = absl::OkStatus();
    recorded = true;
    host_.WantReplacement(io.slot, io.used, why);
  }
  RETURN_IF_ERROR(host_.AbsorbFailures(writes, slot_failed));
  if (!recorded) return absl::OkStatus();
  *slot_failed = true;
  return absl::AbortedError(absl::StrFormat(
      "stripe %d: write errors recorded as bad blocks; written again around "
      "them",
      stripe));
}

absl::StatusOr<std::vector<std::pair<uint64_t, size_t>>>
StripeWriter::RewriteBlocksLocked(const Shape& sh, const MemberIo& io) {
  const SlotGens gens = slots_.CaptureGens();
  std::vector<MemberIo> ios;
  // Blocks of the member (md's STRIPE_SIZE), clipped to the write.
  const uint64_t raw = sh.data_offset + io.offset;
  for (uint64_t x = raw, end = raw + io.len; x < end;) {
    const uint64_t next = std::min<uint64_t>(
        end, x / kMdBlockBytes * kMdBlockBytes + kMdBlockBytes);
    MemberIo w{MemberIo::kWrite,
               io.slot,
               static_cast<uint8_t*>(io.buf) + (x - raw),
               static_cast<size_t>(next - x),
               x - sh.data_offset,
               {}};
    w.fua = io.fua;
    ios.push_back(w);
    x = next;
  }
  io_.Submit(sh, ios, &gens);
  std::vector<std::pair<uint64_t, size_t>> still;
  for (const MemberIo& w : ios) {
    if (w.stale || w.used != io.used) {
      return absl::UnavailableError(absl::StrFormat(
          "slot %d changed members while its write error was handled",
          io.slot));
    }
    if (w.status.ok()) continue;
    // Adjacent failed blocks make one range (one log entry).
    if (!still.empty() &&
        still.back().first + still.back().second == sh.data_offset + w.offset) {
      still.back().second += w.len;
    } else {
      still.emplace_back(sh.data_offset + w.offset, w.len);
    }
  }
  if (still.size() != 1 || still[0].second != io.len) return still;
  // Nothing of the range took: a bad region, or a member that answers
  // nothing at all. Its superblock tells which.
  RETURN_IF_ERROR(ProbeMember(*io.used_ref));
  return still;
}

absl::Status StripeWriter::WriteAroundBadLocked(
    const Shape& sh, uint64_t stripe, uint64_t a, uint64_t b,
    const uint8_t* src, const SlotGens& gens, bool force_rcw, bool* slot_failed,
    std::vector<bool>* touched) {
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t base = sh.data_offset + stripe * C;
  const int disks = sh.geo.raid_disks();
  for (uint64_t pos = a; pos < b;) {
    const int di = static_cast<int>(pos / C);
    const uint64_t x = pos % C;
    uint64_t y = std::min<uint64_t>(b - di * C, C);
    // The piece ends where any slot's bad range starts or ends, so every
    // row of it has the same slots lost.
    for (int i = 0; i < disks; ++i) {
      for (const BadBlock& bb : slots_[i]->bad.Find(
               (base + x) / 512, (base + y + 511) / 512 - (base + x) / 512)) {
        for (const uint64_t edge :
             {bb.sector * 512, (bb.sector + bb.sectors) * 512}) {
          if (edge > base + x && edge < base + y) y = edge - base;
        }
      }
    }
    const size_t len = static_cast<size_t>(y - x);
    const uint8_t* data = src + (di * C + x - a);
    std::vector<int> lost;
    for (int i = 0; i < disks; ++i) {
      if (!slots_.UsableAt(i, stripe) || slots_.BadAt(i, base + x, len)) {
        lost.push_back(i);
      }
    }
    const int d = sh.geo.DataDisk(stripe, di);
    absl::Status st;
    if (lost.size() <= static_cast<size_t>(sh.geo.parity_disks())) {
      const int missing = lost.empty() ? -1 : lost[0];
      const int second = lost.size() < 2 ? -1 : lost[1];
      st = PlanAndWriteStripe(sh, stripe, di * C + x, di * C + y, data, missing,
                              second, gens, force_rcw, slot_failed, touched);
      if (st.ok() && (missing == d || second == d) &&
          slots_.UsableAt(d, stripe)) {
        MakeGoodLocked(sh, stripe, d, x, len, data, gens);
      }
    } else {
      st = WriteLossyRowsLocked(sh, stripe, d, x, len, data, lost, gens,
                                slot_failed, touched);
    }
    RETURN_IF_ERROR(st);
    pos = di * C + y;
  }
  return absl::OkStatus();
}

void StripeWriter::MakeGoodLocked(const Shape& sh, uint64_t stripe, int slot,
                                  uint64_t x, size_t len, const uint8_t* data,
                                  const SlotGens& gens) {
  // Durable before the entry goes: a crash in between must not leave the
  // member's old bytes readable.
  std::vector<MemberIo> w{MemberIo{MemberIo::kWrite,
                                   slot,
                                   const_cast<uint8_t*>(data),
                                   len,
                                   stripe * sh.geo.chunk_bytes() + x,
                                   {}}};
  w[0].fua = true;
  io_.Submit(sh, w, &gens);
  if (!w[0].status.ok()) {
    // Still bad: reads keep rebuilding it. A member that cannot take a
    // write there should go (md's WantReplacement).
    if (!w[0].stale) {
      host_.WantReplacement(slot, w[0].used,
                            absl::StrCat("rewrite of a bad block failed: ",
                                         w[0].status.message()));
    }
    return;
  }
  (void)host_.ClearBadBlocks(slot, w[0].used, sh.data_offset + w[0].offset,
                             len);
}

absl::Status StripeWriter::WriteLossyRowsLocked(
    const Shape& sh, uint64_t stripe, int d, uint64_t x, size_t len,
    const uint8_t* data, const std::vector<int>& lost, const SlotGens& gens,
    bool* slot_failed, std::vector<bool>* touched) {
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t off = stripe * C + x;
  const int p = sh.geo.ParityDisk(stripe);
  const auto is_lost = [&](int s) {
    return std::find(lost.begin(), lost.end(), s) != lost.end();
  };
  counters_.degraded_writes.fetch_add(1, std::memory_order_relaxed);
  // RAID6 (three or more lost in the row): P and Q are recorded bad below
  // rather than read-modify-written, which would need the Q of rows whose
  // P already disagrees.
  if (!is_lost(d) && sh.geo.level() != 6) {
    std::vector<MemberIo> writes{MemberIo{
        MemberIo::kWrite, d, const_cast<uint8_t*>(data), len, off, {}}};
    AlignedBuffer scratch(2 * len);
    if (!is_lost(p)) {
      // Read-modify-write touches only `d` and parity: P ^= Dold ^ Dnew
      // keeps parity the XOR of the row whatever the lost slots held.
      std::vector<MemberIo> reads{
          MemberIo{MemberIo::kRead, d, scratch.data(), len, off, {}},
          MemberIo{MemberIo::kRead, p, scratch.data() + len, len, off, {}}};
      io_.Submit(sh, reads, &gens);
      for (MemberIo& io : reads) {
        if (io.status.ok() || io.stale) continue;
        // Neither can be corrected (the row has lost two already).
        RETURN_IF_ERROR(reader_.RecordUnreadableLocked(
            sh, stripe, io.slot, x, len, static_cast<uint8_t*>(io.buf),
            io.status, io.used));
        io.status = absl::OkStatus();
      }
      RETURN_IF_ERROR(host_.AbsorbFailures(reads, slot_failed));
      const void* srcs[3] = {scratch.data() + len, scratch.data(), data};
      Xor(scratch.data() + len, srcs, len);
      writes.push_back(
          MemberIo{MemberIo::kWrite, p, scratch.data() + len, len, off, {}});
      MarkRewrites(reads, writes);
    }
    for (const MemberIo& io : writes) (*touched)[io.slot] = true;
    io_.Submit(sh, writes, &gens);
    return FinishWritesLocked(sh, stripe, writes, slot_failed);
  }
  if (!slots_.UsableAt(d, stripe)) {
    return absl::DataLossError(absl::StrFormat(
        "cannot write stripe %d's slot %d at member offset %d: its member is "
        "missing and the row has lost another block (slots %s), so parity "
        "cannot hold it",
        stripe, d, sh.data_offset + off, absl::StrJoin(lost, ",")));
  }
  for (const int par : {p, sh.geo.QDisk(stripe)}) {
    if (par < 0 || is_lost(par)) continue;
    // Parity matched the old bytes of `d` and no longer matches the row
    // once `d` is written: recorded bad first, so nothing rebuilds from
    // it.
    RETURN_IF_ERROR(host_.RecordBadBlocks(
        par, false, nullptr, sh.data_offset + off, len,
        absl::StrFormat("parity no longer matches: slot %d rewritten while "
                        "its row had lost slots %s",
                        d, absl::StrJoin(lost, ","))));
  }
  std::vector<MemberIo> w{
      MemberIo{MemberIo::kWrite, d, const_cast<uint8_t*>(data), len, off, {}}};
  w[0].fua = true;
  io_.Submit(sh, w, &gens);
  if (!w[0].status.ok()) {
    if (w[0].stale) {
      *slot_failed = true;
      return w[0].status;
    }
    return absl::DataLossError(absl::StrFormat(
        "cannot write slot %d at member offset %d (listed bad, its row lost "
        "elsewhere too): %s",
        d, sh.data_offset + off, w[0].status.message()));
  }
  return host_.ClearBadBlocks(d, w[0].used, sh.data_offset + off, len);
}

absl::StatusOr<PplLog::Hold> StripeWriter::LogToPpl(
    const std::shared_ptr<PplLog>& ppl, uint64_t stripe, uint64_t a, uint64_t b,
    const WritePlan& plan, const uint8_t* scratch, const uint8_t* client,
    const std::vector<MemberIo>* reads) {
  if (ppl == nullptr || plan.mode == WriteMode::kParityGone) {
    return PplLog::Hold();
  }
  std::shared_ptr<Member> pm = slots_[plan.parity_slot]->member.load();
  if (pm == nullptr) return PplLog::Hold();
  // This very member answered a read of the parity's rows, which lie past
  // its PPL area.
  const bool parity_read =
      reads != nullptr &&
      std::any_of(reads->begin(), reads->end(), [&](const MemberIo& r) {
        return ReadProvedRange(r) && r.slot == plan.parity_slot &&
               r.used == pm.get();
      });
  return ppl->LogStripe(stripe, a, b, plan, scratch, client, *pm, parity_read,
                        [this](const std::vector<bool>& which) {
                          return FlushSlots(which, /*only_dirty=*/true);
                        });
}

absl::Status StripeWriter::CorrectPreReads(const Shape& sh, uint64_t stripe,
                                           std::vector<MemberIo>& reads,
                                           bool* replan) {
  // A write's reads of old data or parity met a read error on a working
  // member: rebuild those bytes from the rest of the stripe and rewrite
  // them, as for a client read, and go on with the plan. Only what cannot
  // be corrected is left for AbsorbFailures.
  const uint64_t base = stripe * sh.geo.chunk_bytes();
  for (MemberIo& io : reads) {
    if (io.status.ok() || io.stale || io.to_replacement ||
        !slots_.UsableAt(io.slot, stripe)) {
      continue;
    }
    absl::Status st = reader_.CorrectReadErrorLocked(
        sh, stripe, io.slot, io.offset - base, io.len,
        static_cast<uint8_t*>(io.buf), io.status, io.used);
    if (st.ok()) {
      io.status = absl::OkStatus();
    } else if (!host_.CheckUsable(false).ok()) {
      return st;
    } else if (st.code() == absl::StatusCode::kDataLoss) {
      // Blocks of the row are lost and now listed bad: the stripe is
      // planned again around them.
      *replan = true;
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status StripeWriter::FlushSlots(const std::vector<bool>& which,
                                      bool only_dirty) {
  for (int attempt = 0; attempt <= static_cast<int>(which.size()); ++attempt) {
    std::vector<MemberIo> ios;
    std::vector<uint64_t> marks;
    for (int i = 0; i < static_cast<int>(which.size()); ++i) {
      if (!which[i] || !slots_.Present(i)) continue;
      // Every write done before this load is covered by a flush issued
      // after it; a slot whose count a finished flush already covered has
      // nothing to make durable (a write still in flight is not the
      // flush's to promise). Only where asked: a client's flush reaches
      // every member, as md's does, which is also how a member that died
      // while idle is noticed.
      const uint64_t mark = slots_[i]->writes_done.load();
      if (only_dirty && mark == slots_[i]->flushed_upto.load()) continue;
      ios.push_back(MemberIo{MemberIo::kFlush, i, nullptr, 0, 0, {}});
      marks.push_back(mark);
    }
    if (ios.empty()) return absl::OkStatus();
    // Flushes address no data: any shape's offsets will do.
    io_.Submit(CurrentShape(), ios);
    for (size_t k = 0; k < ios.size(); ++k) {
      if (!ios[k].status.ok()) continue;
      std::atomic<uint64_t>& upto = slots_[ios[k].slot]->flushed_upto;
      uint64_t seen = upto.load();
      while (seen < marks[k] && !upto.compare_exchange_weak(seen, marks[k])) {
      }
    }
    bool slot_failed;
    absl::Status st = host_.AbsorbFailures(ios, &slot_failed);
    if (st.ok()) return st;
    // A member that cannot flush is failed; the data it held is still
    // recoverable from the others, which did flush. Fine unless the array
    // failed as a whole.
    RETURN_IF_ERROR(host_.CheckUsable(false));
    if (!slot_failed) return st;
  }
  return absl::OkStatus();
}

absl::Status StripeWriter::FlushAll(bool writeback) {
  if (writeback) RETURN_IF_ERROR(WritebackAll());
  return FlushSlots(std::vector<bool>(slots_.size(), true));
}

absl::Status StripeWriter::Flush() {
  RETURN_IF_ERROR(host_.CheckUsable(false));
  // Moving average of the time between flushes (1/8 weight per sample;
  // racy updates lose a sample now and then, which is harmless).
  // On the array's clock, as the cache's age limit is: a simulated
  // client's flushes are spaced in simulated time.
  const int64_t now = clock_.NowNs();
  const int64_t gap = now - last_flush_ns_.exchange(now);
  const int64_t avg = flush_interval_ns_.load(std::memory_order_relaxed);
  flush_interval_ns_.store(avg + (gap - avg) / 8, std::memory_order_relaxed);
  // Everything acknowledged before this call is in the cache or on the
  // members: write the cache back, then make the members durable. Held
  // entries hold only writes not acknowledged yet (every piece gathered
  // into one is held), so they are left to their writers: writing them
  // back here would make them partial-stripe writes, and take their
  // stripe locks behind the write that fills them.
  RETURN_IF_ERROR(WritebackAll(/*unheld_only=*/true));
  RETURN_IF_ERROR(FlushSlots(std::vector<bool>(slots_.size(), true)));
  // Bits whose persist failed earlier go out now: after a flush the
  // on-disk bitmap covers every write (FlushSlots made the data durable).
  if (bitmap_.intent() != nullptr) RETURN_IF_ERROR(bitmap_.intent()->Sync());
  return absl::OkStatus();
}

bool StripeWriter::EveryMemberDiscardsToZeros() const {
  for (const auto& s : slots_) {
    std::shared_ptr<Member> m = s->member.load();
    std::shared_ptr<Member> r = s->replacement.load();
    if ((m != nullptr && !m->DiscardZeroes()) ||
        (r != nullptr && !r->DiscardZeroes())) {
      return false;
    }
  }
  return true;
}

absl::Status StripeWriter::Trim(const Shape& sh, size_t len, uint64_t offset,
                                bool fua) {
  RETURN_IF_ERROR(CheckRange(sh, "trim", len, offset));
  RETURN_IF_ERROR(host_.CheckUsable(true));
  // Advisory: without zeros on read, parity cannot be kept, so skip.
  if (!EveryMemberDiscardsToZeros()) return absl::OkStatus();
  const uint64_t sd = sh.geo.stripe_data_bytes();
  uint64_t first = (offset + sd - 1) / sd;
  uint64_t end = (offset + len) / sd;
  if (first >= end) return absl::OkStatus();
  RETURN_IF_ERROR(host_.BeginWrite());
  std::vector<bool> touched(sh.geo.raid_disks(), false);
  absl::Status st;
  for (uint64_t s = first; s < end && st.ok(); ++s) {
    StripeLock lock(&locks_, LockKey(sh, s));
    st = DiscardStripeLocked(sh, s, &touched);
  }
  if (st.ok() && fua) st = FlushSlots(touched);
  host_.EndWrite();
  return st;
}

absl::StatusOr<bool> StripeWriter::DiscardStripe(const Shape& sh,
                                                 uint64_t stripe) {
  RETURN_IF_ERROR(host_.BeginWrite());
  std::vector<bool> touched(sh.geo.raid_disks(), false);
  absl::StatusOr<bool> done = false;
  {
    StripeLock lock(&locks_, LockKey(sh, stripe));
    // Under the lock: a write over a bad block would make it good, a
    // discard would not (the caller writes the zeros instead).
    if (EveryMemberDiscardsToZeros() &&
        !(slots_.AnyBad() && reader_.StripeHasBadBlocks(sh, stripe))) {
      absl::Status st = DiscardStripeLocked(sh, stripe, &touched);
      if (st.ok()) {
        done = true;
      } else {
        done = st;
      }
    }
  }
  host_.EndWrite();
  return done;
}

absl::Status StripeWriter::DiscardStripeLocked(const Shape& sh, uint64_t s,
                                               std::vector<bool>* touched) {
  const Geometry& geo = sh.geo;
  const uint64_t sd = geo.stripe_data_bytes();
  const uint64_t C = geo.chunk_bytes();
  // The whole stripe is being replaced by zeros.
  if (StripeCache::Entry* e = cache_.Find(s)) {
    RETURN_IF_ERROR(DropEntryLocked(sh, e, touched));
  }
  RETURN_IF_ERROR(bitmap_.StartWrite(s * C, C));
  // PPL: the discard is logged as md logs one (a full-stripe write, an
  // entry without partial parity) before any chunk is dropped. A crash
  // in the middle leaves some chunks zero and others not; without the
  // entry a PPL array, which does not resync, would keep that stripe's
  // parity wrong, and a later read-modify-write there would carry the
  // error into data acknowledged after the crash. The replay recomputes
  // the parity from the data as the crash left it. Logged and held as
  // WriteStripeLocked logs a write (the pass first, see there).
  const WriteEpochs::Pass ppl_pass = ppl_epochs_.Enter();
  PplLog::Hold ppl_hold;
  if (const std::shared_ptr<PplLog> ppl = ppl_.load(); ppl != nullptr) {
    // A full-stripe plan logs no partial parity: no buffers are read.
    absl::StatusOr<PplLog::Hold> hold = LogToPpl(
        ppl, s, 0, sd,
        PlanWrite(
            geo, s, 0, sd,
            StripeHealth{slots_.MissingAt(sh.geo.raid_disks(), s), false}),
        /*scratch=*/nullptr, /*client=*/nullptr, /*reads=*/nullptr);
    if (!hold.ok()) return hold.status();
    ppl_hold = *std::move(hold);
  }
  // Every present chunk, parity included, becomes zeros: the stripe stays
  // consistent and a missing member's chunk reconstructs as zeros too.
  std::vector<MemberIo> ios;
  for (int i = 0; i < geo.raid_disks(); ++i) {
    if (!slots_.UsableAt(i, s)) continue;
    (*touched)[i] = true;
    ios.push_back(MemberIo{MemberIo::kDiscard, i, nullptr, C, s * C, {}});
    if (ppl_hold.held()) ppl_hold.Wrote(i);
  }
  io_.Submit(sh, ios);
  bool slot_failed;
  absl::Status st = host_.AbsorbFailures(ios, &slot_failed);
  if (!st.ok() && slot_failed && host_.CheckUsable(true).ok()) {
    st = absl::OkStatus();  // the failed member's chunk is implied by P=0
  }
  if (bitmap_.intent() != nullptr) {
    bitmap_.intent()->EndWrite(s * C, C, st.ok() && !slot_failed);
  }
  return st;
}

absl::Status StripeWriter::Zero(const Shape& sh, size_t len, uint64_t offset,
                                bool fua) {
  RETURN_IF_ERROR(CheckRange(sh, "zero", len, offset));
  if (len == 0) return host_.CheckUsable(true);
  const uint64_t sd = sh.geo.stripe_data_bytes();
  // Zeros go through the ordinary write path, one stripe's worth at a time,
  // so parity and degraded handling are exactly those of writes.
  AlignedBuffer zeros(std::min<uint64_t>(len, sd), /*zero=*/true);
  for (uint64_t done = 0; done < len;) {
    uint64_t pos = offset + done;
    uint64_t n = std::min<uint64_t>(len - done, sd - pos % sd);
    n = std::min<uint64_t>(n, zeros.size());
    RETURN_IF_ERROR(Write(sh, zeros.data(), n, pos, false));
    done += n;
  }
  return fua ? Flush() : absl::OkStatus();
}

}  // namespace uraid
