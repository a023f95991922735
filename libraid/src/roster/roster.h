// SPDX-License-Identifier: MIT
// Internal: the owner of the array's md metadata, in the manner of
// leveldb's VersionSet::LogAndApply. It holds the superblock template, the
// spare pool, the retired devices, whether the array has failed, and the
// write side of every slot (who holds it: Slot::member, state, id,
// replacement, repl_id), all under one mutex. They change through
// Apply(edit) (roster_edit.h), which decides the edit against the slots as
// they are, persists it (the ordered superblock fan-out, the bitmap header
// first) and reports it, in one place, so a check of who holds a slot and
// the change it leads to cannot be split by another thread. The few other
// writers are named below: Seat (before the slots are published),
// AppendSlotLocked (a reshape), SkipFront (a rebuild's front), the
// superblock fields a reshape or a policy switch stages before an
// edit::Persist (Set*Locked, EndReshapeLocked), and the lock-free
// DropReplacementIf.
//
// The data path reads slot health lock-free (SlotTable); a change of a
// slot's member happens inside the slot's generation change, so a plan
// made before it is refused and redone (Slot::gen).
//
// Thread-safety: thread-safe. Lock order: the array's policy and state
// mutexes and the stripe locks before mu_, mu_ before the bitmap's. Apply
// holds mu_ across the superblock writes (as the array's sb_mu_ did), so it
// must not be called from a thread the fan-out waits for (the executor's
// pool threads); those use DropReplacementIf (slot_table.h), which takes
// no lock.

#ifndef URAID_SRC_ROSTER_ROSTER_H_
#define URAID_SRC_ROSTER_ROSTER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/sync.h"
#include "engine/slot_table.h"
#include "roster/roster_edit.h"
#include "uraid/bitmap.h"
#include "uraid/events.h"
#include "uraid/geometry.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {

// What the roster needs of its array. Called with the roster's mutex held
// (except Report/Log, which may be called either way): implementations
// must not call back into the roster.
class RosterHost {
 public:
  virtual ~RosterHost() = default;
  // Chunk bytes of the array's current shape: the superblocks' positions
  // (resync and recovery offsets) are in its stripes.
  virtual uint64_t CurrentChunkBytes() const = 0;
  // The resync_offset (sectors) a dirty superblock may claim: 0 once a
  // client has written since assembly, else the resync's front.
  virtual uint64_t DirtyResyncSectors() const = 0;
  // Writes the bitmap header with `events`, before the superblocks (md's
  // order: a crash in between leaves the bitmap one event ahead, which
  // assembly accepts, never behind). No-op without a bitmap.
  virtual void WriteBitmapEvents(uint64_t events) = 0;
  // The write-intent bitmap's header, when the array has a bitmap.
  virtual std::optional<BitmapSuper> BitmapHeader() const = 0;
  // A slot's health changed (a failure, a member joining or leaving):
  // the bitmap keeps its bits while the array is degraded.
  virtual void SlotHealthChanged() = 0;
  virtual void Log(LogLevel level, const std::string& line) const = 0;
  virtual void Report(LogLevel level, Event e,
                      const std::string& line) const = 0;
};

class Roster {
 public:
  // `slots` and `spares` as assembly or create found them (seated with
  // Seat); `sb` is the template every superblock is written from.
  // `read_only`: decisions are made, nothing is persisted.
  Roster(RosterHost& host, std::vector<std::unique_ptr<Slot>> slots,
         Superblock sb, std::vector<Spare> spares, bool read_only);

  Roster(const Roster&) = delete;
  Roster& operator=(const Roster&) = delete;

  // Decides `edit`, persists it (unless refused or read-only) and reports
  // it; see roster_edit.h for each edit's condition. The superblock update
  // goes to the members one after another, highest slot first, the bitmap
  // header before them; a member whose write fails is failed by the same
  // decision as edit::Fail and the update is made again with a new events
  // count. An update that fails the array still goes on to the members
  // left (they must agree on which slots failed) and returns Unavailable.
  Applied Apply(const RosterEdit& edit) ABSL_LOCKS_EXCLUDED(mu_);

