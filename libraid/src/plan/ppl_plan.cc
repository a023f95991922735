// SPDX-License-Identifier: MIT
// What md's PPL logs for a stripe write, and the inverse (plan/ppl_plan.h).

#include "plan/ppl_plan.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "parity/parity.h"
#include "uraid/superblock.h"

namespace uraid {
namespace {}  // namespace

std::vector<PplRect> PplRects(const Geometry& geo, uint64_t stripe, uint64_t a,
                              uint64_t b) {
  const uint64_t C = geo.chunk_bytes();
  if (a == 0 && b == geo.stripe_data_bytes()) {
    return {PplRect{stripe, 0, geo.data_disks() - 1, 0, C, true}};
  }
  const int d1 = static_cast<int>(a / C);
  const int d2 = static_cast<int>((b - 1) / C);
  const uint64_t o1 = a % C;
  const uint64_t e2 = (b - 1) % C + 1;
  if (d1 == d2) return {PplRect{stripe, d1, d1, o1, e2, false}};
  // Rows split where the first chunk's part starts and the last one's
  // ends; each band's data indexes are consecutive.
  std::vector<uint64_t> cuts = {0, o1, e2, C};
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<PplRect> rects;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const uint64_t lo = cuts[i], hi = cuts[i + 1];
    const int first = lo >= o1 ? d1 : d1 + 1;
    const int last = hi <= e2 ? d2 : d2 - 1;
    if (first <= last) rects.push_back({stripe, first, last, lo, hi, false});
  }
  return rects;
}

PplEntry PplEntryFor(const Geometry& geo, const PplRect& rect) {
  const uint64_t rows = rect.row_hi - rect.row_lo;
  PplEntry e;
  e.data_sector = (rect.stripe * geo.stripe_data_bytes() +
                   uint64_t(rect.first) * geo.chunk_bytes() + rect.row_lo) /
                  kSectorBytes;
  e.pp_size = rect.full_stripe ? 0 : static_cast<uint32_t>(rows);
  e.data_size = static_cast<uint32_t>(rows * (rect.last - rect.first + 1));
  e.parity_disk = static_cast<uint32_t>(geo.ParityDisk(rect.stripe));
  return e;
}

absl::StatusOr<PplRect> PplRectOf(const Geometry& geo, const PplEntry& e) {
  const uint64_t C = geo.chunk_bytes();
  const int D = geo.data_disks();
  if (e.data_sector >= geo.array_bytes() / kSectorBytes) {
    return absl::DataLossError(absl::StrFormat(
        "ppl entry data_sector %u is past the array's end (sector %u)",
        e.data_sector, geo.array_bytes() / kSectorBytes));
  }
  if (e.pp_size % kSectorBytes != 0 || e.data_size % kSectorBytes != 0 ||
      e.data_size == 0) {
    return absl::DataLossError(absl::StrFormat(
        "ppl entry pp_size %u / data_size %u: not whole non-zero sectors",
        e.pp_size, e.data_size));
  }
  const Location loc = geo.Map(e.data_sector * kSectorBytes);
  PplRect r;
  r.stripe = loc.stripe;
  r.first = loc.data_index;
  r.row_lo = loc.chunk_offset;
  uint64_t disks;
  if (e.pp_size == 0) {
    // A full-stripe write: md reads every data chunk from the stripe's
    // start (ppl_recover_entry with pp_size 0).
    if (r.first != 0 || e.data_size % (uint64_t(D) * kSectorBytes) != 0) {
      return absl::DataLossError(absl::StrFormat(
          "ppl entry without partial parity: data_sector %u is not a "
          "stripe's first data or data_size %u is not whole rows of %d "
          "chunks",
          e.data_sector, e.data_size, D));
    }
    r.full_stripe = true;
    disks = D;
  } else {
    if (e.data_size % e.pp_size != 0) {
      return absl::DataLossError(absl::StrFormat(
          "ppl entry data_size %u is not a multiple of pp_size %u", e.data_size,
          e.pp_size));
    }
    disks = e.data_size / e.pp_size;
  }
  const uint64_t rows =
      e.pp_size == 0 ? e.data_size / (uint64_t(D)) : e.pp_size;
  r.row_hi = r.row_lo + rows;
  if (r.row_hi > C) {
    return absl::DataLossError(absl::StrFormat(
        "ppl entry pp_size %u: rows %u..%u pass the %u-byte chunk", e.pp_size,
        r.row_lo, r.row_hi, C));
  }
  if (r.first + disks > static_cast<uint64_t>(D)) {
    return absl::DataLossError(absl::StrFormat(
        "ppl entry data_size %u: %u chunks from data index %d pass the "
        "stripe's %d",
        e.data_size, disks, r.first, D));
  }
  r.last = r.first + static_cast<int>(disks) - 1;
  if (e.parity_disk != static_cast<uint32_t>(geo.ParityDisk(r.stripe))) {
    return absl::DataLossError(absl::StrFormat(
        "ppl entry parity_disk %u is not stripe %u's parity slot %d",
        e.parity_disk, r.stripe, geo.ParityDisk(r.stripe)));
  }
  return r;
}

absl::StatusOr<PplStripeLog> BuildPplStripeLog(
    const Geometry& geo, uint64_t stripe, uint64_t a, uint64_t b,
    const WritePlan& plan, const uint8_t* scratch, const uint8_t* client) {
  const PlannedIo* parity = nullptr;
  for (const PlannedIo& io : plan.writes) {
    if (io.slot == plan.parity_slot) parity = &io;
  }
  if (parity == nullptr || parity->ref.buffer != PlanRef::kScratch) {
    return absl::InternalError(
        absl::StrFormat("stripe %u: the plan writes no parity to log", stripe));
  }
  // md's entries count whole 512-byte sectors (data_sector, pp_size).
  if (a % kSectorBytes != 0 || b % kSectorBytes != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "stripe %u: a write of bytes %u..%u of the stripe is not in whole "
        "512-byte sectors, which a partial parity log entry needs",
        stripe, a, b));
  }
  PplStripeLog log;
  for (const PplRect& rect : PplRects(geo, stripe, a, b)) {
    PplEntry e = PplEntryFor(geo, rect);
    if (!rect.full_stripe) {
      const uint64_t rows = rect.row_hi - rect.row_lo;
      if (rect.row_lo < parity->chunk_offset ||
          rect.row_hi > parity->chunk_offset + parity->len) {
        return absl::InternalError(absl::StrFormat(
            "stripe %u: rows %u..%u outside the planned parity %u..%u", stripe,
            rect.row_lo, rect.row_hi, parity->chunk_offset,
            parity->chunk_offset + parity->len));
      }
      const size_t at = log.partial_parity.size();
      log.partial_parity.resize(at + rows);
      uint8_t* pp = log.partial_parity.data() + at;
      std::memcpy(
          pp,
          scratch + parity->ref.offset + (rect.row_lo - parity->chunk_offset),
          rows);
      for (int k = rect.first; k <= rect.last; ++k) {
        const WritePlan::Chunk& c = plan.chunks[k];
        if (!c.written || c.x > rect.row_lo || c.y < rect.row_hi) {
          return absl::InternalError(absl::StrFormat(
              "stripe %u: data index %d is not written over rows %u..%u",
              stripe, k, rect.row_lo, rect.row_hi));
        }
        XorAccumulate(pp, client + c.client + (rect.row_lo - c.x), rows);
      }
      e.checksum = Crc32c(std::span<const uint8_t>(pp, rows));
    }
    log.entries.push_back(e);
  }
  return log;
}

}  // namespace uraid
