// SPDX-License-Identifier: MIT
// Switching the consistency policy of a running array (md's
// `mdadm --grow --consistency-policy=ppl|resync`), as md allows it: only
// between resync and ppl, on RAID5, never while a reshape runs. md's
// mdadm refuses "bitmap" as a --grow --consistency-policy target (bitmaps
// come and go with --grow --bitmap) and refuses ppl on an array with a
// bitmap ("Cannot add PPL to array with bitmap"); uraid does the same.
//
// Why the order below is crash-safe. After a crash, assembly trusts the
// log (replays it and marks the array clean, no resync) exactly when the
// superblocks carry the PPL feature. So:
// - resync -> ppl: the superblocks may say ppl only once no stripe write
//   that went out without a log entry can still be torn. The areas are
//   initialised, the log attached, the writes that read "no log" waited
//   out (WriteEpochs: the write path holds a pass from reading ppl_ until
//   its member writes are done) and flushed, and then the superblocks are
//   written. A crash before that resyncs, as the policy said.
// - ppl -> resync: the superblocks drop the PPL first (a crash from then
//   on resyncs whatever the logs say), then the log is detached and the
//   writes still logging to it are waited out before returning.
// Client writes never wait for a switch; the switch waits for them.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/enum_names.h"
#include "base/status_macros.h"
#include "format/ppl_format.h"
#include "meta/ppl_log.h"
#include "uraid/consistency_policy.h"

namespace uraid {
namespace {

// mdadm's area for a 1.2 superblock (super1.c, update "ppl"): from 8
// sectors past the superblock to the bad-block log, or else to the data;
// at least a header and one 4 KiB page, at most 1 MiB. Sectors.
absl::StatusOr<uint16_t> PplSpaceSectors(const Superblock& sb) {
  if (sb.super_offset >= sb.data_offset) {
    return absl::UnimplementedError(absl::StrFormat(
        "superblock at sector %u is past the data offset %u (not a 1.2 "
        "superblock): no room for a partial parity log before the data",
        sb.super_offset, sb.data_offset));
  }
  const int64_t to =
      sb.bblog_offset != 0
          ? int64_t{sb.bblog_offset}
          : static_cast<int64_t>(sb.data_offset - sb.super_offset);
  const int64_t space = to - kPplDefaultOffsetSectors;
  constexpr int64_t kMin = kPplHeaderBytes / 512 + 8;
  if (space < kMin) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "not enough space to add ppl: %d sectors between the superblock's "
        "+%d and the %s (at +%d sectors); a log needs at least %d",
        space, kPplDefaultOffsetSectors,
        sb.bblog_offset != 0 ? "bad-block log (bblog_offset)" : "data", to,
        kMin));
  }
  return static_cast<uint16_t>(
      std::min<int64_t>(space, kPplDefaultSizeSectors));
}

}  // namespace

namespace {

// Indexed by the enumerator (base/enum_names.h).
constexpr std::array<const char*, 3> kPolicyNames = {"resync", "bitmap", "ppl"};

}  // namespace

const char* ConsistencyPolicyName(ConsistencyPolicy policy) {
  return EnumName(kPolicyNames, policy, "?");
}

absl::StatusOr<ConsistencyPolicy> ParseConsistencyPolicy(
    std::string_view name) {
  if (std::optional<ConsistencyPolicy> p =
          EnumFromName<ConsistencyPolicy>(kPolicyNames, name)) {
    return *p;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "consistency policy \"%s\" is not one of resync, bitmap, ppl",
      name.substr(0, 64)));
}

absl::Status Array::SetConsistencyPolicy(ConsistencyPolicy policy) {
  return impl_->SetConsistencyPolicy(policy);
}

