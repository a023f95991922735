// SPDX-License-Identifier: MIT
// The read half of the stripe engine (stripe_reader.h).
#include "engine/stripe_reader.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
#include "base/status_macros.h"
#include "parity/parity.h"

namespace uraid {
namespace {

// The data chunks of the stripe that slots `m` and `m2` (-1: none) held:
// how many rebuilds want each of its survivor rows.
uint32_t LostDataChunks(const Geometry& geo, uint64_t stripe, int m, int m2) {
  uint32_t n = 0;
  for (const int s : {m, m2}) {
    if (s >= 0 && geo.DataIndex(stripe, s) >= 0) ++n;
  }
  return n;
}

}  // namespace

StripeReader::StripeReader(const EngineContext& ctx, StripeCache& cache,
                           SurvivorCache& survivors,
                           const ArrayReporter& reporter, bool read_only)
    : EnginePart(ctx),
      cache_(cache),
      survivors_(survivors),
      reporter_(reporter),
      read_only_(read_only) {}

absl::Status StripeReader::Read(const Shape& sh, void* buf, size_t len,
                                uint64_t offset) {
  RETURN_IF_ERROR(CheckRange(sh, "read", len, offset));
  auto* out = static_cast<uint8_t*>(buf);
  const Geometry& geo = sh.geo;
  const uint64_t chunk = geo.chunk_bytes();

  struct Piece {
    Location loc;
    size_t len;
    uint8_t* dst;
  };
  std::vector<Piece> pieces;
  for (uint64_t done = 0; done < len;) {
    Location loc = geo.Map(offset + done);
    size_t n = static_cast<size_t>(
        std::min<uint64_t>(len - done, chunk - loc.chunk_offset));
    pieces.push_back(Piece{loc, n, out + done});
    done += n;
  }
  // Healthy pieces straight into the caller's buffer, all in flight at once.
  // Pieces of stripes the cache holds newer data for take the locked slow
  // path. A stripe that has lost a data chunk splits in two: its pieces on
  // intact members are read like healthy ones, unlocked (the bytes a
  // member holds are the bytes last written there, as for any healthy
  // read; a read racing a write of the same bytes sees either), and only
  // the pieces on the lost chunk go under the stripe's lock, where the
  // rebuild reads the survivors and parity of one write (the group path).
  // A stripe of a sequential reader is read by several requests at once
  // (qd8): whichever reads a survivor row first puts it in the survivor
  // cache, and a request that wants a row another is reading right now
  // waits for that read (survivor_cache.h's claims) instead of reading it
  // again, so every survivor byte is read once. (All the pieces of such a
  // stripe went under its lock before: a 7 MiB stripe of 1 MiB requests
  // was read one request at a time, 0.20x of the file plugin at qd8.)
  // Pieces come in stripe order: the degraded stripes, ascending.
  struct Lost {
    uint64_t stripe;
    uint32_t data_chunks;  // lost data chunks: readers of each survivor row
  };
  std::vector<Lost> lost;
  for (const Piece& p : pieces) {
    if (!lost.empty() && lost.back().stripe == p.loc.stripe) continue;
    int m, m2;
    slots_.MissingAt(sh.geo.raid_disks(), p.loc.stripe, &m, &m2);
    const uint32_t n = LostDataChunks(geo, p.loc.stripe, m, m2);
    if (n > 0) lost.push_back(Lost{p.loc.stripe, n});
  }
  // Per piece: the index of its stripe in `lost`, or -1.
  std::vector<int> degraded(pieces.size(), -1);
  std::vector<bool> on_lost(pieces.size(), false);
  for (size_t i = 0, k = 0; i < pieces.size(); ++i) {
    while (k < lost.size() && lost[k].stripe < pieces[i].loc.stripe) ++k;
    if (k < lost.size() && lost[k].stripe == pieces[i].loc.stripe) {
      degraded[i] = static_cast<int>(k);
      on_lost[i] = !slots_.UsableAt(pieces[i].loc.disk, pieces[i].loc.stripe);
    }
  }
  // An intact piece's rows that this request's own rebuild covers (every
  // lost data chunk of the stripe over the same chunk bytes) are wanted by
  // no other request: they are neither claimed nor kept.
  const auto own_rebuild_covers = [&](size_t i) {
    uint32_t covering = 0;
    for (size_t j = 0; j < pieces.size(); ++j) {
      if (on_lost[j] && degraded[j] == degraded[i] &&
          pieces[j].loc.chunk_offset <= pieces[i].loc.chunk_offset &&
          pieces[i].loc.chunk_offset + pieces[i].len <=
              pieces[j].loc.chunk_offset + pieces[j].len) {
        ++covering;
      }
    }
    return covering >= lost[degraded[i]].data_chunks;
  };
  std::vector<MemberIo> ios;
  std::vector<size_t> io_piece;
  std::vector<uint64_t> io_ticket;  // the claim of an intact piece's read
  std::vector<size_t> claimed_elsewhere;
  std::vector<bool> slow(pieces.size(), false);
  const SlotGens gens = slots_.CaptureGens();
  // Freshness of the intact rows read here, for the survivor cache and for
  // this request's own rebuilds (survivor_cache.h's rule).
  const uint64_t started = io_.writes_started();
  const bool quiet = io_.writes_finished() == started;
  // md's rule: no bypass read of a range with a recorded bad block. One
  // look per request while every list is empty.
  const bool any_bad = slots_.AnyBad();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (on_lost[i]) continue;
    if (slots_.UsableAt(p.loc.disk, p.loc.stripe) &&
        !cache_.MayContain(p.loc.stripe) &&
        !(any_bad &&
          slots_.BadAt(p.loc.disk, sh.data_offset + p.loc.member_offset,
                       p.len))) {
      uint64_t ticket = 0;
      const bool claim = quiet && degraded[i] >= 0 && !own_rebuild_covers(i);
      if (degraded[i] >= 0 && (claim || !survivors_.empty())) {
        const SurvivorCache::Lookup got = survivors_.Find(
            sh.id, p.loc.stripe, started, p.loc.disk, p.loc.chunk_offset, p.len,
            p.dst, claim ? &ticket : nullptr);
        if (got == SurvivorCache::Lookup::kHit) continue;
        if (got == SurvivorCache::Lookup::kClaimed) {
          claimed_elsewhere.push_back(i);
          continue;
        }
      }
      ios.push_back(MemberIo{
          MemberIo::kRead, p.loc.disk, p.dst, p.len, p.loc.member_offset, {}});
      io_piece.push_back(i);
      io_ticket.push_back(ticket);
    } else {
      slow[i] = true;
    }
  }
  io_.Submit(sh, ios, &gens);
  std::vector<absl::Status> errors(pieces.size());
  std::vector<const Member*> failed(pieces.size(), nullptr);
  const auto absorb = [&](size_t first) {
    const bool fresh = quiet && io_.writes_started() == started;
    for (size_t j = first; j < ios.size(); ++j) {
      const size_t i = io_piece[j];
      if (ios[j].status.ok()) {
        if (io_ticket[j] != 0 && fresh) {
          const Piece& p = pieces[i];
          auto copy = std::make_shared<AlignedBuffer>(p.len);
          std::memcpy(copy->data(), p.dst, p.len);
          std::vector<SurvivorCache::Rows> rows;
          rows.push_back(SurvivorCache::Rows{p.loc.disk, p.loc.chunk_offset,
                                             std::move(copy),
                                             lost[degraded[i]].data_chunks});
          survivors_.Put(sh.id, p.loc.stripe, started, std::move(rows));
        }
      } else {
        // A stale read (the slot changed members) is redone under the
        // lock; only a real error calls for correction.
        if (!ios[j].stale) {
          errors[i] = ios[j].status;
          failed[i] = ios[j].used;
        }
        slow[i] = true;
      }
      if (io_ticket[j] != 0) survivors_.Release(io_ticket[j]);
    }
  };
  absorb(0);
  // Rows another request was reading: taken from the cache once its read
  // is over (this request's claims are released: no cycle), or read here
  // when it could not keep them.
  if (!claimed_elsewhere.empty()) {
    std::vector<MemberIo> more;
    std::vector<size_t> more_piece;
    for (const size_t i : claimed_elsewhere) {
      const Piece& p = pieces[i];
      more.push_back(MemberIo{
          MemberIo::kRead, p.loc.disk, p.dst, p.len, p.loc.member_offset, {}});
      more_piece.push_back(i);
    }
    TakeAwaited(sh, started, more, &more_piece,
                [](const MemberIo& io, SurvivorCache::Held got) {
                  std::memcpy(io.buf, got.data, io.len);
                });
    io_.Submit(sh, more, &gens);
    const size_t first = ios.size();
    ios.insert(ios.end(), more.begin(), more.end());
    io_piece.insert(io_piece.end(), more_piece.begin(), more_piece.end());
    io_ticket.resize(ios.size(), 0);
    absorb(first);
  }
  for (size_t i = 0; i < pieces.size();) {
    if (degraded[i] < 0) {
      ++i;
      continue;
    }
    const uint64_t stripe = pieces[i].loc.stripe;
    const size_t first = i;
    bool rebuild = false, all_fetched = true;
    for (; i < pieces.size() && pieces[i].loc.stripe == stripe; ++i) {
      rebuild = rebuild || on_lost[i];
      all_fetched = all_fetched && (on_lost[i] || !slow[i]);
    }
    if (!rebuild) continue;
    // Every piece of the stripe goes to the group: the intact ones it
    // holds already (`have`) are the rebuild's sources as read. One that
    // did not read cleanly (an error, a bad block, newer cached bytes, a
    // member changing hands) is read again with the rest, under the lock,
    // as before: the group's fallback corrects or reports it.
    absl::InlinedVector<ReadPiece, 16> group;
    absl::InlinedVector<bool, 16> have;
    for (size_t j = first; j < i; ++j) {
      const Piece& p = pieces[j];
      group.push_back(ReadPiece{p.loc.data_index, p.loc.chunk_offset,
                                p.loc.chunk_offset + p.len,
                                static_cast<uint64_t>(p.dst - out)});
      have.push_back(all_fetched && !on_lost[j]);
      slow[j] = false;
    }
    StripeLock lock(&locks_, LockKey(sh, stripe));
    // The rows read unlocked are the members' rows now only when no write
    // was in flight when they were read or has started since.
    if (!(quiet && io_.writes_started() == started)) {
      std::fill(have.begin(), have.end(), false);
    }
    RETURN_IF_ERROR(ReadStripeDegradedLocked(sh, stripe, group, have, out));
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!slow[i]) continue;
    const Piece& p = pieces[i];
    StripeLock lock(&locks_, LockKey(sh, p.loc.stripe));
    if (!errors[i].ok() && slots_.UsableAt(p.loc.disk, p.loc.stripe)) {
      RETURN_IF_ERROR(CorrectReadErrorLocked(sh, p.loc.stripe, p.loc.disk,
                                             p.loc.chunk_offset, p.len, p.dst,
                                             errors[i], failed[i]));
      OverlayCacheLocked(sh, p.loc, p.len, p.dst);
    } else {
      RETURN_IF_ERROR(ReadPieceLocked(sh, p.loc, p.len, p.dst));
    }
  }
  return absl::OkStatus();
}

