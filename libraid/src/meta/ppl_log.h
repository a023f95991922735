// SPDX-License-Identifier: MIT
// File: meta/ppl_log.h
//
// The partial parity log (md's consistency policy "ppl") on the members:
// where a member's PPL area is and how it is initialised. The on-disk
// format is format/ppl_format.h; this file does the member I/O.
//
// The log (md's single-PPL mode, as md does it without MULTIPLE_PPLS):
// each parity member's area holds one header plus the partial parity of
// the stripe writes last logged with their parity there (in flight, or
// done and flushed: replaying a done one rewrites the parity it has). A
// write logs itself (PplLog::LogStripe) before any of its data or parity
// is written, and holds that member's log until its member writes are
// durable, so the header on disk always covers every write in flight with
// parity there. Writes that arrive while a slot's log is held wait and are
// logged together, as md batches stripes into one io_unit: one header with
// an entry per stripe (up to md's 148 entries and the area's size), one
// write and one flush for the batch, once every hold of the batch before
// is released. A stripe releases its hold when its member writes are done,
// saying which members it wrote; the next batch's leader flushes those
// members once, before its header replaces the last (md flushes the data
// disks when an io_unit ends). The log then costs one write and one flush
// of each member written per batch, not per stripe. A stripe alone in its
// batch writes its members with FUA instead (Hold::alone): the same one
// durable write per member, with no flush left on the next header's path
// (where a flush costs a round trip or a system call, that path is the
// log's throughput: one batch per slot at a time).
// PplAreaOf and InitPplArea are thread-compatible; PplLog is thread-safe.

#ifndef URAID_SRC_META_PPL_LOG_H_
#define URAID_SRC_META_PPL_LOG_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/aligned_buffer.h"
#include "base/sync.h"
#include "plan/ppl_plan.h"
#include "plan/stripe_plan.h"
#include "uraid/geometry.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {

// Byte offset of the member's PPL area and its length, from the superblock
// (super_offset + ppl.offset sectors, ppl.size sectors). InvalidArgument
// naming ppl.offset or ppl.size when the superblock has no PPL feature, the
// area is smaller than one header plus one 4 KiB row (the kernel's
// ppl_validate_rdev), or it overlaps the superblock's 4 KiB or the data.
struct PplArea {
  uint64_t offset_bytes = 0;
  uint64_t size_bytes = 0;
};
absl::StatusOr<PplArea> PplAreaOf(const Superblock& sb);

// Makes `member`'s PPL area what mdadm's create and the kernel's
// ppl_write_empty_header leave: zero, then an empty header (0xFF reserved,
// the array's signature, generation 0, no entries) at its start, flushed.
// Errors name the member.
absl::Status InitPplArea(Member& member, const Superblock& sb);

// Flushes the members of the slots marked true (StripeWriter::FlushSlots).
using PplFlush = absl::FunctionRef<absl::Status(const std::vector<bool>&)>;

// The live log of a PPL array: per slot, the batch being logged or held
// and the stripes waiting for the next one.
class PplLog : public std::enable_shared_from_this<PplLog> {
 public:
  // A logged stripe's hold on its parity slot's log. While a hold of a
  // batch lives, that slot logs nothing new (the next header would drop
  // this batch's entries). Move-only; the destructor releases it. It
  // shares ownership of its log, which a policy switch may drop meanwhile.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& o) noexcept;
    Hold& operator=(Hold&& o) noexcept;
    ~Hold() { Release(); }
    bool held() const { return log_ != nullptr; }
    // The stripe went out in a batch of its own. Its writes should then go
    // to the members with FUA rather than be left for the next batch to
    // flush: each member it writes is written once, so FUA costs the
    // members what that flush would, and the next header need not wait for
    // a flush (StripeWriter::PlanAndWriteStripe).
    bool alone() const { return alone_; }
    // Slot `slot`'s member was written (or a write was tried) under this
    // hold without FUA: the next batch flushes it before its header goes
    // out.
    void Wrote(int slot);
    void Release();

