// SPDX-License-Identifier: MIT
// Internal: the planner. One stripe's request plus the stripe's health in,
// the member I/O that serves it out: which member ranges to read, how the
// XOR makes parity or a missing chunk, which member ranges to write. Pure:
// no I/O, no threads, no array state. The stripe engine (array/array.cc)
// runs a plan against the members; tests run it against memory.
//
// Units: every offset and length is in bytes. A PlannedIo's chunk_offset is
// inside the slot's chunk of the stripe (the member offset is
// stripe * chunk_bytes + chunk_offset, relative to the data offset).
// Buffers: a plan names two, the client's buffer (the request's bytes: the
// data to write, or where read data goes) and a scratch buffer of
// `scratch_bytes` the executor allocates; PlanRef points into one of them.
//
// md's rules (reference: md-raid5.md, "partial-stripe writes"): a write
// that covers the whole stripe computes parity from the new data alone; a
// partial one reads either the old data it replaces plus old parity
// (read-modify-write) or the data it does not replace (reconstruct-write),
// whichever reads fewer 4 KiB blocks, ties to reconstruct-write (md's
// default rmw_level); parity that is not trusted (a stripe the resync has
// not reached, or a retry that may have half-written it) is never carried
// forward. Unlike md, which decides per 4 KiB row, the decision is made once
// for the rows the write touches (the window [lo, hi)), so one plan issues
// one read and one write per member.
//
// RAID6 (geo.level() == 6; plan/stripe_plan6.cc): the same plans with P and
// Q. Writes update both (P ^= delta, Q ^= g^slot * delta for RMW; both from
// the data for RCW and full stripes), a degraded write recovers the lost
// rows it needs with RecoverPQ; a stripe may lose two slots. Reads rebuild
// from P alone (XOR, as RAID5) when one data chunk is lost and P is there,
// else from P and Q (RecoverPQ), reading each survivor once.

#ifndef URAID_SRC_PLAN_STRIPE_PLAN_H_
#define URAID_SRC_PLAN_STRIPE_PLAN_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "uraid/geometry.h"

namespace uraid {

struct PlanRef {
  enum Buffer : uint8_t { kScratch, kClient };
  Buffer buffer = kScratch;
  uint64_t offset = 0;
};

struct PlannedIo {
  int slot = 0;
  uint64_t chunk_offset = 0;
  uint64_t len = 0;
  PlanRef ref;  // read destination / write source
};

// What is known of the stripe when the plan is made.
struct StripeHealth {
  int missing_slot = -1;  // a slot whose member cannot serve it
  // False where parity may be stale: never read-modify-write from it.
  bool parity_trusted = true;
  // RAID6 only: a second slot that cannot serve the stripe, or -1.
  int second_missing_slot = -1;
};

enum class WriteMode {
  kParityGone,   // the parity member (RAID6: P and Q) is missing: data only
  kFull,         // parity from the new data alone
  kRmw,          // P' = P ^ Dold ^ Dnew (RAID6: Q' = Q ^ g^slot (Dold ^ Dnew))
  kRcw,          // P' = XOR of new and unreplaced old data (RAID6: and Q')
  kDegradedRcw,  // a chunk whose old rows are needed is missing: rebuilt first
};

struct WritePlan {
  WriteMode mode = WriteMode::kFull;
  bool degraded = false;  // some member of the stripe is missing
  int parity_slot = 0;
  // RAID6: Q's slot (-1 at levels 4 and 5), the number of Q slots
  // (Geometry::SyndromeSlots), and which of P and Q have a member to write.
  int q_slot = -1;
  int syndrome_slots = 0;
  bool p_alive = true, q_alive = false;
  uint64_t lo = 0, hi = 0;  // the rows [lo, hi) the parity work covers
  uint64_t scratch_bytes = 0;
  // Done together first; then ComputeWrite; then `writes`, together.
  std::vector<PlannedIo> reads;
  std::vector<PlannedIo> writes;

