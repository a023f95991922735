// SPDX-License-Identifier: MIT
// A reshape's copy (reshape_copier.h).
#include "jobs/reshape_copier.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <vector>

#include "base/status_macros.h"
#include "base/sync.h"
#include "jobs/job_runner.h"
#include "parity/parity.h"
#include "plan/stripe_plan.h"

namespace uraid {

ReshapeCopier::ReshapeCopier(const SlotTable& slots, StripeReader& reader,
                             StripeWriter& writer, TaskPool& pool)
    : slots_(slots), reader_(reader), writer_(writer), pool_(pool) {}

uint64_t ReshapeCopier::ParityBytes(const ReshapeState& r, uint64_t window) {
  const uint64_t sd = r.to->geo.stripe_data_bytes();
  // A window need not start on a new stripe: one more for a partial first.
  return (window / sd + 1) * FullStripeParityBytes(r.to->geo);
}

bool ReshapeCopier::ParityKept(const ReshapeState& r, uint64_t at,
                               uint64_t next) {
  const uint64_t sd = r.to->geo.stripe_data_bytes();
  return at % sd == 0 && next - at == sd && next <= r.from->geo.array_bytes();
}

uint64_t ReshapeCopier::NewRowsHoleEnd(const ReshapeState& r, uint64_t lo,
                                       uint64_t hi) {
  const Shape& to = *r.to;
  const uint64_t C = to.geo.chunk_bytes();
  const uint64_t sd = to.geo.stripe_data_bytes();
  const uint64_t row = lo / sd;  // lo's new row
  uint64_t end_row = (hi + sd - 1) / sd;
  for (int i = 0; i < to.geo.raid_disks() && end_row > row; ++i) {
    std::shared_ptr<Member> m = slots_[i]->member.load();
    if (m == nullptr) return row * sd;
    absl::StatusOr<uint64_t> data = m->NextDataOffset(to.data_offset + row * C);
    if (!data.ok() || *data < to.data_offset + row * C) return row * sd;
    // Rows wholly below the member's next data are holes on it.
    end_row = std::min(end_row, (*data - to.data_offset) / C);
  }
  return std::min(hi, std::max(end_row, row) * sd);
}

absl::Status ReshapeCopier::Copy(const ReshapeState& r, uint64_t wlo,
                                 uint64_t whi, ReshapeWindowBuf wbuf,
                                 uint64_t rlo, uint64_t rhi,
                                 ReshapeWindowBuf rbuf,
                                 const std::function<absl::Status()>& beside) {
  const uint64_t sd = r.to->geo.stripe_data_bytes();
  const uint64_t pb = FullStripeParityBytes(r.to->geo);
  // The parity of the new stripe holding window byte `at` (ParityKept
  // stripes only), at the same place in the window it was read in.
  const auto parity_at = [&](uint8_t* parity, uint64_t window_lo, uint64_t at) {
    return parity + (at - window_lo) / sd * pb;
  };
  // One new stripe's worth of array bytes in one shape: a write of a whole
  // new stripe (no pre-reads, fresh parity), or a read of the old rows
  // that hold it.
  struct Unit {
    const Shape* shape;
    uint64_t lo, hi;
    // A whole new stripe past the old array's end: zeros, discarded where
    // the members read discards back as zeros (StripeWriter::DiscardStripe).
    bool grown = false;
  };
  std::vector<Unit> writes, reads;
  // New-shape bytes past the old array's end are zeros (md zero-fills
  // them): they become the grown part of the array.
  const uint64_t from_end = r.from->geo.array_bytes();
  // A stripe of zeros whose new rows are holes on every member is left a
  // hole, so a sparse array stays sparse. The gate keeps clients out of
  // [wlo, whi), so the holes cannot fill between the probe and the skip.
  uint64_t holes_end = wlo;  // [.., holes_end): new rows known to be holes
  for (uint64_t at = wlo; at < whi;) {
    const uint64_t next = std::min(whi, (at / sd + 1) * sd);
    const bool grown = at >= from_end && at % sd == 0 && next - at == sd;
    bool skip = false;
    if (grown || IsAllZero(wbuf.data + (at - wlo), next - at)) {
      // One probe answers up to the first data on any member (within the
      // window: past it, clients may write).
      if (holes_end < next) holes_end = NewRowsHoleEnd(r, at, whi);
      skip = holes_end >= next;
    }
    if (!skip) writes.push_back(Unit{r.to, at, next, grown});
    at = next;
  }
  const uint64_t old_end = std::min(rhi, from_end);
  for (uint64_t at = rlo; at < old_end;) {
    const uint64_t next = std::min(old_end, (at / sd + 1) * sd);
    reads.push_back(Unit{r.from, at, next});
    at = next;
  }
  const uint64_t zero_from = std::max(rlo, old_end);
  if (zero_from < rhi)
    std::memset(rbuf.data + (zero_from - rlo), 0, rhi - zero_from);
  // Writes and reads alternate, so both directions of every member stay
  // busy; the workers take the units in that order.
  std::vector<Unit> units;
  for (size_t i = 0; i < std::max(writes.size(), reads.size()); ++i) {
    if (i < writes.size()) units.push_back(writes[i]);
    if (i < reads.size()) units.push_back(reads[i]);
  }
  std::atomic<size_t> next_unit{0};
  std::atomic<bool> failed{false};
  Mutex mu;
  size_t error_at = SIZE_MAX;  // the first unit that failed, under mu
  absl::Status error, beside_status;
  const uint64_t workers = std::min<uint64_t>(kJobDepth, units.size());
  // Worker 0 runs on the calling thread (TaskPool::RunEach): `beside` goes
  // first.
  pool_.RunEach(std::max<uint64_t>(workers, beside ? 1 : 0), [&](uint64_t w) {
    if (w == 0 && beside) {
      beside_status = beside();
      if (!beside_status.ok()) failed.store(true);
    }
    for (size_t i = next_unit.fetch_add(1); i < units.size() && !failed.load();
         i = next_unit.fetch_add(1)) {
      const Unit& u = units[i];
      absl::Status st;
      if (u.shape != r.to) {
        uint8_t* data = rbuf.data + (u.lo - rlo);
        st = reader_.Read(*u.shape, data, u.hi - u.lo, u.lo);
        if (st.ok() && rbuf.parity != nullptr && ParityKept(r, u.lo, u.hi)) {
          // Now, while this worker's CPU cache holds the bytes just read
          // (a stripe of zeros, a hole most likely, needs no XOR).
          uint8_t* parity = parity_at(rbuf.parity, rlo, u.lo);
          if (IsAllZero(data, sd)) {
            std::memset(parity, 0, pb);
          } else {
            ComputeFullStripeParity(r.to->geo, u.lo / sd, data, parity);
          }
        }
      } else {
        // The grown part costs a member write and its XOR per byte when
        // written; a discard costs neither (a quarter of a 4 -> 5 grow's
        // writes, issue 35).
        absl::StatusOr<bool> discarded = false;
        if (u.grown) discarded = writer_.DiscardStripe(*u.shape, u.lo / sd);
        if (!discarded.ok()) {
          st = discarded.status();
        } else if (!*discarded) {
          const uint8_t* data = wbuf.data + (u.lo - wlo);
          // The parity the read kept, else (the stripe holding the old
          // array's end, the grown part) the writer's own.
          st = wbuf.parity != nullptr && ParityKept(r, u.lo, u.hi)
                   ? writer_.WriteFullStripe(*u.shape, u.lo / sd, data,
                                             parity_at(wbuf.parity, wlo, u.lo))
                   : writer_.Write(*u.shape, data, u.hi - u.lo, u.lo,
                                   /*fua=*/false);
        }
      }
      if (st.ok()) continue;
      failed.store(true);
      MutexLock lock(&mu);
      if (i < error_at) {
        error_at = i;
        error = st;
      }
    }
  });
  RETURN_IF_ERROR(beside_status);
  return error;
}

absl::Status ReshapeCopier::CopyWindow(const ReshapeState& r, uint64_t lo,
                                       uint64_t hi, ReshapeWindowBuf buf) {
  RETURN_IF_ERROR(Copy(r, lo, lo, {}, lo, hi, buf, nullptr));
  return Copy(r, lo, hi, buf, hi, hi, {}, nullptr);
}

}  // namespace uraid