   private:
    friend class PplLog;
    Hold(std::shared_ptr<PplLog> log, int slot, bool alone)
        : log_(std::move(log)), slot_(slot), alone_(alone) {}
    std::shared_ptr<PplLog> log_;
    int slot_ = 0;
    bool alone_ = false;
    std::vector<bool> wrote_;
  };

  // `sb`: the array's superblock template (area placement, signature).
  static absl::StatusOr<std::shared_ptr<PplLog>> Make(const Geometry& geo,
                                                      const Superblock& sb);

  // Logs the write of stripe bytes [a, b) that `plan` describes, once
  // ComputeWrite has run (`scratch`, `client` as ComputeWrite had them), on
  // `parity_member` (the plan's parity slot): waits until that slot's
  // previous batch is released, then the stripe's entries go out in the
  // next batch's header (the members the last batch wrote flushed through
  // `flush`, then header and partial parity written with FUA).
  // Returns the stripe's hold: mark each member written under it (Wrote)
  // and keep it until those writes are done. `parity_read`: the stripe
  // just read `parity_member` over rows of its data area (a
  // read-modify-write's old parity), so the file held the area, which lies
  // before the data; a batch with such a stripe writes its header as a
  // Member::Rewrite, without a file member's size check (one system call
  // per batch). Otherwise the stripe's parity write that follows is a
  // size-checked Write, so a member truncated under the array is still
  // found before the stripe is acknowledged. REQUIRES: the plan writes
  // parity; the caller holds no other hold of this log (a second would
  // wait on the first forever). Errors name the member; a failed batch
  // (flush or log write) fails every stripe in it.
  absl::StatusOr<Hold> LogStripe(uint64_t stripe, uint64_t a, uint64_t b,
                                 const WritePlan& plan, const uint8_t* scratch,
                                 const uint8_t* client, Member& parity_member,
                                 bool parity_read, PplFlush flush);

  // Stripes waiting for slot `slot`'s next batch (tests, diagnostics).
  size_t Waiting(int slot) const;

 private:
  // A stripe waiting in a slot's queue; lives on its caller's stack.
  struct Waiter {
    uint64_t stripe = 0;
    PplStripeLog log;
    bool parity_read = false;  // LogStripe's `parity_read`
    bool done = false;         // logged, or failed: `status` says
    absl::Status status;
    bool alone = false;  // went out in a batch of its own, once done
  };
  struct Slot {
    mutable Mutex mu;
    uint64_t generation ABSL_GUARDED_BY(mu) = 0;
    bool writing ABSL_GUARDED_BY(mu) = false;  // a batch is going out
    int holds ABSL_GUARDED_BY(mu) = 0;         // live holds of the last batch
    // Slots the last batch's stripes wrote: flushed before the next header.
    std::vector<bool> unflushed ABSL_GUARDED_BY(mu);
    std::vector<Waiter*> queue ABSL_GUARDED_BY(mu);  // arrival order
    // The batch's header and partial parity on their way to the member:
    // owned by the batch's leader while `writing` (so not guarded by `mu`),
    // kept for the next batch rather than allocated per stripe. Grows to
    // the largest batch, at most the area's size.
    AlignedBuffer out;
  };

  PplLog(const Geometry& geo, PplArea area, uint32_t signature);
  // Header and partial parity of `batch` at the area's start, with FUA,
  // through `out` (the slot's Slot::out). REQUIRES: the caller leads the
  // slot's batch (Slot::writing).
  absl::Status WriteBatch(uint64_t generation,
                          const std::vector<Waiter*>& batch, Member& member,
                          AlignedBuffer& out);

  const Geometry geo_;
  const PplArea area_;
  const uint32_t signature_;
  std::vector<std::unique_ptr<Slot>> slots_;  // one per slot
};

// What RecoverPpl did.
struct PplRecovery {
  int recovered_entries = 0;
  int skipped_entries = 0;  // a data member of the entry missing
  // Logs or entries refused (corrupt, foreign, not fitting the array),
  // with the reasons: md counts these as mismatches and resyncs.
  int mismatches = 0;
  std::vector<std::string> problems;
};

// The replay at the start of a dirty PPL array (the kernel's ppl_recover):
// for each present slot's newest valid log, each entry whose data members
// are all present gets parity = XOR(its data as now on disk) xor its
// partial parity (without partial parity: XOR of every data chunk),
// written to that slot and flushed. `members[s]` is slot s's member or
// null; `data_offset` in bytes. Then every present member's area starts
// afresh (InitPplArea). Read and write errors are returned, naming the
// member; a corrupt, foreign or unfitting log or entry is a mismatch.
absl::StatusOr<PplRecovery> RecoverPpl(
    const Geometry& geo, const Superblock& sb, uint64_t data_offset,
    const std::vector<std::shared_ptr<Member>>& members);

}  // namespace uraid

#endif  // URAID_SRC_META_PPL_LOG_H_
