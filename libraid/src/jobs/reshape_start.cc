// SPDX-License-Identifier: MIT
// Starting a reshape (md's --grow): the request checked against what the
// array can do, the new shape placed below the old one, its first
// superblock written, and the job queued; and resuming one found in the
// superblocks at assembly. The copy itself is in reshape.cc.

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"
#include "format/reshape_math.h"

namespace uraid {

absl::Status ArrayImpl::Grow(GrowOptions options) {
  if (read_only_) return absl::FailedPreconditionError("array is read-only");
  // Not while the consistency policy switches: the ppl check below and
  // the switch's reshape check must not interleave.
  MutexLock policy(&policy_mu_);
  RETURN_IF_ERROR(CheckUsable(true));
  if (reshaping_.load()) {
    // A reshape paused by StopJob (or assembled without background
    // threads) goes on when asked to with nothing new.
    const bool resume = options.raid_devices == 0 && !options.layout &&
                        options.chunk_bytes == 0 && options.level == 0 &&
                        options.add.empty() && options.start_job;
    if (!resume || ReshapeJobQueued()) {
      return absl::FailedPreconditionError(
          "a reshape is already in progress (grow with no changes resumes "
          "a paused one)");
    }
    return jobs_.Request(JobRequest{JobKind::kReshape, -1});
  }
  if (slots_.Gone() > 0) {
    return absl::FailedPreconditionError(
        "array is degraded: rebuild it before reshaping");
  }
  // PPL hook: md refuses a reshape with a partial parity log ("PPL cannot
  // be enabled when reshape is in progress"); the log's entries are in
  // one shape's sectors.
  if (ppl_.load() != nullptr) {
    return absl::FailedPreconditionError(
        "the array's consistency policy is ppl: md does not reshape with a "
        "partial parity log; switch it to resync first (grow "
        "--consistency-policy resync)");
  }
  const Shape& from = *shape_.load();
  if (resync_stripe_.load() < from.geo.stripe_count()) {
    return absl::FailedPreconditionError(
        "the array is resyncing: wait for it to finish before reshaping");
  }
  if (std::optional<JobKind> busy = jobs_.Busy(/*or_queued=*/true)) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "a %s job is running: wait for it (or stop it) before reshaping",
        JobKindName(*busy)));
  }
  const int level = options.level ? options.level : from.geo.level();
  if ((level == 6) != (from.geo.level() == 6)) {
    // RAID5 <-> RAID6 is md's takeover: no data moves (takeover.cc).
    return Takeover(from, level, std::move(options));
  }
  const int disks =
      options.raid_devices ? options.raid_devices : from.geo.raid_disks();
  if (disks < from.geo.raid_disks()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("raid devices %d is fewer than the array's %d: "
                        "shrinking is not supported",
                        disks, from.geo.raid_disks()));
  }
  const size_t adding = static_cast<size_t>(disks - from.geo.raid_disks());
  if (options.add.size() != adding) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "growing from %d to %d raid devices needs %d new member(s); %d given",
        from.geo.raid_disks(), disks, adding, options.add.size()));
  }
  for (const auto& m : options.add) {
    if (m == nullptr) return absl::InvalidArgumentError("no member given");
  }
  if (level != 4 && level != 5 && level != 6) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "level %d: only RAID4, RAID5 and RAID6 are supported", level));
  }
  Layout layout = options.layout.value_or(from.geo.layout());
  if (level == 4 && !options.layout.has_value()) layout = Layout::kParityLast;
  if (level == 4 && layout != Layout::kParityLast) {
    return absl::InvalidArgumentError(
        "RAID4 keeps parity on the last device: its layout is parity-last");
  }
  const uint64_t chunk =
      options.chunk_bytes ? options.chunk_bytes : from.geo.chunk_bytes();
  absl::StatusOr<Geometry> to =
      Geometry::Make(level, layout, chunk, disks, from.geo.member_bytes());
  if (!to.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("the new shape is invalid: %s", to.status().message()));
  }
  if (*to == from.geo) {
    return absl::InvalidArgumentError(
        "nothing to change: the new shape is the array's shape");
  }
  if (to->raid_disks() == from.geo.raid_disks() &&
      to->layout() == from.geo.layout() &&
      to->chunk_bytes() == from.geo.chunk_bytes()) {
    // RAID4 <-> RAID5 with parity-last: the same placement under another
    // level number (md's instant takeover). Nothing moves.
    {
      MutexLock lock(roster_.mu());
      shape_.store(AddShapeLocked(*to, from.data_offset, /*lock_tag=*/0));
      roster_.SetLevelLocked(*to);
    }
    Log(LogLevel::kNotice,
        absl::StrFormat("level changed to %d (parity-last: no data moves)",
                        level));
    return WriteSuperblocks(std::nullopt);
  }
  ASSIGN_OR_RETURN(
      const uint64_t to_offset,
      ChooseReshapeDataOffset(from.geo, from.data_offset, *to, MetadataEnd()));
  std::vector<DeviceId> ids;
  for (const auto& m : options.add) {
    ASSIGN_OR_RETURN(DeviceId id, PrepareNewMember(*m));
    for (size_t j = 0; j < ids.size(); ++j) {
      if (options.add[j]->Name() == m->Name()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s is given twice", m->Name()));
      }
    }
    ids.push_back(id);
  }
  for (const auto& m : options.add) RETURN_IF_ERROR(bitmap_.CopyTo(*m));

  auto state = std::make_unique<ReshapeState>();
  state->from = &from;
  state->end = to->array_bytes();
  // Requests wait until the cache is written back (below).
  state->gate.Close(0, UINT64_MAX);
  {
    MutexLock lock(roster_.mu());
    for (size_t i = 0; i < options.add.size(); ++i) {
      roster_.AppendSlotLocked(
          std::shared_ptr<Member>(std::move(options.add[i])), ids[i]);
    }
    PublishReshapeLocked(std::move(state), *to, to_offset);
    SetReshapeFieldsLocked(0);
  }
  ReshapeState& r = *reshape_.load();
  reshaping_.store(true);
  // Requests that took the plain path before reshaping_ was set finish in
  // the old shape, perhaps through the cache; then the cache goes out.
  plain_epochs_.Drain();
  absl::Status st = writer_.WritebackAll();
  if (st.ok()) st = WriteSuperblocks(std::nullopt);
  r.gate.Open();
  if (!st.ok()) {
    // The superblocks may or may not say "reshaping"; either way the array
    // serves through the router, and the next assembly resumes or not.
    Log(LogLevel::kError, absl::StrFormat("reshape start: %s", st.message()));
    return st;
  }
  Log(LogLevel::kNotice,
      absl::StrFormat(
          "reshape started: %d -> %d devices, %s -> %s, chunk %d -> %d, data "
          "offset %d -> %d",
          from.geo.raid_disks(), to->raid_disks(),
          LayoutName(from.geo.layout()), LayoutName(to->layout()),
          from.geo.chunk_bytes(), to->chunk_bytes(), from.data_offset,
          to_offset));
  if (!options.start_job) return absl::OkStatus();
  return jobs_.Request(JobRequest{JobKind::kReshape, -1});
}