void StripeReader::TakeAwaited(
    const Shape& sh, uint64_t started, std::vector<MemberIo>& ios,
    std::vector<size_t>* tags,
    absl::FunctionRef<void(const MemberIo&, SurvivorCache::Held)> take) {
  const uint64_t chunk = sh.geo.chunk_bytes();
  size_t kept = 0;
  for (size_t j = 0; j < ios.size(); ++j) {
    const MemberIo& io = ios[j];
    const uint64_t stripe = io.offset / chunk, x = io.offset % chunk;
    survivors_.AwaitUnclaimed(sh.id, stripe, io.slot, x, io.len);
    SurvivorCache::Held got;
    if (survivors_.Find(sh.id, stripe, started, io.slot, x, io.len, nullptr,
                        nullptr, &got) == SurvivorCache::Lookup::kHit) {
      take(io, std::move(got));
      continue;
    }
    ios[kept] = io;
    if (tags != nullptr) (*tags)[kept] = (*tags)[j];
    ++kept;
  }
  ios.resize(kept);
  if (tags != nullptr) tags->resize(kept);
}

void StripeReader::OverlayCacheLocked(const Shape& sh, const Location& loc,
                                      size_t len, uint8_t* dst) {
  if (StripeCache::Entry* e = cache_.Find(loc.stripe)) {
    const uint64_t start =
        static_cast<uint64_t>(loc.data_index) * sh.geo.chunk_bytes() +
        loc.chunk_offset;
    const uint64_t end = start + len;
    for (const auto& [a, b] : e->dirty.ranges()) {
      uint64_t x = std::max(a, start), y = std::min(b, end);
      if (x < y) std::memcpy(dst + (x - start), e->data.data() + x, y - x);
    }
  }
}

