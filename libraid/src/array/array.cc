// SPDX-License-Identifier: MIT
// The read and write paths, member failure, superblock updates, the
// clean/active state machine and resync.

#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"
#include "parity/parity.h"

namespace uraid {
namespace {

// md's safemode delay: the array is marked clean this long after the last
// write completes.
constexpr auto kSafemodeDelay = std::chrono::milliseconds(200);
// Resync and parity check work on row windows of at most this many bytes
// per member, so memory stays bounded for any chunk size.
constexpr uint64_t kScanWindow = 1 << 20;
// Member I/Os faster than this on average are run one after another by the
// calling thread; slower ones in parallel (see Submit).
// (kParallelIoThresholdNs: array_impl.h)

uint64_t NowSeconds() { return static_cast<uint64_t>(std::time(nullptr)); }

}  // namespace

Counters AtomicCounters::Snapshot() const {
  Counters c;
  c.member_reads = member_reads.load();
  c.member_read_bytes = member_read_bytes.load();
  c.member_writes = member_writes.load();
  c.member_write_bytes = member_write_bytes.load();
  c.member_flushes = member_flushes.load();
  c.full_stripe_writes = full_stripe_writes.load();
  c.rmw_writes = rmw_writes.load();
  c.rcw_writes = rcw_writes.load();
  c.degraded_writes = degraded_writes.load();
  c.reconstructions = reconstructions.load();
  c.resynced_stripes = resynced_stripes.load();
  c.resync_repairs = resync_repairs.load();
  c.cached_writes = cached_writes.load();
  c.cache_writebacks = cache_writebacks.load();
  c.cache_evictions = cache_evictions.load();
  c.read_errors_corrected = read_errors_corrected.load();
  c.recovered_stripes = recovered_stripes.load();
  c.scrubbed_stripes = scrubbed_stripes.load();
  c.resync_bitmap_chunks = resync_bitmap_chunks.load();
  c.resync_bytes = resync_bytes.load();
  return c;
}

ArrayImpl::ArrayImpl(Geometry geometry, uint64_t data_offset_bytes,
                     Superblock sb, std::vector<std::unique_ptr<Slot>> slots,
                     std::vector<Spare> spares, bool read_only,
                     const CacheOptions& cache, Logger logger)
    : shape_view_(this, &shape_),
      geo_(shape_view_),
      data_offset_(shape_view_),
      read_only_(read_only),
      logger_(std::move(logger)),
      event_uuid_(FormatUuid(sb.set_uuid)),
      event_name_(sb.set_name),
      slots_(std::move(slots)),
      pool_(geometry.raid_disks() - 1),
      cache_(geometry.stripe_data_bytes(), read_only ? 0 : cache.bytes),
      cache_max_age_(cache.max_age_ms),
      bypass_flush_ns_(int64_t{cache.bypass_flush_interval_ms} * 1'000'000),
      sb_(std::move(sb)),
      spares_(std::move(spares)),
      resync_stripe_(geometry.stripe_count()) {
  shapes_.push_back(
      std::make_unique<Shape>(Shape{geometry, data_offset_bytes, 0}));
  shape_.store(shapes_.back().get());
  MutexLock lock(&state_mu_);
  clean_ = sb_.clean();
  last_write_ = std::chrono::steady_clock::now();
  if (GoneSlots() > 1) failed_.store(true);
}

ArrayImpl::~ArrayImpl() { Shutdown(); }

int ArrayImpl::MissingSlotAt(uint64_t stripe) const {
  for (int i = 0; i < geo_.raid_disks(); ++i) {
    if (!SlotUsableAt(i, stripe)) return i;
  }
  return -1;
}

absl::Status ArrayImpl::CheckRange(const char* op, size_t len,
                                   uint64_t offset) const {
  if (offset > geo_.array_bytes() || len > geo_.array_bytes() - offset) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s of %d bytes at %d is past the end of the array (%d bytes)", op, len,
        offset, geo_.array_bytes()));
  }
  return absl::OkStatus();
}

int ArrayImpl::GoneSlots() const {
  int gone = 0;
  for (const auto& s : slots_) gone += s->state.load() != SlotState::kActive;
  return gone;
}

absl::Status ArrayImpl::CheckUsable(bool write) const {
  if (failed_.load()) {
    return absl::UnavailableError(
        "array has failed: more than one member is missing or faulty");
  }
  if (write && read_only_) {
    return absl::FailedPreconditionError("array is read-only");
  }
  if (write && has_bg_error_.load(std::memory_order_acquire)) {
    MutexLock lock(&bg_mu_);
    return bg_error_;
  }
  return absl::OkStatus();
}

void ArrayImpl::RecordBackgroundError(const absl::Status& st,
                                      absl::string_view what) {
  if (st.ok()) return;
  {
    MutexLock lock(&bg_mu_);
    if (!bg_error_.ok()) return;
    bg_error_ = absl::Status(
        st.code(),
        absl::StrCat(what, " could not be recorded in the superblocks (",
                     st.message(), "); writes are refused until restart"));
    has_bg_error_.store(true, std::memory_order_release);
  }
  Log(LogLevel::kError,
      absl::StrCat("background error: ", what, ": ", st.message(),
                   "; the array refuses writes from now on"));
}

namespace {

// One call on one member, retried once: a transient error (a dropped
// connection, a busy device) should not cost a member. A second failure is
// the member's.
absl::Status DoIo(Member& m, const MemberIo& io, uint64_t raw) {
  absl::Status st;
  for (int attempt = 0; attempt < 2; ++attempt) {
    switch (io.kind) {
      case MemberIo::kRead:
        st = m.Read(io.buf, io.len, raw);
        break;
      case MemberIo::kWrite:
        st = m.Write(io.buf, io.len, raw);
        break;
      case MemberIo::kFlush:
        st = m.Flush();
        break;
      case MemberIo::kDiscard:
        st = m.Discard(io.len, raw);
        break;
    }
    if (st.ok() || absl::IsOutOfRange(st)) break;
  }
  return st;
}

}  // namespace

absl::Status WriteDurably(Member& m, const void* buf, size_t len,
                          uint64_t raw) {
  MemberIo io{MemberIo::kWrite, 0, const_cast<void*>(buf), len, 0, {}};
  absl::Status st = DoIo(m, io, raw);
  if (!st.ok()) return st;
  io.kind = MemberIo::kFlush;
  return DoIo(m, io, raw);
}

void ArrayImpl::RunTogether(std::span<const std::function<void()>> tasks) {
  // As Submit: members that answer at once are cheaper to call in turn.
  if (tasks.size() <= 1 ||
      io_latency_ns_.load(std::memory_order_relaxed) < kParallelIoThresholdNs) {
    for (const auto& task : tasks) task();
    return;
  }
  pool_.RunAll(tasks);
}

void ArrayImpl::RunIo(MemberIo& io) {
  Slot& slot = *slots_[io.slot];
  const auto stale = [&] {
    if (!io.check_gen || slot.gen.load() == io.gen) return false;
    io.stale = true;
    io.status = absl::AbortedError(absl::StrFormat(
        "slot %d changed members while the request was planned", io.slot));
    return true;
  };
  if (stale()) return;
  std::shared_ptr<Member> m =
      io.to_replacement ? slot.replacement.load() : slot.member.load();
  if (m == nullptr) {
    io.status = absl::UnavailableError("member is gone");
    return;
  }
  const uint64_t raw = io.base + io.offset;
  const auto start = std::chrono::steady_clock::now();
  io.used = m.get();
  io.used_ref = m;
  if (io.keep_sparse && io.kind == MemberIo::kWrite &&
      IsAllZero(io.buf, io.len)) {
    absl::StatusOr<uint64_t> data = m->NextDataOffset(raw);
    if (data.ok() && *data >= raw + io.len) {
      // Already zeros there (a hole): nothing to write, and no latency
      // sample (a probe is not a write).
      io.status = absl::OkStatus();
      stale();
      return;
    }
  }
  io.status = DoIo(*m, io, raw);
  switch (io.kind) {
    case MemberIo::kRead:
      counters_.member_reads.fetch_add(1, std::memory_order_relaxed);
      counters_.member_read_bytes.fetch_add(io.len, std::memory_order_relaxed);
      break;
    case MemberIo::kWrite:
      counters_.member_writes.fetch_add(1, std::memory_order_relaxed);
      counters_.member_write_bytes.fetch_add(io.len, std::memory_order_relaxed);
      break;
    case MemberIo::kFlush:
      counters_.member_flushes.fetch_add(1, std::memory_order_relaxed);
      break;
    case MemberIo::kDiscard:
      break;
  }
  // A replace job's target gets every write and flush of the stripes it
  // already holds, so that it is current when it takes the slot. Its own
  // failure ends the replace, not the slot.
  if (io.status.ok() && !io.to_replacement && io.kind != MemberIo::kRead) {
    std::shared_ptr<Member> r = slot.replacement.load();
    if (r != nullptr && (io.kind == MemberIo::kFlush ||
                         io.offset / geo_.chunk_bytes() <
                             slot.repl_front.load(std::memory_order_acquire))) {
      absl::Status rs = DoIo(*r, io, raw);
      if (!rs.ok() && slot.replacement.compare_exchange_strong(r, nullptr)) {
        ReportReplacementFailed(r->Name(), io.slot, rs);
      }
    }
  }
  // The member changed under the I/O: whatever it did went to a member that
  // no longer holds the slot (or read from one that does not yet).
  if (stale()) return;
  // Flushes and discards say nothing about per-I/O latency.
  if (io.kind == MemberIo::kFlush || io.kind == MemberIo::kDiscard) return;
  // Moving average of data I/O latency (1/8 weight per sample). Racy
  // updates lose a sample now and then, which is harmless.
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count();
  const int64_t old = io_latency_ns_.load(std::memory_order_relaxed);
  io_latency_ns_.store(old + (ns - old) / 8, std::memory_order_relaxed);
}