void ArrayImpl::ResumeReshape(const Geometry& to, uint64_t to_data_offset,
                              uint64_t front_bytes, bool unclean) {
  auto state = std::make_unique<ReshapeState>();
  state->from = shape_.load();
  state->end = to.array_bytes();
  state->front.store(front_bytes);
  // Torn stripes of the moved part are resynced by the reshape job (in
  // the new shape) before it copies on: after an unclean shutdown, and
  // whenever the bitmap holds set bits (a stale bitmap counts as all set).
  // The plain resync, which knows only one shape, must not run.
  state->resync_moved = unclean || (bitmap_.intent() != nullptr &&
                                    bitmap_.intent()->DirtyChunks() > 0);
  resync_stripe_.store(shape_.load()->geo.stripe_count());
  {
    MutexLock lock(roster_.mu());
    PublishReshapeLocked(std::move(state), to, to_data_offset);
  }
  reshaping_.store(true);
  Log(LogLevel::kNotice,
      absl::StrFormat("reshape in progress at %d of %d bytes (%d -> %d "
                      "devices); it resumes "
                      "when the array starts%s",
                      front_bytes, to.array_bytes(),
                      shape_.load()->geo.raid_disks(), to.raid_disks(),
                      unclean ? ", after resyncing the moved part" : ""));
}

}  // namespace uraid
