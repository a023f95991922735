// SPDX-License-Identifier: MIT
// PPL area placement and initialisation (see meta/ppl_log.h).

#include "meta/ppl_log.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
#include "base/status_macros.h"
#include "format/ppl_format.h"
#include "parity/parity.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {

// The kernel's minimum: a header and one stripe_head's page of partial
// parity (ppl_validate_rdev).
constexpr uint64_t kMinAreaBytes = kPplHeaderBytes + 4096;

// Marks in `into` every slot `from` marks, growing `into` as needed.
void MarkAll(const std::vector<bool>& from, std::vector<bool>& into) {
  if (into.size() < from.size()) into.resize(from.size());
  for (size_t i = 0; i < from.size(); ++i) {
    if (from[i]) into[i] = true;
  }
}

}  // namespace

absl::StatusOr<PplArea> PplAreaOf(const Superblock& sb) {
  if (!sb.has_ppl()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "feature_map 0x%x has no PPL: ppl.offset and ppl.size are not set",
        sb.feature_map));
  }
  const int64_t start = static_cast<int64_t>(sb.super_offset) + sb.ppl_offset();
  const uint64_t size = uint64_t{sb.ppl_size()} * kSectorBytes;
  if (size < kMinAreaBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ppl.size %u sectors is below the %u bytes of a header and one row",
        sb.ppl_size(), kMinAreaBytes));
  }
  // The superblock's own 4 KiB block, and the data, are off limits.
  const int64_t sb_end = static_cast<int64_t>(sb.super_offset) + 8;
  const int64_t end = start + sb.ppl_size();
  const bool overlaps_sb =
      start < sb_end && end > static_cast<int64_t>(sb.super_offset);
  const bool overlaps_data =
      end > static_cast<int64_t>(sb.data_offset) &&
      start < static_cast<int64_t>(sb.data_offset + sb.data_size);
  if (start < 0 || overlaps_sb || overlaps_data) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ppl.offset %d sectors (area %d..%d) overlaps the superblock at "
        "sector %u or the data at %u..%u",
        sb.ppl_offset(), start, end, sb.super_offset, sb.data_offset,
        sb.data_offset + sb.data_size));
  }
  return PplArea{static_cast<uint64_t>(start) * kSectorBytes, size};
}

absl::Status InitPplArea(Member& member, const Superblock& sb) {
  ASSIGN_OR_RETURN(const PplArea area, PplAreaOf(sb));
  auto named = [&](const absl::Status& st) {
    return absl::Status(st.code(),
                        absl::StrFormat("%s: writing the PPL area: %s",
                                        member.Name(), st.message()));
  };
  // Zero first, so no older log (of another array, or of md's
  // MULTIPLE_PPLS units) survives behind the new header.
  constexpr size_t kStep = 256 * 1024;
  AlignedBuffer zeros(std::min<uint64_t>(kStep, area.size_bytes), true);
  for (uint64_t off = kPplHeaderBytes; off < area.size_bytes;) {
    const size_t n = std::min<uint64_t>(zeros.size(), area.size_bytes - off);
    if (absl::Status st =
            member.Write(zeros.data(), n, area.offset_bytes + off);
        !st.ok()) {
      return named(st);
    }
    off += n;
  }
  PplHeader empty;
  empty.signature = PplSignature(sb.set_uuid);
  AlignedBuffer buf(kPplHeaderBytes);
  EncodePplHeaderTo(empty, std::span<uint8_t>(buf.data(), buf.size()));
  if (absl::Status st = member.Write(buf.data(), buf.size(), area.offset_bytes);
      !st.ok()) {
    return named(st);
  }
  if (absl::Status st = member.Flush(); !st.ok()) return named(st);
  return absl::OkStatus();
}

PplLog::PplLog(const Geometry& geo, PplArea area, uint32_t signature)
    : geo_(geo), area_(area), signature_(signature) {
  for (int i = 0; i < geo.raid_disks(); ++i) {
    slots_.push_back(std::make_unique<Slot>());
  }
}

absl::StatusOr<std::shared_ptr<PplLog>> PplLog::Make(const Geometry& geo,
                                                     const Superblock& sb) {
  ASSIGN_OR_RETURN(const PplArea area, PplAreaOf(sb));
  // One stripe's partial parity must fit the area after the header: at
  // most a chunk (the rectangles of one write share no rows).
  if (kPplHeaderBytes + geo.chunk_bytes() > area.size_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ppl.size %u sectors cannot hold a %u-byte chunk's partial parity "
        "after the header (uraid logs a stripe write at once; chunks up to "
        "%u bytes)",
        sb.ppl_size(), geo.chunk_bytes(), area.size_bytes - kPplHeaderBytes));
  }
  return std::shared_ptr<PplLog>(
      new PplLog(geo, area, PplSignature(sb.set_uuid)));
}

PplLog::Hold::Hold(Hold&& o) noexcept
    : log_(std::move(o.log_)),
      slot_(o.slot_),
      alone_(o.alone_),
      wrote_(std::move(o.wrote_)) {
  o.log_ = nullptr;
}