SlotGens ArrayImpl::CaptureGens() const {
  SlotGens gens(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i) {
    uint64_t g;
    while ((g = slots_[i]->gen.load()) & 1) std::this_thread::yield();
    gens[i] = g;
  }
  return gens;
}

void ArrayImpl::Submit(std::vector<MemberIo>& ios, const SlotGens* gens) {
  const uint64_t base = data_offset_;
  for (MemberIo& io : ios) io.base = base;
  if (gens != nullptr) {
    for (MemberIo& io : ios) {
      io.check_gen = true;
      io.gen = (*gens)[io.slot];
    }
  }
  // Members that answer within a few microseconds (page cache, memory) are
  // cheaper to call one after another than to hand to other threads: a
  // handoff costs more than the I/O. Slower members (disks, O_DIRECT,
  // remote exports) get every I/O of the plan in flight at once, so a
  // stripe costs one member latency, not N. The choice follows the
  // measured latency, so it adapts to whatever the members are.
  if (ios.size() == 1 ||
      io_latency_ns_.load(std::memory_order_relaxed) < kParallelIoThresholdNs) {
    for (MemberIo& io : ios) RunIo(io);
    return;
  }
  std::vector<std::function<void()>> tasks;
  tasks.reserve(ios.size());
  for (MemberIo& io : ios) tasks.emplace_back([this, &io] { RunIo(io); });
  pool_.RunAll(tasks);
}

absl::Status ArrayImpl::AbsorbFailures(std::vector<MemberIo>& ios,
                                       bool* slot_failed) {
  *slot_failed = false;
  absl::Status first;
  for (MemberIo& io : ios) {
    if (io.status.ok()) continue;
    if (io.stale) {
      // Not the member's fault: the caller replans with the new members.
      *slot_failed = true;
      if (first.ok()) first = io.status;
      continue;
    }
    if (io.to_replacement) {
      // The copy target failed: the replace ends, the slot is unharmed.
      std::shared_ptr<Member> r = slots_[io.slot]->replacement.load();
      if (r != nullptr &&
          slots_[io.slot]->replacement.compare_exchange_strong(r, nullptr)) {
        ReportReplacementFailed(r->Name(), io.slot, io.status);
      }
      if (first.ok()) first = io.status;
      continue;
    }
    if (first.ok()) {
      std::shared_ptr<Member> m = slots_[io.slot]->member.load();
      first = absl::Status(
          io.status.code(),
          absl::StrFormat("member %s (slot %d) at member offset %d: %s",
                          m ? m->Name() : "?", io.slot,
                          data_offset_ + io.offset, io.status.message()));
    }
    if (SlotPresent(io.slot)) {
      RecordBackgroundError(
          FailSlot(io.slot, std::string(io.status.message()), io.used),
          absl::StrFormat("the failure of slot %d", io.slot));
    }
    // Failed by us or, racing us, by another request that hit the same
    // dying member: either way the caller should redo its plan around it.
    *slot_failed = true;
  }
  return first;
}

uint64_t ArrayImpl::HandOverToReplacement(Slot& s,
                                          const std::shared_ptr<Member>& r) {
  uint64_t from = 0;
  // sb_mu_ is held; the analysis cannot see into the lambda ChangeSlot runs.
  ChangeSlot(s, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    retired_devs_.push_back(s.id.dev_number);
    s.id = s.repl_id;
    from = s.repl_front.load();
    s.front.store(from);
    s.durable_front.store(0);  // not flushed yet: claim nothing
    s.partial.store(false);
    s.member.store(r);
    s.replacement.store(nullptr);
    s.state.store(SlotState::kRebuilding);
  });
  return from;
}

void ArrayImpl::ReportMemberFailed(const std::string& name, int slot,
                                   const std::string& why) const {
  {
    Event e = MakeEvent("Fail", name, slot);
    e.details.emplace_back("error", why);
    Report(LogLevel::kError, std::move(e),
           absl::StrFormat("member %s (slot %d) failed: %s", name, slot, why));
  }
  std::vector<uint64_t> gone;
  for (int i = 0; i < SlotCount(); ++i) {
    if (slots_[i]->state.load() != SlotState::kActive) gone.push_back(i);
  }
  if (failed_.load()) {
    Event e = MakeEvent("ArrayFailed", name, slot);
    e.details.emplace_back("gone_slots", gone);
    Report(LogLevel::kCritical, std::move(e),
           absl::StrFormat("array has FAILED (%d members gone, the last %s); "
                           "requests that need them return EIO",
                           gone.size(), name));
    return;
  }
  Event e = MakeEvent("DegradedArray");
  e.details.emplace_back("gone_slots", gone);
  Report(LogLevel::kWarning, std::move(e),
         absl::StrFormat("array continues degraded without slot %d", slot));
}

void ArrayImpl::ReportReplacementFailed(const std::string& name, int slot,
                                        const absl::Status& why) const {
  Event e = MakeEvent("FailSpare", name, slot);
  e.details.emplace_back("error", std::string(why.message()));
  e.details.emplace_back("kind", std::string("replace"));
  Report(LogLevel::kError, std::move(e),
         absl::StrFormat(
             "replacement %s for slot %d failed: %s; replace abandoned", name,
             slot, why.message()));
}

absl::Status ArrayImpl::FailSlot(int slot, const std::string& why,
                                 const Member* only_if) {
  if (slot < 0 || slot >= SlotCount()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("slot %d out of range 0..%d", slot, SlotCount() - 1));
  }
  Slot& sl = *slots_[slot];
  // The check of who holds the slot and the change it decides are one step
  // under sb_mu_ (every hand-over of a slot happens under it): two requests
  // that hit the same dying member must not both act on it, or the second
  // would fail the replacement the first handed the slot to.
  enum class Outcome { kNotHolder, kHandedOver, kTargetFailed, kFailed, kGone };
  Outcome outcome = Outcome::kGone;
  std::shared_ptr<Member> old, r;
  uint64_t f = 0;
  {
    MutexLock lock(&sb_mu_);
    old = sl.member.load();
    r = sl.replacement.load();
    SlotState st = sl.state.load();
    if (only_if != nullptr && old.get() != only_if) {
      outcome = Outcome::kNotHolder;
    } else if (r != nullptr && st == SlotState::kActive) {
      // A member being replaced fails: its replacement takes over.
      outcome = Outcome::kHandedOver;
      f = HandOverToReplacement(sl, r);
    } else {
      // A rebuild may finish (kRebuilding -> kActive) while we look: the
      // exchange retries with what it found.
      while ((st == SlotState::kActive || st == SlotState::kRebuilding) &&
             !sl.state.compare_exchange_weak(st, SlotState::kFaulty)) {
      }
      if (st == SlotState::kActive) outcome = Outcome::kFailed;
      if (st == SlotState::kRebuilding) outcome = Outcome::kTargetFailed;
    }
  }
  switch (outcome) {
    case Outcome::kNotHolder:
      Log(LogLevel::kDebug,
          absl::StrFormat("slot %d: ignoring a late error from %s, which no "
                          "longer holds the "
                          "slot: %s",
                          slot, only_if->Name(), why));
      return absl::OkStatus();
    case Outcome::kGone:
      return absl::OkStatus();  // already gone
    case Outcome::kHandedOver: {
      Event e = MakeEvent("Fail", old ? old->Name() : "", slot);
      e.details.emplace_back("error", why);
      e.details.emplace_back("replacement", r->Name());
      Report(LogLevel::kWarning, std::move(e),
             absl::StrFormat(
                 "member %s (slot %d) failed during replace: %s; "
                 "replacement %s continues as a rebuild from stripe %d",
                 old ? old->Name() : "", slot, why, r->Name(), f));
    }
      return read_only_ ? absl::OkStatus() : WriteSuperblocks(std::nullopt);
    case Outcome::kTargetFailed: {
      // The rebuild target failed: the slot is as degraded as before.
      {
        Event e = MakeEvent("FailSpare", old ? old->Name() : "", slot);
        e.details.emplace_back("error", why);
        Report(LogLevel::kError, std::move(e),
               absl::StrFormat("rebuild target %s (slot %d) failed: %s",
                               old ? old->Name() : "", slot, why));
      }
      absl::Status st =
          read_only_ ? absl::OkStatus() : WriteSuperblocks(std::nullopt);
      MaybeStartRecovery();
      return st;
    }
    case Outcome::kFailed:
      break;
  }
  UpdateBitmapDegraded();
  std::string name = old ? old->Name() : "";
  const int gone = GoneSlots();
  if (gone > 1) failed_.store(true);
  ReportMemberFailed(name, slot, why);
  if (gone > 1) return absl::OkStatus();  // nothing safe to record any more
  if (resync_stripe_.load() < geo_.stripe_count()) {
    Log(LogLevel::kWarning,
        "a member failed before resync finished; stripes not yet "
        "resynced may reconstruct stale data");
  }
  if (read_only_) return absl::OkStatus();
  absl::Status st = WriteSuperblocks(std::nullopt);
  MaybeStartRecovery();
  return st;
}

