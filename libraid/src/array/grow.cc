// SPDX-License-Identifier: MIT
// md's --grow: the request checked against what the array can do, the new
// shape placed below the old one, and the reshape started
// (jobs/reshape_job.h) and its job queued; a level change that moves no
// data (takeover.cc, or RAID4 <-> RAID5 with parity-last) done here.

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"
#include "format/reshape_math.h"
#include "uraid/bad_blocks.h"

namespace uraid {

namespace {

// The end of the bad-block log on a member when it lies past the
// superblock (a 1.2 member's), else 0.
uint64_t BadBlockLogEnd(const Superblock& sb) {
  const std::optional<BadBlockLogArea> log = BadBlockLogAreaOf(sb);
  if (!log.has_value() || log->offset_bytes < kSb12OffsetBytes) return 0;
  return log->offset_bytes + log->size_bytes;
}

}  // namespace

absl::Status ArrayImpl::Grow(GrowOptions options) {
  if (read_only_) return absl::FailedPreconditionError("array is read-only");
  // Not while the consistency policy switches: the ppl check below and
  // the switch's reshape check must not interleave.
  MutexLock policy(&policy_mu_);
  RETURN_IF_ERROR(faults_.CheckUsable(true));
  if (jobs_.reshape().running()) {
    // A reshape paused by StopJob (or assembled without background
    // threads) goes on when asked to with nothing new.
    const bool resume = options.raid_devices == 0 && !options.layout &&
                        options.chunk_bytes == 0 && options.level == 0 &&
                        options.add.empty() && options.start_job;
    if (!resume || jobs_.reshape().queued()) {
      return absl::FailedPreconditionError(
          "a reshape is already in progress (grow with no changes resumes "
          "a paused one)");
    }
    return jobs_.runner().Request(JobRequest{JobKind::kReshape, -1});
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
  const Shape& from = CurrentShape();
  if (resync_stripe_.load() < from.geo.stripe_count()) {
    return absl::FailedPreconditionError(
        "the array is resyncing: wait for it to finish before reshaping");
  }
  if (std::optional<JobKind> busy = jobs_.runner().Busy(/*or_queued=*/true)) {
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
      shapes_.MakeCurrent(shapes_.Add(*to, from.data_offset, /*lock_tag=*/0));
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
    ASSIGN_OR_RETURN(DeviceId id, members_.PrepareNewMember(*m));
    for (size_t j = 0; j < ids.size(); ++j) {
      if (options.add[j]->Name() == m->Name()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s is given twice", m->Name()));
      }
    }
    ids.push_back(id);
  }
  for (const auto& m : options.add) RETURN_IF_ERROR(bitmap_.CopyTo(*m));

  std::vector<std::shared_ptr<Member>> add;
  for (auto& m : options.add) add.push_back(std::move(m));
  RETURN_IF_ERROR(jobs_.reshape().Start(*to, to_offset, std::move(add), ids));
  if (!options.start_job) return absl::OkStatus();
  return jobs_.runner().Request(JobRequest{JobKind::kReshape, -1});
}

void ArrayImpl::ResumeReshape(const Geometry& to, uint64_t to_data_offset,
                              uint64_t front_bytes, bool unclean) {
  resync_stripe_.store(CurrentShape().geo.stripe_count());
  jobs_.reshape().Resume(to, to_data_offset, front_bytes, unclean);
}

uint64_t ArrayImpl::MetadataEnd() const {
  uint64_t end = kSb12OffsetBytes + kSbBlockBytes;
  end = std::max(end, bitmap_.AreaEnd());
  end = std::max(end, BadBlockLogEnd(roster_.Template()));
  return end;
}

}  // namespace uraid
