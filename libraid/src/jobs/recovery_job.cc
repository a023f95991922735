// SPDX-License-Identifier: MIT
// Recovery onto a spare and replace (RecoveryJob): each window of stripes
// rebuilt (or copied) onto the target under the stripes' locks, holes
// skipped where every member has one, the position checkpointed as md
// does.

#include "jobs/recovery_job.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
#include "base/status_macros.h"

namespace uraid {
namespace {

// Recovery persists its position this often (md checkpoints as it goes).
constexpr int64_t kCheckpointNs = 1'000'000'000;
// Stripes examined per hole-skipping step (their locks are held together).
constexpr uint64_t kHoleWindowStripes = 256;
// Work per member I/O of a rebuild: bounds memory for large chunks.
constexpr uint64_t kRebuildWindow = 1 << 20;
// Stripes one rebuild window may take (kJobDepth of them in flight at
// once): the members drain only at a window's end, so a long window keeps
// them busy; the stripe locks of done stripes go as the front passes them.
constexpr uint64_t kRecoveryWindowStripes = 8 * kJobDepth;

}  // namespace

absl::Status RecoveryJob::Checkpoint(int slot) {
  Slot& s = *roster_.slots()[slot];
  if (s.state.load() != SlotState::kRebuilding) return absl::OkStatus();
  // The superblock may claim only what is durable on the target.
  const uint64_t front = s.front.load();
  std::vector<bool> which(roster_.SlotCount(), false);
  which[slot] = true;
  RETURN_IF_ERROR(writer_.FlushSlots(which));
  // Refused (nothing written) when the target failed meanwhile.
  return host_.ApplyEdit(edit::CheckpointRebuild{slot, front}).status;
}

void RecoveryJob::TakeUnrecovered() {
  std::vector<uint64_t> where;
  if (const uint64_t lost = rebuilder_.TakeUnrecovered(&where); lost > 0) {
    runner_.AddUnrecovered(lost, where);
  }
}

absl::Status RecoveryJob::CheckpointPair(int a, int b) {
  Slot& sa = *roster_.slots()[a];
  Slot& sb = *roster_.slots()[b];
  const bool ra = sa.state.load() == SlotState::kRebuilding;
  const bool rb = sb.state.load() == SlotState::kRebuilding;
  if (!ra && !rb) return absl::OkStatus();  // replace copies: not kept
  // The superblocks may claim only what is durable on the targets.
  const uint64_t fa = sa.front.load(), fb = sb.front.load();
  std::vector<bool> which(roster_.SlotCount(), false);
  which[a] = ra;
  which[b] = rb;
  RETURN_IF_ERROR(writer_.FlushSlots(which));
  return host_
      .ApplyEdit(edit::CheckpointRebuild{ra ? a : -1, fa, rb ? b : -1, fb})
      .status;
}

absl::Status RecoveryJob::RunPair(const Shape& sh, int a, int b) {
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t stripes = sh.geo.stripe_count();
  const size_t piece = static_cast<size_t>(std::min(C, kRebuildWindow));
  // Each target as the pass starts: its member (the replace target for an
  // active slot), its front, and a name for the log.
  RebuildTarget pair[2];
  std::shared_ptr<Member> held[2];
  uint64_t start = stripes;
  std::string names[2];
  for (int k = 0; k < 2; ++k) {
    const int slot = k == 0 ? a : b;
    Slot& s = *roster_.slots()[slot];
    const bool replace = s.state.load() == SlotState::kActive;
    held[k] = replace ? s.replacement.load() : s.member.load();
    if (held[k] == nullptr) {
      return absl::AbortedError(absl::StrFormat(
          "slot %d has no recovery or replace target any more", slot));
    }
    pair[k] = RebuildTarget{slot, held[k].get()};
    start = std::min(start, replace ? s.repl_front.load() : s.front.load());
    names[k] = absl::StrFormat("slot %d onto %s%s", slot, held[k]->Name(),
                               replace ? " (replace)" : "");
  }
  host_.Log(LogLevel::kInfo,
            absl::StrFormat("recover: rebuilding %s and %s in one pass from "
                            "stripe %d",
                            names[0], names[1], start));
  AlignedBuffer bufs = AlignedBuffer::FilledWhole(2 * piece * kJobDepth);
  uint64_t stripe = start;
  StripePass pass;
  pass.stripe_work = C;
  pass.max_window = kRecoveryWindowStripes;
  pass.skip = [&](uint64_t at) {
    return at + rebuilder_.SkipPairWindow(sh, pair, at, kHoleWindowStripes);
  };
  pass.work = [&](uint64_t at, uint64_t count, absl::Status* error) {
    bool target_gone;
    const uint64_t done = rebuilder_.RebuildPair(
        sh, pair, at, count, bufs.data(), piece, error, &target_gone);
    TakeUnrecovered();
    if (error->ok() && target_gone) {
      *error = absl::AbortedError(absl::StrFormat(
          "a target of the recovery of slots %d and %d failed or was removed",
          a, b));
    }
    return done;
  };
  int64_t last_checkpoint = runner_.NowNs();
  pass.moved = [&](uint64_t at) -> absl::Status {
    runner_.Progress(at * C);
    if (runner_.NowNs() - last_checkpoint > kCheckpointNs) {
      RETURN_IF_ERROR(CheckpointPair(a, b));
      last_checkpoint = runner_.NowNs();
    }
    return absl::OkStatus();
  };
  runner_.Progress(stripe * C);
  absl::Status ran = runner_.RunStripePass(pass, stripes, &stripe);
  if (!ran.ok()) {
    // The target that is left keeps what it has: checkpointed now (md
    // keeps a failed pass's progress too), rebuilt on from there.
    (void)CheckpointPair(a, b);
    return ran;
  }
  if (stripe < stripes) return CheckpointPair(a, b);  // stopped
  // Durable first, then the slots change hands.
  std::vector<bool> which(roster_.SlotCount(), false);
  which[a] = which[b] = true;
  RETURN_IF_ERROR(writer_.FlushSlots(which));
  absl::Status result;
  bool finished = false;
  for (const int slot : {a, b}) {
    if (roster_.slots()[slot]->state.load() != SlotState::kRebuilding) continue;
    const Applied f =
        roster_.Apply(edit::FinishRebuild{slot, stripes, /*persist=*/false});
    if (f.status.ok()) {
      finished = true;
    } else if (result.ok()) {
      result = f.status;
    }
  }
  if (finished) {
    // Whole again: the bits kept for writes made while degraded have done
    // their job (every stripe was rebuilt after them).
    if (bitmap_.intent() != nullptr && roster_.slots().Gone() == 0) {
      bitmap_.intent()->ForEachDirtyChunk(
          [this](uint64_t k) { bitmap_.intent()->ClearChunk(k); });
    }
    RETURN_IF_ERROR(host_.ApplyEdit(edit::Persist{}).status);
  }
  for (int k = 0; k < 2; ++k) {
    const Slot& s = *roster_.slots()[pair[k].slot];
    if (s.state.load() != SlotState::kActive ||
        s.replacement.load() != held[k]) {
      continue;
    }
    const absl::Status st =
        host_.ApplyEdit(edit::SwapInReplacement{pair[k].slot}).status;
    if (result.ok()) result = st;
  }
  return result;
}

absl::Status RecoveryJob::Run(const Shape& sh, int slot, bool replace,
                              const std::function<bool()>& pair_ready,
                              bool* paired) {
  if (paired != nullptr) *paired = false;
  Slot& s = *roster_.slots()[slot];
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t stripes = sh.geo.stripe_count();
  const size_t piece = static_cast<size_t>(std::min(C, kRebuildWindow));
  AlignedBuffer bufs = AlignedBuffer::FilledWhole(piece * kJobDepth);
  uint64_t stripe = replace ? s.repl_front.load() : s.front.load();
  if (!replace) {
    host_.Log(LogLevel::kInfo,
              absl::StrFormat(
                  "recover: rebuilding slot %d onto %s from stripe %d%s", slot,
                  s.member.load()->Name(), stripe,
                  s.partial.load() && bitmap_.intent() != nullptr
                      ? absl::StrFormat(
                            " (re-added: only the %d of %d bitmap regions "
                            "with bits set)",
                            bitmap_.intent()->DirtyChunks(),
                            bitmap_.intent()->chunks())
                      : ""));
  }
  StripePass pass;
  pass.stripe_work = C;  // the limits count stripes rebuilt, not skipped
  pass.max_window = kRecoveryWindowStripes;
  bool pair_stop = false;
  if (pair_ready != nullptr && paired != nullptr) {
    pass.stopped = [&] { return pair_stop = pair_ready(); };
  }
  pass.skip = [&](uint64_t at) {
    if (s.state.load() != SlotState::kRebuilding) return at;
    return at + rebuilder_.SkipWindow(sh, slot, at, kHoleWindowStripes);
  };
  pass.cap = [&](uint64_t at, uint64_t want) {
    if (s.state.load() != SlotState::kRebuilding || !s.partial.load() ||
        bitmap_.intent() == nullptr) {
      return want;
    }
    // A re-added member: never past this bitmap region, whose bit was
    // set; the next one may be clear and skipped whole.
    const uint64_t B = bitmap_.intent()->chunk_bytes();
    const uint64_t region_end = (at * C / B + 1) * B;
    return std::min(want, std::max<uint64_t>(1, (region_end - at * C) / C));
  };
  pass.work = [&](uint64_t at, uint64_t count, absl::Status* error) {
    bool target_gone;
    const uint64_t done = rebuilder_.RebuildStripes(
        sh, slot, at, count, bufs.data(), piece, error, &target_gone);
    TakeUnrecovered();
    if (error->ok() && target_gone) {
      *error = absl::AbortedError(
          absl::StrFormat("the %s target for slot %d failed or was removed",
                          replace ? "replace" : "recovery", slot));
    }
    return done;
  };
  int64_t last_checkpoint = runner_.NowNs();
  pass.moved = [&](uint64_t at) -> absl::Status {
    runner_.Progress(at * C);
    if (runner_.NowNs() - last_checkpoint > kCheckpointNs) {
      RETURN_IF_ERROR(Checkpoint(slot));
      last_checkpoint = runner_.NowNs();
    }
    return absl::OkStatus();
  };
  runner_.Progress(stripe * C);
  RETURN_IF_ERROR(runner_.RunStripePass(pass, stripes, &stripe));
  if (stripe < stripes) {
    // Stopped (or handing over to a pair pass): keep the position for the
    // next run (or assembly).
    RETURN_IF_ERROR(Checkpoint(slot));
    if (pair_stop) *paired = true;
    return absl::OkStatus();
  }
  std::vector<bool> which(roster_.SlotCount(), false);
  which[slot] = true;
  if (s.state.load() == SlotState::kRebuilding) {
    RETURN_IF_ERROR(writer_.FlushSlots(which));
    // Active now (the roster tells the bitmap); the superblocks are written
    // below, after the bitmap.
    RETURN_IF_ERROR(roster_
                        .Apply(edit::FinishRebuild{slot, stripes,
                                                   /*persist=*/false})
                        .status);
    // Whole again: the bits kept for writes made while degraded have done
    // their job (every stripe was rebuilt after them).
    if (bitmap_.intent() != nullptr && roster_.slots().Gone() == 0) {
      bitmap_.intent()->ForEachDirtyChunk(
          [this](uint64_t k) { bitmap_.intent()->ClearChunk(k); });
    }
    return host_.ApplyEdit(edit::Persist{}).status;
  }
  // Replace: make the copy durable (FlushSlots also flushes the
  // replacement), then swap it into the slot.
  RETURN_IF_ERROR(writer_.FlushSlots(which));
  // Under the roster's mutex, like every hand-over: the old member failing
  // now either happened before (the replacement is already the slot's
  // rebuilding member: refused, Aborted) or waits until the swap is done.
  return host_.ApplyEdit(edit::SwapInReplacement{slot}).status;
}

}  // namespace uraid