absl::Status ArrayImpl::WriteSuperblocks(std::optional<bool> clean) {
  bool member_failed = false;
  absl::Status st = WriteSuperblocksOnce(clean, &member_failed);
  ProcessDeferredFailures();  // a member that failed the bitmap header
  if (member_failed) {
    // What FailSlot does after its own superblock write (it cannot be
    // called from inside one): a spare steps in.
    UpdateBitmapDegraded();
    MaybeStartRecovery();
  }
  return st;
}

absl::Status ArrayImpl::WriteSuperblocksOnce(std::optional<bool> clean,
                                             bool* member_failed) {
  // Positions in the superblock (resync and recovery offsets) are in the
  // current shape's stripes, whichever shape the caller was working in.
  ShapeScope current(this, shape_.load());
  MutexLock lock(&sb_mu_);
  for (int attempt = 0; attempt < 64; ++attempt) {
    sb_.events += 1;
    sb_.utime = NowSeconds();
    if (clean.has_value()) {
      if (*clean) {
        sb_.resync_offset = kMaxSector;
      } else if (wrote_since_open_.load()) {
        // Writes since assembly may have torn stripes anywhere: dirty from
        // the start.
        sb_.resync_offset = 0;
      } else {
        // Only resync has written: stripes below its front are in sync.
        sb_.resync_offset = resync_stripe_.load() * geo_.chunk_bytes() / 512;
      }
    }
    std::fill(sb_.dev_roles.begin(), sb_.dev_roles.end(), kRoleSpare);
    auto set_role = [&](uint32_t dev, uint16_t role)
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(sb_mu_) {
                          if (dev >= sb_.dev_roles.size()) {
                            sb_.dev_roles.resize(dev + 1, kRoleSpare);
                          }
                          sb_.dev_roles[dev] = role;
                        };
    for (uint32_t dev : retired_devs_) set_role(dev, kRoleFaulty);
    // Every device that gets this superblock: slot members (active or
    // recovering), a replace target, spares.
    struct Target {
      std::shared_ptr<Member> member;
      DeviceId id;
      int slot = -1;  // -1: a spare
      bool replacement = false;
      std::optional<uint64_t> recovery_sectors;
    };
    // Highest slots first: at a reshape's start the new members get their
    // superblocks before the old ones, so a crash in between leaves either
    // the old array intact (new members without a superblock) or the
    // reshape's superblock on the freshest members (see assemble.cc).
    std::vector<Target> targets;
    for (int i = SlotCount() - 1; i >= 0; --i) {
      const Slot& s = *slots_[i];
      std::shared_ptr<Member> m = s.member.load();
      const SlotState st = s.state.load();
      if (m != nullptr) {
        if (st == SlotState::kActive || st == SlotState::kRebuilding) {
          set_role(s.id.dev_number, static_cast<uint16_t>(i));
          Target t{m, s.id, i, false, std::nullopt};
          if (st == SlotState::kRebuilding) {
            t.recovery_sectors =
                s.durable_front.load() * geo_.chunk_bytes() / 512;
          }
          targets.push_back(std::move(t));
        } else {
          set_role(s.id.dev_number, kRoleFaulty);
        }
      }
      if (std::shared_ptr<Member> r = s.replacement.load(); r != nullptr) {
        // Not resumable across restarts (see ReplaceMember): a spare on disk.
        set_role(s.repl_id.dev_number, kRoleSpare);
        targets.push_back(Target{r, s.repl_id, i, true, std::nullopt});
      }
    }
    for (const Spare& sp : spares_) {
      set_role(sp.id.dev_number, kRoleSpare);
      targets.push_back(Target{sp.member, sp.id, -1, false, std::nullopt});
    }
    // md writes the bitmap header (with the new events) before the
    // superblocks: a crash in between leaves the bitmap one event ahead,
    // which assembly accepts, never behind (which would mean stale).
    if (bitmap_ != nullptr) {
      absl::Status bs = bitmap_->SetEvents(sb_.events);
      if (!bs.ok()) {
        Log(LogLevel::kError, absl::StrFormat("bitmap: writing events %d: %s",
                                              sb_.events, bs.message()));
      }
    }
    std::vector<std::vector<uint8_t>> blocks;
    for (const Target& t : targets) {
      Superblock mine = sb_;
      mine.dev_number = t.id.dev_number;
      mine.device_uuid = t.id.device_uuid;
      mine.data_size = t.id.data_size_sectors;
      mine.feature_map &= ~kFeatureRecoveryOffset;
      mine.recovery_offset = 0;
      if (t.recovery_sectors.has_value()) {
        mine.feature_map |= kFeatureRecoveryOffset;
        mine.recovery_offset = *t.recovery_sectors;
      }
      blocks.push_back(EncodeSuperblock(mine));
    }
    // Every member's write and flush at once (each retried once, as data
    // I/O): the first write after idle waits for one member round trip, not
    // one per member. While a reshape is on the superblocks, they go one
    // after another in the order above, which assembly relies on.
    std::vector<absl::Status> results(targets.size());
    const bool in_order = reshaping_.load() || sb_.delta_disks != 0 ||
                          (sb_.feature_map & kFeatureReshapeActive) != 0;
    if (in_order) {
      for (size_t i = 0; i < targets.size(); ++i) {
        results[i] = WriteDurably(*targets[i].member, blocks[i].data(),
                                  blocks[i].size(), kSb12OffsetBytes);
        if (!results[i].ok()) break;
      }
    } else {
      std::vector<std::function<void()>> tasks;
      for (size_t i = 0; i < targets.size(); ++i) {
        tasks.emplace_back([&, i] {
          results[i] = WriteDurably(*targets[i].member, blocks[i].data(),
                                    blocks[i].size(), kSb12OffsetBytes);
        });
      }
      RunTogether(tasks);
    }
    // The first failure, in target order, is handled as before and the
    // update is made again with a new event count.
    bool retry = false;
    for (size_t i = 0; i < targets.size(); ++i) {
      const Target& t = targets[i];
      const absl::Status& st = results[i];
      if (st.ok()) continue;
      {
        Event e = MakeEvent("MetadataWriteFailed", t.member->Name(), t.slot);
        e.details.emplace_back("error", std::string(st.message()));
        Report(LogLevel::kError, std::move(e),
               absl::StrFormat("member %s failed writing its superblock: %s",
                               t.member->Name(), st.message()));
      }
      retry = true;
      if (t.slot < 0) {
        std::erase_if(spares_,
                      [&](const Spare& sp) { return sp.member == t.member; });
        break;
      }
      Slot& s = *slots_[t.slot];
      if (t.replacement) {
        std::shared_ptr<Member> expected = t.member;
        s.replacement.compare_exchange_strong(expected, nullptr);
        break;
      }
      // Hand-overs happen under sb_mu_, which is held: the member still
      // holds its slot unless the slot changed hands before this write.
      if (s.member.load() != t.member) break;
      *member_failed = true;
      if (std::shared_ptr<Member> r = s.replacement.load();
          r != nullptr && s.state.load() == SlotState::kActive) {
        // As in FailSlot: the replacement goes on as a rebuild.
        (void)HandOverToReplacement(s, r);
        Event e = MakeEvent("Fail", t.member->Name(), t.slot);
        e.details.emplace_back("error", std::string(st.message()));
        e.details.emplace_back("replacement", r->Name());
        Report(
            LogLevel::kWarning, std::move(e),
            absl::StrFormat("replacement %s continues as a rebuild of slot %d",
                            r->Name(), t.slot));
        break;
      }
      SlotState was = s.state.load();
      while ((was == SlotState::kActive || was == SlotState::kRebuilding) &&
             !s.state.compare_exchange_weak(was, SlotState::kFaulty)) {
      }
      const std::string why =
          absl::StrCat("superblock write failed: ", st.message());
      if (was == SlotState::kRebuilding) {
        Event e = MakeEvent("FailSpare", t.member->Name(), t.slot);
        e.details.emplace_back("error", why);
        Report(LogLevel::kError, std::move(e),
               absl::StrFormat("rebuild target %s (slot %d) failed: %s",
                               t.member->Name(), t.slot, why));
      }
      if (was == SlotState::kActive) {
        if (GoneSlots() > 1) failed_.store(true);
        ReportMemberFailed(t.member->Name(), t.slot, why);
        if (failed_.load()) {
          return absl::UnavailableError(absl::StrFormat(
              "array has failed: superblock write to %s failed: %s",
              t.member->Name(), st.message()));
        }
      }
      break;
    }
    if (!retry) return absl::OkStatus();
  }
  return absl::InternalError("superblock update did not settle");
}

