// SPDX-License-Identifier: MIT
#include "plan/stripe_plan.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "parity/parity.h"
#include "plan/stripe_plan6.h"

namespace uraid {
namespace {

using plan_internal::Blocks;
using plan_internal::Client;
using plan_internal::Resolve;
using plan_internal::Scratch;

// Picks RMW or RCW for a healthy stripe with trusted parity, by the 4 KiB
// blocks each reads over the window. A tie goes to RMW (md's rmw_level 2,
// "prefer RMW"; md's default sends it to RCW): both read and write as
// many blocks, but RMW writes back over exactly what it read, which a
// member can take as a Rewrite (a file member then skips its per-write
// size probe: measured 22-23k against 29-30k 4 KiB random writes per
// second on 4 memory-speed members). Parity not yet trusted never gets
// here (RCW is forced), so RMW only ever carries parity the resync or the
// bitmap vouches for.
WriteMode CheaperMode(const WritePlan& plan) {
  uint64_t rmw = Blocks(plan.lo, plan.hi), rcw = 0;  // rmw: old parity
  for (const WritePlan::Chunk& c : plan.chunks) {
    if (c.written) {
      rmw += Blocks(c.x, c.y);
      rcw += Blocks(plan.lo, c.x) + Blocks(c.y, plan.hi);
    } else {
      rcw += Blocks(plan.lo, plan.hi);
    }
  }
  return rmw <= rcw ? WriteMode::kRmw : WriteMode::kRcw;
}

}  // namespace

WritePlan PlanWrite(const Geometry& geo, uint64_t stripe, uint64_t a,
                    uint64_t b, const StripeHealth& health) {
  if (geo.level() == 6)
    return plan_internal::PlanWrite6(geo, stripe, a, b, health);
  const uint64_t C = geo.chunk_bytes();
  const int D = geo.data_disks();
  WritePlan plan;
  plan.parity_slot = geo.ParityDisk(stripe);
  plan.chunks.resize(D);
  // Room for every member once: one allocation each, where growing one
  // push_back at a time took two for a small write's two reads and two
  // writes (a cost on every random write, issue 35).
  plan.reads.reserve(D + 1);
  plan.writes.reserve(D + 1);
  plan.lo = C;
  for (int k = 0; k < D; ++k) {
    WritePlan::Chunk& c = plan.chunks[k];
    c.slot = geo.DataDisk(stripe, k);
    const uint64_t cs = static_cast<uint64_t>(k) * C, ce = cs + C;
    if (b <= cs || a >= ce) continue;
    c.written = true;
    c.x = std::max(a, cs) - cs;
    c.y = std::min(b, ce) - cs;
    c.client = std::max(a, cs) - a;
    plan.lo = std::min(plan.lo, c.x);
    plan.hi = std::max(plan.hi, c.y);
  }
  const int missing = health.missing_slot;
  plan.degraded = missing >= 0;
  const bool parity_missing = missing == plan.parity_slot;
  plan.missing_index =
      (missing >= 0 && !parity_missing) ? geo.DataIndex(stripe, missing) : -1;
  for (int k = 0; k < D; ++k) {
    const WritePlan::Chunk& c = plan.chunks[k];
    if (!c.written || k == plan.missing_index) continue;
    plan.writes.push_back({c.slot, c.x, c.y - c.x, Client(c.client)});
  }
  if (parity_missing) {  // data alone is the truth
    plan.mode = WriteMode::kParityGone;
    return plan;
  }
  if (a == 0 && b == geo.stripe_data_bytes()) {
    plan.mode = WriteMode::kFull;
    plan.scratch_bytes = C;
    plan.writes.push_back({plan.parity_slot, 0, C, Scratch(0)});
    return plan;
  }

  if (plan.missing_index >= 0) {
    plan.mode = plan.chunks[plan.missing_index].written
                    ? WriteMode::kDegradedRcw
                    : WriteMode::kRmw;
  } else if (!health.parity_trusted) {
    plan.mode = WriteMode::kRcw;
  } else {
    plan.mode = CheaperMode(plan);
  }

  // Scratch: the parity window at 0, then one window-sized row per data
  // index (old data for RMW, the chunk's new contents for RCW).
  const uint64_t lo = plan.lo, hi = plan.hi, W = hi - lo;
  plan.scratch_bytes = W * (1 + static_cast<uint64_t>(D));
  auto row = [&](int k) { return W + W * static_cast<uint64_t>(k); };
  if (plan.mode == WriteMode::kRmw) {
    plan.reads.push_back({plan.parity_slot, lo, W, Scratch(0)});
    for (int k = 0; k < D; ++k) {
      const WritePlan::Chunk& c = plan.chunks[k];
      if (!c.written) continue;
      plan.reads.push_back(
          {c.slot, c.x, c.y - c.x, Scratch(row(k) + c.x - lo)});
    }
  } else {
    for (int k = 0; k < D; ++k) {
      const WritePlan::Chunk& c = plan.chunks[k];
      if (k == plan.missing_index) continue;  // rebuilt by ComputeWrite
      if (plan.mode == WriteMode::kDegradedRcw) {
        // Rebuilding the missing chunk needs every other chunk's old rows.
        plan.reads.push_back({c.slot, lo, W, Scratch(row(k))});
        continue;
      }
      if (c.written && c.x == lo && c.y == hi) continue;
      const uint64_t x = c.written ? c.x : hi;
      if (x > lo) plan.reads.push_back({c.slot, lo, x - lo, Scratch(row(k))});
      if (c.written && c.y < hi) {
        plan.reads.push_back(
            {c.slot, c.y, hi - c.y, Scratch(row(k) + c.y - lo)});
      }
    }
    if (plan.mode == WriteMode::kDegradedRcw) {
      plan.reads.push_back({plan.parity_slot, lo, W, Scratch(0)});
    }
  }
  plan.writes.push_back({plan.parity_slot, lo, W, Scratch(0)});
  return plan;
}

uint64_t FullStripeParityBytes(const Geometry& geo) {
  return geo.chunk_bytes() * static_cast<uint64_t>(geo.parity_disks());
}

void ComputeFullStripeParity(const Geometry& geo, uint64_t stripe,
                             const uint8_t* data, uint8_t* parity) {
  // The healthy plan computes every parity chunk, in the layout every
  // full-stripe plan of the stripe writes from.
  ComputeWrite(PlanWrite(geo, stripe, 0, geo.stripe_data_bytes(), {}), parity,
               data);
}

namespace {

// RAID5's full-stripe parity: P is the XOR of the data chunks, chunk `c`
// at `at(c.client)`.
template <typename At>
void XorFullStripe(const WritePlan& plan, uint8_t* scratch, At at) {
  std::vector<const void*> srcs;
  for (const WritePlan::Chunk& c : plan.chunks) srcs.push_back(at(c.client));
  Xor(scratch, srcs, plan.scratch_bytes);
}

}  // namespace

void ComputeFullWriteFromChunks(const WritePlan& plan, uint64_t chunk_bytes,
                                const uint8_t* const* chunks,
                                uint8_t* scratch) {
  assert(plan.q_slot < 0 && (plan.mode == WriteMode::kFull ||
                             plan.mode == WriteMode::kParityGone));
  if (plan.mode != WriteMode::kFull) return;
  XorFullStripe(plan, scratch, [&](uint64_t off) {
    return chunks[off / chunk_bytes] + off % chunk_bytes;
  });
}

void ComputeWrite(const WritePlan& plan, uint8_t* scratch,
                  const uint8_t* client) {
  if (plan.q_slot >= 0) {
    plan_internal::ComputeWrite6(plan, scratch, client);
    return;
  }
  const int D = static_cast<int>(plan.chunks.size());
  switch (plan.mode) {
    case WriteMode::kParityGone:
      return;
    case WriteMode::kFull:
      XorFullStripe(plan, scratch, [&](uint64_t off) { return client + off; });
      return;
    case WriteMode::kRmw: {
      const uint64_t W = plan.hi - plan.lo;
      for (int k = 0; k < D; ++k) {
        const WritePlan::Chunk& c = plan.chunks[k];
        if (!c.written) continue;
        uint8_t* p = scratch + (c.x - plan.lo);
        const void* srcs[3] = {p, scratch + W + W * k + (c.x - plan.lo),
                               client + c.client};
        Xor(p, srcs, c.y - c.x);
      }
      return;
    }
    case WriteMode::kRcw:
    case WriteMode::kDegradedRcw: {
      const uint64_t W = plan.hi - plan.lo;
      auto row = [&](int k) { return scratch + W + W * k; };
      if (plan.mode == WriteMode::kDegradedRcw) {
        // The missing chunk's old rows: old parity ^ every other chunk.
        std::vector<const void*> others{scratch};
        for (int k = 0; k < D; ++k) {
          if (k != plan.missing_index) others.push_back(row(k));
        }
        Xor(row(plan.missing_index), others, W);
      }
      // The new bytes over the window; a chunk replaced across the whole
      // window is used in place from the client's buffer (no copy).
      std::vector<const void*> srcs(D);
      for (int k = 0; k < D; ++k) {
        const WritePlan::Chunk& c = plan.chunks[k];
        srcs[k] = row(k);
        if (!c.written) continue;
        if (c.x == plan.lo && c.y == plan.hi) {
          srcs[k] = client + c.client;
        } else {
          std::memcpy(row(k) + (c.x - plan.lo), client + c.client, c.y - c.x);
        }
      }
      Xor(scratch, srcs, W);
      return;
    }
  }
}

namespace plan_internal {

PlanRef GatherRows(ReadPlan& plan, int slot, uint64_t x, uint64_t len,
                   const ReadPiece* p) {
  const uint64_t y = x + len;
  if (p != nullptr) {
    plan.reads.push_back({slot, p->x, p->y - p->x, Client(p->client)});
    if (p->x <= x && p->y >= y) {  // the client's bytes cover the rows
      return Client(p->client + (x - p->x));
    }
  }
  const uint64_t row = plan.scratch_bytes;
  plan.scratch_bytes += len;
  if (p == nullptr) {
    plan.reads.push_back({slot, x, len, Scratch(row)});
    return Scratch(row);
  }
  // Part of the rows arrives in the client's buffer: read only the rest.
  const uint64_t ov_a = std::max(x, p->x), ov_b = std::min(y, p->y);
  if (ov_a < ov_b) {
    plan.copies.push_back(
        {p->client + (ov_a - p->x), row + (ov_a - x), ov_b - ov_a});
  }
  if (x < p->x) {
    const uint64_t e = std::min(y, p->x);
    plan.reads.push_back({slot, x, e - x, Scratch(row)});
  }
  if (p->y < y) {
    const uint64_t s = std::max(x, p->y);
    plan.reads.push_back({slot, s, y - s, Scratch(row + (s - x))});
  }
  return Scratch(row);
}

ReadPlan PlanRebuild(const Geometry& geo, uint64_t stripe, int slot, uint64_t x,
                     uint64_t len, uint64_t target,
                     std::span<const ReadPiece> pieces, int exclude) {
  ReadPlan plan;
  plan.rebuild = true;
  plan.target = Client(target);
  plan.len = len;
  std::vector<const ReadPiece*> on(geo.raid_disks(), nullptr);
  for (const ReadPiece& p : pieces) on[geo.DataDisk(stripe, p.data_index)] = &p;
  // One source is read straight into the target, which the XOR then
  // updates in place: a slot the client reads nothing from saves a scratch
  // row. The parity first, when the rebuilt slot holds data: the data rows
  // then stay intact in scratch, where the array keeps them for the next
  // request of a sequential reader (stripe/survivor_cache.h).
  int direct = -1;
  const int parity = geo.ParityDisk(stripe);
  if (parity != slot) direct = parity;
  for (int i = 0; i < geo.raid_disks() && direct < 0; ++i) {
    if (i != slot && i != exclude && on[i] == nullptr) direct = i;
  }
  if (direct >= 0) {
    plan.reads.push_back({direct, x, len, plan.target});
    plan.sources.push_back(plan.target);
  }
  for (int i = 0; i < geo.raid_disks(); ++i) {
    if (i == slot || i == direct || i == exclude) continue;
    plan.sources.push_back(GatherRows(plan, i, x, len, on[i]));
  }
  return plan;
}

}  // namespace plan_internal

namespace {

// The rebuild of `slot`'s bytes [x, x + len) into client offset `target`,
// from every other slot, with `pieces` (on other slots) read into the
// client buffer on the way.
ReadPlan PlanRebuild(const Geometry& geo, uint64_t stripe, int slot, uint64_t x,
                     uint64_t len, uint64_t target,
                     std::span<const ReadPiece> pieces) {
  return plan_internal::PlanRebuild(geo, stripe, slot, x, len, target, pieces,
                                    /*exclude=*/-1);
}

}  // namespace

ReadPlan PlanDegradedRead(const Geometry& geo, uint64_t stripe,
                          std::span<const ReadPiece> pieces, int missing_slot,
                          int second_missing_slot) {
  if (geo.level() == 6) {
    return plan_internal::PlanDegradedRead6(geo, stripe, pieces, missing_slot,
                                            second_missing_slot);
  }
  const ReadPiece* lost = nullptr;
  std::vector<ReadPiece> others;
  for (const ReadPiece& p : pieces) {
    if (missing_slot >= 0 &&
        geo.DataDisk(stripe, p.data_index) == missing_slot) {
      lost = &p;
    } else {
      others.push_back(p);
    }
  }
  if (lost == nullptr) {
    ReadPlan plan;
    for (const ReadPiece& p : pieces) {
      plan.reads.push_back({geo.DataDisk(stripe, p.data_index), p.x, p.y - p.x,
                            Client(p.client)});
    }
    return plan;
  }
  return PlanRebuild(geo, stripe, missing_slot, lost->x, lost->y - lost->x,
                     lost->client, others);
}

ReadPlan PlanReconstruct(const Geometry& geo, uint64_t stripe, int slot,
                         uint64_t x, uint64_t len, int also_missing) {
  if (geo.level() == 6) {
    return plan_internal::PlanReconstruct6(geo, stripe, slot, x, len,
                                           also_missing);
  }
  return PlanRebuild(geo, stripe, slot, x, len, 0, {});
}

ReadPlan PlanReconstructPair(const Geometry& geo, uint64_t stripe, int a, int b,
                             uint64_t x, uint64_t len, uint64_t b_client) {
  return plan_internal::PlanReconstructPair6(geo, stripe, a, b, x, len,
                                             b_client);
}

ReadPlan PlanReadAndRebuild(const Geometry& geo, uint64_t stripe, int read_slot,
                            uint64_t read_client, int lost_slot,
                            uint64_t lost_client, uint64_t x, uint64_t len) {
  (void)stripe;  // every slot but the lost one is a source, in any stripe
  ReadPlan plan;
  plan.rebuild = true;
  plan.target = Client(lost_client);
  plan.len = len;
  plan.reads.push_back({read_slot, x, len, Client(read_client)});
  plan.sources.push_back(Client(read_client));
  for (int i = 0; i < geo.raid_disks(); ++i) {
    if (i == read_slot || i == lost_slot) continue;
    plan.sources.push_back(plan_internal::GatherRows(plan, i, x, len, nullptr));
  }
  return plan;
}

void ComputeRead(const ReadPlan& plan, uint8_t* scratch, uint8_t* client) {
  ComputeRead(plan, scratch, client, {});
}

void ComputeRead(const ReadPlan& plan, uint8_t* scratch, uint8_t* client,
                 std::span<const ScratchRow> elsewhere) {
  // Where each XOR source lies when a row holds it whole; rows that hold
  // only part of a source, or any source of a syndrome rebuild, are copied
  // to their place in scratch.
  const auto within = [&](const PlanRef& r) -> const ScratchRow* {
    if (r.buffer != PlanRef::kScratch) return nullptr;
    for (const ScratchRow& e : elsewhere) {
      if (e.offset <= r.offset && r.offset + plan.len <= e.offset + e.len) {
        return &e;
      }
    }
    return nullptr;
  };
  const bool xor_rebuild = plan.rebuild && !plan.pq;
  for (const ScratchRow& e : elsewhere) {
    bool whole = xor_rebuild;
    for (const PlanRef& r : plan.sources) {
      if (!whole) break;
      const bool overlaps = r.buffer == PlanRef::kScratch &&
                            r.offset < e.offset + e.len &&
                            e.offset < r.offset + plan.len;
      whole = !overlaps || within(r) == &e;
    }
    if (!whole) std::memcpy(scratch + e.offset, e.at, e.len);
  }
  for (const ReadPlan::Copy& c : plan.copies) {
    std::memcpy(scratch + c.to_scratch, client + c.from_client, c.len);
  }
  if (!plan.rebuild) return;
  if (plan.pq) {
    plan_internal::ComputeRead6(plan, scratch, client);
    return;
  }
  std::vector<const void*> srcs;
  for (const PlanRef& r : plan.sources) {
    const ScratchRow* e = within(r);
    srcs.push_back(e != nullptr ? e->at + (r.offset - e->offset)
                                : Resolve(r, scratch, client));
  }
  Xor(Resolve(plan.target, scratch, client), srcs, plan.len);
}

uint64_t ReadBytes(const std::vector<PlannedIo>& ios) {
  uint64_t n = 0;
  for (const PlannedIo& io : ios) n += io.len;
  return n;
}

}  // namespace uraid