absl::StatusOr<std::vector<StripeReader::Block>>
StripeReader::RereadBlocksLocked(const Shape& sh, uint64_t stripe, int slot,
                                 uint64_t chunk_offset, size_t len,
                                 uint8_t* dst, const Member* failed) {
  const uint64_t base = stripe * sh.geo.chunk_bytes();
  const SlotGens gens = slots_.CaptureGens();
  std::vector<MemberIo> ios;
  // 4 KiB blocks of the member (md's STRIPE_SIZE), clipped to the range.
  for (uint64_t x = chunk_offset, end = chunk_offset + len; x < end;) {
    const uint64_t next =
        std::min<uint64_t>(end, (sh.data_offset + base + x) / kBlock * kBlock +
                                    kBlock - sh.data_offset - base);
    ios.push_back(MemberIo{MemberIo::kRead,
                           slot,
                           dst + (x - chunk_offset),
                           static_cast<size_t>(next - x),
                           base + x,
                           {}});
    x = next;
  }
  io_.Submit(sh, ios, &gens);
  std::vector<Block> bad;
  for (const MemberIo& io : ios) {
    if (io.stale) {
      return absl::UnavailableError(absl::StrFormat(
          "slot %d changed members while its read error was handled", slot));
    }
    if (!io.status.ok()) bad.push_back(Block{io.offset - base, io.len});
  }
  if (bad.size() < ios.size() || bad.empty()) return bad;
  // Nothing of the range reads: a bad region, or a member that answers
  // nothing at all. Its superblock tells which.
  std::shared_ptr<Member> m = slots_[slot]->member.load();
  if (m == nullptr || (failed != nullptr && m.get() != failed)) {
    return absl::UnavailableError(absl::StrFormat(
        "slot %d changed members while its read error was handled", slot));
  }
  if (absl::Status ps = ProbeMember(*m); !ps.ok()) {
    const std::string why = absl::StrFormat(
        "member stopped answering: member offset %d unreadable, and so is its "
        "superblock (%s)",
        sh.data_offset + base + chunk_offset, ps.message());
    host_.RecordBackgroundError(
        host_.FailSlot(slot, why, m.get()),
        absl::StrFormat("the failure of slot %d", slot));
    return absl::UnavailableError(absl::StrFormat(
        "member %s (slot %d) failed: %s", m->Name(), slot, why));
  }
  return bad;
}

absl::Status StripeReader::RecordBlocksLocked(const Shape& sh, uint64_t stripe,
                                              int slot,
                                              const std::vector<Block>& blocks,
                                              const absl::Status& why,
                                              const Member* failed) {
  const uint64_t base = sh.data_offset + stripe * sh.geo.chunk_bytes();
  for (const Block& b : blocks) {
    const absl::Status rec =
        host_.RecordBadBlocks(slot, false, failed, base + b.offset, b.len,
                              std::string(why.message()));
    // FailedPrecondition: read-only, nothing recorded, the blocks are lost
    // all the same; any other error: the member was failed instead.
    if (!rec.ok() && rec.code() != absl::StatusCode::kFailedPrecondition) {
      return rec;
    }
  }
  return LostError(sh, stripe, slot, blocks, why);
}

