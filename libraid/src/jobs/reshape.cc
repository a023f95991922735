// SPDX-License-Identifier: MIT
// Online reshape (md's --grow): more members, another layout, chunk or
// level, restriped in the background while clients read and write.
//
// How it stays crash-safe without a backup file (see reshape_math.h and
// docs/reshape.md): the new shape is written below the old one, at a data
// offset moved down into the headroom, so a window's new rows never land
// on old rows still holding bytes not yet copied. Each window is copied
// (old-shape read, new-shape full-stripe writes), the members flushed, and
// only then is the window's end recorded as md's reshape_position in every
// superblock. After a crash the copy restarts at the recorded position,
// whose old copy is intact.
//
// Client requests during a reshape go through the router
// (array/reshape_router.cc): below the front they use the new shape, at or
// past it the old one, and requests touching the window being copied wait
// for it (ReshapeGate). The copy itself is ReshapeCopier's; starting a
// reshape is in reshape_start.cc.
// The stripe cache is written back and bypassed for the duration: it is
// keyed by one shape's stripes.

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"
#include "format/reshape_math.h"
#include "parity/parity.h"

namespace uraid {
namespace {

// Largest window copied between two checkpoints (array bytes): bounds the
// copy buffer and how long a request touching the window waits.
constexpr uint64_t kMaxReshapeWindow = 16 << 20;
// Tag of the new shape's stripe locks while both shapes are live. The
// current shape's tag is always 0 (FinishReshape republishes the new shape
// with tag 0 once no request uses the old one). Every stripe lock is taken
// through LockKey with the shape it is in.
constexpr uint64_t kNewShapeLockTag = uint64_t{1} << 63;

}  // namespace

uint64_t ArrayImpl::MetadataEnd() const {
  uint64_t end = kSb12OffsetBytes + kSbBlockBytes;
  end = std::max(end, bitmap_.AreaEnd());
  end = std::max(end, bblog_end_);
  return end;
}

void ArrayImpl::SetReshapeFieldsLocked(uint64_t front_bytes) {
  const ReshapeState& r = *reshape_.load();
  roster_.SetReshapeLocked(r.from->geo, r.from->data_offset, r.to->geo,
                           r.to->data_offset, front_bytes);
}

void ArrayImpl::PublishReshapeLocked(std::unique_ptr<ReshapeState> state,
                                     const Geometry& to,
                                     uint64_t to_data_offset) {
  state->to = AddShapeLocked(to, to_data_offset, kNewShapeLockTag);
  reshapes_.push_back(std::move(state));
  reshape_.store(reshapes_.back().get());
}

bool ArrayImpl::ReshapeJobQueued() const {
  return jobs_.RunsOrQueued(JobKind::kReshape);
}

absl::StatusOr<uint64_t> ArrayImpl::ReshapeWindowAt(uint64_t lo,
                                                    uint64_t max_window) {
  const ReshapeState& r = *reshape_.load();
  const uint64_t hi =
      ReshapeWindowEnd(r.from->geo, r.from->data_offset, r.to->geo,
                       r.to->data_offset, lo, max_window);
  if (hi <= lo) {
    return absl::InternalError(absl::StrFormat(
        "reshape cannot progress at %d: the data offsets are too close", lo));
  }
  return hi;
}

absl::Status ArrayImpl::ReshapeCheckpoint(uint64_t hi) {
  // The copy durable before the superblocks say the front moved.
  RETURN_IF_ERROR(writer_.FlushSlots(std::vector<bool>(SlotCount(), true)));
  {
    MutexLock lock(roster_.mu());
    SetReshapeFieldsLocked(hi);
  }
  RETURN_IF_ERROR(WriteSuperblocks(std::nullopt));
  reshape_.load()->front.store(hi);
  return absl::OkStatus();
}

absl::Status ArrayImpl::ResyncMovedPart() {
  ReshapeState& r = *reshape_.load();
  if (slots_.Gone() > 0) {
    // Parity cannot be recomputed without every member (the bits stay set
    // for a later resync); a dirty degraded array was started by force.
    r.resync_moved = false;
    return absl::OkStatus();
  }
  const Geometry& to = r.to->geo;
  const uint64_t moved = r.front.load() / to.stripe_data_bytes();
  const uint64_t C = to.chunk_bytes();
  uint64_t done = 0;
  const auto scan = [&](uint64_t first, uint64_t last) -> absl::Status {
    for (uint64_t s = first; s < std::min(last, moved); ++s) {
      bool mismatch;
      RETURN_IF_ERROR(
          scanner_.ScanStripe(*r.to, s, /*repair=*/true, &mismatch));
      counters_.resynced_stripes.fetch_add(1, std::memory_order_relaxed);
      if (mismatch) {
        counters_.resync_repairs.fetch_add(1, std::memory_order_relaxed);
      }
      ++done;
    }
    return absl::OkStatus();
  };
  if (bitmap_.intent() != nullptr) {
    // Bits are kept by member offset from whichever data offset the write
    // used; a set bit may stand for a torn stripe of either shape. Old-shape
    // stripes past the front get fresh parity when they are copied, so only
    // the new shape's stripes below the front need resyncing here. The bits
    // stay set until the reshape ends (a second crash must find them).
    const uint64_t B = bitmap_.intent()->chunk_bytes();
    for (uint64_t k = 0; k < bitmap_.intent()->chunks(); ++k) {
      if (!bitmap_.intent()->IsChunkDirty(k)) continue;
      r.dirty_at_resume.push_back(k);
      RETURN_IF_ERROR(scan(k * B / C, ((k + 1) * B + C - 1) / C));
    }
  } else {
    RETURN_IF_ERROR(scan(0, moved));
  }
  Log(LogLevel::kInfo,
      absl::StrFormat(
          "reshape: resynced %d stripes of the moved part after an unclean "
          "shutdown",
          done));
  r.resync_moved = false;
  return absl::OkStatus();
}

uint64_t ArrayImpl::ReshapeMaxWindow() const {
  const uint64_t sd = reshape_.load()->to->geo.stripe_data_bytes();
  return std::max<uint64_t>(kMaxReshapeWindow / sd * sd, sd);
}

absl::Status ArrayImpl::ReshapeStep(uint8_t* buf, uint64_t max_window) {
  ReshapeState& r = *reshape_.load();
  if (r.resync_moved) RETURN_IF_ERROR(ResyncMovedPart());
  const uint64_t lo = r.front.load();
  if (lo >= r.end) return FinishReshape();
  ASSIGN_OR_RETURN(const uint64_t hi, ReshapeWindowAt(lo, max_window));
  r.gate.Close(lo, hi);
  absl::Status st = copier_.CopyWindow(*reshape_.load(), lo, hi, buf);
  if (st.ok()) st = ReshapeCheckpoint(hi);
  r.gate.Open();
  if (!st.ok()) {
    return absl::Status(
        st.code(),
        absl::StrFormat("reshape stopped at %d bytes: %s", lo, st.message()));
  }
  return hi >= r.end ? FinishReshape() : absl::OkStatus();
}

absl::StatusOr<bool> ArrayImpl::StepReshape() {
  if (!reshaping_.load()) {
    return absl::FailedPreconditionError("no reshape is in progress");
  }
  if (std::optional<JobKind> busy = jobs_.Busy()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a %s job is running: it drives the reshape", JobKindName(*busy)));
  }
  AlignedBuffer buf(ReshapeMaxWindow());
  RETURN_IF_ERROR(ReshapeStep(buf.data(), buf.size()));
  return !reshaping_.load();
}

absl::Status ArrayImpl::RunReshape() {
  if (!reshaping_.load()) return absl::OkStatus();
  ReshapeState& r = *reshape_.load();
  const uint64_t dd = static_cast<uint64_t>(r.to->geo.data_disks());
  jobs_.SetTotals(r.end / dd, r.front.load() / dd);
  if (r.resync_moved) RETURN_IF_ERROR(ResyncMovedPart());
  // The job pipelines what ReshapeStep does one window at a time: while
  // window [lo, hi) is written in the new shape, the next one, [hi, next),
  // is read in the old shape, and the end of the window before, lo, is
  // recorded. Reading early is safe: the next window's old rows are at or
  // past the old row holding hi, and this window's new rows stay below the
  // old row holding lo (the invariant, docs/reshape.md). Writing beside
  // the checkpoint is safe only when this window also stays below the old
  // row holding the position already recorded (`durable`), which the
  // growing distance between the shapes allows once the front has moved
  // far enough; until then the checkpoint comes first, as one window at a
  // time. Either way a crash at any point restarts at a recorded position
  // whose old copy is intact. The gate stays closed over everything from
  // `durable` to the end of what is read, so no client request sees or
  // writes bytes whose copy is not yet recorded.
  const uint64_t max_window = ReshapeMaxWindow();
  AlignedBuffer buf_a(max_window), buf_b(max_window);
  uint8_t* cur = buf_a.data();    // holds [lo, hi) once read
  uint8_t* ahead = buf_b.data();  // receives [hi, next)
  ThrottleState throttle;
  const uint64_t start = r.front.load();
  uint64_t durable = start;         // reshape_position in the superblocks
  uint64_t lo = start, hi = start;  // hi == lo: nothing read yet
  uint64_t gate_hi = start;         // the gate covers [durable, gate_hi)
  const auto stopped_at = [&](const absl::Status& st) {
    r.gate.Open();
    return absl::Status(
        st.code(), absl::StrFormat("reshape stopped at %d bytes: %s", durable,
                                   st.message()));
  };
  // Records everything written, [.., lo), and lets its requests in.
  const std::function<absl::Status()> checkpoint = [&]() -> absl::Status {
    RETURN_IF_ERROR(ReshapeCheckpoint(lo));
    durable = lo;
    if (gate_hi > lo) {
      r.gate.Close(lo, gate_hi);
    } else {
      r.gate.Open();
    }
    return absl::OkStatus();
  };
  bool read_ahead = true;
  while (lo < r.end) {
    if (hi == lo) {
      // Nothing read ahead (the first window, after a rest, or when not
      // reading ahead): read this window alone. The last one may not be
      // recorded yet, so the gate still starts at `durable`.
      absl::StatusOr<uint64_t> e = ReshapeWindowAt(lo, max_window);
      if (!e.ok()) return stopped_at(e.status());
      hi = gate_hi = *e;
      r.gate.Close(durable, hi);
      absl::Status st =
          copier_.Copy(*reshape_.load(), lo, lo, nullptr, lo, hi, cur, nullptr);
      if (!st.ok()) return stopped_at(st);
    }
    uint64_t next = hi;
    if (read_ahead && hi < r.end) {
      // Without a window there (an error), the next round finds out.
      absl::StatusOr<uint64_t> e = ReshapeWindowAt(hi, max_window);
      if (e.ok()) {
        next = gate_hi = *e;
        // Wider: waits for the requests inside [hi, next) to leave.
        r.gate.Close(durable, next);
      }
    }
    const bool pending = durable < lo;
    const bool beside =
        pending &&
        hi <= ReshapeWindowEnd(r.from->geo, r.from->data_offset, r.to->geo,
                               r.to->data_offset, durable, r.end);
    if (pending && !beside) {
      absl::Status st = checkpoint();
      if (!st.ok()) return stopped_at(st);
    }
    absl::Status st = copier_.Copy(*reshape_.load(), lo, hi, cur, hi, next,
                                   ahead, beside ? checkpoint : nullptr);
    if (!st.ok()) return stopped_at(st);
    jobs_.Progress(hi / dd);
    lo = hi;
    hi = next;
    std::swap(cur, ahead);
    if (lo >= r.end) break;
    bool wait = false;
    read_ahead = jobs_.Throttle(throttle, (lo - start) / dd, true, &wait);
    if (!read_ahead) {
      // Rest (or stop) with what is written recorded and the gate open:
      // the window read ahead is dropped, and read again after the rest.
      // While the limits hold the job back, it reads no further ahead
      // (that read could be wasted).
      gate_hi = lo;
      hi = lo;
      st = checkpoint();
      if (!st.ok()) return stopped_at(st);
      if (!wait || !jobs_.Throttle(throttle, (lo - start) / dd)) {
        return absl::OkStatus();
      }
    }
  }
  if (durable < lo) {
    gate_hi = lo;
    absl::Status st = checkpoint();
    if (!st.ok()) return stopped_at(st);
  }
  return FinishReshape();
}

absl::Status ArrayImpl::FinishReshape() {
  ReshapeState& r = *reshape_.load();
  const Shape& to = *r.to;
  // No request may be in either shape while the current one changes.
  r.gate.Close(0, UINT64_MAX);
  const int64_t moved_by = static_cast<int64_t>(r.from->data_offset) -
                           static_cast<int64_t>(to.data_offset);
  {
    MutexLock lock(roster_.mu());
    shape_.store(AddShapeLocked(to.geo, to.data_offset, /*lock_tag=*/0));
    // Each device's data area now starts lower, so it is that much larger.
    roster_.EndReshapeLocked(to.geo, to.data_offset,
                             static_cast<uint64_t>(moved_by) / 512);
  }
  cache_.ResetStripeBytes(to.geo.stripe_data_bytes());
  resync_stripe_.store(to.geo.stripe_count());
  reshaping_.store(false);
  absl::Status st = WriteSuperblocks(std::nullopt);
  r.gate.Open();
  if (bitmap_.intent() != nullptr && st.ok()) {
    // Chunks dirty at a resume are consistent now: their moved stripes were
    // resynced and the rest were copied with fresh parity.
    for (uint64_t k : r.dirty_at_resume) bitmap_.intent()->ClearChunk(k);
  }
  Log(LogLevel::kNotice,
      absl::StrFormat("reshape finished: %d devices, %s, chunk %d, %d bytes",
                      to.geo.raid_disks(), LayoutName(to.geo.layout()),
                      to.geo.chunk_bytes(), to.geo.array_bytes()));
  return st;
}

}  // namespace uraid