// ---------------------------------------------------------------- reads

absl::Status ArrayImpl::Read(void* buf, size_t len, uint64_t offset) {
  return Route(ReqKind::kRead, buf, len, offset, false,
               [&] { return ReadShaped(buf, len, offset); });
}

absl::Status ArrayImpl::Write(const void* buf, size_t len, uint64_t offset,
                              bool fua) {
  // The router only reads from `buf` for writes.
  return Route(ReqKind::kWrite, const_cast<void*>(buf), len, offset, fua,
               [&] { return WriteShaped(buf, len, offset, fua); });
}

absl::Status ArrayImpl::Trim(size_t len, uint64_t offset, bool fua) {
  return Route(ReqKind::kTrim, nullptr, len, offset, fua,
               [&] { return TrimShaped(len, offset, fua); });
}

absl::Status ArrayImpl::Zero(size_t len, uint64_t offset, bool fua) {
  return Route(ReqKind::kZero, nullptr, len, offset, fua,
               [&] { return ZeroShaped(len, offset, fua); });
}

absl::Status ArrayImpl::ReadShaped(void* buf, size_t len, uint64_t offset) {
  RETURN_IF_ERROR(CheckRange("read", len, offset));
  auto* out = static_cast<uint8_t*>(buf);
  const uint64_t chunk = geo_.chunk_bytes();

  struct Piece {
    Location loc;
    size_t len;
    uint8_t* dst;
  };
  std::vector<Piece> pieces;
  for (uint64_t done = 0; done < len;) {
    Location loc = geo_.Map(offset + done);
    size_t n = static_cast<size_t>(
        std::min<uint64_t>(len - done, chunk - loc.chunk_offset));
    pieces.push_back(Piece{loc, n, out + done});
    done += n;
  }
  // Healthy pieces straight into the caller's buffer, all in flight at once.
  // Pieces of stripes the cache holds newer data for, and pieces on a
  // missing member, take the locked slow path.
  // Pieces of a stripe with a missing member go together, so the stripe's
  // surviving chunks are read once for the client and the rebuild both.
  std::vector<bool> degraded(pieces.size(), false);
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (SlotUsableAt(pieces[i].loc.disk, pieces[i].loc.stripe)) continue;
    for (size_t j = i;
         j > 0 && pieces[j - 1].loc.stripe == pieces[i].loc.stripe; --j) {
      degraded[j - 1] = true;
    }
    for (size_t j = i;
         j < pieces.size() && pieces[j].loc.stripe == pieces[i].loc.stripe;
         ++j) {
      degraded[j] = true;
    }
  }
  std::vector<MemberIo> ios;
  std::vector<size_t> io_piece;
  std::vector<bool> slow(pieces.size(), false);
  const SlotGens gens = CaptureGens();
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (degraded[i]) continue;
    if (SlotUsableAt(p.loc.disk, p.loc.stripe) &&
        !cache_.MayContain(p.loc.stripe)) {
      ios.push_back(MemberIo{
          MemberIo::kRead, p.loc.disk, p.dst, p.len, p.loc.member_offset, {}});
      io_piece.push_back(i);
    } else {
      slow[i] = true;
    }
  }
  Submit(ios, &gens);
  std::vector<absl::Status> errors(pieces.size());
  std::vector<const Member*> failed(pieces.size(), nullptr);
  for (size_t j = 0; j < ios.size(); ++j) {
    if (ios[j].status.ok()) continue;
    // A stale read (the slot changed members) is redone under the lock;
    // only a real error calls for correction.
    if (!ios[j].stale) {
      errors[io_piece[j]] = ios[j].status;
      failed[io_piece[j]] = ios[j].used;
    }
    slow[io_piece[j]] = true;
  }
  for (size_t i = 0; i < pieces.size();) {
    if (!degraded[i]) {
      ++i;
      continue;
    }
    const uint64_t stripe = pieces[i].loc.stripe;
    absl::InlinedVector<ReadPiece, 16> group;
    for (; i < pieces.size() && degraded[i] && pieces[i].loc.stripe == stripe;
         ++i) {
      const Piece& p = pieces[i];
      group.push_back(ReadPiece{p.loc.data_index, p.loc.chunk_offset,
                                p.loc.chunk_offset + p.len,
                                static_cast<uint64_t>(p.dst - out)});
    }
    StripeLock lock(&locks_, LockKey(stripe));
    RETURN_IF_ERROR(ReadStripeDegradedLocked(stripe, group, out));
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!slow[i]) continue;
    const Piece& p = pieces[i];
    StripeLock lock(&locks_, LockKey(p.loc.stripe));
    if (!errors[i].ok() && SlotUsableAt(p.loc.disk, p.loc.stripe)) {
      RETURN_IF_ERROR(CorrectReadErrorLocked(p.loc.stripe, p.loc.disk,
                                             p.loc.chunk_offset, p.len, p.dst,
                                             errors[i], failed[i]));
      OverlayCacheLocked(p.loc, p.len, p.dst);
    } else {
      RETURN_IF_ERROR(ReadPieceLocked(p.loc, p.len, p.dst));
    }
  }
  return absl::OkStatus();
}

void ArrayImpl::OverlayCacheLocked(const Location& loc, size_t len,
                                   uint8_t* dst) {
  if (StripeCache::Entry* e = cache_.Find(loc.stripe)) {
    const uint64_t start =
        static_cast<uint64_t>(loc.data_index) * geo_.chunk_bytes() +
        loc.chunk_offset;
    const uint64_t end = start + len;
    for (const auto& [a, b] : e->dirty.ranges()) {
      uint64_t x = std::max(a, start), y = std::min(b, end);
      if (x < y) std::memcpy(dst + (x - start), e->data.data() + x, y - x);
    }
  }
}

