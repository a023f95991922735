// SPDX-License-Identifier: MIT
// The array's bad-block lists kept on the members (md's bad-block log):
// recording a range a member could not read or write, clearing one a write
// made good, and the log writes that make either durable. The lists
// themselves are the slots' (Slot::bad, meta/bad_block_list.h); the data
// path reads them without the array.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array/member_faults.h"
#include "base/status_macros.h"
#include "uraid/bad_blocks.h"

namespace uraid {

absl::Status MemberFaults::WriteBadBlockLogLocked(Member& m,
                                                  const BadBlockList& list) {
  const std::optional<BadBlockLogArea> area =
      BadBlockLogAreaOf(roster_.TemplateLocked());
  if (!area.has_value()) {
    return absl::FailedPreconditionError(
        "the array's members have no bad-block log (created without one; "
        "md's rule: an error that cannot be recorded fails the member)");
  }
  const std::vector<BadBlock> blocks = list.Snapshot();
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                   EncodeBadBlockLog(blocks, area->shift, area->size_bytes));
  return WriteDurably(m, bytes.data(), bytes.size(), area->offset_bytes);
}

std::string MemberFaults::DescribeMemberRange(int slot, uint64_t at,
                                              uint64_t len) const {
  const Shape& sh = shapes_.current();
  const Geometry& geo = sh.geo;
  if (at < sh.data_offset || slot >= geo.raid_disks()) {
    return "no array data";
  }
  const uint64_t C = geo.chunk_bytes();
  std::string out;
  // Piece by piece within each chunk: a range may cross stripes.
  for (uint64_t off = at - sh.data_offset, end = off + len; off < end;) {
    const uint64_t stripe = off / C;
    const uint64_t n = std::min(end - off, C - off % C);
    if (stripe >= geo.stripe_count()) break;
    if (!out.empty()) absl::StrAppend(&out, ", ");
    if (geo.ParityDisk(stripe) == slot) {
      absl::StrAppendFormat(&out, "parity of stripe %d", stripe);
    } else if (std::optional<uint64_t> a = geo.Unmap(slot, off);
               a.has_value()) {
      absl::StrAppendFormat(&out, "array bytes %d-%d", *a, *a + n - 1);
    }
    off += n;
  }
  return out.empty() ? "no array data" : out;
}

