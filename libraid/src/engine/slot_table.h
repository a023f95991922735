// SPDX-License-Identifier: MIT
// Internal: the array's slots: which member holds each role, its state and
// rebuild fronts, and the table the data path indexes without a lock.

#ifndef URAID_SRC_ENGINE_SLOT_TABLE_H_
#define URAID_SRC_ENGINE_SLOT_TABLE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "meta/bad_block_list.h"
#include "uraid/array.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {

// Identity of one member device in the superblocks.
struct DeviceId {
  uint32_t dev_number = 0;
  std::array<uint8_t, 16> device_uuid{};
  uint64_t data_size_sectors = 0;  // this device's data_size
};

// What the engine saw of a slot's member since it took the slot: member
// I/O through the executor that failed after its retry (reads; writes,
// flushes and discards), bad-block ranges recorded for it, and its data
// I/O time. Relaxed atomics bumped on the data path (IoExecutor::RunIo),
// read by Info; reset when another member takes the slot (with
// Slot::read_errors). The replace target's own I/O is not counted here:
// it counts once it holds the slot.
struct MemberStats {
  std::atomic<uint64_t> read_errors{0};
  std::atomic<uint64_t> write_errors{0};
  std::atomic<uint64_t> bad_block_records{0};
  std::atomic<uint64_t> ios{0};    // data reads and writes that succeeded,
  std::atomic<uint64_t> io_ns{0};  // their time in total
  // A moving average of their time (1/8 weight per sample; a racy update
  // loses a sample now and then, which is harmless).
  std::atomic<int64_t> latency_ns{0};

  void Reset() {
    for (auto* c :
         {&read_errors, &write_errors, &bad_block_records, &ios, &io_ns}) {
      c->store(0, std::memory_order_relaxed);
    }
    latency_ns.store(0, std::memory_order_relaxed);
  }
};

struct Slot {
  // The member in this slot (null when missing). Recovery and replace swap
  // it while I/O runs: the data path loads its own reference for each I/O,
  // so a retired member closes when its last I/O returns.
  std::atomic<std::shared_ptr<Member>> member;
  std::atomic<SlotState> state{SlotState::kMissing};
  // kRebuilding: stripes below `front` are in sync on `member`; below
  // `durable_front` that is also flushed (what the superblock may claim).
  std::atomic<uint64_t> front{0};
  std::atomic<uint64_t> durable_front{0};
  // kRebuilding a member re-added to the slot it left (md's re-add): it
  // holds every region the write-intent bitmap has clear, so recovery
  // rebuilds only the regions with bits set. Set and cleared with the
  // member, under the Roster's mutex.
  std::atomic<bool> partial{false};
  // A replace job's target: writes to stripes below `repl_front` go to it
  // as well as to `member`.
  std::atomic<std::shared_ptr<Member>> replacement;
  std::atomic<uint64_t> repl_front{0};
  // Active and being copied onto a replace target: the old member still
  // serves the slot; `replacement` receives the copy.
  bool Copying() const {
    return state.load() == SlotState::kActive && replacement.load() != nullptr;
  }
  // Data writes and discards done on this slot's member or replacement,
  // and how many of them a completed flush of the slot had seen done
  // before it began: FlushSlots(only_dirty) skips a slot with nothing new
  // since (IoExecutor::RunIo counts, StripeWriter::FlushSlots records).
  std::atomic<uint64_t> writes_done{0};
  std::atomic<uint64_t> flushed_upto{0};
  // Read errors corrected by rewriting (md's corrected read errors).
  std::atomic<uint32_t> read_errors{0};
  // Error counts and latency of `member` (see MemberStats).
  MemberStats stats;
  // Bumped (to odd) before and (to even) after every change of `member`
  // that happens without the stripe locks (replace hand-over, a replace
  // target taking over a failed slot, a spare stepping in, removal), so
  // that plans made before it can tell (MemberIo::check_gen).
  std::atomic<uint64_t> gen{0};
  // The bad-block lists (md's log) of `member` and of `replacement`: ranges
  // of theirs that hold no trustworthy data, never read. They belong to the
  // member, so they change with it (under the Roster's mutex, inside the
  // generation change).
  BadBlockList bad;
  BadBlockList repl_bad;
  // `member` had a write error that was recorded in its log instead of
  // failing it (md's WantReplacement): a spare, when there is one, replaces
  // it by copying. In memory only, as md keeps it; it goes with the member
  // (cleared wherever `bad` is reset for a new one).
  std::atomic<bool> want_replacement{false};
  // Written only by the Roster (roster/roster.h) under its mutex once the
  // array exists, as are member, state and replacement.
  DeviceId id;
  DeviceId repl_id;  // the replacement's, likewise
};

// Slot generations captured when a plan is decided (see Slot::gen).
using SlotGens = absl::InlinedVector<uint64_t, 16>;

