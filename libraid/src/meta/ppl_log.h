// SPDX-License-Identifier: MIT
// File: meta/ppl_log.h
//
// The partial parity log (md's consistency policy "ppl") on the members:
// where a member's PPL area is and how it is initialised. The on-disk
// format is format/ppl_format.h; this file does the member I/O.
//
// The log (md's single-PPL mode, as md does it without MULTIPLE_PPLS):
// each parity member's area holds one header plus the partial parity of
// the last stripe write logged with its parity there (in flight, or done
// and flushed: replaying a done one rewrites the parity it has). A write
// logs itself (PplLog::LogStripe: header with the next generation and the
// partial parity, written then flushed, md's FUA) before any of its data
// or parity is written, and holds that member's log until its member
// writes are flushed, so the header on disk always covers every write in
// flight with parity there. Simplest correct order; it serialises the
// partial writes that share a parity member.
//
// PplAreaOf and InitPplArea are thread-compatible; PplLog is thread-safe.

#ifndef URAID_SRC_META_PPL_LOG_H_
#define URAID_SRC_META_PPL_LOG_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// The live log of a PPL array: one lock and one generation per slot.
class PplLog {
 public:
  // `sb`: the array's superblock template (area placement, signature).
  static absl::StatusOr<std::shared_ptr<PplLog>> Make(const Geometry& geo,
                                                      const Superblock& sb);

  // Logs the write of stripe bytes [a, b) that `plan` describes, once
  // ComputeWrite has run (`scratch`, `client` as ComputeWrite had them), on
  // `parity_member` (the plan's parity slot): waits for that slot's
  // previous stripe to release its log, then writes header and partial
  // parity and flushes. Returns the slot's lock: hold it until the
  // stripe's member writes are flushed. REQUIRES: the plan writes parity.
  // Errors name the member.
  absl::StatusOr<std::unique_lock<std::mutex>> LogStripe(
      uint64_t stripe, uint64_t a, uint64_t b, const WritePlan& plan,
      const uint8_t* scratch, const uint8_t* client, Member& parity_member);

 private:
  PplLog(const Geometry& geo, PplArea area, uint32_t signature);

  const Geometry geo_;
  const PplArea area_;
  const uint32_t signature_;
  // One per slot: held from a log write until its stripe is durable.
  std::vector<std::unique_ptr<std::mutex>> mu_;
  std::vector<uint64_t> generation_;  // slot i's, guarded by *mu_[i]
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