absl::Status ArrayImpl::CorrectReadErrorLocked(uint64_t stripe, int slot,
                                               uint64_t chunk_offset,
                                               size_t len, uint8_t* dst,
                                               const absl::Status& why,
                                               const Member* failed) {
  Slot& s = *slots_[slot];
  const SlotGens gens = CaptureGens();
  std::shared_ptr<Member> m = s.member.load();
  const std::string name = failed ? failed->Name() : "?";
  const uint64_t member_offset = stripe * geo_.chunk_bytes() + chunk_offset;
  // The slot changed hands since the read (a spare took over): the error
  // belongs to a member that is gone; the bytes come from parity.
  const bool same = failed == nullptr || m.get() == failed;
  if (absl::Status rs = ReconstructLocked(stripe, slot, chunk_offset, len, dst);
      !rs.ok()) {
    if (same) {
      RecordBackgroundError(FailSlot(slot, std::string(why.message()), failed),
                            absl::StrFormat("the failure of slot %d", slot));
    }
    return absl::UnavailableError(absl::StrFormat(
        "member %s (slot %d) failed reading at member offset %d (%s) and "
        "cannot be rebuilt from parity: %s",
        name, slot, data_offset_ + member_offset, why.message(), rs.message()));
  }
  if (!same) return absl::OkStatus();
  // A member that no longer covers the offset (a file truncated under the
  // array, an export that shrank) has lost its data: no rewrite can help.
  if (why.code() == absl::StatusCode::kOutOfRange) {
    return FailSlot(slot, std::string(why.message()), failed);
  }
  if (read_only_) {
    Log(LogLevel::kWarning,
        absl::StrFormat(
            "read error on %s (slot %d) at member offset %d: %s; served from "
            "parity (read-only: not rewritten)",
            name, slot, data_offset_ + member_offset, why.message()));
    return absl::OkStatus();
  }
  // md rewrites the sector from parity: a medium error usually goes away
  // when the drive remaps it. Only a member that keeps failing is dropped.
  std::vector<MemberIo> w{
      MemberIo{MemberIo::kWrite, slot, dst, len, member_offset, {}}};
  Submit(w, &gens);
  if (w[0].stale) return absl::OkStatus();
  if (!w[0].status.ok()) {
    return FailSlot(slot,
                    absl::StrFormat("read error (%s) and rewrite failed (%s)",
                                    why.message(), w[0].status.message()),
                    failed);
  }
  const uint32_t n = s.read_errors.fetch_add(1) + 1;
  counters_.read_errors_corrected.fetch_add(1, std::memory_order_relaxed);
  {
    Event e = MakeEvent("ReadErrorCorrected", name, slot);
    e.details.emplace_back("offset",
                           static_cast<int64_t>(data_offset_ + member_offset));
    e.details.emplace_back("error", std::string(why.message()));
    e.details.emplace_back("corrected", int64_t{n});
    Report(LogLevel::kWarning, std::move(e),
           absl::StrFormat(
               "read error on %s (slot %d) at member offset %d: %s; rebuilt "
               "from parity and rewritten (%d corrected on this member)",
               name, slot, data_offset_ + member_offset, why.message(), n));
  }
  if (n > kMaxCorrectedReadErrors) {
    return FailSlot(slot,
                    absl::StrFormat("%d read errors corrected, more than "
                                    "md's limit of %d",
                                    n, kMaxCorrectedReadErrors),
                    failed);
  }
  return absl::OkStatus();
}

absl::Status ArrayImpl::ReadPieceLocked(const Location& loc, size_t len,
                                        uint8_t* dst) {
  RETURN_IF_ERROR(
      ReadPieceDegraded(loc.stripe, loc.disk, loc.chunk_offset, len, dst));
  // Lay newer cached bytes over what the members hold.
  OverlayCacheLocked(loc, len, dst);
  return absl::OkStatus();
}

absl::Status ArrayImpl::ReadPieceDegraded(uint64_t stripe, int slot,
                                          uint64_t chunk_offset, size_t len,
                                          uint8_t* dst) {
  const uint64_t member_offset = stripe * geo_.chunk_bytes() + chunk_offset;
  for (int attempt = 0;; ++attempt) {
    const SlotGens gens = CaptureGens();
    if (!SlotUsableAt(slot, stripe)) break;
    std::vector<MemberIo> ios{
        MemberIo{MemberIo::kRead, slot, dst, len, member_offset, {}}};
    Submit(ios, &gens);
    if (ios[0].status.ok()) return absl::OkStatus();
    if (ios[0].stale && attempt < 8) continue;  // members changed: again
    return CorrectReadErrorLocked(stripe, slot, chunk_offset, len, dst,
                                  ios[0].status, ios[0].used);
  }
  return ReconstructLocked(stripe, slot, chunk_offset, len, dst);
}

