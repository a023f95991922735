// SPDX-License-Identifier: MIT
// The reshape job (reshape_job.h): starting, resuming, the pipelined copy
// with its checkpoints, the resync of the moved part after a crash, and
// the end.

#include "jobs/reshape_job.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
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

absl::Status ReshapeJob::Start(const Geometry& to, uint64_t to_offset,
                               std::vector<std::shared_ptr<Member>> add,
                               const std::vector<DeviceId>& ids) {
  const Shape& from = shapes_.current();
  auto state = std::make_unique<ReshapeState>();
  state->from = &from;
  state->end = to.array_bytes();
  // Requests wait until the cache is written back (below).
  state->gate.Close(0, UINT64_MAX);
  {
    MutexLock lock(roster_.mu());
    for (size_t i = 0; i < add.size(); ++i) {
      roster_.AppendSlotLocked(std::move(add[i]), ids[i]);
    }
    PublishLocked(std::move(state), to, to_offset);
    SetFieldsLocked(0);
  }
  ReshapeState& r = *state_.load();
  // Requests that took the plain path before reshaping() was set finish in
  // the old shape, perhaps through the cache; then the cache goes out.
  host_.DrainPlainRequests();
  absl::Status st = writer_.WritebackAll();
  if (st.ok()) st = host_.UpdateSuperblocks();
  r.gate.Open();
  if (!st.ok()) {
    // The superblocks may or may not say "reshaping"; either way the array
    // serves through the router, and the next assembly resumes or not.
    host_.Log(LogLevel::kError,
              absl::StrFormat("reshape start: %s", st.message()));
    return st;
  }
  host_.Log(
      LogLevel::kNotice,
      absl::StrFormat(
          "reshape started: %d -> %d devices, %s -> %s, chunk %d -> %d, data "
          "offset %d -> %d",
          from.geo.raid_disks(), to.raid_disks(), LayoutName(from.geo.layout()),
          LayoutName(to.layout()), from.geo.chunk_bytes(), to.chunk_bytes(),
          from.data_offset, to_offset));
  return absl::OkStatus();
}

void ReshapeJob::Resume(const Geometry& to, uint64_t to_offset,
                        uint64_t front_bytes, bool unclean) {
  const Shape& from = shapes_.current();
  auto state = std::make_unique<ReshapeState>();
  state->from = &from;
  state->end = to.array_bytes();
  state->front.store(front_bytes);
  // Torn stripes of the moved part are resynced by the reshape job (in
  // the new shape) before it copies on: after an unclean shutdown, and
  // whenever the bitmap holds set bits (a stale bitmap counts as all set).
  // The plain resync, which knows only one shape, must not run.
  state->resync_moved = unclean || (bitmap_.intent() != nullptr &&
                                    bitmap_.intent()->DirtyChunks() > 0);
  {
    MutexLock lock(roster_.mu());
    PublishLocked(std::move(state), to, to_offset);
  }
  host_.Log(LogLevel::kNotice,
            absl::StrFormat("reshape in progress at %d of %d bytes (%d -> %d "
                            "devices); it resumes when the array starts%s",
                            front_bytes, to.array_bytes(),
                            from.geo.raid_disks(), to.raid_disks(),
                            unclean ? ", after resyncing the moved part" : ""));
}

void ReshapeJob::SetFieldsLocked(uint64_t front_bytes) {
  const ReshapeState& r = *state_.load();
  roster_.SetReshapeLocked(r.from->geo, r.from->data_offset, r.to->geo,
                           r.to->data_offset, front_bytes);
}

void ReshapeJob::PublishLocked(std::unique_ptr<ReshapeState> state,
                               const Geometry& to, uint64_t to_data_offset) {
  state->to = shapes_.Add(to, to_data_offset, kNewShapeLockTag);
  states_.push_back(std::move(state));
  state_.store(states_.back().get());
  // Last: a request that sees reshaping() takes the router, which reads
  // state_ (stored above, so it finds this state and its new shape).
  shapes_.SetReshaping(true);
}

