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

namespace uraid {

ReshapeCopier::ReshapeCopier(const SlotTable& slots, StripeReader& reader,
                             StripeWriter& writer, TaskPool& pool)
    : slots_(slots), reader_(reader), writer_(writer), pool_(pool) {}

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
                                 uint64_t whi, const uint8_t* wbuf,
                                 uint64_t rlo, uint64_t rhi, uint8_t* rbuf,
                                 const std::function<absl::Status()>& beside) {
  const uint64_t sd = r.to->geo.stripe_data_bytes();
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
    if (grown || IsAllZero(wbuf + (at - wlo), next - at)) {
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
    std::memset(rbuf + (zero_from - rlo), 0, rhi - zero_from);
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
        st = reader_.Read(*u.shape, rbuf + (u.lo - rlo), u.hi - u.lo, u.lo);
      } else {
        // The grown part costs a member write and its XOR per byte when
        // written; a discard costs neither (a quarter of a 4 -> 5 grow's
        // writes, issue 35).
        absl::StatusOr<bool> discarded = false;
        if (u.grown) discarded = writer_.DiscardStripe(*u.shape, u.lo / sd);
        if (!discarded.ok()) {
          st = discarded.status();
        } else if (!*discarded) {
          st = writer_.Write(*u.shape, wbuf + (u.lo - wlo), u.hi - u.lo, u.lo,
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
                                       uint64_t hi, uint8_t* buf) {
  RETURN_IF_ERROR(Copy(r, lo, lo, nullptr, lo, hi, buf, nullptr));
  return Copy(r, lo, hi, buf, hi, hi, nullptr, nullptr);
}

}  // namespace uraid