  // For ComputeWrite: per data index, the new bytes [x, y) of its chunk,
  // from client offset `client`.
  struct Chunk {
    int slot = 0;
    int qslot = -1;  // RAID6: its Q slot (Geometry::QSlot)
    bool written = false;
    uint64_t x = 0, y = 0;
    uint64_t client = 0;
  };
  std::vector<Chunk> chunks;
  int missing_index = -1;         // data index of the missing data chunk, or -1
  int second_missing_index = -1;  // RAID6: a second one, or -1
};

// The plan for writing the stripe's data bytes [a, b) (offsets into the
// stripe's data, 0 <= a < b <= stripe_data_bytes()) whose new contents are
// client bytes [0, b - a). REQUIRES: the request lies inside one stripe.
WritePlan PlanWrite(const Geometry& geo, uint64_t stripe, uint64_t a,
                    uint64_t b, const StripeHealth& health);

// Once the plan's reads are in `scratch`: computes the new parity there
// (and, for kDegradedRcw, the missing chunk's old rows first). `client`
// holds the new data.
void ComputeWrite(const WritePlan& plan, uint8_t* scratch,
                  const uint8_t* client);
// ComputeWrite for a RAID5 full-stripe plan (kFull, or kParityGone: nothing
// to compute) whose client bytes are given chunk by chunk: `chunks[k]`
// holds client bytes [k * chunk_bytes, (k + 1) * chunk_bytes).
void ComputeFullWriteFromChunks(const WritePlan& plan, uint64_t chunk_bytes,
                                const uint8_t* const* chunks, uint8_t* scratch);

// A whole stripe's parity as a full-stripe write makes it, for a caller
// that computes it ahead of the write (the reshape's copy, while the data
// it has just read is in the CPU's cache): P, then (RAID6) Q, one chunk
// each; exactly the scratch of PlanWrite(geo, stripe, 0,
// stripe_data_bytes(), ...) after ComputeWrite, whatever the stripe's
// health (a lost P or Q is simply not written).
uint64_t FullStripeParityBytes(const Geometry& geo);
// Computes it into `parity` (FullStripeParityBytes) from the stripe's data
// `data` (stripe_data_bytes(), data index order).
void ComputeFullStripeParity(const Geometry& geo, uint64_t stripe,
                             const uint8_t* data, uint8_t* parity);

// One client piece of a read: data index `data_index`'s bytes [x, y) go to
// client offset `client`.
struct ReadPiece {
  int data_index = 0;
  uint64_t x = 0, y = 0;
  uint64_t client = 0;
};

struct ReadPlan {
  uint64_t scratch_bytes = 0;
  std::vector<PlannedIo> reads;  // done together first; then ComputeRead
  // Bytes the client's buffer already holds that the rebuild also needs:
  // copied to scratch so each source is one contiguous range.
  struct Copy {
    uint64_t from_client = 0, to_scratch = 0, len = 0;
  };
  std::vector<Copy> copies;
  // The rebuild: `target` (len bytes, in the client buffer) becomes the XOR
  // of `sources`; sources[0] may be the target itself (a read landed there).
  bool rebuild = false;
  PlanRef target;
  uint64_t len = 0;
  std::vector<PlanRef> sources;
  // RAID6, a rebuild that needs Q (set instead of `sources`): the stripe's
  // rows [.., + len) by Q slot (nullopt: a zero block, DDF's P and Q), P
  // and Q (nullopt: neither read nor rebuilt), and the lost blocks in
  // RecoverPQ's terms, whose refs are where the rebuilt rows go.
  struct Syndrome {
    std::vector<std::optional<PlanRef>> slots;
    std::optional<PlanRef> p, q;
    std::vector<int> lost;
  };
  std::optional<Syndrome> pq;
  // After the rebuild: rebuilt rows (in scratch) the client asked for.
  struct Out {
    uint64_t from_scratch = 0, to_client = 0, len = 0;
  };
  std::vector<Out> outs;
};

// The plan for a read of one stripe's `pieces` (distinct data indexes, in
// any order) while `missing_slot` cannot serve the stripe: every surviving
// byte the client asked for and every byte the rebuild needs is read once,
// the client's pieces straight into its buffer. missing_slot < 0, or a
// missing slot no piece lies on, makes plain reads. RAID6:
// `second_missing_slot` is another slot that cannot serve it, or -1.
ReadPlan PlanDegradedRead(const Geometry& geo, uint64_t stripe,
                          std::span<const ReadPiece> pieces, int missing_slot,
                          int second_missing_slot = -1);

// Slot `slot`'s bytes [x, x + len) of the stripe, rebuilt from every other
// slot into client offset 0 (a read error's correction, or a piece of a
// missing member). RAID6: `also_missing` is another slot that cannot help,
// or -1; levels 4 and 5 REQUIRE -1.
ReadPlan PlanReconstruct(const Geometry& geo, uint64_t stripe, int slot,
                         uint64_t x, uint64_t len, int also_missing = -1);

// RAID6 only: slots `a` and `b` (distinct; data, P or Q) rebuilt together
// over their bytes [x, x + len), a's into client offset 0 and b's into
// client offset `b_client` (>= len): every other slot's rows are read once
// (a recovery writing two targets in one pass). REQUIRES geo.level() == 6.
ReadPlan PlanReconstructPair(const Geometry& geo, uint64_t stripe, int a, int b,
                             uint64_t x, uint64_t len, uint64_t b_client);

// Levels 4 and 5: slot `read_slot`'s bytes [x, x + len) read into client
// offset `read_client`, and slot `lost_slot`'s rebuilt into client offset
// `lost_client` from every other slot, those rows among them: each member
// read once for both (a recovery that finishes a replace's copy and
// rebuilds a failed slot in one pass). The two client ranges are disjoint.
ReadPlan PlanReadAndRebuild(const Geometry& geo, uint64_t stripe, int read_slot,
                            uint64_t read_client, int lost_slot,
                            uint64_t lost_client, uint64_t x, uint64_t len);

// Once the plan's reads are done: the copies, then the rebuild.
void ComputeRead(const ReadPlan& plan, uint8_t* scratch, uint8_t* client);

// Scratch bytes [offset, offset + len) that are at `at` instead (read into
// a buffer of their own, or lent by a cache), never written through.
struct ScratchRow {
  uint64_t offset = 0;
  uint64_t len = 0;
  const uint8_t* at = nullptr;
};
// ComputeRead where `elsewhere` holds some of the scratch rows: a source of
// a single-parity rebuild that lies within one of them is XORed from
// there, and the rest are copied into scratch first (a source the plan
// gathered from several reads; RAID6's syndrome math, which takes writable
// rows). The rows must not overlap each other or what the plan writes.
void ComputeRead(const ReadPlan& plan, uint8_t* scratch, uint8_t* client,
                 std::span<const ScratchRow> elsewhere);

// Member bytes a plan reads and writes (for tests and counters).
uint64_t ReadBytes(const std::vector<PlannedIo>& ios);

}  // namespace uraid

#endif  // URAID_SRC_PLAN_STRIPE_PLAN_H_