absl::Status ArrayImpl::ReconstructLocked(uint64_t stripe, int slot,
                                          uint64_t chunk_offset, size_t len,
                                          uint8_t* dst) {
  RETURN_IF_ERROR(CheckUsable(false));
  const uint64_t member_offset = stripe * geo_.chunk_bytes() + chunk_offset;
  // Generations first, health second: a member that changes hands after
  // the check is caught by the generation (its reads come back stale).
  const SlotGens gens = CaptureGens();
  for (int i = 0; i < geo_.raid_disks(); ++i) {
    if (i != slot && !SlotUsableAt(i, stripe)) {
      return absl::UnavailableError(absl::StrFormat(
          "cannot reconstruct slot %d at member offset %d: member in slot %d "
          "is also gone",
          slot, data_offset_ + member_offset, i));
    }
  }
  const ReadPlan plan = PlanReconstruct(geo_, stripe, slot, chunk_offset, len);
  ScratchOrOwned scratch(ScratchUser::kReconstruct, plan.scratch_bytes);
  std::vector<MemberIo> ios = PlannedMemberIos(MemberIo::kRead, stripe,
                                               plan.reads, scratch.data(), dst);
  Submit(ios, &gens);
  bool slot_failed;
  absl::Status st = AbsorbFailures(ios, &slot_failed);
  if (!st.ok() && std::any_of(ios.begin(), ios.end(),
                              [](const MemberIo& io) { return io.stale; })) {
    // A member was swapped under us (replace hand-over): read again.
    return ReconstructLocked(stripe, slot, chunk_offset, len, dst);
  }
  if (!st.ok()) {
    return absl::UnavailableError(
        absl::StrFormat("cannot reconstruct slot %d at member offset %d: %s",
                        slot, data_offset_ + member_offset, st.message()));
  }
  ComputeRead(plan, scratch.data(), dst);
  counters_.reconstructions.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status ArrayImpl::ReadStripeDegradedLocked(
    uint64_t stripe, std::span<const ReadPiece> pieces, uint8_t* client) {
  // Every surviving chunk the stripe's pieces and the rebuild need is read
  // once: a degraded sequential read costs one member byte per byte. Under
  // the stripe lock, so data and parity come from the same write. Anything
  // but a clean run (a slot changing hands, a read error) falls back to the
  // piece-at-a-time path, which corrects or reports it.
  const SlotGens gens = CaptureGens();  // before the health (as above)
  const int missing = MissingSlotAt(stripe);
  bool others_usable = true;
  for (int i = missing + 1; i < geo_.raid_disks(); ++i) {
    others_usable = others_usable && SlotUsableAt(i, stripe);
  }
  if (missing >= 0 && others_usable && CheckUsable(false).ok()) {
    const ReadPlan plan = PlanDegradedRead(geo_, stripe, pieces, missing);
    ScratchOrOwned scratch(ScratchUser::kReconstruct, plan.scratch_bytes);
    std::vector<MemberIo> ios = PlannedMemberIos(
        MemberIo::kRead, stripe, plan.reads, scratch.data(), client);
    Submit(ios, &gens);
    if (std::all_of(ios.begin(), ios.end(),
                    [](const MemberIo& io) { return io.status.ok(); })) {
      ComputeRead(plan, scratch.data(), client);
      if (plan.rebuild) {
        counters_.reconstructions.fetch_add(1, std::memory_order_relaxed);
      }
      for (const ReadPiece& p : pieces) {
        OverlayCacheLocked(PieceLocation(stripe, p), p.y - p.x,
                           client + p.client);
      }
      return absl::OkStatus();
    }
  }
  for (const ReadPiece& p : pieces) {
    RETURN_IF_ERROR(ReadPieceLocked(PieceLocation(stripe, p), p.y - p.x,
                                    client + p.client));
  }
  return absl::OkStatus();
}

Location ArrayImpl::PieceLocation(uint64_t stripe, const ReadPiece& p) const {
  Location loc;
  loc.stripe = stripe;
  loc.data_index = p.data_index;
  loc.disk = geo_.DataDisk(stripe, p.data_index);
  loc.parity_disk = geo_.ParityDisk(stripe);
  loc.chunk_offset = p.x;
  loc.member_offset = stripe * geo_.chunk_bytes() + p.x;
  return loc;
}

// ---------------------------------------------------------------- writes

absl::Status ArrayImpl::BeginWrite() {
  MutexLock lock(&state_mu_);
  RETURN_IF_ERROR(CheckUsable(true));
  ++writes_in_flight_;
  wrote_since_open_.store(true);
  if (clean_) {
    // md's rule: the superblocks say "active" (dirty) before any member
    // write, so a crash from here on is detected at the next assembly.
    absl::Status st = WriteSuperblocks(/*clean=*/false);
    if (!st.ok()) {
      --writes_in_flight_;
      return st;
    }
    clean_ = false;
  }
  return absl::OkStatus();
}

void ArrayImpl::EndWrite() {
  MutexLock lock(&state_mu_);
  --writes_in_flight_;
  last_write_ = std::chrono::steady_clock::now();
}

absl::Status ArrayImpl::WriteShaped(const void* buf, size_t len,
                                    uint64_t offset, bool fua) {
  RETURN_IF_ERROR(CheckRange("write", len, offset));
  if (len == 0) return CheckUsable(true);
  RETURN_IF_ERROR(BeginWrite());
  const auto* src = static_cast<const uint8_t*>(buf);
  const uint64_t sd = geo_.stripe_data_bytes();
  std::vector<bool> touched(geo_.raid_disks(), false);
  absl::Status st;
  for (uint64_t done = 0; done < len && st.ok();) {
    uint64_t pos = offset + done;
    uint64_t stripe = pos / sd;
    uint64_t a = pos % sd;
    uint64_t b = std::min<uint64_t>(sd, a + (len - done));
    st = WritePiece(stripe, a, b, src + done, fua, &touched);
    done += b - a;
  }
  if (st.ok() && fua) st = FlushSlots(touched);
  EndWrite();
  return st;
}

absl::Status ArrayImpl::WritePiece(uint64_t stripe, uint64_t a, uint64_t b,
                                   const uint8_t* src, bool fua,
                                   std::vector<bool>* touched) {
  const uint64_t sd = geo_.stripe_data_bytes();
  const bool full = a == 0 && b == sd;
  // Gather only what looks like a stream: a piece that starts or ends a
  // stripe (a sequential writer crossing a stripe boundary; with a deep
  // queue the pieces arrive out of order), or lands in or beside a stripe
  // already being gathered. A random small write gains nothing from
  // waiting, so it goes straight to RMW/RCW. Nor does anything while some
  // client flushes every few milliseconds: each flush would write the
  // half-gathered stripes back as partial stripes anyway, and it is the
  // flushing client that would wait for them (the latency-isolation case:
  // a 4K write+flush beside a stream); writing through puts that cost on
  // the writer instead.
  // The cache is keyed by stripes of one shape: a reshape writes it back
  // and runs without it (reshape.cc).
  const bool cache =
      cache_.enabled() && !reshaping_.load() && !full && !fua &&
      flush_interval_ns_.load(std::memory_order_relaxed) >= bypass_flush_ns_ &&
      (a == 0 || b == sd || cache_.MayContain(stripe) ||
       (stripe > 0 && cache_.MayContain(stripe - 1)) ||
       cache_.MayContain(stripe + 1));
  if (cache) {
    // Keep the cache within its bound before taking our stripe lock: never
    // hold one stripe lock while waiting for another.
    for (int i = 0; i < 4 && cache_.over_capacity(); ++i) {
      std::vector<uint64_t> victims = cache_.Oldest(1, std::nullopt);
      if (victims.empty() || victims[0] == stripe) break;
      RETURN_IF_ERROR(WritebackStripe(victims[0]));
      counters_.cache_evictions.fetch_add(1, std::memory_order_relaxed);
    }
  }
  StripeLock lock(&locks_, LockKey(stripe));
  StripeCache::Entry* e = cache_.Find(stripe);
  if (cache || (e != nullptr && !full)) {
    // Gather: the bytes join the stripe's entry; a stripe that becomes
    // fully dirty goes out at once as a full-stripe write (no reads).
    if (e == nullptr) e = cache_.GetOrCreate(stripe);
    std::memcpy(e->data.data() + a, src, b - a);
    e->dirty.Add(a, b);
    counters_.cached_writes.fetch_add(1, std::memory_order_relaxed);
    if (!fua && !e->dirty.Covers(sd)) return absl::OkStatus();
    return WritebackLocked(e, touched);
  }
  // A full-stripe write supersedes anything cached for the stripe.
  if (e != nullptr) cache_.Erase(stripe);
  return WriteStripeLocked(stripe, a, b, src, touched);
}

absl::Status ArrayImpl::WritebackLocked(StripeCache::Entry* e,
                                        std::vector<bool>* touched) {
  const uint64_t stripe = e->stripe;
  for (const auto& [a, b] : e->dirty.ranges()) {
    RETURN_IF_ERROR(
        WriteStripeLocked(stripe, a, b, e->data.data() + a, touched));
  }
  counters_.cache_writebacks.fetch_add(1, std::memory_order_relaxed);
  cache_.Erase(stripe);
  return absl::OkStatus();
}

absl::Status ArrayImpl::WritebackStripe(uint64_t stripe) {
  StripeLock lock(&locks_, LockKey(stripe));
  StripeCache::Entry* e = cache_.Find(stripe);
  if (e == nullptr) return absl::OkStatus();
  std::vector<bool> touched(geo_.raid_disks(), false);
  return WritebackLocked(e, &touched);
}

absl::Status ArrayImpl::WritebackAll() {
  absl::Status first;
  for (uint64_t stripe : cache_.Oldest(SIZE_MAX, std::nullopt)) {
    absl::Status st = WritebackStripe(stripe);
    if (first.ok()) first = st;
  }
  return first;
}

absl::Status ArrayImpl::WriteStripeLocked(uint64_t stripe, uint64_t a,
                                          uint64_t b, const uint8_t* src,
                                          std::vector<bool>* touched) {
  // A write over the end of one chunk and the start of the next touches
  // disjoint rows when it is shorter than a chunk: two small updates (as
  // md's per-row choice would make) instead of one over the whole chunk.
  const uint64_t C = geo_.chunk_bytes();
  if (a / C + 1 == (b - 1) / C && b % C != 0 && b % C <= a % C) {
    uint64_t mid = (a / C + 1) * C;
    RETURN_IF_ERROR(WriteStripeLocked(stripe, a, mid, src, touched));
    return WriteStripeLocked(stripe, mid, b, src + (mid - a), touched);
  }
  // md's write-intent rule: the region's bit is durable before the first
  // member write into it, and is released when the write is done.
  if (bitmap_ != nullptr) {
    RETURN_IF_ERROR(bitmap_->StartWrite(stripe * C, C));
    ProcessDeferredFailures();
  }
  absl::Status st = absl::InternalError("write retries exhausted");
  bool whole = true;  // every member got its share (else keep the bit)
  for (int attempt = 0; attempt <= geo_.raid_disks(); ++attempt) {
    st = CheckUsable(true);
    if (!st.ok()) break;
    bool slot_failed = false;
    const SlotGens gens = CaptureGens();
    const int missing = MissingSlotAt(stripe);
    whole = whole && missing < 0;
    st = PlanAndWriteStripe(stripe, a, b, src, missing, gens,
                            /*force_rcw=*/attempt > 0, &slot_failed, touched);
    if (st.ok() || !slot_failed) break;
    whole = false;
    // A member failed mid-plan: it is now marked faulty. Redo the stripe
    // around it; every plan is idempotent (it rewrites the same data and
    // parity from scratch), so partial writes of the failed attempt are
    // harmless.
  }
  if (bitmap_ != nullptr) bitmap_->EndWrite(stripe * C, C, st.ok() && whole);
  return st;
}

absl::Status ArrayImpl::PlanAndWriteStripe(uint64_t stripe, uint64_t a,
                                           uint64_t b, const uint8_t* src,
                                           int missing, const SlotGens& gens,
                                           bool force_rcw, bool* slot_failed,
                                           std::vector<bool>* touched) {
  // Parity of a stripe the resync has not reached is not trusted yet, and a
  // retry's may already hold part of this write: never carry it forward.
  const StripeHealth health{
      missing,
      !force_rcw && stripe < resync_stripe_.load(std::memory_order_acquire)};
  const WritePlan plan = PlanWrite(geo_, stripe, a, b, health);
  AlignedBuffer scratch(plan.scratch_bytes);
  auto* client = const_cast<uint8_t*>(src);  // only written from
  if (!plan.reads.empty()) {
    std::vector<MemberIo> reads = PlannedMemberIos(
        MemberIo::kRead, stripe, plan.reads, scratch.data(), client);
    Submit(reads, &gens);
    RETURN_IF_ERROR(CorrectPreReads(stripe, reads));
    RETURN_IF_ERROR(AbsorbFailures(reads, slot_failed));
  }
  ComputeWrite(plan, scratch.data(), src);
  std::vector<MemberIo> writes = PlannedMemberIos(
      MemberIo::kWrite, stripe, plan.writes, scratch.data(), client);
  std::atomic<uint64_t>* counter = &counters_.degraded_writes;
  if (!plan.degraded) {
    counter = plan.mode == WriteMode::kFull  ? &counters_.full_stripe_writes
              : plan.mode == WriteMode::kRmw ? &counters_.rmw_writes
                                             : &counters_.rcw_writes;
  }
  counter->fetch_add(1, std::memory_order_relaxed);
  for (const MemberIo& io : writes) (*touched)[io.slot] = true;
  Submit(writes, &gens);
  return AbsorbFailures(writes, slot_failed);
}

std::vector<MemberIo> ArrayImpl::PlannedMemberIos(
    MemberIo::Kind kind, uint64_t stripe, const std::vector<PlannedIo>& planned,
    uint8_t* scratch, uint8_t* client) const {
  const uint64_t base = stripe * geo_.chunk_bytes();
  std::vector<MemberIo> ios;
  ios.reserve(planned.size());
  for (const PlannedIo& p : planned) {
    uint8_t* buf =
        (p.ref.buffer == PlanRef::kScratch ? scratch : client) + p.ref.offset;
    ios.push_back(
        MemberIo{kind, p.slot, buf, p.len, base + p.chunk_offset, {}});
  }
  return ios;
}

absl::Status ArrayImpl::CorrectPreReads(uint64_t stripe,
                                        std::vector<MemberIo>& reads) {
  // A write's reads of old data or parity met a read error on a working
  // member: rebuild those bytes from the rest of the stripe and rewrite
  // them, as for a client read, and go on with the plan. Only what cannot
  // be corrected is left for AbsorbFailures.
  const uint64_t base = stripe * geo_.chunk_bytes();
  for (MemberIo& io : reads) {
    if (io.status.ok() || io.stale || io.to_replacement ||
        !SlotUsableAt(io.slot, stripe)) {
      continue;
    }
    absl::Status st = CorrectReadErrorLocked(
        stripe, io.slot, io.offset - base, io.len,
        static_cast<uint8_t*>(io.buf), io.status, io.used);
    if (st.ok()) {
      io.status = absl::OkStatus();
    } else if (!CheckUsable(false).ok()) {
      return st;
    }
  }
  return absl::OkStatus();
}

absl::Status ArrayImpl::FlushSlots(const std::vector<bool>& which) {
  for (int attempt = 0; attempt <= static_cast<int>(which.size()); ++attempt) {
    std::vector<MemberIo> ios;
    for (int i = 0; i < static_cast<int>(which.size()); ++i) {
      if (which[i] && SlotPresent(i)) {
        ios.push_back(MemberIo{MemberIo::kFlush, i, nullptr, 0, 0, {}});
      }
    }
    Submit(ios);
    bool slot_failed;
    absl::Status st = AbsorbFailures(ios, &slot_failed);
    if (st.ok()) return st;
    // A member that cannot flush is failed; the data it held is still
    // recoverable from the others, which did flush. Fine unless the array
    // failed as a whole.
    RETURN_IF_ERROR(CheckUsable(false));
    if (!slot_failed) return st;
  }
  return absl::OkStatus();
}

absl::Status ArrayImpl::Flush() {
  RETURN_IF_ERROR(CheckUsable(false));
  // Moving average of the time between flushes (1/8 weight per sample;
  // racy updates lose a sample now and then, which is harmless).
  const int64_t now = NowNs();
  const int64_t gap = now - last_flush_ns_.exchange(now);
  const int64_t avg = flush_interval_ns_.load(std::memory_order_relaxed);
  flush_interval_ns_.store(avg + (gap - avg) / 8, std::memory_order_relaxed);
  // Everything acknowledged before this call is in the cache or on the
  // members: write the cache back, then make the members durable.
  RETURN_IF_ERROR(WritebackAll());
  RETURN_IF_ERROR(FlushSlots(std::vector<bool>(SlotCount(), true)));
  // Bits whose persist failed earlier go out now: after a flush the
  // on-disk bitmap covers every write (FlushSlots made the data durable).
  if (bitmap_ != nullptr) RETURN_IF_ERROR(bitmap_->Sync());
  return absl::OkStatus();
}

absl::Status ArrayImpl::TrimShaped(size_t len, uint64_t offset, bool fua) {
  RETURN_IF_ERROR(CheckRange("trim", len, offset));
  RETURN_IF_ERROR(CheckUsable(true));
  for (const auto& s : slots_) {
    std::shared_ptr<Member> m = s->member.load();
    std::shared_ptr<Member> r = s->replacement.load();
    if ((m != nullptr && !m->DiscardZeroes()) ||
        (r != nullptr && !r->DiscardZeroes())) {
      return absl::OkStatus();  // advisory: cannot keep parity, so skip
    }
  }
  const uint64_t sd = geo_.stripe_data_bytes();
  uint64_t first = (offset + sd - 1) / sd;
  uint64_t end = (offset + len) / sd;
  if (first >= end) return absl::OkStatus();
  RETURN_IF_ERROR(BeginWrite());
  std::vector<bool> touched(geo_.raid_disks(), false);
  absl::Status st;
  for (uint64_t s = first; s < end && st.ok(); ++s) {
    StripeLock lock(&locks_, LockKey(s));
    cache_.Erase(s);  // the whole stripe is being replaced by zeros
    const uint64_t C = geo_.chunk_bytes();
    if (bitmap_ != nullptr) {
      st = bitmap_->StartWrite(s * C, C);
      if (!st.ok()) break;
    }
    // Every present chunk, parity included, becomes zeros: the stripe stays
    // consistent and a missing member's chunk reconstructs as zeros too.
    std::vector<MemberIo> ios;
    for (int i = 0; i < geo_.raid_disks(); ++i) {
      if (!SlotUsableAt(i, s)) continue;
      touched[i] = true;
      ios.push_back(MemberIo{MemberIo::kDiscard,
                             i,
                             nullptr,
                             geo_.chunk_bytes(),
                             s * geo_.chunk_bytes(),
                             {}});
    }
    Submit(ios);
    bool slot_failed;
    st = AbsorbFailures(ios, &slot_failed);
    if (!st.ok() && slot_failed && CheckUsable(true).ok()) {
      st = absl::OkStatus();  // the failed member's chunk is implied by P=0
    }
    if (bitmap_ != nullptr) {
      bitmap_->EndWrite(s * C, C, st.ok() && !slot_failed);
    }
  }
  if (st.ok() && fua) st = FlushSlots(touched);
  EndWrite();
  return st;
}

absl::Status ArrayImpl::ZeroShaped(size_t len, uint64_t offset, bool fua) {
  RETURN_IF_ERROR(CheckRange("zero", len, offset));
  if (len == 0) return CheckUsable(true);
  const uint64_t sd = geo_.stripe_data_bytes();
  // Zeros go through the ordinary write path, one stripe's worth at a time,
  // so parity and degraded handling are exactly those of writes.
  AlignedBuffer zeros(std::min<uint64_t>(len, sd), /*zero=*/true);
  for (uint64_t done = 0; done < len;) {
    uint64_t pos = offset + done;
    uint64_t n = std::min<uint64_t>(len - done, sd - pos % sd);
    n = std::min<uint64_t>(n, zeros.size());
    RETURN_IF_ERROR(WriteShaped(zeros.data(), n, pos, false));
    done += n;
  }
  return fua ? Flush() : absl::OkStatus();
}

// ------------------------------------------------------ resync and check

// ------------------------------------------------- clean/active and threads

absl::Status ArrayImpl::MarkCleanLocked() {
  if (clean_ || read_only_ || failed_.load()) return absl::OkStatus();
  if (resync_stripe_.load() < geo_.stripe_count()) return absl::OkStatus();
  // Data first, then the claim that it is consistent.
  RETURN_IF_ERROR(WritebackAll());
  RETURN_IF_ERROR(FlushSlots(std::vector<bool>(SlotCount(), true)));
  RETURN_IF_ERROR(WriteSuperblocks(/*clean=*/true));
  clean_ = true;
  return absl::OkStatus();
}

void ArrayImpl::SafemodeLoop() {
  MutexLock lock(&state_mu_);
  while (!stop_) {
    state_mu_.AwaitWithTimeout(
        Condition(&stop_), absl::FromChrono(std::chrono::milliseconds(100)));
    if (stop_) break;
    if (!clean_ && writes_in_flight_ == 0 &&
        std::chrono::steady_clock::now() - last_write_ >= kSafemodeDelay) {
      absl::Status st = MarkCleanLocked();
      if (!st.ok())
        Log(LogLevel::kError,
            absl::StrFormat("marking clean failed: %s", st.message()));
    }
  }
}

void ArrayImpl::WritebackLoop() {
  for (;;) {
    {
      MutexLock lock(&state_mu_);
      state_mu_.AwaitWithTimeout(
          Condition(&stop_), absl::FromChrono(std::chrono::milliseconds(10)));
      if (stop_) return;
    }
    // Aged entries first, then the oldest while the cache is over 3/4 full
    // (so writers rarely have to evict inline).
    auto deadline = StripeCache::Clock::now() - cache_max_age_;
    for (uint64_t stripe : cache_.Oldest(SIZE_MAX, deadline)) {
      absl::Status st = WritebackStripe(stripe);
      if (!st.ok()) {
        Log(LogLevel::kError,
            absl::StrFormat("cache writeback of stripe %d failed: %s", stripe,
                            st.message()));
        break;
      }
    }
    while (cache_.bytes() * 4 > cache_.capacity() * 3 && cache_.size() > 0) {
      std::vector<uint64_t> v = cache_.Oldest(1, std::nullopt);
      if (v.empty() || !WritebackStripe(v[0]).ok()) break;
    }
    BitmapTick();
  }
}

void ArrayImpl::StartBackground() {
  if (read_only_ || safemode_thread_.joinable()) return;
  safemode_thread_ = std::thread([this] { SafemodeLoop(); });
  writeback_thread_ = std::thread([this] { WritebackLoop(); });
  if (resync_stripe_.load() < geo_.stripe_count() && !failed_.load() &&
      !reshaping_.load()) {
    resync_thread_ = std::thread([this] {
      ScratchOrOwned::EnableThreadScratch();
      (void)Resync();
    });
  }
  {
    MutexLock lock(&job_mu_);
    background_ = true;
  }
  // A reshape found by assembly resumes before any recovery (which runs
  // after it, in the new shape).
  if (reshaping_.load() && !failed_.load() && !ReshapeJobQueued()) {
    absl::Status st = RequestJob(JobRequest{JobKind::kReshape, -1});
    if (!st.ok())
      Log(LogLevel::kError,
          absl::StrFormat("reshape not resumed: %s", st.message()));
  }
  MaybeStartRecovery();
}

void ArrayImpl::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    MutexLock lock(&state_mu_);
    stop_ = true;
  }
  if (safemode_thread_.joinable()) safemode_thread_.join();
  if (writeback_thread_.joinable()) writeback_thread_.join();
  if (resync_thread_.joinable()) resync_thread_.join();
  {
    MutexLock lock(&job_mu_);
    job_stop_ = true;
    pending_job_.reset();
  }
  // Not under job_mu_: the job thread takes it on its way out.
  if (job_thread_.joinable()) job_thread_.join();
  absl::Status wb = WritebackAll();
  if (!wb.ok()) {
    Log(LogLevel::kError,
        absl::StrFormat("writing back cached data at shutdown failed: %s",
                        wb.message()));
  }
  MutexLock lock(&state_mu_);
  if (!read_only_ && !failed_.load() && !clean_) {
    absl::Status st = MarkCleanLocked();
    if (!st.ok())
      Log(LogLevel::kError,
          absl::StrFormat("marking clean failed: %s", st.message()));
  }
  if (clean_ && !failed_.load()) ClearBitmapAtStop();
}