absl::Status ArrayImpl::SetConsistencyPolicy(ConsistencyPolicy policy) {
  MutexLock policy_lock(&policy_mu_);
  ConsistencyPolicy now;
  Superblock tmpl;
  {
    MutexLock lock(roster_.mu());
    tmpl = roster_.TemplateLocked();
  }
  if (tmpl.has_ppl()) {
    now = ConsistencyPolicy::kPpl;
  } else if (bitmap_.known() ||
             (tmpl.feature_map & kFeatureBitmapOffset) != 0) {
    now = ConsistencyPolicy::kBitmap;
  } else {
    now = ConsistencyPolicy::kResync;
  }
  if (now == policy) {
    return absl::AlreadyExistsError(absl::StrFormat(
        "consistency policy is already %s", ConsistencyPolicyName(policy)));
  }
  if (policy == ConsistencyPolicy::kBitmap ||
      now == ConsistencyPolicy::kBitmap) {
    // md changes only between resync and ppl (a bitmap comes and goes with
    // --grow --bitmap), and uraid cannot add or remove one online.
    return absl::InvalidArgumentError(absl::StrFormat(
        "cannot change the consistency policy from %s to %s: %s",
        ConsistencyPolicyName(now), ConsistencyPolicyName(policy),
        policy == ConsistencyPolicy::kBitmap
            ? "md adds a bitmap with --grow --bitmap, not "
              "--consistency-policy, and uraid does not add one to an "
              "existing array"
            : "md changes only between resync and ppl; a PPL is not "
              "compatible with a bitmap, which uraid cannot remove from an "
              "existing array"));
  }
  if (read_only_) return absl::FailedPreconditionError("array is read-only");
  RETURN_IF_ERROR(faults_.CheckUsable(true));

  if (policy == ConsistencyPolicy::kResync) {
    // The superblocks first: from their write on, a crash resyncs.
    {
      MutexLock lock(roster_.mu());
      const uint32_t features = roster_.TemplateLocked().feature_map;
      // bitmap_offset 0: the ppl.offset/ppl.size union, cleared.
      roster_.SetPolicyFieldsLocked(
          features & ~(kFeaturePpl | kFeatureMultiplePpls), 0);
    }
    if (absl::Status st = WriteSuperblocks(std::nullopt); !st.ok()) {
      MutexLock lock(roster_.mu());
      roster_.SetPolicyFieldsLocked(tmpl.feature_map, tmpl.bitmap_offset);
      return absl::Status(
          st.code(), absl::StrCat("switching to consistency policy resync: "
                                  "writing the superblocks: ",
                                  st.message()));
    }
    ppl_.store(nullptr);
    ppl_epochs_.Drain();  // no write logs to the old area any more
    Log(LogLevel::kInfo, "consistency policy is now resync (was ppl)");
    return absl::OkStatus();
  }

  // resync -> ppl. Never during a reshape (refused below), so the current
  // shape is the only one.
  const Geometry& geo = CurrentShape().geo;
  if (geo.level() != 5) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "consistency policy ppl is only supported for RAID level 5, not %d",
        geo.level()));
  }
  if (jobs_.reshape().running() || jobs_.reshape().queued()) {
    return absl::FailedPreconditionError(
        "PPL cannot be enabled when reshape is in progress");
  }
  if (resync_stripe_.load() < geo.stripe_count() || jobs_.resync().running()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the array is resyncing (parity of stripes from %d on is not yet "
        "consistent, and a log replay would mark it clean): wait for the "
        "resync to finish before switching to ppl",
        resync_stripe_.load()));
  }
  ASSIGN_OR_RETURN(const uint16_t size, PplSpaceSectors(tmpl));
  Superblock with = tmpl;
  with.feature_map |= kFeaturePpl;
  with.set_ppl(kPplDefaultOffsetSectors, size);
  ASSIGN_OR_RETURN(std::shared_ptr<PplLog> log, PplLog::Make(geo, with));

  // Every member that takes writes starts with md's empty log. The areas
  // are unused under resync, so this races with nothing.
  std::vector<std::pair<std::shared_ptr<Member>, uint64_t>> targets;
  {
    MutexLock lock(roster_.mu());
    for (const auto& s : slots_) {
      if (std::shared_ptr<Member> m = s->member.load()) {
        targets.emplace_back(m, s->id.data_size_sectors);
      }
      if (std::shared_ptr<Member> r = s->replacement.load()) {
        targets.emplace_back(r, s->repl_id.data_size_sectors);
      }
    }
  }
  for (const auto& [m, data_size] : targets) {
    Superblock mine = with;
    mine.data_size = data_size;
    RETURN_IF_ERROR(InitPplArea(*m, mine));
  }
  // Gathered writes go out before the log is attached: the log takes
  // whole sectors only, and a gathered piece may be smaller.
  RETURN_IF_ERROR(engine_.writer().WritebackAll());

  ppl_.store(log);
  ppl_epochs_.Drain();  // every stripe write that read "no log" is done
  auto detach = [&](const absl::Status& st, const char* step) {
    ppl_.store(nullptr);
    ppl_epochs_.Drain();
    return absl::Status(
        st.code(), absl::StrFormat("switching to consistency policy ppl: %s: "
                                   "%s (the policy stays resync)",
                                   step, st.message()));
  };
  // ... and durable, so none of them can be torn by a crash.
  if (absl::Status st =
          engine_.writer().FlushSlots(std::vector<bool>(SlotCount(), true));
      !st.ok()) {
    return detach(st, "flushing the members");
  }
  {
    MutexLock lock(roster_.mu());
    Superblock with_ppl = roster_.TemplateLocked();
    with_ppl.feature_map |= kFeaturePpl;
    with_ppl.set_ppl(kPplDefaultOffsetSectors, size);
    roster_.SetPolicyFieldsLocked(with_ppl.feature_map, with_ppl.bitmap_offset);
  }
  if (absl::Status st = WriteSuperblocks(std::nullopt); !st.ok()) {
    {
      MutexLock lock(roster_.mu());
      roster_.SetPolicyFieldsLocked(tmpl.feature_map, tmpl.bitmap_offset);
    }
    return detach(st, "writing the superblocks");
  }
  Log(LogLevel::kInfo,
      absl::StrFormat("consistency policy is now ppl (was resync): a %u-sector "
                      "log 8 sectors past each superblock",
                      size));
  return absl::OkStatus();
}

}  // namespace uraid