absl::Status StripeReader::RecordUnreadableLocked(
    const Shape& sh, uint64_t stripe, int slot, uint64_t chunk_offset,
    size_t len, uint8_t* dst, const absl::Status& why, const Member* failed) {
  ASSIGN_OR_RETURN(
      std::vector<Block> bad,
      RereadBlocksLocked(sh, stripe, slot, chunk_offset, len, dst, failed));
  if (bad.empty()) return absl::OkStatus();
  return RecordBlocksLocked(sh, stripe, slot, bad, why, failed);
}

absl::Status StripeReader::LostError(const Shape& sh, uint64_t stripe, int slot,
                                     const std::vector<Block>& bad,
                                     const absl::Status& why) const {
  const uint64_t base = sh.data_offset + stripe * sh.geo.chunk_bytes();
  std::string where;
  for (const Block& b : bad) {
    absl::StrAppendFormat(&where, "%s%d+%d", where.empty() ? "" : ", ",
                          base + b.offset, b.len);
  }
  return absl::DataLossError(absl::StrFormat(
      "slot %d: member bytes %s unreadable (%s) and not rebuildable from "
      "parity (degraded, or another error in the row); kept in its bad-block "
      "log, the rest of the array is served",
      slot, where, why.message()));
}

absl::Status StripeReader::CorrectReadErrorLocked(
    const Shape& sh, uint64_t stripe, int slot, uint64_t chunk_offset,
    size_t len, uint8_t* dst, const absl::Status& why, const Member* failed) {
  Slot& s = *slots_[slot];
  std::shared_ptr<Member> m = s.member.load();
  const std::string name = failed ? failed->Name() : "?";
  const uint64_t member_offset = stripe * sh.geo.chunk_bytes() + chunk_offset;
  // The slot changed hands since the read (a spare took over): the error
  // belongs to a member that is gone; the bytes come from parity.
  const bool same = failed == nullptr || m.get() == failed;
  if (absl::Status rs = ReconstructLocked(sh, stripe, slot, chunk_offset, len,
                                          dst, /*record_sources=*/false);
      !rs.ok()) {
    // A member that no longer covers the offset (a file truncated under
    // the array, an export that shrank) has lost its data; so has one of a
    // failed array. Otherwise only the blocks that still fail are lost.
    if (same && why.code() != absl::StatusCode::kOutOfRange &&
        host_.CheckUsable(false).ok()) {
      return NarrowReadErrorLocked(sh, stripe, slot, chunk_offset, len, dst,
                                   why, failed);
    }
    if (same) {
      host_.RecordBackgroundError(
          host_.FailSlot(slot, std::string(why.message()), failed),
          absl::StrFormat("the failure of slot %d", slot));
    }
    return absl::UnavailableError(absl::StrFormat(
        "member %s (slot %d) failed reading at member offset %d (%s) and "
        "cannot be rebuilt from parity: %s",
        name, slot, sh.data_offset + member_offset, why.message(),
        rs.message()));
  }
  if (!same) return absl::OkStatus();
  if (why.code() == absl::StatusCode::kOutOfRange) {
    return host_.FailSlot(slot, std::string(why.message()), failed);
  }
  return RewriteLocked(sh, stripe, slot, chunk_offset, len, dst, why, failed);
}

absl::Status StripeReader::RewriteLocked(const Shape& sh, uint64_t stripe,
                                         int slot, uint64_t chunk_offset,
                                         size_t len, const uint8_t* data,
                                         const absl::Status& why,
                                         const Member* failed) {
  Slot& s = *slots_[slot];
  const std::string name = failed ? failed->Name() : "?";
  const uint64_t member_offset = stripe * sh.geo.chunk_bytes() + chunk_offset;
  // Opened read-only, switched read-only (uraid readonly), or refusing
  // writes after a background error: md writes nothing then either.
  if (read_only_ || !host_.CheckUsable(/*write=*/true).ok()) {
    reporter_.Log(
        LogLevel::kWarning,
        absl::StrFormat(
            "read error on %s (slot %d) at member offset %d: %s; served from "
            "parity (read-only: not rewritten)",
            name, slot, sh.data_offset + member_offset, why.message()));
    return absl::OkStatus();
  }
  // md rewrites the sector from parity: a medium error usually goes away
  // when the drive remaps it. Only a member that keeps failing is dropped.
  const SlotGens gens = slots_.CaptureGens();
  std::vector<MemberIo> w{MemberIo{MemberIo::kWrite,
                                   slot,
                                   const_cast<uint8_t*>(data),
                                   len,
                                   member_offset,
                                   {}}};
  io_.Submit(sh, w, &gens);
  if (w[0].stale) return absl::OkStatus();
  if (!w[0].status.ok()) {
    // md's rule for a failed rewrite: the range goes into the member's
    // bad-block list (the bytes were served from parity, which keeps them);
    // only a member that cannot record it is failed.
    // Either way the bytes served, from parity, are right.
    const std::string what =
        absl::StrFormat("read error (%s) and rewrite failed (%s)",
                        why.message(), w[0].status.message());
    if (host_
            .RecordBadBlocks(slot, false, failed,
                             sh.data_offset + member_offset, len, what)
            .ok()) {
      host_.WantReplacement(slot, failed, what);
    }
    return absl::OkStatus();
  }
  const uint32_t n = s.read_errors.fetch_add(1) + 1;
  counters_.read_errors_corrected.fetch_add(1, std::memory_order_relaxed);
  {
    Event e = MakeEvent("ReadErrorCorrected", name, slot);
    e.details.emplace_back(
        "offset", static_cast<int64_t>(sh.data_offset + member_offset));
    e.details.emplace_back("error", std::string(why.message()));
    e.details.emplace_back("corrected", int64_t{n});
    reporter_.Report(
        LogLevel::kWarning, std::move(e),
        absl::StrFormat(
            "read error on %s (slot %d) at member offset %d: %s; rebuilt "
            "from parity and rewritten (%d corrected on this member)",
            name, slot, sh.data_offset + member_offset, why.message(), n));
  }
  if (n > kMaxCorrectedReadErrors) {
    return host_.FailSlot(slot,
                          absl::StrFormat("%d read errors corrected, more than "
                                          "md's limit of %d",
                                          n, kMaxCorrectedReadErrors),
                          failed);
  }
  return absl::OkStatus();
}