// The array's slots. Fixed capacity so that a reshape can append slots
// while the data path indexes them without a lock: an element is
// constructed before size() (release) makes it visible, and never moves.
// Appends are serialised by the caller (the Roster's mutex).
class SlotTable {
 public:
  explicit SlotTable(std::vector<std::unique_ptr<Slot>> slots) {
    for (auto& s : slots) Append(std::move(s));
  }
  size_t size() const { return n_.load(std::memory_order_acquire); }
  const std::unique_ptr<Slot>& operator[](size_t i) const { return slots_[i]; }
  const std::unique_ptr<Slot>* begin() const { return slots_.data(); }
  const std::unique_ptr<Slot>* end() const { return slots_.data() + size(); }
  // Lock-free reads of slot health, for the data path.
  // Active: holds current data for every stripe.
  bool Usable(int slot) const {
    return slots_[slot]->state.load(std::memory_order_acquire) ==
           SlotState::kActive;
  }
  // Holds current data for `stripe`: active, or rebuilt that far.
  bool UsableAt(int slot, uint64_t stripe) const {
    const SlotState st = slots_[slot]->state.load(std::memory_order_acquire);
    return st == SlotState::kActive ||
           (st == SlotState::kRebuilding &&
            stripe < slots_[slot]->front.load(std::memory_order_acquire));
  }
  // Has a member that takes writes (active or rebuilding).
  bool Present(int slot) const {
    const SlotState st = slots_[slot]->state.load(std::memory_order_acquire);
    return st == SlotState::kActive || st == SlotState::kRebuilding;
  }
  // The first of slots [0, disks) that cannot serve `stripe`, or -1.
  int MissingAt(int disks, uint64_t stripe) const {
    for (int i = 0; i < disks; ++i) {
      if (!UsableAt(i, stripe)) return i;
    }
    return -1;
  }
  // The slots of [0, disks) that cannot serve `stripe`: the first two in
  // *first and *second (-1 where there are fewer); returns how many.
  int MissingAt(int disks, uint64_t stripe, int* first, int* second) const {
    int n = 0;
    *first = *second = -1;
    for (int i = 0; i < disks; ++i) {
      if (UsableAt(i, stripe)) continue;
      if (n == 0) *first = i;
      if (n == 1) *second = i;
      ++n;
    }
    return n;
  }
  // Whether any slot's member has a recorded bad block: one atomic load a
  // slot, so a request checks once and the healthy path looks no further.
  bool AnyBad() const {
    for (size_t i = 0; i < size(); ++i) {
      if (!slots_[i]->bad.empty()) return true;
    }
    return false;
  }
  // Whether `slot`'s member has a bad block in member bytes [at, at + len)
  // (absolute on the member: a shape's data offset plus the stripe's).
  bool BadAt(int slot, uint64_t at, uint64_t len) const {
    const BadBlockList& b = slots_[slot]->bad;
    if (b.empty() || len == 0) return false;
    return b.Overlaps(at / 512, (at + len + 511) / 512 - at / 512);
  }
  // Whether the array survives one more member failure: fewer slots gone
  // than the shape's parity chunks (`parity_disks`).
  bool CanLoseOne(int parity_disks) const { return Gone() < parity_disks; }
  // Slots not active (missing, faulty, rebuilding).
  int Gone() const {
    int gone = 0;
    for (size_t i = 0; i < size(); ++i) gone += !Usable(static_cast<int>(i));
    return gone;
  }
  // Every slot's generation, waiting out a change in progress. Take it
  // before looking at slot states to decide a plan.
  SlotGens CaptureGens() const {
    SlotGens gens(size());
    for (size_t i = 0; i < gens.size(); ++i) {
      uint64_t g;
      while ((g = slots_[i]->gen.load()) & 1) std::this_thread::yield();
      gens[i] = g;
    }
    return gens;
  }
  void Append(std::unique_ptr<Slot> slot) {
    const size_t n = n_.load();
    // A slot dropped by PopBack stays alive for the array's lifetime.
    if (slots_[n] != nullptr) retired_.push_back(std::move(slots_[n]));
    slots_[n] = std::move(slot);
    n_.store(n + 1, std::memory_order_release);
  }
  // Drops the last slot (md's RAID6 -> RAID5 takeover). Requests still
  // holding the old shape may index it, so it stays allocated where it is.
  // Serialised with Append by the caller.
  void PopBack() { n_.store(n_.load() - 1, std::memory_order_release); }

 private:
  std::array<std::unique_ptr<Slot>, kMaxDisks> slots_;
  std::atomic<size_t> n_{0};
  std::vector<std::unique_ptr<Slot>> retired_;
};

// Scope of a change of who holds `slot`: bumps the slot's generation to odd
// on entry and to even on exit (see Slot::gen).
class SlotChange {
 public:
  explicit SlotChange(Slot& slot) : slot_(slot) { slot_.gen.fetch_add(1); }
  ~SlotChange() { slot_.gen.fetch_add(1); }
  SlotChange(const SlotChange&) = delete;
  SlotChange& operator=(const SlotChange&) = delete;

 private:
  Slot& slot_;
};

// Runs `change` (of who holds `slot`) between the two generation bumps of
// the slot (see Slot::gen).
template <typename F>
void ChangeSlot(Slot& slot, F change) {
  SlotChange scope(slot);
  change();
}

// Ends `slot`'s replace when `target` is still its replace target: the one
// compare-and-swap through which every path drops a replace target (the
// executor's failed mirror write, a failed bitmap or superblock write, a
// failed bad-block record, fail or remove by request: roster/roster.h's
// edit::DropReplacement). Takes no lock, so the executor's pool threads may
// run it mid-I/O. True when this call dropped it.
inline bool DropReplacementIf(Slot& slot,
                              const std::shared_ptr<Member>& target) {
  if (target == nullptr) return false;
  std::shared_ptr<Member> expected = target;
  return slot.replacement.compare_exchange_strong(expected, nullptr);
}

// The slot's replace target becomes its member (a finished replace, or the
// old member failing during one): the target's bad-block list goes with it.
// REQUIRES: inside the slot's generation change, under the Roster's mutex.
inline void TakeReplacementBadBlocks(Slot& s) {
  s.bad.Reset(s.repl_bad.Snapshot());
  s.bad.flag_durable.store(s.repl_bad.flag_durable.load());
  s.repl_bad.Reset({});
  s.repl_bad.flag_durable.store(false);
  s.want_replacement.store(false);
  s.stats.Reset();
}

// A member that belongs to the array without a slot.
struct Spare {
  std::shared_ptr<Member> member;
  DeviceId id;
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_SLOT_TABLE_H_