absl::StatusOr<uint64_t> ReshapeJob::WindowAt(uint64_t lo,
                                              uint64_t max_window) const {
  const ReshapeState& r = *state_.load();
  const uint64_t hi =
      ReshapeWindowEnd(r.from->geo, r.from->data_offset, r.to->geo,
                       r.to->data_offset, lo, max_window);
  if (hi <= lo) {
    return absl::InternalError(absl::StrFormat(
        "reshape cannot progress at %d: the data offsets are too close", lo));
  }
  return hi;
}

absl::Status ReshapeJob::Checkpoint(uint64_t hi) {
  // The copy durable before the superblocks say the front moved.
  RETURN_IF_ERROR(writer_.FlushSlots(std::vector<bool>(slots_.size(), true)));
  {
    MutexLock lock(roster_.mu());
    SetFieldsLocked(hi);
  }
  RETURN_IF_ERROR(host_.UpdateSuperblocks());
  state_.load()->front.store(hi);
  return absl::OkStatus();
}

absl::Status ReshapeJob::ResyncMovedPart() {
  ReshapeState& r = *state_.load();
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
  host_.Log(
      LogLevel::kInfo,
      absl::StrFormat(
          "reshape: resynced %d stripes of the moved part after an unclean "
          "shutdown",
          done));
  r.resync_moved = false;
  return absl::OkStatus();
}

uint64_t ReshapeJob::MaxWindow() const {
  const uint64_t sd = state_.load()->to->geo.stripe_data_bytes();
  return std::max<uint64_t>(kMaxReshapeWindow / sd * sd, sd);
}

absl::Status ReshapeJob::StepWindow(ReshapeWindowBuf buf, uint64_t max_window) {
  ReshapeState& r = *state_.load();
  if (r.resync_moved) RETURN_IF_ERROR(ResyncMovedPart());
  const uint64_t lo = r.front.load();
  if (lo >= r.end) return Finish();
  ASSIGN_OR_RETURN(const uint64_t hi, WindowAt(lo, max_window));
  r.gate.Close(lo, hi);
  absl::Status st = copier_.CopyWindow(*state_.load(), lo, hi, buf);
  if (st.ok()) st = Checkpoint(hi);
  r.gate.Open();
  if (!st.ok()) {
    return absl::Status(
        st.code(),
        absl::StrFormat("reshape stopped at %d bytes: %s", lo, st.message()));
  }
  return hi >= r.end ? Finish() : absl::OkStatus();
}

absl::StatusOr<bool> ReshapeJob::Step() {
  if (!running()) {
    return absl::FailedPreconditionError("no reshape is in progress");
  }
  if (std::optional<JobKind> busy = runner_.Busy()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a %s job is running: it drives the reshape", JobKindName(*busy)));
  }
  const uint64_t max_window = MaxWindow();
  AlignedBuffer buf = AlignedBuffer::FilledWhole(max_window);
  AlignedBuffer parity = AlignedBuffer::FilledWhole(
      ReshapeCopier::ParityBytes(*state_.load(), max_window));
  RETURN_IF_ERROR(StepWindow({buf.data(), parity.data()}, max_window));
  return !running();
}