absl::Status StripeReader::NarrowReadErrorLocked(
    const Shape& sh, uint64_t stripe, int slot, uint64_t chunk_offset,
    size_t len, uint8_t* dst, const absl::Status& why, const Member* failed) {
  // md works in 4 KiB rows: each block of the piece that still fails is
  // rebuilt alone if its row allows (and rewritten), else recorded bad.
  absl::StatusOr<std::vector<Block>> still =
      RereadBlocksLocked(sh, stripe, slot, chunk_offset, len, dst, failed);
  if (!still.ok()) {
    // The member answered nothing and has been failed. md then serves the
    // read as any degraded read, from the others, if the array still can:
    // the rebuild tried first (CorrectReadErrorLocked) counted this slot
    // as a source and may have failed only on another member that died
    // with it, which this rebuild fails in turn (RAID6: two gone).
    if (slots_.UsableAt(slot, stripe) || !host_.CheckUsable(false).ok()) {
      return still.status();
    }
    const absl::Status rs =
        ReconstructLocked(sh, stripe, slot, chunk_offset, len, dst);
    if (rs.ok()) return rs;
    return absl::Status(rs.code(),
                        absl::StrCat(still.status().message(),
                                     "; and from the others: ", rs.message()));
  }
  std::vector<Block> lost;
  for (const Block& b : *still) {
    uint8_t* at = dst + (b.offset - chunk_offset);
    if (ReconstructLocked(sh, stripe, slot, b.offset, b.len, at).ok()) {
      RETURN_IF_ERROR(
          RewriteLocked(sh, stripe, slot, b.offset, b.len, at, why, failed));
      continue;
    }
    RETURN_IF_ERROR(host_.CheckUsable(false));
    lost.push_back(b);
  }
  if (lost.empty()) return absl::OkStatus();
  return RecordBlocksLocked(sh, stripe, slot, lost, why, failed);
}

absl::Status StripeReader::ReadAroundBadLocked(const Shape& sh, uint64_t stripe,
                                               int slot, uint64_t chunk_offset,
                                               size_t len, uint8_t* dst) {
  const uint64_t base = sh.data_offset + stripe * sh.geo.chunk_bytes();
  const uint64_t end = chunk_offset + len;
  uint64_t x = chunk_offset;
  for (const BadBlock& b : slots_[slot]->bad.Find(
           (base + x) / 512, (base + end + 511) / 512 - (base + x) / 512)) {
    const uint64_t bx = std::max(b.sector * 512, base + x) - base;
    const uint64_t by =
        std::min((b.sector + b.sectors) * 512, base + end) - base;
    if (bx > x) {
      RETURN_IF_ERROR(ReadPieceDegraded(sh, stripe, slot, x, bx - x,
                                        dst + (x - chunk_offset)));
    }
    // The listed range: never read from the member (md's rule).
    RETURN_IF_ERROR(ReconstructLocked(sh, stripe, slot, bx, by - bx,
                                      dst + (bx - chunk_offset)));
    x = by;
  }
  if (x < end) {
    RETURN_IF_ERROR(ReadPieceDegraded(sh, stripe, slot, x, end - x,
                                      dst + (x - chunk_offset)));
  }
  return absl::OkStatus();
}

bool StripeReader::StripeHasBadBlocks(const Shape& sh, uint64_t stripe) const {
  const uint64_t C = sh.geo.chunk_bytes();
  for (int i = 0; i < sh.geo.raid_disks(); ++i) {
    if (slots_.BadAt(i, sh.data_offset + stripe * C, C)) return true;
  }
  return false;
}

absl::Status StripeReader::ReadPieceLocked(const Shape& sh, const Location& loc,
                                           size_t len, uint8_t* dst) {
  RETURN_IF_ERROR(
      ReadPieceDegraded(sh, loc.stripe, loc.disk, loc.chunk_offset, len, dst));
  // Lay newer cached bytes over what the members hold.
  OverlayCacheLocked(sh, loc, len, dst);
  return absl::OkStatus();
}

absl::Status StripeReader::ReadPieceDegraded(const Shape& sh, uint64_t stripe,
                                             int slot, uint64_t chunk_offset,
                                             size_t len, uint8_t* dst) {
  const uint64_t member_offset = stripe * sh.geo.chunk_bytes() + chunk_offset;
  for (int attempt = 0;; ++attempt) {
    const SlotGens gens = slots_.CaptureGens();
    if (!slots_.UsableAt(slot, stripe)) break;
    if (slots_.BadAt(slot, sh.data_offset + member_offset, len)) {
      return ReadAroundBadLocked(sh, stripe, slot, chunk_offset, len, dst);
    }
    std::vector<MemberIo> ios{
        MemberIo{MemberIo::kRead, slot, dst, len, member_offset, {}}};
    io_.Submit(sh, ios, &gens);
    if (ios[0].status.ok()) return absl::OkStatus();
    if (ios[0].stale && attempt < 8) continue;  // members changed: again
    return CorrectReadErrorLocked(sh, stripe, slot, chunk_offset, len, dst,
                                  ios[0].status, ios[0].used);
  }
  return ReconstructLocked(sh, stripe, slot, chunk_offset, len, dst);
}

