// SPDX-License-Identifier: MIT
// Internal: one member I/O of a plan, as the array's executor
// (io_executor.h) runs it.

#ifndef URAID_SRC_ENGINE_MEMBER_IO_H_
#define URAID_SRC_ENGINE_MEMBER_IO_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "uraid/member.h"

namespace uraid {

// One member I/O of a plan. `offset` is relative to data_offset.
struct MemberIo {
  enum Kind { kRead, kWrite, kFlush, kDiscard };
  Kind kind = kRead;
  int slot = 0;
  void* buf = nullptr;  // kRead destination / kWrite source
  size_t len = 0;
  uint64_t offset = 0;
  absl::Status status;
  // Addressed to the slot's replacement (a replace job's copy target)
  // rather than its member.
  bool to_replacement = false;
  // Set by Submit when given the slot generations the plan was made with:
  // the I/O is refused (stale, status Aborted) if its slot's member or
  // role changed since, before or while it ran, so the caller replans.
  bool check_gen = false;
  uint64_t gen = 0;
  bool stale = false;
  // The member the I/O went to (set by RunIo): an error is held against
  // that member only, not whatever holds the slot by the time it is seen.
  const Member* used = nullptr;
  // `used` itself answered the call (set by RunIo). Unlike `status`, which
  // a caller may clear after correcting a failed read, this stays.
  bool answered = false;
  // Keeps `used` alive as long as this MemberIo: the member may leave its
  // slot (and be closed) while the I/O's error is still being handled,
  // which then names it (FailSlot's only_if).
  std::shared_ptr<Member> used_ref;
  // The data offset (bytes) and chunk size of the shape the plan was made
  // in, set by Submit from the shape it is given (see shape.h): `offset`
  // is relative to `base`, and offset / chunk_bytes is the I/O's stripe
  // (which a replace target's front is compared with).
  uint64_t base = 0;
  uint64_t chunk_bytes = 0;
  // kWrite from a job copying onto a member (rebuild, replace): where the
  // data is all zeros and the member already reads as a hole there, the
  // write is skipped and succeeds, so a sparse source leaves a sparse
  // copy. Only for writers that hold the range's stripe lock (no client
  // write can fill the hole between the probe and the skip).
  bool keep_sparse = false;
  // kWrite: the member this plan read the same range from, in full, just
  // before (a read-modify-write; see MarkRewrites). A write that goes to
  // that same member is a Member::Rewrite; to any other (the slot changed
  // members, or a replace target's copy), a Write.
  const Member* read_from = nullptr;
  // kWrite: durable when done (Member::WriteFua), so no later flush has to
  // cover it. A PPL stripe alone in its log batch (PplLog::Hold::alone).
  bool fua = false;
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_MEMBER_IO_H_