PplLog::Hold& PplLog::Hold::operator=(Hold&& o) noexcept {
  if (this != &o) {
    Release();
    log_ = std::move(o.log_);
    slot_ = o.slot_;
    alone_ = o.alone_;
    wrote_ = std::move(o.wrote_);
    o.log_ = nullptr;
  }
  return *this;
}

void PplLog::Hold::Wrote(int slot) {
  if (wrote_.size() <= static_cast<size_t>(slot)) wrote_.resize(slot + 1);
  wrote_[slot] = true;
}

void PplLog::Hold::Release() {
  if (log_ == nullptr) return;
  {
    Slot& s = *log_->slots_[slot_];
    MutexLock lock(&s.mu);
    MarkAll(wrote_, s.unflushed);
    --s.holds;
  }
  log_ = nullptr;  // may free the log: its slot's lock is released above
  wrote_.clear();
}

absl::StatusOr<PplLog::Hold> PplLog::LogStripe(
    uint64_t stripe, uint64_t a, uint64_t b, const WritePlan& plan,
    const uint8_t* scratch, const uint8_t* client, Member& parity_member,
    bool parity_read, PplFlush flush) {
  const int slot = plan.parity_slot;
  Waiter me{stripe};
  me.parity_read = parity_read;
  ASSIGN_OR_RETURN(
      me.log, BuildPplStripeLog(geo_, stripe, a, b, plan, scratch, client));
  Slot& s = *slots_[slot];
  MutexLock lock(&s.mu);
  s.queue.push_back(&me);
  while (true) {
    // Either this stripe's batch has gone out, or the slot is free and
    // this thread leads the next batch (whoever wakes first leads; the
    // batch is the queue's front, which may or may not hold its leader).
    auto ready = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return me.done || (!s.writing && s.holds == 0);
    };
    s.mu.Await(Condition(&ready));
    if (me.done) break;
    std::vector<Waiter*> batch;
    uint64_t pp_bytes = 0;
    size_t entries = 0;
    for (Waiter* w : s.queue) {
      const uint64_t pp = w->log.partial_parity.size();
      const size_t n = w->log.entries.size();
      if (!batch.empty() &&
          (entries + n > kPplMaxEntries ||
           kPplHeaderBytes + pp_bytes + pp > area_.size_bytes)) {
        break;
      }
      batch.push_back(w);
      pp_bytes += pp;
      entries += n;
    }
    s.queue.erase(s.queue.begin(), s.queue.begin() + batch.size());
    const uint64_t generation = ++s.generation;
    std::vector<bool> unflushed;
    unflushed.swap(s.unflushed);
    s.writing = true;
    s.mu.Unlock();
    // The last batch's writes are durable before this header drops its
    // entries.
    absl::Status st = absl::OkStatus();
    if (std::find(unflushed.begin(), unflushed.end(), true) !=
        unflushed.end()) {
      st = flush(unflushed);
    }
    if (st.ok()) st = WriteBatch(generation, batch, parity_member, s.out);
    s.mu.Lock();
    if (!st.ok()) {
      // Not known durable: the next batch tries them again.
      MarkAll(unflushed, s.unflushed);
    }
    s.writing = false;
    // Every stripe of a logged batch holds the slot until its writes are
    // done (the next batch's leader flushes them); a failed batch holds
    // nothing (none of it goes on).
    s.holds = st.ok() ? static_cast<int>(batch.size()) : 0;
    for (Waiter* w : batch) {
      // Each its own copy, not a share of `st`'s: waiters drop theirs on
      // their own threads, and a shared Status frees its message by a
      // reference count that ThreadSanitizer cannot see (Debian's libabsl
      // is not instrumented), so it reported the last drop as a race.
      w->status = absl::Status(st.code(), st.message());
      w->done = true;
      w->alone = batch.size() == 1;
    }
  }
  if (!me.status.ok()) {
    return absl::Status(
        me.status.code(),
        absl::StrFormat("%s: writing the partial parity log "
                        "of stripe %u: %s",
                        parity_member.Name(), stripe, me.status.message()));
  }
  return Hold(shared_from_this(), slot, me.alone);
}

size_t PplLog::Waiting(int slot) const {
  const Slot& s = *slots_[slot];
  MutexLock lock(&s.mu);
  return s.queue.size();
}

absl::Status PplLog::WriteBatch(uint64_t generation,
                                const std::vector<Waiter*>& batch,
                                Member& member, AlignedBuffer& out) {
  PplHeader h;
  h.signature = signature_;
  h.generation = generation;
  uint64_t pp_bytes = 0;
  bool area_read = false;
  for (const Waiter* w : batch) {
    h.entries.insert(h.entries.end(), w->log.entries.begin(),
                     w->log.entries.end());
    pp_bytes += w->log.partial_parity.size();
    area_read = area_read || w->parity_read;
  }
  const size_t len = kPplHeaderBytes + pp_bytes;
  if (out.size() < len) out = AlignedBuffer(len);
  EncodePplHeaderTo(h, std::span<uint8_t>(out.data(), kPplHeaderBytes));
  uint8_t* at = out.data() + kPplHeaderBytes;
  for (const Waiter* w : batch) {
    const std::vector<uint8_t>& pp = w->log.partial_parity;
    if (!pp.empty()) std::memcpy(at, pp.data(), pp.size());
    at += pp.size();
  }
  // FUA, as md writes its io_unit header: the members the batches before
  // wrote were flushed by the caller. A Rewrite when a stripe of the batch
  // has just read this member past the area (LogStripe's `parity_read`).
  return area_read ? member.RewriteFua(out.data(), len, area_.offset_bytes)
                   : member.WriteFua(out.data(), len, area_.offset_bytes);
}

