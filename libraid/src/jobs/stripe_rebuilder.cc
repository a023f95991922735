// SPDX-License-Identifier: MIT
// Recovery's stripe work (stripe_rebuilder.h).
#include "jobs/stripe_rebuilder.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "jobs/job_runner.h"

namespace uraid {

StripeRebuilder::StripeRebuilder(const EngineContext& ctx, StripeReader& reader,
                                 TaskPool& pool, ArrayBitmap& bitmap,
                                 Roster& roster)
    : EnginePart(ctx),
      reader_(reader),
      pool_(pool),
      bitmap_(bitmap),
      roster_(roster) {}

uint64_t StripeRebuilder::SkipWindow(const Shape& sh, int slot, uint64_t from,
                                     uint64_t count) {
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t base = sh.data_offset;
  Slot& s = *slots_[slot];
  const std::shared_ptr<Member> target = s.member.load();
  const bool partial = s.partial.load() && bitmap_.intent() != nullptr;
  count = std::min(count, sh.geo.stripe_count() - from);
  uint64_t B = 0;
  if (partial) {
    // Whole bitmap regions at a time: a window that reaches into a region
    // with its bit set would be rebuilt stripe by stripe up to it.
    B = bitmap_.intent()->chunk_bytes();
    const uint64_t region_end = (from * C / B + 1) * B;
    count = std::min(count, std::max<uint64_t>(1, (region_end - from * C) / C));
  }
  if (count == 0 || target == nullptr) return 0;
  const auto holes = [&]() {
    for (int i = 0; i < sh.geo.raid_disks(); ++i) {
      std::shared_ptr<Member> m = slots_[i]->member.load();
      if (m == nullptr) {
        if (i == slot) return false;
        continue;
      }
      if (i != slot && !slots_.Usable(i)) continue;
      absl::StatusOr<uint64_t> d = m->NextDataOffset(base + from * C);
      if (!d.ok() || *d < base + (from + count) * C) return false;
    }
    return true;
  };
  // A write sets its region's bit (under its stripe lock) before it skips
  // the rebuilding member, so a clear region has had no write the member
  // missed.
  const auto clear = [&]() {
    if (!partial) return false;
    const uint64_t last = ((from + count) * C - 1) / B;
    for (uint64_t k = from * C / B; k <= last; ++k) {
      if (k >= bitmap_.intent()->chunks() || bitmap_.intent()->IsChunkDirty(k))
        return false;
    }
    return true;
  };
  // Ask first without locks: most windows of a full rebuild hold data.
  if (!clear() && !holes()) return 0;
  // Then again with every stripe of the window locked (ascending order, as
  // the lock rule allows): no write can slip in between the answer and the
  // front moving past it.
  for (uint64_t st = from; st < from + count; ++st) {
    locks_.Lock(LockKey(sh, st));
  }
  const bool was_clear = clear();
  bool ok = was_clear || holes();
  if (ok) {
    // The member could have failed and another taken the slot since the
    // look above; the roster checks under the mutex hand-overs take.
    ok = roster_.SkipFront(slot, target.get(), from, from + count, was_clear);
  }
  for (uint64_t st = from; st < from + count; ++st) {
    locks_.Unlock(LockKey(sh, st));
  }
  return ok ? count : 0;
}

uint64_t StripeRebuilder::SkipPairWindow(const Shape& sh,
                                         const RebuildTarget (&pair)[2],
                                         uint64_t from, uint64_t count) {
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t base = sh.data_offset;
  count = std::min(count, sh.geo.stripe_count() - from);
  if (count == 0) return 0;
  const auto held = [&]() {
    for (const RebuildTarget& t : pair) {
      bool to_repl;
      if (!Holds(t, &to_repl) || to_repl ||
          slots_[t.slot]->front.load() != from) {
        return false;
      }
    }
    return true;
  };
  // Holes on every member that can serve and on both targets.
  const auto holes = [&]() {
    for (int i = 0; i < sh.geo.raid_disks(); ++i) {
      const bool target = i == pair[0].slot || i == pair[1].slot;
      if (!target && !slots_.Usable(i)) continue;
      std::shared_ptr<Member> m = slots_[i]->member.load();
      if (m == nullptr) return false;
      absl::StatusOr<uint64_t> d = m->NextDataOffset(base + from * C);
      if (!d.ok() || *d < base + (from + count) * C) return false;
    }
    return true;
  };
  if (!held() || !holes()) return 0;
  // Again with the window's stripes locked (SkipWindow's reasoning).
  for (uint64_t st = from; st < from + count; ++st) {
    locks_.Lock(LockKey(sh, st));
  }
  bool ok = held() && holes();
  // The roster moves each front only while its member still holds the
  // slot there; a target lost in between is seen by the next window.
  for (int k = 0; ok && k < 2; ++k) {
    ok = roster_.SkipFront(pair[k].slot, pair[k].member, from, from + count,
                           /*need_partial=*/false) ||
         k == 1;
  }
  for (uint64_t st = from; st < from + count; ++st) {
    locks_.Unlock(LockKey(sh, st));
  }
  return ok ? count : 0;
}

absl::Status StripeRebuilder::RebuildStripeLocked(const Shape& sh, int slot,
                                                  uint64_t stripe, uint8_t* buf,
                                                  size_t buf_len,
                                                  bool* target_gone) {
  *target_gone = false;
  const uint64_t C = sh.geo.chunk_bytes();
  Slot& s = *slots_[slot];
  RETURN_IF_ERROR(host_.CheckUsable(false));
  for (uint64_t w = 0; w < C; w += buf_len) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(buf_len, C - w));
    const SlotState state = s.state.load();
    const bool replace =
        state == SlotState::kActive && s.replacement.load() != nullptr;
    if (state != SlotState::kRebuilding && !replace) {
      *target_gone = true;
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(FillPieceLocked(sh, slot, stripe, w, len, buf, replace));
    // The old member may have failed while being read: its replacement is
    // then the slot's member, rebuilding.
    const bool to_repl = s.Copying();
    if (!to_repl && s.state.load() != SlotState::kRebuilding) {
      *target_gone = true;
      return absl::OkStatus();
    }
    std::vector<MemberIo> io{
        MemberIo{MemberIo::kWrite, slot, buf, len, stripe * C + w, {}}};
    io[0].to_replacement = to_repl;
    io[0].keep_sparse = true;  // the caller holds the stripe lock
    io_.Submit(sh, io);
    if (!io[0].status.ok()) {
      bool slot_failed;
      (void)host_.AbsorbFailures(io, &slot_failed);
      *target_gone = true;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status StripeRebuilder::FillPieceLocked(const Shape& sh, int slot,
                                              uint64_t stripe, uint64_t w,
                                              size_t len, uint8_t* buf,
                                              bool replace) {
  // Replace copies from the old member (parity steps in if it fails);
  // recovery rebuilds from the others.
  absl::Status rs =
      replace ? reader_.ReadPieceDegraded(sh, stripe, slot, w, len, buf)
              : reader_.ReconstructLocked(sh, stripe, slot, w, len, buf);
  if (rs.code() == absl::StatusCode::kDataLoss &&
      host_.CheckUsable(false).ok()) {
    rs = RebuildAroundLossLocked(sh, slot, stripe, w, len, buf, replace);
  }
  return rs;
}

bool StripeRebuilder::Holds(const RebuildTarget& t, bool* to_repl) const {
  const Slot& s = *slots_[t.slot];
  const SlotState st = s.state.load();
  if (st == SlotState::kRebuilding && s.member.load().get() == t.member) {
    *to_repl = false;
    return true;
  }
  *to_repl = true;
  return st == SlotState::kActive && s.replacement.load().get() == t.member;
}

absl::Status StripeRebuilder::RebuildPairStripeLocked(
    const Shape& sh, const RebuildTarget (&pair)[2], uint64_t stripe,
    uint8_t* buf, size_t buf_len, bool* target_gone) {
  *target_gone = false;
  const uint64_t C = sh.geo.chunk_bytes();
  RETURN_IF_ERROR(host_.CheckUsable(false));
  for (uint64_t w = 0; w < C; w += buf_len) {
    const size_t len = static_cast<size_t>(std::min<uint64_t>(buf_len, C - w));
    // The targets this stripe still needs: a front already past it (a
    // target resumed further on) means it is in sync there.
    struct Need {
      int t;  // index in `pair`
      int slot;
      bool to_repl;
      uint8_t* at;
    };
    Need need[2];
    int n = 0;
    for (int k = 0; k < 2; ++k) {
      const Slot& s = *slots_[pair[k].slot];
      bool to_repl;
      if (!Holds(pair[k], &to_repl)) {
        *target_gone = true;
        return absl::OkStatus();
      }
      if (stripe < (to_repl ? s.repl_front.load() : s.front.load())) continue;
      need[n++] = Need{k, pair[k].slot, to_repl, buf + k * buf_len};
    }
    if (n == 0) return absl::OkStatus();
    // Both at once, each member read once. RAID6: a replace target's slot
    // is rebuilt too rather than copied (its old member's read would be a
    // second pass over that member). Level 5: the replaced member is read
    // once, its rows both the copy and a source of the failed slot's
    // rebuild (one at a time, the copy and the rebuild each read it).
    // Anything in the way (a slot that cannot help, a bad block, a read
    // error) falls back to one target at a time, which corrects, records or
    // fails as a single rebuild does.
    const bool joint =
        n == 2 &&
        reader_
            .ReconstructPairLocked(sh, stripe, need[0].slot, need[1].slot, w,
                                   len, need[0].at,
                                   static_cast<size_t>(need[1].at - need[0].at))
            .ok();
    if (!joint) {
      for (int k = 0; k < n; ++k) {
        RETURN_IF_ERROR(FillPieceLocked(sh, need[k].slot, stripe, w, len,
                                        need[k].at, need[k].to_repl));
      }
    }
    std::vector<MemberIo> io;
    for (int k = 0; k < n; ++k) {
      // A replace target may have taken over its failed slot meanwhile: it
      // is then the slot's member.
      bool to_repl;
      if (!Holds(pair[need[k].t], &to_repl)) {
        *target_gone = true;
        return absl::OkStatus();
      }
      io.push_back(MemberIo{
          MemberIo::kWrite, need[k].slot, need[k].at, len, stripe * C + w, {}});
      io.back().to_replacement = to_repl;
      io.back().keep_sparse = true;  // the caller holds the stripe lock
    }
    io_.Submit(sh, io);
    if (std::any_of(io.begin(), io.end(),
                    [](const MemberIo& x) { return !x.status.ok(); })) {
      bool slot_failed;
      (void)host_.AbsorbFailures(io, &slot_failed);
      *target_gone = true;
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status StripeRebuilder::RebuildAroundLossLocked(const Shape& sh, int slot,
                                                      uint64_t stripe,
                                                      uint64_t w, size_t len,
                                                      uint8_t* buf,
                                                      bool replace) {
  constexpr uint64_t kBlock = 4096;  // md's STRIPE_SIZE
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t base = sh.data_offset + stripe * C;
  Slot& s = *slots_[slot];
  for (uint64_t x = w, end = w + len; x < end;) {
    const uint64_t next =
        std::min<uint64_t>(end, (base + x) / kBlock * kBlock + kBlock - base);
    const size_t n = static_cast<size_t>(next - x);
    uint8_t* at = buf + (x - w);
    absl::Status st =
        replace ? reader_.ReadPieceDegraded(sh, stripe, slot, x, n, at)
                : reader_.ReconstructLocked(sh, stripe, slot, x, n, at);
    if (st.code() == absl::StatusCode::kDataLoss) {
      // The row is lost for this slot: the target keeps an entry for it,
      // so nothing ever reads what is written there.
      std::memset(at, 0, n);
      const bool to_repl = s.Copying();
      std::shared_ptr<Member> target =
          to_repl ? s.replacement.load() : s.member.load();
      RETURN_IF_ERROR(host_.RecordBadBlocks(
          slot, to_repl, target.get(), base + x, n,
          absl::StrFormat("%s could not rebuild it: %s",
                          replace ? "replace" : "recovery", st.message())));
      MutexLock lock(&lost_mu_);
      lost_bytes_ += n;
      if (sh.geo.ParityDisk(stripe) != slot && lost_at_.size() < 16) {
        if (std::optional<uint64_t> a = sh.geo.Unmap(slot, stripe * C + x)) {
          lost_at_.push_back(*a);
        }
      }
    } else if (!st.ok()) {
      return st;
    }
    x = next;
  }
  return absl::OkStatus();
}

uint64_t StripeRebuilder::TakeUnrecovered(std::vector<uint64_t>* where) {
  MutexLock lock(&lost_mu_);
  const uint64_t n = lost_bytes_;
  *where = std::move(lost_at_);
  lost_at_.clear();
  lost_bytes_ = 0;
  return n;
}

uint64_t StripeRebuilder::RebuildStripes(const Shape& sh, int slot,
                                         uint64_t from, uint64_t count,
                                         uint8_t* bufs, size_t buf_len,
                                         absl::Status* error,
                                         bool* target_gone) {
  Slot& s = *slots_[slot];
  return SlideWindow(
      sh, from, count,
      [&](uint64_t stripe, uint64_t worker, bool* gone) {
        return RebuildStripeLocked(sh, slot, stripe, bufs + worker * buf_len,
                                   buf_len, gone);
      },
      [&](uint64_t front) {
        if (s.state.load() == SlotState::kRebuilding) {
          s.front.store(front, std::memory_order_release);
        } else {
          s.repl_front.store(front, std::memory_order_release);
        }
      },
      error, target_gone);
}

uint64_t StripeRebuilder::RebuildPair(const Shape& sh,
                                      const RebuildTarget (&pair)[2],
                                      uint64_t from, uint64_t count,
                                      uint8_t* bufs, size_t buf_len,
                                      absl::Status* error, bool* target_gone) {
  return SlideWindow(
      sh, from, count,
      [&](uint64_t stripe, uint64_t worker, bool* gone) {
        return RebuildPairStripeLocked(
            sh, pair, stripe, bufs + worker * 2 * buf_len, buf_len, gone);
      },
      [&](uint64_t front) {
        // Only this pass moves the fronts; one resumed further on stays.
        for (const RebuildTarget& t : pair) {
          Slot& s = *slots_[t.slot];
          bool to_repl;
          if (!Holds(t, &to_repl)) continue;
          std::atomic<uint64_t>& f = to_repl ? s.repl_front : s.front;
          if (f.load() < front) f.store(front, std::memory_order_release);
        }
      },
      error, target_gone);
}

uint64_t StripeRebuilder::SlideWindow(
    const Shape& sh, uint64_t from, uint64_t count,
    const std::function<absl::Status(uint64_t stripe, uint64_t worker,
                                     bool* gone)>& one,
    const std::function<void(uint64_t front)>& advance, absl::Status* error,
    bool* target_gone) {
  *error = absl::OkStatus();
  *target_gone = false;
  count = std::min(count, sh.geo.stripe_count() - from);
  if (count == 0) return 0;
  // A sliding window: kJobDepth workers claim the window's stripes in
  // order, each taking the next as soon as its last is done, so one
  // stripe's write overlaps the next stripes' reads and the members only
  // drain at the window's end. Stripe locks are taken as stripes are
  // claimed, in ascending order: the first waited for (nothing is held
  // then), the rest only while free, so a client holding a stripe further
  // on ends the window there instead of holding up the stripes before it.
  // A stripe's lock is held until the front has moved past it, so no
  // client write can slip between its copy and the front; the front moves
  // (and those locks go) as soon as an unbroken run from `from` is done.
  struct Window {
    Mutex mu;
    uint64_t next ABSL_GUARDED_BY(mu) = 1;        // next to claim; 0 is claimed
    uint64_t end ABSL_GUARDED_BY(mu);             // claims stop here
    uint64_t prefix ABSL_GUARDED_BY(mu) = 0;      // done from `from`, unlocked
    std::vector<char> state ABSL_GUARDED_BY(mu);  // 0 busy, 1 done, 2 not
    std::vector<absl::Status> status ABSL_GUARDED_BY(mu);
    std::vector<char> gone ABSL_GUARDED_BY(mu);
  } w;
  {
    MutexLock lock(&w.mu);
    w.end = count;
    w.state.assign(count, 0);
    w.status.assign(count, absl::OkStatus());
    w.gone.assign(count, 0);
  }
  locks_.Lock(LockKey(sh, from));
  auto finish = [&](uint64_t i, absl::Status st, bool gone) {
    MutexLock lock(&w.mu);
    const bool ok = st.ok() && !gone;
    w.state[i] = ok ? 1 : 2;
    w.status[i] = std::move(st);
    w.gone[i] = gone;
    if (!ok) w.end = std::min(w.end, i + 1);  // nothing new past a failure
    const uint64_t was = w.prefix;
    while (w.prefix < count && w.state[w.prefix] == 1) ++w.prefix;
    if (w.prefix == was) return;
    advance(from + w.prefix);
    counters_.recovered_stripes.fetch_add(w.prefix - was,
                                          std::memory_order_relaxed);
    for (uint64_t k = was; k < w.prefix; ++k) {
      locks_.Unlock(LockKey(sh, from + k));
    }
  };
  const uint64_t workers = std::min<uint64_t>(count, kJobDepth);
  pool_.RunEach(workers, [&](uint64_t worker) {
    uint64_t i = worker == 0 ? 0 : count;  // worker 0 starts with stripe 0
    for (;;) {
      if (i == count) {
        MutexLock lock(&w.mu);
        if (w.next >= w.end) return;
        if (!locks_.TryLock(LockKey(sh, from + w.next))) {
          w.end = w.next;
          return;
        }
        i = w.next++;
      }
      bool gone = false;
      absl::Status st = one(from + i, worker, &gone);
      finish(i, std::move(st), gone);
      i = count;
    }
  });
  MutexLock lock(&w.mu);
  // Stripes claimed past a failed one were copied too, but the front may
  // claim only an unbroken run; they are done again on the next attempt.
  for (uint64_t k = w.prefix; k < w.next; ++k) {
    locks_.Unlock(LockKey(sh, from + k));
  }
  if (w.prefix < count && w.prefix < w.next) {
    *error = w.status[w.prefix];
    *target_gone = w.gone[w.prefix];
  }
  return w.prefix;
}

}  // namespace uraid