ArrayInfo ArrayImpl::Info() const {
  ArrayInfo info{.geometry = geo_};
  {
    MutexLock lock(&sb_mu_);
    info.uuid = sb_.set_uuid;
    info.name = sb_.set_name;
    info.events = sb_.events;
    info.ctime = sb_.ctime;
    info.utime = sb_.utime;
  }
  {
    MutexLock lock(&state_mu_);
    info.clean = clean_;
  }
  info.data_offset_bytes = data_offset_;
  info.read_only = read_only_;
  info.failed = failed_.load();
  info.resyncing = resync_stripe_.load() < geo_.stripe_count();
  info.resync_bytes = resync_stripe_.load() * geo_.chunk_bytes();
  int gone = 0;
  {
    MutexLock lock(&sb_mu_);
    for (int i = 0; i < SlotCount(); ++i) {
      const Slot& s = *slots_[i];
      SlotInfo si;
      si.slot = i;
      si.state = s.state.load();
      std::shared_ptr<Member> m = s.member.load();
      si.name = m ? m->Name() : "";
      si.dev_number = s.id.dev_number;
      si.device_uuid = s.id.device_uuid;
      if (si.state == SlotState::kRebuilding) {
        si.recovery_bytes = s.front.load() * geo_.chunk_bytes();
      }
      gone += si.state != SlotState::kActive;
      info.slots.push_back(si);
      if (std::shared_ptr<Member> r = s.replacement.load(); r != nullptr) {
        SlotInfo ri;
        ri.slot = -1;
        ri.state = SlotState::kSpare;
        ri.name = r->Name();
        ri.dev_number = s.repl_id.dev_number;
        ri.device_uuid = s.repl_id.device_uuid;
        info.spares.push_back(ri);
      }
    }
    for (const Spare& sp : spares_) {
      SlotInfo si;
      si.slot = -1;
      si.state = SlotState::kSpare;
      si.name = sp.member->Name();
      si.dev_number = sp.id.dev_number;
      si.device_uuid = sp.id.device_uuid;
      info.spares.push_back(si);
    }
  }
  info.degraded = gone == 1;
  {
    MutexLock lock(&job_mu_);
    info.job = job_;
    info.last_job = last_job_;
    info.speed = speed_;
  }
  if (info.job.kind == JobKind::kNone && resync_running_.load()) {
    info.job.kind = JobKind::kResync;
    info.job.total_bytes = geo_.member_bytes();
    info.job.done_bytes = info.resync_bytes;
  }
  info.counters = counters_.Snapshot();
  if (const ReshapeState* r = reshape_.load(); r != nullptr && reshaping_) {
    info.reshape.active = true;
    info.reshape.from = r->from->geo;
    info.reshape.to = r->to->geo;
    info.reshape.position_bytes = r->front.load();
    info.reshape.to_data_offset_bytes = r->to->data_offset;
  }
  if (bitmap_super_.has_value()) {
    BitmapInfo& b = info.bitmap;
    b.present = true;
    b.offset_bytes = bitmap_area_offset_;
    const BitmapSuper bs = bitmap_ ? bitmap_->super() : *bitmap_super_;
    b.chunk_bytes = bs.chunksize;
    b.chunks = BitmapChunks(bs);
    b.dirty_chunks = bitmap_ ? bitmap_->DirtyChunks() : bitmap_dirty_at_load_;
    b.events = bs.events;
    b.events_cleared = bs.events_cleared;
    b.sync_size_bytes = bs.sync_size * 512;
    b.daemon_sleep_s = bs.daemon_sleep;
  }
  return info;
}