absl::Status StripeReader::ReconstructLocked(const Shape& sh, uint64_t stripe,
                                             int slot, uint64_t chunk_offset,
                                             size_t len, uint8_t* dst,
                                             bool record_sources) {
  RETURN_IF_ERROR(host_.CheckUsable(false));
  const uint64_t member_offset = stripe * sh.geo.chunk_bytes() + chunk_offset;
  // Generations first, health second: a member that changes hands after
  // the check is caught by the generation (its reads come back stale).
  const SlotGens gens = slots_.CaptureGens();
  // RAID6 rebuilds beside one other slot that cannot help (gone, or bad
  // in these rows); RAID5 beside none.
  int also = -1;
  for (int i = 0; i < sh.geo.raid_disks(); ++i) {
    if (i == slot || slots_.UsableAt(i, stripe)) continue;
    if (also < 0 && sh.geo.parity_disks() == 2) {
      also = i;
      continue;
    }
    return absl::UnavailableError(absl::StrFormat(
        "cannot reconstruct slot %d at member offset %d: member in slot %d "
        "is also gone%s",
        slot, sh.data_offset + member_offset, i,
        also >= 0 ? absl::StrFormat(", and so is slot %d's", also) : ""));
  }
  for (int i = 0; i < sh.geo.raid_disks(); ++i) {
    if (i == slot || i == also ||
        !slots_.BadAt(i, sh.data_offset + member_offset, len)) {
      continue;
    }
    if (also < 0 && sh.geo.parity_disks() == 2) {
      also = i;
      continue;
    }
    return absl::DataLossError(absl::StrFormat(
        "cannot reconstruct slot %d at member offset %d (%d bytes): slot "
        "%d has a recorded bad block in those rows%s",
        slot, sh.data_offset + member_offset, len, i,
        also >= 0 ? absl::StrFormat(" and slot %d cannot help either", also)
                  : ""));
  }
  const ReadPlan plan =
      PlanReconstruct(sh.geo, stripe, slot, chunk_offset, len, also);
  ScratchOrOwned scratch(ScratchUser::kReconstruct, plan.scratch_bytes);
  std::vector<MemberIo> ios = PlannedMemberIos(sh, MemberIo::kRead, stripe,
                                               plan.reads, scratch.data(), dst);
  io_.Submit(sh, ios, &gens);
  if (std::any_of(ios.begin(), ios.end(),
                  [](const MemberIo& io) { return io.stale; })) {
    // A member was swapped under us (replace hand-over): read again.
    return ReconstructLocked(sh, stripe, slot, chunk_offset, len, dst,
                             record_sources);
  }
  // A source that fails to read cannot be corrected here: the row's other
  // copy is the one being rebuilt. Its blocks that still fail are recorded
  // bad (record_sources), or left to the caller, which narrows first; a
  // member that answers nothing, or lost the range, is failed as before.
  absl::Status lost;
  for (MemberIo& io : ios) {
    if (io.status.ok() || io.kind != MemberIo::kRead ||
        io.status.code() == absl::StatusCode::kOutOfRange ||
        !slots_.UsableAt(io.slot, stripe)) {
      continue;
    }
    if (!record_sources) {
      return absl::DataLossError(absl::StrFormat(
          "cannot reconstruct slot %d at member offset %d: slot %d failed "
          "reading too: %s",
          slot, sh.data_offset + member_offset, io.slot, io.status.message()));
    }
    absl::Status rs = RecordUnreadableLocked(
        sh, stripe, io.slot, io.offset - stripe * sh.geo.chunk_bytes(), io.len,
        static_cast<uint8_t*>(io.buf), io.status, io.used);
    if (rs.ok()) {
      io.status = absl::OkStatus();  // read the second time
    } else if (lost.ok()) {
      lost = rs;
    }
  }
  // A source that failed here and was failed for it (it stopped answering)
  // was usable when planned: RAID6 may still rebuild the rows from the
  // others, so plan again without it (the checks above refuse once too
  // many are gone; each retry needs a newly failed slot, so it ends).
  const auto source_failed = [&] {
    if (sh.geo.parity_disks() < 2) return false;  // RAID5: nothing left
    for (const MemberIo& io : ios) {
      if (!io.status.ok() && !io.to_replacement &&
          !slots_.UsableAt(io.slot, stripe)) {
        return true;
      }
    }
    return false;
  };
  if (!lost.ok()) {
    if (source_failed() && host_.CheckUsable(false).ok()) {
      return ReconstructLocked(sh, stripe, slot, chunk_offset, len, dst,
                               record_sources);
    }
    return absl::DataLossError(
        absl::StrFormat("cannot reconstruct slot %d at member offset %d: %s",
                        slot, sh.data_offset + member_offset, lost.message()));
  }
  bool slot_failed;
  absl::Status st = host_.AbsorbFailures(ios, &slot_failed);
  if (!st.ok()) {
    if (source_failed() && host_.CheckUsable(false).ok()) {
      return ReconstructLocked(sh, stripe, slot, chunk_offset, len, dst,
                               record_sources);
    }
    return absl::UnavailableError(
        absl::StrFormat("cannot reconstruct slot %d at member offset %d: %s",
                        slot, sh.data_offset + member_offset, st.message()));
  }
  ComputeRead(plan, scratch.data(), dst);
  counters_.reconstructions.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status StripeReader::ReconstructPairLocked(const Shape& sh,
                                                 uint64_t stripe, int a, int b,
                                                 uint64_t chunk_offset,
                                                 size_t len, uint8_t* dst,
                                                 size_t b_at) {
  if (a == b) return absl::FailedPreconditionError("one slot, not a pair");
  RETURN_IF_ERROR(host_.CheckUsable(false));
  const uint64_t member_offset = stripe * sh.geo.chunk_bytes() + chunk_offset;
  const SlotGens gens = slots_.CaptureGens();  // before the health (as above)
  const auto helps = [&](int i) {
    return slots_.UsableAt(i, stripe) &&
           !slots_.BadAt(i, sh.data_offset + member_offset, len);
  };
  for (int i = 0; i < sh.geo.raid_disks(); ++i) {
    if (i == a || i == b) continue;
    if (!helps(i)) {
      return absl::FailedPreconditionError(
          absl::StrFormat("slot %d cannot help at member offset %d", i,
                          sh.data_offset + member_offset));
    }
  }
  ReadPlan plan;
  if (sh.geo.parity_disks() == 2) {
    plan = PlanReconstructPair(sh.geo, stripe, a, b, chunk_offset, len, b_at);
  } else if (helps(a) != helps(b)) {
    // One parity: the pair's serving slot is read, the other rebuilt.
    plan = helps(a) ? PlanReadAndRebuild(sh.geo, stripe, a, 0, b, b_at,
                                         chunk_offset, len)
                    : PlanReadAndRebuild(sh.geo, stripe, b, b_at, a, 0,
                                         chunk_offset, len);
  } else {
    return absl::FailedPreconditionError(absl::StrFormat(
        "slots %d and %d: one must serve the stripe, the other be rebuilt", a,
        b));
  }
  ScratchOrOwned scratch(ScratchUser::kReconstruct, plan.scratch_bytes);
  std::vector<MemberIo> ios = PlannedMemberIos(sh, MemberIo::kRead, stripe,
                                               plan.reads, scratch.data(), dst);
  io_.Submit(sh, ios, &gens);
  for (const MemberIo& io : ios) {
    if (io.stale) return absl::AbortedError("a member changed hands");
    if (!io.status.ok()) return io.status;
  }
  ComputeRead(plan, scratch.data(), dst);
  counters_.reconstructions.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status StripeReader::ReadStripeDegradedLocked(
    const Shape& sh, uint64_t stripe, std::span<const ReadPiece> pieces,
    std::span<const bool> have, uint8_t* client) {
  // Every surviving chunk the stripe's pieces and the rebuild need is read
  // once: a degraded sequential read costs one member byte per byte. Under
  // the stripe lock, so data and parity come from the same write. Anything
  // but a clean run (a slot changing hands, a read error) falls back to the
  // piece-at-a-time path, which corrects or reports it.
  const SlotGens gens = slots_.CaptureGens();  // before the health (as above)
  int missing, second;
  const int n_missing =
      slots_.MissingAt(sh.geo.raid_disks(), stripe, &missing, &second);
  if (missing >= 0 && n_missing <= sh.geo.parity_disks() &&
      host_.CheckUsable(false).ok() && !StripeHasBadBlocks(sh, stripe)) {
    const ReadPlan plan =
        PlanDegradedRead(sh.geo, stripe, pieces, missing, second);
    ScratchOrOwned scratch(ScratchUser::kReconstruct, plan.scratch_bytes);
    std::vector<MemberIo> planned = PlannedMemberIos(
        sh, MemberIo::kRead, stripe, plan.reads, scratch.data(), client);
    const uint64_t started = io_.writes_started();
    const bool quiet = io_.writes_finished() == started;
    const uint8_t* const scratch_end = scratch.data() + plan.scratch_bytes;
    const auto in_scratch = [&](const MemberIo& io) {
      const auto* at = static_cast<const uint8_t*>(io.buf);
      return at >= scratch.data() && at < scratch_end;
    };
    const auto is_parity = [&](int slot) {
      return slot == sh.geo.ParityDisk(stripe) || slot == sh.geo.QDisk(stripe);
    };
    // What is not read here: the pieces the caller read already (`have`,
    // in the client's buffer where the plan would read them), and rows
    // the survivor cache holds (lent, not copied: the rebuild XORs from
    // them); rows another request is reading right now are awaited after
    // this read (`claimed`). Extra survivor rows are claimed (the request
    // that asks for them will want them) and read into buffers of their
    // own, which the rebuild XORs from and the cache keeps as they are:
    // no scratch page is touched and no row copied for either.
    const uint32_t lost_data = LostDataChunks(sh.geo, stripe, missing, second);
    std::vector<MemberIo> ios, claimed;
    std::vector<uint64_t> tickets;
    std::vector<ScratchRow> elsewhere;
    std::vector<SurvivorCache::Held> lent;
    std::vector<SurvivorCache::Rows> fetched;
    std::deque<AlignedBuffer> own;  // stable addresses as it grows
    // A row the cache holds, for `io`: lent to the rebuild where the plan
    // reads it into scratch, copied where it reads into the client's buffer.
    const auto use_held = [&](const MemberIo& io, SurvivorCache::Held got) {
      const auto* at = static_cast<const uint8_t*>(io.buf);
      if (in_scratch(io)) {
        elsewhere.push_back(ScratchRow{
            static_cast<uint64_t>(at - scratch.data()), io.len, got.data});
        lent.push_back(std::move(got));
      } else {
        std::memcpy(io.buf, got.data, io.len);
      }
    };
    for (MemberIo& io : planned) {
      const auto* at = static_cast<const uint8_t*>(io.buf);
      bool held = false;
      for (size_t k = 0; k < pieces.size() && !held; ++k) {
        const uint8_t* p = client + pieces[k].client;
        held = have[k] && at >= p && at < p + (pieces[k].y - pieces[k].x);
      }
      if (held) continue;
      const uint64_t x = io.offset - stripe * sh.geo.chunk_bytes();
      const bool claim = quiet && !is_parity(io.slot) && in_scratch(io);
      if (!is_parity(io.slot) && (claim || !survivors_.empty())) {
        uint64_t ticket = 0;
        SurvivorCache::Held got;
        const SurvivorCache::Lookup found =
            survivors_.Find(sh.id, stripe, started, io.slot, x, io.len, nullptr,
                            claim ? &ticket : nullptr, &got);
        if (found == SurvivorCache::Lookup::kHit) {
          use_held(io, std::move(got));
          continue;
        }
        if (found == SurvivorCache::Lookup::kClaimed) {
          claimed.push_back(io);
          continue;
        }
        if (ticket != 0) {
          tickets.push_back(ticket);
          auto row = std::make_shared<AlignedBuffer>(io.len);
          elsewhere.push_back(ScratchRow{
              static_cast<uint64_t>(at - scratch.data()), io.len, row->data()});
          io.buf = row->data();
          fetched.push_back(
              SurvivorCache::Rows{io.slot, x, std::move(row), lost_data});
          ios.push_back(io);
          continue;
        }
      }
      // Any other row of a single-parity rebuild (parity above all) goes
      // into a block of its own from the recycled list, not into the
      // scratch: a request thread's scratch is allocated per call, and
      // one of more than 4 MiB (a stripe of 1 MiB chunks) comes fresh
      // from the kernel, page-faulted in row by row (perf, 8 x 1M chunks
      // read 1M qd8 just after a bench freed its memory, when this VM's
      // faults are dearest: a tenth of the plugin's CPU in faults).
      if (!plan.pq && in_scratch(io)) {
        own.emplace_back(io.len);
        elsewhere.push_back(
            ScratchRow{static_cast<uint64_t>(at - scratch.data()), io.len,
                       own.back().data()});
        io.buf = own.back().data();
      }
      ios.push_back(io);
    }
    io_.Submit(sh, ios, &gens);
    bool ok = std::all_of(ios.begin(), ios.end(),
                          [](const MemberIo& io) { return io.status.ok(); });
    // The extra rows, for the request of the stripe that asks for them,
    // when no write was in flight or began while they were read. The
    // rebuild keeps its own hold of them (`lent`).
    if (ok && !fetched.empty() && io_.writes_started() == started) {
      for (const SurvivorCache::Rows& r : fetched) {
        lent.push_back(SurvivorCache::Held{r.data, r.data->data()});
      }
      survivors_.Put(sh.id, stripe, started, std::move(fetched));
    }
    // Released before waiting for others' claims (survivor_cache.h).
    for (const uint64_t t : tickets) survivors_.Release(t);
    if (ok && !claimed.empty()) {
      // Rows another request was reading: once its read is over, lent by
      // the cache like the rows found there above, not copied into the
      // scratch; read here when it could not keep them. (perf, 8 x 1M
      // chunks read 1M qd8: that copy and its page faults were 18% of the
      // plugin's CPU when reads were slow and rebuilds often found their
      // rows claimed, 1% on a quiet machine with warm memory.)
      TakeAwaited(sh, started, claimed, nullptr, use_held);
      io_.Submit(sh, claimed, &gens);
      ok = std::all_of(claimed.begin(), claimed.end(),
                       [](const MemberIo& io) { return io.status.ok(); });
    }
    if (ok) {
      ComputeRead(plan, scratch.data(), client, elsewhere);
      if (plan.rebuild) {
        counters_.reconstructions.fetch_add(1, std::memory_order_relaxed);
      }
      for (const ReadPiece& p : pieces) {
        OverlayCacheLocked(sh, PieceLocation(sh, stripe, p), p.y - p.x,
                           client + p.client);
      }
      return absl::OkStatus();
    }
  }
  for (const ReadPiece& p : pieces) {
    RETURN_IF_ERROR(ReadPieceLocked(sh, PieceLocation(sh, stripe, p), p.y - p.x,
                                    client + p.client));
  }
  return absl::OkStatus();
}

Location StripeReader::PieceLocation(const Shape& sh, uint64_t stripe,
                                     const ReadPiece& p) {
  Location loc;
  loc.stripe = stripe;
  loc.data_index = p.data_index;
  loc.disk = sh.geo.DataDisk(stripe, p.data_index);
  loc.parity_disk = sh.geo.ParityDisk(stripe);
  loc.chunk_offset = p.x;
  loc.member_offset = stripe * sh.geo.chunk_bytes() + p.x;
  return loc;
}

}  // namespace uraid