absl::Status ReshapeJob::Run() {
  if (!running()) return absl::OkStatus();
  ReshapeState& r = *state_.load();
  const uint64_t dd = static_cast<uint64_t>(r.to->geo.data_disks());
  runner_.SetTotals(r.end / dd, r.front.load() / dd);
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
  const uint64_t max_window = MaxWindow();
  AlignedBuffer buf_a = AlignedBuffer::FilledWhole(max_window);
  AlignedBuffer buf_b = AlignedBuffer::FilledWhole(max_window);
  // Each window's new stripes' parity, computed as they are read.
  const uint64_t parity_bytes = ReshapeCopier::ParityBytes(r, max_window);
  AlignedBuffer par_a = AlignedBuffer::FilledWhole(parity_bytes);
  AlignedBuffer par_b = AlignedBuffer::FilledWhole(parity_bytes);
  ReshapeWindowBuf cur{buf_a.data(), par_a.data()};    // holds [lo, hi)
  ReshapeWindowBuf ahead{buf_b.data(), par_b.data()};  // gets [hi, next)
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
    RETURN_IF_ERROR(Checkpoint(lo));
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
      absl::StatusOr<uint64_t> e = WindowAt(lo, max_window);
      if (!e.ok()) return stopped_at(e.status());
      hi = gate_hi = *e;
      r.gate.Close(durable, hi);
      absl::Status st =
          copier_.Copy(*state_.load(), lo, lo, {}, lo, hi, cur, nullptr);
      if (!st.ok()) return stopped_at(st);
    }
    uint64_t next = hi;
    if (read_ahead && hi < r.end) {
      // Without a window there (an error), the next round finds out.
      absl::StatusOr<uint64_t> e = WindowAt(hi, max_window);
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
    absl::Status st = copier_.Copy(*state_.load(), lo, hi, cur, hi, next, ahead,
                                   beside ? checkpoint : nullptr);
    if (!st.ok()) return stopped_at(st);
    runner_.Progress(hi / dd);
    lo = hi;
    hi = next;
    std::swap(cur, ahead);
    if (lo >= r.end) break;
    bool wait = false;
    read_ahead = runner_.Throttle(throttle, (lo - start) / dd, true, &wait);
    if (!read_ahead) {
      // Rest (or stop) with what is written recorded and the gate open:
      // the window read ahead is dropped, and read again after the rest.
      // While the limits hold the job back, it reads no further ahead
      // (that read could be wasted).
      gate_hi = lo;
      hi = lo;
      st = checkpoint();
      if (!st.ok()) return stopped_at(st);
      if (!wait || !runner_.Throttle(throttle, (lo - start) / dd)) {
        return absl::OkStatus();
      }
    }
  }
  if (durable < lo) {
    gate_hi = lo;
    absl::Status st = checkpoint();
    if (!st.ok()) return stopped_at(st);
  }
  return Finish();
}

absl::Status ReshapeJob::Finish() {
  ReshapeState& r = *state_.load();
  const Shape& to = *r.to;
  // No request may be in either shape while the current one changes.
  r.gate.Close(0, UINT64_MAX);
  const int64_t moved_by = static_cast<int64_t>(r.from->data_offset) -
                           static_cast<int64_t>(to.data_offset);
  {
    MutexLock lock(roster_.mu());
    shapes_.MakeCurrent(shapes_.Add(to.geo, to.data_offset, /*lock_tag=*/0));
    // Each device's data area now starts lower, so it is that much larger.
    roster_.EndReshapeLocked(to.geo, to.data_offset,
                             static_cast<uint64_t>(moved_by) / 512);
  }
  host_.ShapeChanged(shapes_.current());
  // After the new shape is current: the router sends a request that
  // waited at the gate back to the plain path.
  shapes_.SetReshaping(false);
  absl::Status st = host_.UpdateSuperblocks();
  r.gate.Open();
  if (bitmap_.intent() != nullptr && st.ok()) {
    // Chunks dirty at a resume are consistent now: their moved stripes were
    // resynced and the rest were copied with fresh parity.
    for (uint64_t k : r.dirty_at_resume) bitmap_.intent()->ClearChunk(k);
  }
  host_.Log(
      LogLevel::kNotice,
      absl::StrFormat("reshape finished: %d devices, %s, chunk %d, %d bytes",
                      to.geo.raid_disks(), LayoutName(to.geo.layout()),
                      to.geo.chunk_bytes(), to.geo.array_bytes()));
  return st;
}

}  // namespace uraid