absl::Status MemberFaults::RecordBadBlocks(int slot, bool replacement,
                                           const Member* only_if, uint64_t at,
                                           uint64_t len,
                                           const std::string& why) {
  if (slot < 0 || slot >= roster_.SlotCount() || len == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bad-block range on slot %d of %d bytes", slot, len));
  }
  Slot& s = *slots_[slot];
  BadBlockList& list = replacement ? s.repl_bad : s.bad;
  const uint64_t first = at / 512;
  const uint64_t sectors = (at + len + 511) / 512 - first;
  std::shared_ptr<Member> m;
  absl::Status st;
  bool added = false;
  {
    MutexLock lock(roster_.mu());
    m = replacement ? s.replacement.load() : s.member.load();
    if (m == nullptr || (only_if != nullptr && m.get() != only_if)) {
      return absl::AbortedError(absl::StrFormat(
          "slot %d changed members before its bad block could be recorded",
          slot));
    }
    if (read_only_) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "array is read-only: bad block on %s at member bytes %d-%d not "
          "recorded",
          m->Name(), at, at + len - 1));
    }
    const std::vector<BadBlock> before = list.Snapshot();
    added = list.Add(first, sectors);
    if (added) {
      st = WriteBadBlockLogLocked(*m, list);
      if (!st.ok()) {
        list.Reset(before);
      } else if (!replacement) {
        s.stats.bad_block_records.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  if (!st.ok()) {
    // md's rule: an error that cannot be recorded fails the member.
    const std::string reason = absl::StrFormat(
        "%s; and its bad block (member bytes %d-%d) could not be recorded: %s",
        why, at, at + len - 1, st.message());
    if (replacement) {
      roster_.Apply(edit::DropReplacement{slot, m, absl::DataLossError(reason),
                                          /*report=*/true,
                                          edit::DropReplacement::kNever});
    } else {
      RecordBackgroundError(FailSlot(slot, reason, m.get()),
                            absl::StrFormat("the failure of slot %d", slot));
    }
    return absl::DataLossError(absl::StrFormat("member %s (slot %d) failed: %s",
                                               m->Name(), slot, reason));
  }
  // The BAD_BLOCKS bit goes into the superblocks before anything relies on
  // the entry: without it md (and the next assembly) would not read the log.
  if (!list.flag_durable.load())
    RETURN_IF_ERROR(ApplyEdit(edit::Persist{}).status);
  if (!added) return absl::OkStatus();
  const std::string what = replacement ? "replacement (no array data yet)"
                                       : DescribeMemberRange(slot, at, len);
  Event e = MakeEvent("BadBlocksRecorded", m->Name(), slot);
  e.details.emplace_back("first_sector", static_cast<int64_t>(first));
  e.details.emplace_back("sectors", static_cast<int64_t>(sectors));
  e.details.emplace_back("error", why);
  e.details.emplace_back("affects", what);
  reporter_.Report(
      LogLevel::kWarning, std::move(e),
      absl::StrFormat("member %s (slot %d): sectors %d-%d recorded in its "
                      "bad-block log (%s): %s; %d ranges now listed",
                      m->Name(), slot, first, first + sectors - 1, why, what,
                      list.size()));
  return absl::OkStatus();
}

void MemberFaults::WantReplacement(int slot, const Member* only_if,
                                   const std::string& why) {
  Slot& s = *slots_[slot];
  std::shared_ptr<Member> m = s.member.load();
  if (m == nullptr || (only_if != nullptr && m.get() != only_if)) return;
  if (s.want_replacement.exchange(true)) return;
  const bool spare = roster_.FirstSpare() != nullptr;
  Event e = MakeEvent("WantReplacement", m->Name(), slot);
  e.details.emplace_back("error", why);
  reporter_.Report(
      LogLevel::kWarning, std::move(e),
      absl::StrFormat(
          "member %s (slot %d) had a write error (%s), recorded in its "
          "bad-block log instead of failing it; it should be replaced "
          "(md's want_replacement): %s",
          m->Name(), slot, why,
          spare ? "a spare starts copying it"
                : "add a spare, or run uraid replace"));
  start_recovery_();
}

absl::Status MemberFaults::ClearBadBlocks(int slot, const Member* only_if,
                                          uint64_t at, uint64_t len) {
  Slot& s = *slots_[slot];
  // Only whole sectors the write covered.
  const uint64_t first = (at + 511) / 512;
  const uint64_t end = (at + len) / 512;
  if (end <= first || s.bad.empty()) return absl::OkStatus();
  std::shared_ptr<Member> m;
  {
    MutexLock lock(roster_.mu());
    m = s.member.load();
    if (m == nullptr || (only_if != nullptr && m.get() != only_if) ||
        read_only_) {
      return absl::OkStatus();
    }
    const std::vector<BadBlock> before = s.bad.Snapshot();
    if (!s.bad.Clear(first, end - first)) return absl::OkStatus();
    if (absl::Status st = WriteBadBlockLogLocked(*m, s.bad); !st.ok()) {
      // The entry stays: reads keep rebuilding the range from parity,
      // which holds what was written.
      s.bad.Reset(before);
      return st;
    }
  }
  reporter_.Log(
      LogLevel::kNotice,
      absl::StrFormat("member %s (slot %d): sectors %d-%d rewritten and "
                      "cleared from its bad-block log; %d ranges left",
                      m->Name(), slot, first, end - 1, s.bad.size()));
  return absl::OkStatus();
}

}  // namespace uraid
