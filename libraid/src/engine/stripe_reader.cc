// SPDX-License-Identifier: MIT
// The read half of the stripe engine (stripe_reader.h).
#include "engine/stripe_reader.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
#include "base/status_macros.h"
#include "parity/parity.h"

namespace uraid {

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
  // path. Pieces of a stripe that has lost a data chunk go together, under the
  // stripe's lock, so the stripe's surviving chunks are read once for the
  // client and the rebuild both, and once for two requests that share the
  // stripe: a sequential reader's requests run at once (qd8) and end
  // inside stripes, the one that covers the lost chunk rebuilding it from
  // rows the other asked for. Whichever takes the lock first reads the
  // rows and keeps them (the survivor cache); the other finds them there.
  // (Healthy pieces of such a stripe used to be read unlocked beside the
  // other request's rebuild: 1.11 member bytes per byte at 1 MiB.) A stripe
  // whose lost chunk is its parity needs no rebuild and stays unlocked.
  // Pieces come in stripe order: the degraded stripes, ascending.
  std::vector<uint64_t> lost;
  for (const Piece& p : pieces) {
    if (!lost.empty() && lost.back() == p.loc.stripe) continue;
    int m, m2;
    slots_.MissingAt(sh.geo.raid_disks(), p.loc.stripe, &m, &m2);
    for (const int s : {m, m2}) {
      if (s >= 0 && geo.DataIndex(p.loc.stripe, s) >= 0) {
        lost.push_back(p.loc.stripe);
        break;
      }
    }
  }
  std::vector<bool> degraded(pieces.size(), false);
  for (size_t i = 0; i < pieces.size(); ++i) {
    degraded[i] =
        std::binary_search(lost.begin(), lost.end(), pieces[i].loc.stripe);
  }
  std::vector<MemberIo> ios;
  std::vector<size_t> io_piece;
  std::vector<bool> slow(pieces.size(), false);
  const SlotGens gens = slots_.CaptureGens();
  // md's rule: no bypass read of a range with a recorded bad block. One
  // look per request while every list is empty.
  const bool any_bad = slots_.AnyBad();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (degraded[i]) continue;
    if (slots_.UsableAt(p.loc.disk, p.loc.stripe) &&
        !cache_.MayContain(p.loc.stripe) &&
        !(any_bad &&
          slots_.BadAt(p.loc.disk, sh.data_offset + p.loc.member_offset,
                       p.len))) {
      ios.push_back(MemberIo{
          MemberIo::kRead, p.loc.disk, p.dst, p.len, p.loc.member_offset, {}});
      io_piece.push_back(i);
    } else {
      slow[i] = true;
    }
  }
  io_.Submit(sh, ios, &gens);
  std::vector<absl::Status> errors(pieces.size());
  std::vector<const Member*> failed(pieces.size(), nullptr);
  for (size_t j = 0; j < ios.size(); ++j) {
    if (ios[j].status.ok()) continue;
    // A stale read (the slot changed members) is redone under the lock;
    // only a real error calls for correction.
    if (!ios[j].stale) {
      errors[io_piece[j]] = ios[j].status;
      failed[io_piece[j]] = ios[j].used;
    }
    slow[io_piece[j]] = true;
  }
  for (size_t i = 0; i < pieces.size();) {
    if (!degraded[i]) {
      ++i;
      continue;
    }
    const uint64_t stripe = pieces[i].loc.stripe;
    absl::InlinedVector<ReadPiece, 16> group;
    for (; i < pieces.size() && degraded[i] && pieces[i].loc.stripe == stripe;
         ++i) {
      const Piece& p = pieces[i];
      group.push_back(ReadPiece{p.loc.data_index, p.loc.chunk_offset,
                                p.loc.chunk_offset + p.len,
                                static_cast<uint64_t>(p.dst - out)});
    }
    StripeLock lock(&locks_, LockKey(sh, stripe));
    RETURN_IF_ERROR(ReadStripeDegradedLocked(sh, stripe, group, out));
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
  ASSIGN_OR_RETURN(
      std::vector<Block> still,
      RereadBlocksLocked(sh, stripe, slot, chunk_offset, len, dst, failed));
  std::vector<Block> lost;
  for (const Block& b : still) {
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
    uint8_t* client) {
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
    std::vector<MemberIo> ios = PlannedMemberIos(
        sh, MemberIo::kRead, stripe, plan.reads, scratch.data(), client);
    const uint64_t started = io_.writes_started();
    const bool quiet = io_.writes_finished() == started;
    // Rows an earlier request of a sequential reader already fetched (the
    // survivor cache) are not read again.
    if (!survivors_.empty()) {
      std::erase_if(ios, [&](const MemberIo& io) {
        return survivors_.Get(sh.id, stripe, started, io.slot,
                              io.offset - stripe * sh.geo.chunk_bytes(), io.len,
                              static_cast<uint8_t*>(io.buf));
      });
    }
    io_.Submit(sh, ios, &gens);
    if (std::all_of(ios.begin(), ios.end(),
                    [](const MemberIo& io) { return io.status.ok(); })) {
      // Rows another request of the stripe needs, when no write was in
      // flight or began while they were read: a rebuild's extra survivor
      // rows (what the client did not ask for), or, when the pieces stop
      // short of the lost chunk, the client's own rows, which that
      // chunk's rebuild will want. Not when the cache gave some of them
      // (an entry is replaced whole, and it holds them already).
      const bool all_read = ios.size() == plan.reads.size();
      if (quiet && io_.writes_started() == started &&
          (plan.rebuild || all_read)) {
        std::vector<SurvivorCache::Rows> rows;
        for (const PlannedIo& io : plan.reads) {
          if (io.slot == sh.geo.ParityDisk(stripe) ||
              io.slot == sh.geo.QDisk(stripe) ||
              (plan.rebuild && io.ref.buffer != PlanRef::kScratch)) {
            continue;
          }
          const uint8_t* at =
              (io.ref.buffer == PlanRef::kScratch ? scratch.data() : client) +
              io.ref.offset;
          AlignedBuffer copy(io.len);
          std::memcpy(copy.data(), at, io.len);
          rows.push_back(
              SurvivorCache::Rows{io.slot, io.chunk_offset, std::move(copy)});
        }
        if (!rows.empty()) {
          survivors_.Put(sh.id, stripe, started, std::move(rows));
        }
      }
      ComputeRead(plan, scratch.data(), client);
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
