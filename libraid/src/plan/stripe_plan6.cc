// SPDX-License-Identifier: MIT
// RAID6 plans. The shapes are RAID5's (stripe_plan.cc): one window of rows
// [lo, hi) per write, one read and one write per member, the RMW/RCW choice
// by md's 4 KiB block count (RMW now reads P and Q); what changes is the
// arithmetic (Q by md's slot order, parity/raid6.h) and that a stripe may
// have lost two slots.

#include "plan/stripe_plan6.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "parity/parity.h"
#include "parity/raid6.h"

namespace uraid::plan_internal {
namespace {

// The planner made a recovery RecoverPQ refuses: a bug here, never a
// property of the data. Writing parity computed from garbage would corrupt
// the array silently, so the process stops instead.
void PlanInvariant(const absl::Status& st) {
  if (st.ok()) return;
  std::fprintf(stderr, "uraid: RAID6 plan invariant broken: %s\n",
               std::string(st.message()).c_str());
  std::abort();
}

// The RAID6 rebuild of rows [x, x + len) of the lost slots `l1` and `l2`
// (l2 may be -1; any of data, P, Q) from the survivors it needs, through
// RecoverPQ. `on[i]`: the client's piece on survivor i (read into its
// buffer on the way); `dest[i]`: where lost slot i's rows go (nullopt: a
// scratch row).
ReadPlan PlanRecover(const Geometry& geo, uint64_t stripe, int l1, int l2,
                     uint64_t x, uint64_t len,
                     const std::vector<const ReadPiece*>& on,
                     const std::vector<std::optional<PlanRef>>& dest) {
  ReadPlan plan;
  plan.rebuild = true;
  plan.len = len;
  ReadPlan::Syndrome sy;
  sy.slots.assign(geo.SyndromeSlots(), std::nullopt);
  const int P = geo.ParityDisk(stripe), Q = geo.QDisk(stripe);
  auto lost = [&](int s) { return s == l1 || s == l2; };
  int nd = 0;  // lost data slots
  for (const int l : {l1, l2}) nd += l >= 0 && l != P && l != Q;
  const bool p_lost = lost(P), q_lost = lost(Q);
  // P rebuilds one data slot; Q a second, or one whose P is lost too.
  const bool need_p = !p_lost && nd >= 1;
  const bool need_q = !q_lost && (nd == 2 || (nd == 1 && p_lost));
  auto out_row = [&](int s) {
    if (dest[s]) return *dest[s];
    const PlanRef r = Scratch(plan.scratch_bytes);
    plan.scratch_bytes += len;
    return r;
  };
  for (int i = 0; i < geo.raid_disks(); ++i) {
    if (i == P) {
      if (p_lost) {
        sy.p = out_row(i);
      } else if (need_p) {
        sy.p = GatherRows(plan, i, x, len, nullptr);
      }
    } else if (i == Q) {
      if (q_lost) {
        sy.q = out_row(i);
      } else if (need_q) {
        sy.q = GatherRows(plan, i, x, len, nullptr);
      }
    } else {
      sy.slots[geo.QSlot(stripe, i)] =
          lost(i) ? out_row(i) : GatherRows(plan, i, x, len, on[i]);
    }
  }
  for (const int l : {l1, l2}) {
    if (l < 0) continue;
    sy.lost.push_back(l == P ? kLostP : l == Q ? kLostQ : geo.QSlot(stripe, l));
  }
  plan.pq = std::move(sy);
  return plan;
}

}  // namespace

WritePlan PlanWrite6(const Geometry& geo, uint64_t stripe, uint64_t a,
                     uint64_t b, const StripeHealth& health) {
  const uint64_t C = geo.chunk_bytes();
  const int D = geo.data_disks();
  WritePlan plan;
  plan.parity_slot = geo.ParityDisk(stripe);
  plan.q_slot = geo.QDisk(stripe);
  plan.syndrome_slots = geo.SyndromeSlots();
  auto lost = [&](int s) {
    return s >= 0 &&
           (s == health.missing_slot || s == health.second_missing_slot);
  };
  plan.p_alive = !lost(plan.parity_slot);
  plan.q_alive = !lost(plan.q_slot);
  plan.degraded = health.missing_slot >= 0 || health.second_missing_slot >= 0;
  plan.chunks.resize(D);
  plan.lo = C;
  int nmiss = 0;
  for (int k = 0; k < D; ++k) {
    WritePlan::Chunk& c = plan.chunks[k];
    c.slot = geo.DataDisk(stripe, k);
    c.qslot = geo.QSlot(stripe, c.slot);
    if (lost(c.slot)) {
      (nmiss++ == 0 ? plan.missing_index : plan.second_missing_index) = k;
    }
    const uint64_t cs = static_cast<uint64_t>(k) * C, ce = cs + C;
    if (b <= cs || a >= ce) continue;
    c.written = true;
    c.x = std::max(a, cs) - cs;
    c.y = std::min(b, ce) - cs;
    c.client = std::max(a, cs) - a;
    plan.lo = std::min(plan.lo, c.x);
    plan.hi = std::max(plan.hi, c.y);
  }
  for (const WritePlan::Chunk& c : plan.chunks) {
    if (!c.written || lost(c.slot)) continue;
    plan.writes.push_back({c.slot, c.x, c.y - c.x, Client(c.client)});
  }
  if (!plan.p_alive && !plan.q_alive) {  // data alone is the truth
    plan.mode = WriteMode::kParityGone;
    return plan;
  }
  if (a == 0 && b == geo.stripe_data_bytes()) {
    plan.mode = WriteMode::kFull;
    plan.scratch_bytes = 2 * C;  // P at 0, Q at C
    if (plan.p_alive)
      plan.writes.push_back({plan.parity_slot, 0, C, Scratch(0)});
    if (plan.q_alive) plan.writes.push_back({plan.q_slot, 0, C, Scratch(C)});
    return plan;
  }

  const uint64_t lo = plan.lo, hi = plan.hi, W = hi - lo;
  // A lost chunk the write replaces has no old bytes for RMW; one whose
  // rows over the window are not all replaced must be rebuilt for RCW.
  bool missing_written = false, missing_needed = false;
  for (const int m : {plan.missing_index, plan.second_missing_index}) {
    if (m < 0) continue;
    const WritePlan::Chunk& c = plan.chunks[m];
    missing_written = missing_written || c.written;
    missing_needed = missing_needed || !(c.written && c.x == lo && c.y == hi);
  }
  const bool rmw_ok = health.parity_trusted && !missing_written;
  const bool rcw_ok = !missing_needed;
  if (rmw_ok && rcw_ok) {
    uint64_t rmw = (uint64_t{plan.p_alive} + plan.q_alive) * Blocks(lo, hi);
    uint64_t rcw = 0;
    for (const WritePlan::Chunk& c : plan.chunks) {
      if (lost(c.slot)) continue;  // replaced over the whole window
      if (c.written) {
        rmw += Blocks(c.x, c.y);
        rcw += Blocks(lo, c.x) + Blocks(c.y, hi);
      } else {
        rcw += Blocks(lo, hi);
      }
    }
    // A tie goes to RMW, as at level 5 (stripe_plan.cc's CheaperMode):
    // its writes go back over what it read (Member::Rewrite).
    plan.mode = rmw <= rcw ? WriteMode::kRmw : WriteMode::kRcw;
  } else {
    plan.mode = rmw_ok   ? WriteMode::kRmw
                : rcw_ok ? WriteMode::kRcw
                         : WriteMode::kDegradedRcw;
  }

  // Scratch: P's window at 0, Q's at W, then one window-sized row per data
  // index (old data for RMW, the chunk's new contents for RCW).
  plan.scratch_bytes = W * (2 + static_cast<uint64_t>(D));
  auto row = [&](int k) { return 2 * W + W * static_cast<uint64_t>(k); };
  if (plan.mode == WriteMode::kRmw) {
    if (plan.p_alive)
      plan.reads.push_back({plan.parity_slot, lo, W, Scratch(0)});
    if (plan.q_alive) plan.reads.push_back({plan.q_slot, lo, W, Scratch(W)});
    for (int k = 0; k < D; ++k) {
      const WritePlan::Chunk& c = plan.chunks[k];
      if (!c.written) continue;
      plan.reads.push_back(
          {c.slot, c.x, c.y - c.x, Scratch(row(k) + c.x - lo)});
    }
  } else if (plan.mode == WriteMode::kRcw) {
    for (int k = 0; k < D; ++k) {
      const WritePlan::Chunk& c = plan.chunks[k];
      if (lost(c.slot) || (c.written && c.x == lo && c.y == hi)) continue;
      const uint64_t x = c.written ? c.x : hi;
      if (x > lo) plan.reads.push_back({c.slot, lo, x - lo, Scratch(row(k))});
      if (c.written && c.y < hi) {
        plan.reads.push_back(
            {c.slot, c.y, hi - c.y, Scratch(row(k) + c.y - lo)});
      }
    }
  } else {
    // Rebuilding the lost chunks' rows needs every other chunk's old rows,
    // P for one (Q when P is lost too), P and Q for two.
    for (int k = 0; k < D; ++k) {
      const WritePlan::Chunk& c = plan.chunks[k];
      if (!lost(c.slot)) plan.reads.push_back({c.slot, lo, W, Scratch(row(k))});
    }
    if (nmiss == 2 || plan.p_alive) {
      plan.reads.push_back({plan.parity_slot, lo, W, Scratch(0)});
    }
    if (nmiss == 2 || !plan.p_alive) {
      plan.reads.push_back({plan.q_slot, lo, W, Scratch(W)});
    }
  }
  if (plan.p_alive)
    plan.writes.push_back({plan.parity_slot, lo, W, Scratch(0)});
  if (plan.q_alive) plan.writes.push_back({plan.q_slot, lo, W, Scratch(W)});
  return plan;
}

void ComputeWrite6(const WritePlan& plan, uint8_t* scratch,
                   const uint8_t* client) {
  const int D = static_cast<int>(plan.chunks.size());
  switch (plan.mode) {
    case WriteMode::kParityGone:
      return;
    case WriteMode::kFull: {
      const uint64_t C = plan.scratch_bytes / 2;
      std::vector<const void*> slots(plan.syndrome_slots, nullptr);
      for (const WritePlan::Chunk& c : plan.chunks) {
        slots[c.qslot] = client + c.client;
      }
      ComputePQ(slots, plan.p_alive ? scratch : nullptr,
                plan.q_alive ? scratch + C : nullptr, C);
      return;
    }
    case WriteMode::kRmw: {
      const uint64_t W = plan.hi - plan.lo;
      for (int k = 0; k < D; ++k) {
        const WritePlan::Chunk& c = plan.chunks[k];
        if (!c.written) continue;
        const uint64_t at = c.x - plan.lo, n = c.y - c.x;
        uint8_t* delta = scratch + 2 * W + W * k + at;  // old data, in place
        const void* srcs[2] = {delta, client + c.client};
        Xor(delta, srcs, n);
        UpdatePQ(c.qslot, delta, plan.p_alive ? scratch + at : nullptr,
                 plan.q_alive ? scratch + W + at : nullptr, n);
      }
      return;
    }
    case WriteMode::kRcw:
    case WriteMode::kDegradedRcw: {
      const uint64_t W = plan.hi - plan.lo;
      auto row = [&](int k) { return scratch + 2 * W + W * k; };
      if (plan.mode == WriteMode::kDegradedRcw) {
        // The lost chunks' old rows, from the others and P (or Q).
        std::vector<void*> slots(plan.syndrome_slots, nullptr);
        for (int k = 0; k < D; ++k) slots[plan.chunks[k].qslot] = row(k);
        std::vector<int> lost;
        for (const int m : {plan.missing_index, plan.second_missing_index}) {
          if (m >= 0) lost.push_back(plan.chunks[m].qslot);
        }
        if (lost.size() == 1 && !plan.p_alive) lost.push_back(kLostP);
        PlanInvariant(RecoverPQ(slots, scratch, scratch + W, W, lost));
      }
      // The new bytes over the window; a chunk replaced across the whole
      // window is used in place from the client's buffer (no copy).
      std::vector<const void*> slots(plan.syndrome_slots, nullptr);
      for (int k = 0; k < D; ++k) {
        const WritePlan::Chunk& c = plan.chunks[k];
        slots[c.qslot] = row(k);
        if (!c.written) continue;
        if (c.x == plan.lo && c.y == plan.hi) {
          slots[c.qslot] = client + c.client;
        } else {
          std::memcpy(row(k) + (c.x - plan.lo), client + c.client, c.y - c.x);
        }
      }
      ComputePQ(slots, plan.p_alive ? scratch : nullptr,
                plan.q_alive ? scratch + W : nullptr, W);
      return;
    }
  }
}

ReadPlan PlanDegradedRead6(const Geometry& geo, uint64_t stripe,
                           std::span<const ReadPiece> pieces, int missing_slot,
                           int second_missing_slot) {
  auto lost = [&](int s) {
    return s >= 0 && (s == missing_slot || s == second_missing_slot);
  };
  std::vector<const ReadPiece*> on(geo.raid_disks(), nullptr);
  std::vector<ReadPiece> others;
  std::vector<const ReadPiece*> wanted;  // pieces on lost slots
  for (const ReadPiece& p : pieces) {
    const int slot = geo.DataDisk(stripe, p.data_index);
    if (lost(slot)) {
      wanted.push_back(&p);
    } else {
      on[slot] = &p;
      others.push_back(p);
    }
  }
  if (wanted.empty()) {
    ReadPlan plan;
    for (const ReadPiece& p : pieces) {
      plan.reads.push_back({geo.DataDisk(stripe, p.data_index), p.x, p.y - p.x,
                            Client(p.client)});
    }
    return plan;
  }
  const int Q = geo.QDisk(stripe);
  const int t = geo.DataDisk(stripe, wanted[0]->data_index);
  const int other = t == missing_slot ? second_missing_slot : missing_slot;
  if (wanted.size() == 1 && (other < 0 || other == Q)) {
    // One data chunk lost beside Q at most: P and the other data, as RAID5.
    const ReadPiece& w = *wanted[0];
    return PlanRebuild(geo, stripe, t, w.x, w.y - w.x, w.client, others, Q);
  }
  // The window covers every wanted piece; a piece that is the whole window
  // takes its rows straight, the others get theirs copied out of scratch.
  uint64_t x = wanted[0]->x, y = wanted[0]->y;
  for (const ReadPiece* w : wanted) {
    x = std::min(x, w->x);
    y = std::max(y, w->y);
  }
  std::vector<std::optional<PlanRef>> dest(geo.raid_disks());
  for (const ReadPiece* w : wanted) {
    if (w->x == x && w->y == y) {
      dest[geo.DataDisk(stripe, w->data_index)] = Client(w->client);
    }
  }
  ReadPlan plan = PlanRecover(geo, stripe, missing_slot, second_missing_slot, x,
                              y - x, on, dest);
  for (const ReadPiece* w : wanted) {
    const int slot = geo.DataDisk(stripe, w->data_index);
    if (dest[slot]) continue;
    const PlanRef& r = plan.pq->slots[geo.QSlot(stripe, slot)].value();
    plan.outs.push_back({r.offset + (w->x - x), w->client, w->y - w->x});
  }
  return plan;
}

ReadPlan PlanReconstruct6(const Geometry& geo, uint64_t stripe, int slot,
                          uint64_t x, uint64_t len, int also_missing) {
  const int Q = geo.QDisk(stripe);
  if (also_missing == slot) also_missing = -1;
  if (slot != Q && (also_missing < 0 || also_missing == Q)) {
    return PlanRebuild(geo, stripe, slot, x, len, 0, {}, Q);
  }
  std::vector<const ReadPiece*> on(geo.raid_disks(), nullptr);
  std::vector<std::optional<PlanRef>> dest(geo.raid_disks());
  dest[slot] = Client(0);
  return PlanRecover(geo, stripe, slot, also_missing, x, len, on, dest);
}

ReadPlan PlanReconstructPair6(const Geometry& geo, uint64_t stripe, int a,
                              int b, uint64_t x, uint64_t len,
                              uint64_t b_client) {
  std::vector<const ReadPiece*> on(geo.raid_disks(), nullptr);
  std::vector<std::optional<PlanRef>> dest(geo.raid_disks());
  dest[a] = Client(0);
  dest[b] = Client(b_client);
  return PlanRecover(geo, stripe, a, b, x, len, on, dest);
}

void ComputeRead6(const ReadPlan& plan, uint8_t* scratch, uint8_t* client) {
  const ReadPlan::Syndrome& sy = *plan.pq;
  std::vector<void*> slots(sy.slots.size(), nullptr);
  for (size_t i = 0; i < sy.slots.size(); ++i) {
    if (sy.slots[i]) slots[i] = Resolve(*sy.slots[i], scratch, client);
  }
  void* p = sy.p ? Resolve(*sy.p, scratch, client) : nullptr;
  void* q = sy.q ? Resolve(*sy.q, scratch, client) : nullptr;
  PlanInvariant(RecoverPQ(slots, p, q, plan.len, sy.lost));
  for (const ReadPlan::Out& o : plan.outs) {
    std::memcpy(client + o.to_client, scratch + o.from_scratch, o.len);
  }
}

}  // namespace uraid::plan_internal
