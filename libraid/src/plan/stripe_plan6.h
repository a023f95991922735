// SPDX-License-Identifier: MIT
// Internal to plan/: the RAID6 halves of the planner (stripe_plan.h states
// the contract; its entry points dispatch here at level 6), and the pieces
// both halves share (the block count, buffer refs, row gathering).

#ifndef URAID_SRC_PLAN_STRIPE_PLAN6_H_
#define URAID_SRC_PLAN_STRIPE_PLAN6_H_

#include <cstdint>
#include <span>

#include "plan/stripe_plan.h"
#include "uraid/geometry.h"

namespace uraid::plan_internal {

inline constexpr uint64_t kBlock = 4096;  // md's unit for the RMW/RCW count

// 4 KiB blocks touched by [x, y).
inline uint64_t Blocks(uint64_t x, uint64_t y) {
  return y <= x ? 0 : (y + kBlock - 1) / kBlock - x / kBlock;
}

inline PlanRef Client(uint64_t offset) { return {PlanRef::kClient, offset}; }
inline PlanRef Scratch(uint64_t offset) { return {PlanRef::kScratch, offset}; }

inline uint8_t* Resolve(const PlanRef& r, uint8_t* scratch, uint8_t* client) {
  return (r.buffer == PlanRef::kScratch ? scratch : client) + r.offset;
}

// Adds to `plan` the reads that bring `slot`'s rows [x, x + len) together
// and returns where they will be: in the client's buffer when `piece` (the
// client's read of that slot, or nullptr) covers them, else a new scratch
// row (the piece's overlap copied there, the rest read).
PlanRef GatherRows(ReadPlan& plan, int slot, uint64_t x, uint64_t len,
                   const ReadPiece* piece);

// `slot`'s rows [x, x + len) into client offset `target` as the XOR of every
// other slot but `exclude` (-1, or RAID6's Q), `pieces` (on other slots)
// read into the client's buffer on the way.
ReadPlan PlanRebuild(const Geometry& geo, uint64_t stripe, int slot, uint64_t x,
                     uint64_t len, uint64_t target,
                     std::span<const ReadPiece> pieces, int exclude);

WritePlan PlanWrite6(const Geometry& geo, uint64_t stripe, uint64_t a,
                     uint64_t b, const StripeHealth& health);
void ComputeWrite6(const WritePlan& plan, uint8_t* scratch,
                   const uint8_t* client);
ReadPlan PlanDegradedRead6(const Geometry& geo, uint64_t stripe,
                           std::span<const ReadPiece> pieces, int missing_slot,
                           int second_missing_slot);
ReadPlan PlanReconstruct6(const Geometry& geo, uint64_t stripe, int slot,
                          uint64_t x, uint64_t len, int also_missing);
ReadPlan PlanReconstructPair6(const Geometry& geo, uint64_t stripe, int a,
                              int b, uint64_t x, uint64_t len,
                              uint64_t b_client);
// The rebuild of a plan with `pq` set (after its copies), then its outs.
void ComputeRead6(const ReadPlan& plan, uint8_t* scratch, uint8_t* client);

}  // namespace uraid::plan_internal

#endif  // URAID_SRC_PLAN_STRIPE_PLAN6_H_