absl::StatusOr<PplRecovery> RecoverPpl(
    const Geometry& geo, const Superblock& sb, uint64_t data_offset,
    const std::vector<std::shared_ptr<Member>>& members) {
  ASSIGN_OR_RETURN(const PplArea area, PplAreaOf(sb));
  const uint32_t signature = PplSignature(sb.set_uuid);
  const bool multiple = (sb.feature_map & kFeatureMultiplePpls) != 0;
  const uint64_t C = geo.chunk_bytes();
  PplRecovery out;
  auto named = [](const Member& m, const absl::Status& st) {
    return absl::Status(st.code(), absl::StrFormat("%s: ppl recovery: %s",
                                                   m.Name(), st.message()));
  };
  for (int s = 0; s < geo.raid_disks(); ++s) {
    Member* log_member = members[s].get();
    if (log_member == nullptr) continue;
    AlignedBuffer raw(area.size_bytes);
    if (absl::Status st =
            log_member->Read(raw.data(), raw.size(), area.offset_bytes);
        !st.ok()) {
      return named(*log_member, st);
    }
    std::span<const uint8_t> bytes(raw.data(), raw.size());
    absl::StatusOr<PplUnit> unit =
        FindNewestPplHeader(bytes, signature, multiple);
    if (!unit.ok()) {
      ++out.mismatches;
      out.problems.push_back(absl::StrFormat("%s: %s", log_member->Name(),
                                             unit.status().message()));
      continue;
    }
    for (size_t i = 0; i < unit->header.entries.size(); ++i) {
      const PplEntry& e = unit->header.entries[i];
      absl::StatusOr<PplRect> rect = PplRectOf(geo, e);
      absl::Status bad = rect.status();
      if (bad.ok() && e.parity_disk != static_cast<uint32_t>(s)) {
        bad = absl::DataLossError(absl::StrFormat(
            "ppl entry %d parity_disk %u is in the log of slot %d", i,
            e.parity_disk, s));
      }
      const uint64_t pp_at = PplEntryDataOffset(*unit, i);
      if (bad.ok() && pp_at + e.pp_size > bytes.size()) {
        bad = absl::DataLossError(absl::StrFormat(
            "ppl entry %d pp_size %u runs past the ppl area", i, e.pp_size));
      }
      if (bad.ok() && Crc32c(bytes.subspan(pp_at, e.pp_size)) != e.checksum) {
        bad = absl::DataLossError(absl::StrFormat(
            "ppl entry %d checksum 0x%08x does not match its partial parity", i,
            e.checksum));
      }
      if (!bad.ok()) {
        ++out.mismatches;
        out.problems.push_back(
            absl::StrFormat("%s: %s", log_member->Name(), bad.message()));
        continue;
      }
      const int lo_k = rect->full_stripe ? 0 : rect->first;
      const int hi_k = rect->full_stripe ? geo.data_disks() - 1 : rect->last;
      bool all_present = true;
      for (int k = lo_k; k <= hi_k; ++k) {
        all_present &= members[geo.DataDisk(rect->stripe, k)] != nullptr;
      }
      if (!all_present) {
        ++out.skipped_entries;  // md: "data member disk missing"
        continue;
      }
      const uint64_t rows = rect->row_hi - rect->row_lo;
      const uint64_t at = data_offset + rect->stripe * C + rect->row_lo;
      AlignedBuffer parity(rows, true), data(rows);
      for (int k = lo_k; k <= hi_k; ++k) {
        Member& m = *members[geo.DataDisk(rect->stripe, k)];
        if (absl::Status st = m.Read(data.data(), rows, at); !st.ok()) {
          return named(m, st);
        }
        XorAccumulate(parity.data(), data.data(), rows);
      }
      if (!rect->full_stripe) {
        XorAccumulate(parity.data(), bytes.data() + pp_at, rows);
      }
      if (absl::Status st = log_member->Write(parity.data(), rows, at);
          !st.ok()) {
        return named(*log_member, st);
      }
      ++out.recovered_entries;
    }
    if (absl::Status st = log_member->Flush(); !st.ok()) {
      return named(*log_member, st);
    }
  }
  // The replayed logs are done with: each member starts a fresh one.
  for (const auto& m : members) {
    if (m != nullptr) RETURN_IF_ERROR(InitPplArea(*m, sb));
  }
  return out;
}

}  // namespace uraid
