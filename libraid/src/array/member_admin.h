// SPDX-License-Identifier: MIT
// Internal: member management on a live array, md's --fail, --remove,
// --add (and re-add) and --replace: the checks a request needs before it
// is an edit, then the edit. The roster decides each edit again under its
// mutex, makes it and writes it to the superblocks before the call returns
// (roster/roster.h), so a look here and the change cannot be split by a
// member failing meanwhile.
//
// Thread-safety: every method may be called from any thread (the control
// socket's); none holds a lock across calls into the roster or the jobs.

#ifndef URAID_SRC_ARRAY_MEMBER_ADMIN_H_
#define URAID_SRC_ARRAY_MEMBER_ADMIN_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "array/array_jobs.h"
#include "engine/engine_host.h"
#include "engine/shape_set.h"
#include "jobs/recovery_job.h"
#include "meta/array_bitmap.h"
#include "report/array_reporter.h"
#include "roster/roster.h"
#include "uraid/member.h"

namespace uraid {

class MemberAdmin {
  // References to parts that outlive it: `host` for the failure rules
  // (CheckUsable, FailSlot), `edits` for roster edits with the array's
  // after-effects (RecoveryHost::ApplyEdit), `jobs` to start the recovery
  // or replace a change makes possible.
 public:
  MemberAdmin(EngineHost& host, RecoveryHost& edits, Roster& roster,
              const ShapeSet& shapes, ArrayBitmap& bitmap, ArrayJobs& jobs,
              const ArrayReporter& reporter)
      : host_(host),
        edits_(edits),
        roster_(roster),
        slots_(roster.slots()),
        shapes_(shapes),
        bitmap_(bitmap),
        jobs_(jobs),
        reporter_(reporter) {}
  MemberAdmin(const MemberAdmin&) = delete;
  MemberAdmin& operator=(const MemberAdmin&) = delete;

  // Marks the member faulty (a replace target: ends the replace; a spare:
  // leaves the array). Refused when the array would fail.
  absl::Status Fail(const std::string& name);
  // Removes a faulty member, a spare, or a replace target (cancelling the
  // replace).
  absl::Status Remove(const std::string& name);
  // Adds a spare, or re-adds a member that held a slot of this array (only
  // the regions its bitmap marks are rebuilt).
  absl::Status Add(std::unique_ptr<Member> member);
  // Copies active member `old_name` onto `replacement` (md's --replace).
  absl::Status Replace(const std::string& old_name,
                       std::unique_ptr<Member> replacement);

  // Checks a member about to join (size, not ours already, not another
  // array's) and gives it a device uuid and size; not yet a dev_number.
  absl::StatusOr<DeviceId> PrepareNewMember(Member& member);

 private:
  // The member called `name`: its slot or its index among the spares (the
  // other -1), or null.
  std::shared_ptr<Member> FindByName(const std::string& name, int* slot,
                                     int* spare) const;
  Applied Apply(const RosterEdit& edit) { return edits_.ApplyEdit(edit); }

  EngineHost& host_;
  RecoveryHost& edits_;
  Roster& roster_;
  const SlotTable& slots_;
  const ShapeSet& shapes_;
  ArrayBitmap& bitmap_;
  ArrayJobs& jobs_;
  const ArrayReporter& reporter_;
};

}  // namespace uraid

#endif  // URAID_SRC_ARRAY_MEMBER_ADMIN_H_
