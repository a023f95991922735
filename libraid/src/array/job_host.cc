// SPDX-License-Identifier: MIT
// The array's side of its background jobs: ArrayJobs as the job runner's
// JobHost (jobs/job_runner.h holds the queue, the thread, the throttle and
// the window loop). What each job does is in jobs/: recovery_job.h
// (recovery onto a spare and replace), scrub_job.h (check/repair),
// resync_job.h (after an unclean shutdown; a runner job too,
// JobKind::kResync, which StopJob does not stop) and reshape_job.h. Every
// stripe a job touches is handled under that stripe's lock, so clients
// keep reading and writing everywhere while it runs.

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "array/array_jobs.h"
#include "base/status_macros.h"

namespace uraid {

void ArrayJobs::MaybeStartRecovery() {
  if (read_only_ || roster_.failed()) return;
  bool needed = false;
  bool wanted = false;  // a member wants replacement and a spare can
  {
    MutexLock lock(roster_.mu());
    const bool spare = !roster_.SparesLocked().empty();
    for (const auto& s : slots_) {
      const SlotState st = s->state.load();
      if (st == SlotState::kRebuilding || (st != SlotState::kActive && spare)) {
        needed = true;
      }
    }
    wanted = spare && SlotWantingReplacement() >= 0;
  }
  if (!needed) {
    // md starts the copy onto a spare by itself, after any running job.
    if (wanted && !runner_.Busy().has_value()) {
      absl::Status st = runner_.Request(JobRequest{JobKind::kReplace, -1});
      if (!st.ok()) {
        Log(LogLevel::kWarning,
            absl::StrFormat("replace not started: %s", st.message()));
      }
    }
    return;
  }
  absl::Status st = runner_.RequestRecovery();
  if (!st.ok()) {
    Log(LogLevel::kWarning,
        absl::StrFormat("recovery not started: %s", st.message()));
  }
}

bool ArrayJobs::PrepareJob(JobRequest* req, JobInfo* info) {
  int slot = req->slot;
  const JobKind kind = req->kind;
  if (kind == JobKind::kRecover && slot < 0) {
    // Find the slot to recover: one already rebuilding resumes, else the
    // gone slot gets a spare. RAID6: every gone slot gets a spare first
    // (md adds every spare it can before recovery starts), so two are
    // rebuilt in one pass.
    const Geometry& geo = CurrentShape().geo;
    const int disks = geo.raid_disks();
    if (geo.parity_disks() == 2) PromoteSparesIntoGoneSlots(/*except=*/-1);
    for (int i = 0; i < disks && slot < 0; ++i) {
      if (slots_[i]->state.load() == SlotState::kRebuilding) slot = i;
    }
    for (int i = 0; i < disks && slot < 0; ++i) {
      if (slots_[i]->state.load() != SlotState::kActive &&
          PromoteSpare(i).ok()) {
        slot = i;
      }
    }
    if (slot < 0 || roster_.failed()) return false;  // nothing to do
    req->second_slot = PairedRecoverySlot(slot);
  }
  if (kind == JobKind::kReplace && slot < 0) {
    // A member that wants replacement (WantReplacement), onto a spare.
    slot = SlotWantingReplacement();
    if (slot < 0 || roster_.failed()) return false;
    if (absl::Status st = SpareAsReplacement(slot); !st.ok()) {
      Log(LogLevel::kWarning,
          absl::StrFormat("replace of slot %d not started: %s", slot,
                          st.message()));
      return false;
    }
  }
  req->slot = slot;
  const Geometry& geo = CurrentShape().geo;
  info->total_bytes = geo.stripe_count() * geo.chunk_bytes();
  info->slot = slot;
  if (slot >= 0) {
    std::shared_ptr<Member> t = kind == JobKind::kReplace
                                    ? slots_[slot]->replacement.load()
                                    : slots_[slot]->member.load();
    info->target = t ? t->Name() : "";
  }
  if (req->second_slot >= 0) {
    const Slot& s = *slots_[req->second_slot];
    std::shared_ptr<Member> t = s.state.load() == SlotState::kActive
                                    ? s.replacement.load()
                                    : s.member.load();
    info->second_slot = req->second_slot;
    info->second_target = t ? t->Name() : "";
  }
  return true;
}

int ArrayJobs::PairedRecoverySlot(int slot) const {
  const Geometry& geo = CurrentShape().geo;
  if (slots_[slot]->partial.load()) return -1;
  // Two slots rebuilt from the others need two parity members; a replace
  // copy needs none (its old member still serves), so at level 4/5 it
  // pairs with one rebuilding slot, as md's restarted recovery takes a
  // replacement and a spare together at any level.
  if (geo.parity_disks() == 2 || slots_[slot]->Copying()) {
    for (int i = 0; i < geo.raid_disks(); ++i) {
      const Slot& s = *slots_[i];
      if (i != slot && s.state.load() == SlotState::kRebuilding &&
          !s.partial.load()) {
        return i;
      }
    }
  }
  for (int i = 0; i < geo.raid_disks(); ++i) {
    if (i != slot && slots_[i]->Copying()) return i;
  }
  return -1;
}

bool ArrayJobs::SecondSlotRecoverable(int slot) const {
  const Geometry& geo = CurrentShape().geo;
  // Level 4/5: only beside a replace copy (a second slot lost beside a
  // rebuild has failed the array).
  if ((geo.parity_disks() != 2 && !slots_[slot]->Copying()) ||
      slots_[slot]->partial.load() || roster_.failed()) {
    return false;
  }
  return roster_.FirstSpare() != nullptr && GoneSlotOtherThan(slot) >= 0;
}

absl::Status ArrayJobs::RunRecovery(const JobRequest& req) {
  // A job works in one shape: the current one when it starts (fronts and
  // checkpoints are in its stripes).
  if (req.second_slot >= 0) {
    return recovery_.RunPair(CurrentShape(), req.slot, req.second_slot);
  }
  // A second member failing (or a spare arriving for a gone one) while
  // this slot is rebuilt alone at RAID6, or copied onto its replace target
  // at any level, stops this pass at its front; the rest goes on as one
  // pass over both (md_error interrupts any recovery, a replace's copy
  // included, and md's restart recovers every device not in sync from the
  // lowest offset). At RAID6 the survivors are read once for the stripes
  // still ahead rather than twice in two passes; at every level the gone
  // slot is rebuilt now, not after the copy: the array runs a member
  // short for one pass only.
  const bool replace = req.kind == JobKind::kReplace;
  bool paired = false;
  RETURN_IF_ERROR(recovery_.Run(
      CurrentShape(), req.slot, replace,
      [&] { return SecondSlotRecoverable(req.slot); }, &paired));
  if (!paired) return absl::OkStatus();
  PromoteSparesIntoGoneSlots(/*except=*/req.slot);
  const int second = PairedRecoverySlot(req.slot);
  if (second < 0 || slots_[second]->state.load() != SlotState::kRebuilding) {
    // The spare went (dropped, or taken by another slot): on alone.
    return recovery_.Run(CurrentShape(), req.slot, replace);
  }
  std::shared_ptr<Member> t = slots_[second]->member.load();
  runner_.SetSecondSlot(second, t ? t->Name() : "");
  JobStarted(JobRequest{JobKind::kRecover, second});  // its RebuildStarted
  return recovery_.RunPair(CurrentShape(), req.slot, second);
}

absl::Status ArrayJobs::RunJob(const JobRequest& req) {
  ScratchOrOwned::EnableThreadScratch();
  switch (req.kind) {
    case JobKind::kRecover:
    case JobKind::kReplace:
      return RunRecovery(req);
    case JobKind::kCheck:
    case JobKind::kRepair:
      // A job works in one shape: the current one when it starts (no
      // scrub runs during a reshape: both are jobs).
      return scrub_.Run(CurrentShape(), req.kind == JobKind::kRepair);
    case JobKind::kReshape:
      return reshape_.Run();
    case JobKind::kResync:
      return Resync(/*as_job=*/true);  // ResyncJob
    case JobKind::kNone:
      break;
  }
  return absl::OkStatus();
}

void ArrayJobs::JobStarted(const JobRequest& req) {
  const JobKind kind = req.kind;
  const int slot = req.slot;
  if ((kind == JobKind::kRecover || kind == JobKind::kReplace) &&
      (slot < 0 || slot >= roster_.SlotCount())) {
    return;
  }
  switch (kind) {
    case JobKind::kRecover:
    case JobKind::kReplace: {
      // One event per slot, also for the second of a RAID6 pair (an active
      // one is being copied onto its replace target).
      for (const int i : {slot, req.second_slot}) {
        if (i < 0 || i >= roster_.SlotCount()) continue;
        Slot& s = *slots_[i];
        const bool repl = kind == JobKind::kReplace ||
                          (i != slot && s.state.load() == SlotState::kActive);
        std::shared_ptr<Member> t =
            repl ? s.replacement.load() : s.member.load();
        const std::string name = t ? t->Name() : "";
        Event e = MakeEvent("RebuildStarted", name, i);
        e.details.emplace_back("kind", std::string(JobKindName(kind)));
        const uint64_t from = repl ? s.repl_front.load() : s.front.load();
        e.details.emplace_back("from_stripe", static_cast<int64_t>(from));
        Report(LogLevel::kNotice, std::move(e),
               absl::StrFormat("%s: rebuilding slot %d onto %s from stripe %d",
                               JobKindName(kind), i, name, from));
      }
      return;
    }
    case JobKind::kReshape:
      Report(LogLevel::kNotice, MakeEvent("ReshapeStarted"),
             "reshape: copying started");
      return;
    case JobKind::kCheck:
    case JobKind::kRepair:
      Log(LogLevel::kNotice, absl::StrFormat("%s started", JobKindName(kind)));
      return;
    case JobKind::kResync:
    case JobKind::kNone:
      return;
  }
}

void ArrayJobs::JobEnded(const JobInfo& done, const absl::Status& status,
                         double secs, bool cancelled) {
  ReportJobEnd(done, status.ok(), secs);
  // A target that failed, or a second spare: recover again. Not after
  // StopJob (the admin asked for quiet).
  if (!cancelled) MaybeStartRecovery();
}

std::string ArrayJobs::LocatedText(const JobInfo& done) const {
  if (done.located_mismatches == 0) return "";
  std::vector<std::string> named;
  for (size_t i = 0; i < done.first_located.size(); ++i) {
    const int slot = static_cast<int>(done.first_located_slots[i]);
    std::shared_ptr<Member> m =
        slot < roster_.SlotCount() ? slots_[slot]->member.load() : nullptr;
    named.push_back(absl::StrFormat("stripe %d slot %d (%s)",
                                    done.first_located[i], slot,
                                    m ? m->Name() : "?"));
  }
  std::string how;
  if (done.kind == JobKind::kRepair) {
    const uint64_t others = done.mismatches - done.located_mismatches;
    how = others == 0 ? " (that chunk rewritten)"
                      : absl::StrFormat(
                            " (that chunk rewritten; P and Q recomputed in "
                            "the other %d)",
                            others);
  }
  return absl::StrFormat(
      "; P and Q name the bad chunk in %d of them%s: %s%s",
      done.located_mismatches, how, absl::StrJoin(named, ", "),
      done.located_mismatches > done.first_located.size() ? ", ..." : "");
}

void ArrayJobs::ReportJobEnd(const JobInfo& done, bool ok, double secs) {
  const bool completed = done.result == "completed";
  // Routine when it completed or was stopped; an error is worth a look.
  const LogLevel level = ok ? LogLevel::kNotice : LogLevel::kError;
  switch (done.kind) {
    case JobKind::kCheck:
    case JobKind::kRepair: {
      const bool repair = done.kind == JobKind::kRepair;
      Event e = MakeEvent(repair ? "RepairFinished" : "CheckFinished");
      e.details.emplace_back("result", done.result);
      e.details.emplace_back("mismatches",
                             static_cast<int64_t>(done.mismatches));
      e.details.emplace_back("first_mismatches", done.first_mismatches);
      // RAID6: the stripes whose bad chunk P and Q located, and its slot.
      e.details.emplace_back("located_mismatches",
                             static_cast<int64_t>(done.located_mismatches));
      e.details.emplace_back("first_located", done.first_located);
      e.details.emplace_back("first_located_slots", done.first_located_slots);
      e.details.emplace_back("unchecked_bytes",
                             static_cast<int64_t>(done.unchecked_bytes));
      e.details.emplace_back("first_unchecked", done.first_unchecked);
      // What the members' bad-block logs hold: rows not checked, and why.
      std::string logs;
      for (int i = 0; i < roster_.SlotCount(); ++i) {
        const Slot& s = *slots_[i];
        if (s.bad.empty()) continue;
        std::shared_ptr<Member> m = s.member.load();
        absl::StrAppendFormat(&logs, "%s%s (slot %d) %d ranges, %d sectors",
                              logs.empty() ? "" : ", ", m ? m->Name() : "?", i,
                              s.bad.size(), s.bad.sectors());
      }
      Report(ok && (done.mismatches > 0 || done.unchecked_bytes > 0)
                 ? LogLevel::kWarning
                 : level,
             std::move(e),
             absl::StrFormat(
                 "%s: %s after %.1f s: %d stripes with mismatched parity%s%s%s",
                 JobKindName(done.kind), done.result, secs, done.mismatches,
                 repair && done.mismatches ? " (rewritten)" : "",
                 LocatedText(done),
                 done.unchecked_bytes == 0 && logs.empty()
                     ? ""
                     : absl::StrFormat(
                           "; %d bytes per member in rows listed in bad-block "
                           "logs not checked (stripes %s); the logs list %s",
                           done.unchecked_bytes,
                           absl::StrJoin(done.first_unchecked, ", "),
                           logs.empty() ? "nothing now" : logs)));
      return;
    }
    case JobKind::kReshape: {
      Event e = MakeEvent("ReshapeFinished");
      e.details.emplace_back("result", done.result);
      e.details.emplace_back("raid_devices",
                             int64_t{CurrentShape().geo.raid_disks()});
      Report(level, std::move(e),
             absl::StrFormat("reshape: %s after %.1f s (%.1f MB/s per member)",
                             done.result, secs, done.bytes_per_s / 1e6));
      return;
    }
    case JobKind::kRecover:
    case JobKind::kReplace: {
      // Each slot of the pass (two for a RAID6 pair) is reported.
      bool spare_active = false;
      for (const auto& [slot, target] :
           {std::pair{done.slot, done.target},
            std::pair{done.second_slot, done.second_target}}) {
        if (slot < 0) continue;
        // A replace's second slot is a gone one it took on (RunRecovery),
        // rebuilt onto a spare: a recovery, as its RebuildStarted said.
        const JobKind kind =
            done.kind == JobKind::kReplace && slot == done.second_slot
                ? JobKind::kRecover
                : done.kind;
        Event e = MakeEvent("RebuildFinished", target, slot);
        e.details.emplace_back("kind", std::string(JobKindName(kind)));
        e.details.emplace_back("result", done.result);
        Report(level, std::move(e),
               absl::StrFormat("%s of slot %d onto %s: %s after %.1f s (%.1f "
                               "MB/s)",
                               JobKindName(kind), slot, target, done.result,
                               secs, done.bytes_per_s / 1e6));
        if (!completed || slot >= roster_.SlotCount()) continue;
        const Slot& s = *slots_[slot];
        std::shared_ptr<Member> m = s.member.load();
        if (m != nullptr && m->Name() == target &&
            s.state.load() == SlotState::kActive) {
          Report(LogLevel::kNotice, MakeEvent("SpareActive", target, slot),
                 absl::StrFormat("%s is now active in slot %d", target, slot));
          spare_active = true;
        }
      }
      if (spare_active) roster_.CheckSpares();
      return;
    }
    case JobKind::kResync:
    case JobKind::kNone:
      return;
  }
}

void ArrayJobs::JobMilestone(const JobInfo& job, int milestone) {
  Event e = MakeEvent(absl::StrFormat("Rebuild%d", milestone).c_str(),
                      job.target, job.slot);
  e.details.emplace_back("percent", int64_t{milestone});
  e.details.emplace_back("kind", std::string(JobKindName(job.kind)));
  Report(
      LogLevel::kInfo, std::move(e),
      absl::StrFormat("%s of slot %d onto %s: %d%% done", JobKindName(job.kind),
                      job.slot, job.target, milestone));
}

}  // namespace uraid