  // Puts `member` (device `id`) into a slot not yet published to any other
  // thread (assembly, create). `front`: for kRebuilding, the stripe below
  // which the member is in sync (and durable).
  static void Seat(Slot& slot, std::shared_ptr<Member> member,
                   const DeviceId& id, SlotState state, uint64_t front = 0);
  // Appends an active slot held by `member` (a reshape adding members),
  // with the next device number. REQUIRES: mu_ (the caller publishes the
  // reshape that stripes over it under the same hold).
  void AppendSlotLocked(std::shared_ptr<Member> member, DeviceId id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves rebuilding `slot`'s front from `from` to `to` when `target` still
  // holds it there (a window skipped: holes or clear bitmap regions;
  // `need_partial`: only for a re-added member). Returns whether it moved.
  bool SkipFront(int slot, const Member* target, uint64_t from, uint64_t to,
                 bool need_partial) ABSL_LOCKS_EXCLUDED(mu_);

  // The mutex under which the metadata changes. Callers that keep state of
  // their own in step with it (the shapes a reshape publishes with its
  // superblock fields, a member's bad-block log) hold it through this.
  Mutex* mu() const ABSL_LOCK_RETURNED(mu_) { return &mu_; }
  // The superblock template.
  const Superblock& TemplateLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return sb_;
  }
  // Fields staged by their owner under mu_, together with state of its own
  // (the shapes a reshape publishes), and written by the next
  // edit::Persist. The reshape's (md's reshape_position, delta_disks,
  // new_level, new_layout, new_chunk, new_offset and the RESHAPE_ACTIVE and
  // NEW_OFFSET bits) from shape `from` (data at `from_offset` bytes) to
  // `to` (at `to_offset`), its front at array byte `front_bytes`:
  void SetReshapeLocked(const Geometry& from, uint64_t from_offset,
                        const Geometry& to, uint64_t to_offset,
                        uint64_t front_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // the end of a reshape: the array is in `to` (data at `to_offset`
  // bytes), each member's data area `grown_sectors` larger;
  void EndReshapeLocked(const Geometry& to, uint64_t to_offset,
                        uint64_t grown_sectors)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // a change of level with the same placement (RAID4 <-> RAID5
  // parity-last: md's takeover);
  void SetLevelLocked(const Geometry& to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // md's RAID5 <-> RAID6 takeover to `to`, one slot more or fewer than now:
  // the level, layout and raid_disks; RAID6 gains an empty last slot (Q,
  // for a spare to rebuild), RAID5 loses the last slot, whose member joins
  // the spares (as md leaves it). Written by the next edit::Persist.
  void TakeoverLocked(const Geometry& to) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // the consistency policy's feature bits and the bitmap/PPL union
  // (Superblock::bitmap_offset).
  void SetPolicyFieldsLocked(uint32_t feature_map, int32_t bitmap_offset)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A copy of the template.
  Superblock Template() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::vector<Spare>& SparesLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return spares_;
  }
  std::vector<Spare> Spares() const ABSL_LOCKS_EXCLUDED(mu_);
  // The first spare of the pool, or null.
  std::shared_ptr<Member> FirstSpare() const ABSL_LOCKS_EXCLUDED(mu_);
  // Why a member with superblock `old`, which held a slot of this array,
  // cannot return to it with a partial rebuild (md's re-add); empty when
  // it can.
  std::string ReAddRefusalLocked(const Superblock& old) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SlotTable& slots() { return slots_; }
  const SlotTable& slots() const { return slots_; }
  int SlotCount() const { return static_cast<int>(slots_.size()); }
  // More than one slot gone: the array has failed (set once, by a
  // decision under mu_, or at construction).
  bool failed() const { return failed_.load(); }

  // Reports an active member that has just been marked faulty: Fail, then
  // ArrayFailed when the array failed, else DegradedArray.
  void ReportMemberFailed(const std::string& name, int slot,
                          const std::string& why) const;
  // md's spares=N (mdadm.conf): fewer spares than this is worth an event.
  void SetExpectedSpares(int n) { expected_spares_.store(n); }
  int expected_spares() const { return expected_spares_.load(); }
  // Reports SparesMissing when the pool holds fewer spares than expected
  // (after a spare was used, dropped or removed).
  void CheckSpares() const ABSL_LOCKS_EXCLUDED(mu_);
  // Reports a replace target that failed (FailSpare): the replace ends.
  void ReportReplacementFailed(const std::string& name, int slot,
                               const absl::Status& why) const;

 private:
  // One Decide per edit kind: checks the edit's condition and makes the
  // change, filling `a`. Returns whether the superblocks are to be written.
  bool DecideLocked(const edit::Fail& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::DropReplacement& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::PromoteSpare& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::ReAdd& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::StartReplace& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::CheckpointRebuild& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::FinishRebuild& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::SwapInReplacement& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::Remove& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::AddSpare& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::RemoveSpare& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::SetClean& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DecideLocked(const edit::Persist& e, Applied* a)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The one fail-a-slot decision, for edit::Fail and a failed superblock
  // write alike; records nothing on the members.
  Applied FailLocked(int slot, const Member* only_if)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The events and log lines of a decided failure of `slot`.
  void ReportSlotFailure(int slot, const Applied& f,
                         const std::string& why) const;
  // The slot's member (active, being replaced) has failed: its replace
  // target becomes the member, rebuilding from its copy front (md turns a
  // replacement into an ordinary rebuild the same way). Returns that stripe.
  uint64_t HandOverLocked(Slot& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Puts `m` (device `id`) into gone slot `s`, rebuilding from stripe 0;
  // `partial`: only where the bitmap has bits set (a re-added member).
  void StartRebuildLocked(Slot& s, const std::shared_ptr<Member>& m,
                          const DeviceId& id, bool partial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The next device number past every one in use or retired.
  uint32_t NextDevNumberLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives `id` that number (and `a` names it), or refuses `a` with
  // ResourceExhausted past the superblocks' role table. Returns whether it
  // did.
  bool NumberDeviceLocked(DeviceId* id, Applied* a) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The superblock fan-out (superblock_fanout.cc). `clean`: persist clean
  // (true), dirty (false) or keep what the template says (nullopt).
  absl::Status PersistLocked(std::optional<bool> clean, bool* member_failed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RosterHost& host_;
  const bool read_only_;
  SlotTable slots_;
  std::atomic<bool> failed_{false};
  std::atomic<int> expected_spares_{0};

  mutable Mutex mu_;
  Superblock sb_ ABSL_GUARDED_BY(mu_);
  std::vector<Spare> spares_ ABSL_GUARDED_BY(mu_);
  // Devices that left the array (removed, replaced): listed as faulty in
  // the superblocks so that they are refused if presented again.
  std::vector<uint32_t> retired_devs_ ABSL_GUARDED_BY(mu_);
};

}  // namespace uraid

#endif  // URAID_SRC_ROSTER_ROSTER_H_
