// SPDX-License-Identifier: MIT
// Internal: what the stripe engine (StripeReader, StripeWriter) and the
// jobs' stripe work (StripeRebuilder, StripeScanner) need of their array:
// whether it may serve at all, the clean/active bracket of a write, and
// what a failed member I/O means for the slot it hit. The array's failure
// rules (array/member_faults.h) implement it; the parts know nothing else of
// it.

#ifndef URAID_SRC_ENGINE_ENGINE_HOST_H_
#define URAID_SRC_ENGINE_ENGINE_HOST_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/member_io.h"
#include "uraid/member.h"

namespace uraid {

// Every method is thread-safe and may be called with stripe locks held.
class EngineHost {
 public:
  // OK when the array may serve a read (`write` false) or a write: not
  // failed, and for writes neither read-only nor holding a background
  // error.
  virtual absl::Status CheckUsable(bool write) const = 0;
  // Marks `slot` faulty (or hands it to its replacement); with `only_if`,
  // only while that member still holds it. Writes the superblocks.
  virtual absl::Status FailSlot(int slot, const std::string& why,
                                const Member* only_if) = 0;
  // The first failed I/O of a plan, its slot failed (see FailSlot), or OK.
  // Sets *slot_failed when a member was failed or a slot changed hands, so
  // the caller redoes its plan around it.
  virtual absl::Status AbsorbFailures(std::vector<MemberIo>& ios,
                                      bool* slot_failed) = 0;
  // Records member bytes [at, at + len) (absolute on the member) of `slot`'s
  // member, or with `replacement` of its replace target, as bad (md's
  // bad-block log), durably: the log, then the superblocks' BAD_BLOCKS
  // bit, before it returns, so nothing relying on the entry is
  // acknowledged first. `only_if`: only while that member still holds the
  // slot (else Aborted, nothing done). When the entry cannot be kept (no
  // log, log full, the log write failed) the member is failed instead,
  // md's rule, and the error says so; on a read-only array nothing is
  // recorded or failed (FailedPrecondition). `why` names the error.
  virtual absl::Status RecordBadBlocks(int slot, bool replacement,
                                       const Member* only_if, uint64_t at,
                                       uint64_t len,
                                       const std::string& why) = 0;
  // `slot`'s member (`only_if`, when given) had a write error that was
  // recorded instead of failing it: md's WantReplacement. Reported once per
  // member; a spare in the pool starts replacing it.
  virtual void WantReplacement(int slot, const Member* only_if,
                               const std::string& why) = 0;
  // A write covering member bytes [at, at + len) of `slot`'s member reached
  // it durably: their entries go, and the log is rewritten.
  virtual absl::Status ClearBadBlocks(int slot, const Member* only_if,
                                      uint64_t at, uint64_t len) = 0;
  // Brackets a client write (or trim): the first one marks the array
  // active (dirty) in the superblocks before any member is written (md's
  // rule). BeginWrite fails when the array may not be written; EndWrite
  // follows every BeginWrite that succeeded.
  virtual absl::Status BeginWrite() = 0;
  virtual void EndWrite() = 0;
  // Keeps `st` (if an error) as the array's sticky background error, named
  // by `what`: a failure that could not be recorded on the members.
  virtual void RecordBackgroundError(const absl::Status& st,
                                     absl::string_view what) = 0;

 protected:
  ~EngineHost() = default;
};

}  // namespace uraid

#endif  // URAID_SRC_ENGINE_ENGINE_HOST_H_