// ------------------------------------------------------------ Array shell

Array::Array(std::unique_ptr<ArrayImpl> impl) : impl_(std::move(impl)) {}
Array::~Array() {
  if (impl_) impl_->Shutdown();
}
void Array::StartBackground() { impl_->StartBackground(); }
absl::Status Array::Read(void* buf, size_t len, uint64_t offset) {
  return impl_->Read(buf, len, offset);
}
absl::Status Array::Write(const void* buf, size_t len, uint64_t offset,
                          bool fua) {
  return impl_->Write(buf, len, offset, fua);
}
absl::Status Array::Flush() { return impl_->Flush(); }
absl::Status Array::Trim(size_t len, uint64_t offset, bool fua) {
  return impl_->Trim(len, offset, fua);
}
absl::Status Array::Zero(size_t len, uint64_t offset, bool fua) {
  return impl_->Zero(len, offset, fua);
}
absl::Status Array::Resync() { return impl_->Resync(); }
absl::Status Array::FailSlot(int slot) {
  return impl_->FailSlot(slot, "failed by request");
}
absl::StatusOr<uint64_t> Array::CheckParity(std::vector<uint64_t>* first_bad) {
  return impl_->CheckParity(first_bad);
}
uint64_t Array::size() const { return impl_->geometry().array_bytes(); }
const Geometry& Array::geometry() const { return impl_->geometry(); }
bool Array::read_only() const { return impl_->read_only(); }
ArrayInfo Array::Info() const { return impl_->Info(); }
void Array::SetCacheBytes(uint64_t bytes) { impl_->SetCacheBytes(bytes); }

absl::Status Array::FailMember(const std::string& name) {
  return impl_->FailMember(name);
}
absl::Status Array::RemoveMember(const std::string& name) {
  return impl_->RemoveMember(name);
}
absl::Status Array::AddMember(std::unique_ptr<Member> member) {
  return impl_->AddMember(std::move(member));
}
absl::Status Array::ReplaceMember(const std::string& old_name,
                                  std::unique_ptr<Member> replacement) {
  return impl_->ReplaceMember(old_name, std::move(replacement));
}
absl::Status Array::StartScrub(bool repair) {
  return impl_->StartScrub(repair);
}
absl::Status Array::Grow(GrowOptions options) {
  return impl_->Grow(std::move(options));
}
absl::StatusOr<bool> Array::StepReshape() { return impl_->StepReshape(); }
absl::Status Array::StopJob() { return impl_->StopJob(); }
absl::Status Array::WaitForJob() { return impl_->WaitForJob(); }
void Array::SetSpeedLimits(const SpeedLimits& limits) {
  impl_->SetSpeedLimits(limits);
}

}  // namespace uraid
