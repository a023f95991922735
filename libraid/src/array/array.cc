// SPDX-License-Identifier: MIT
// ArrayImpl's core: construction (the parts wired together), the request
// entry points, usability and the sticky background error, the cache's
// writeback thread, start and shutdown, Info, and the Array shell. The
// stripe engine is StripeReader and StripeWriter, member I/O the
// IoExecutor; member failure and superblocks are in member_failure.cc;
// the clean/active state is ArrayState (array_state.h).

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"
#include "parity/parity.h"
#include "uraid/bad_blocks.h"
#include "uraid/status_errno.h"

namespace uraid {

namespace {

// The end of the bad-block log on a member when it lies past the
// superblock (a 1.2 member's), else 0.
uint64_t BadBlockLogEnd(const Superblock& sb) {
  const std::optional<BadBlockLogArea> log = BadBlockLogAreaOf(sb);
  if (!log.has_value() || log->offset_bytes < kSb12OffsetBytes) return 0;
  return log->offset_bytes + log->size_bytes;
}

}  // namespace

ArrayImpl::ArrayImpl(Geometry geometry, uint64_t data_offset_bytes,
                     Superblock sb, std::vector<std::unique_ptr<Slot>> slots,
                     std::vector<Spare> spares, bool read_only,
                     const CacheOptions& cache, Logger logger,
                     std::shared_ptr<Clock> clock)
    : shapes_(geometry, data_offset_bytes),
      read_only_(read_only),
      reporter_(std::move(logger), FormatUuid(sb.set_uuid), sb.set_name),
      roster_(*this, std::move(slots), sb, std::move(spares), read_only),
      slots_(roster_.slots()),
      io_(slots_, counters_, geometry.raid_disks() - 1,
          [this](const std::string& name, int slot, const absl::Status& why) {
            roster_.ReportReplacementFailed(name, slot, why);
          }),
      cache_(geometry.stripe_data_bytes(), read_only ? 0 : cache.bytes),
      reader_(Engine(), cache_, survivors_, reporter_, read_only),
      cache_max_age_(cache.max_age_ms),
      bblog_end_(BadBlockLogEnd(sb)),
      jobs_(this, clock),
      bitmap_(this, read_only),
      state_(*this, sb.clean(), sb.resync_offset, read_only, std::move(clock)),
      resync_stripe_(geometry.stripe_count()),
      writer_(Engine(), cache_, reader_, bitmap_, ppl_, ppl_epochs_, shapes_,
              resync_stripe_,
              int64_t{cache.bypass_flush_interval_ms} * 1'000'000),
      scanner_(Engine(), writer_, job_pool_),
      rebuilder_(Engine(), reader_, job_pool_, bitmap_, roster_) {}

ArrayImpl::~ArrayImpl() { Shutdown(); }

absl::Status ArrayImpl::Read(void* buf, size_t len, uint64_t offset) {
  return Route(ReqKind::kRead, buf, len, offset, false,
               [&] { return reader_.Read(CurrentShape(), buf, len, offset); });
}

absl::Status ArrayImpl::Write(const void* buf, size_t len, uint64_t offset,
                              bool fua) {
  // The router only reads from `buf` for writes.
  return Route(ReqKind::kWrite, const_cast<void*>(buf), len, offset, fua, [&] {
    return writer_.Write(CurrentShape(), buf, len, offset, fua);
  });
}

absl::Status ArrayImpl::Trim(size_t len, uint64_t offset, bool fua) {
  return Route(ReqKind::kTrim, nullptr, len, offset, fua,
               [&] { return writer_.Trim(CurrentShape(), len, offset, fua); });
}

absl::Status ArrayImpl::Zero(size_t len, uint64_t offset, bool fua) {
  return Route(ReqKind::kZero, nullptr, len, offset, fua,
               [&] { return writer_.Zero(CurrentShape(), len, offset, fua); });
}

absl::Status ArrayImpl::CheckUsable(bool write) const {
  if (roster_.failed()) {
    return absl::UnavailableError(
        "array has failed: more than one member is missing or faulty");
  }
  if (write && read_only_) {
    return absl::FailedPreconditionError("array is read-only");
  }
  if (write && state_.switched_read_only()) {
    return SwitchedReadOnlyError();
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

// ------------------------------------------------- clean/active and threads

absl::Status ArrayImpl::FlushMembers(bool writeback) {
  if (writeback) RETURN_IF_ERROR(writer_.WritebackAll());
  return writer_.FlushSlots(std::vector<bool>(SlotCount(), true));
}

void ArrayImpl::WritebackLoop() {
  for (;;) {
    if (state_.WaitForStop(/*ms=*/10)) return;
    // Aged entries first, then the oldest while the cache is over 3/4 full
    // (so writers rarely have to evict inline).
    auto deadline = StripeCache::Clock::now() - cache_max_age_;
    for (uint64_t stripe : cache_.Oldest(SIZE_MAX, deadline)) {
      absl::Status st = writer_.WritebackStripe(stripe);
      if (!st.ok()) {
        Log(LogLevel::kError,
            absl::StrFormat("cache writeback of stripe %d failed: %s", stripe,
                            st.message()));
        break;
      }
    }
    while (cache_.bytes() * 4 > cache_.capacity() * 3 && cache_.size() > 0) {
      std::vector<uint64_t> v = cache_.Oldest(1, std::nullopt);
      if (v.empty() || !writer_.WritebackStripe(v[0]).ok()) break;
    }
    bitmap_.Tick();
  }
}

void ArrayImpl::StartBackground() {
  if (read_only_ || writeback_thread_.joinable()) return;
  state_.Start();
  writeback_thread_ = std::thread([this] { WritebackLoop(); });
  // The resync an unclean shutdown (or a deferred create) left goes first:
  // a recovery asked for below queues behind it, as md recovers only
  // once its resync has ended (a degraded stripe ends it).
  if (resync_stripe_.load() < CurrentShape().geo.stripe_count() &&
      !roster_.failed() && !reshape_.running()) {
    absl::Status st = jobs_.Request(JobRequest{JobKind::kResync, -1});
    if (!st.ok())
      Log(LogLevel::kError,
          absl::StrFormat("resync not started: %s", st.message()));
  }
  // A reshape found by assembly resumes before any recovery (which runs
  // after it, in the new shape).
  if (reshape_.running() && !roster_.failed() && !reshape_.queued()) {
    absl::Status st = jobs_.Request(JobRequest{JobKind::kReshape, -1});
    if (!st.ok())
      Log(LogLevel::kError,
          absl::StrFormat("reshape not resumed: %s", st.message()));
  }
  MaybeStartRecovery();
}

void ArrayImpl::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  state_.Stop();
  if (writeback_thread_.joinable()) writeback_thread_.join();
  jobs_.Shutdown();
  absl::Status wb = writer_.WritebackAll();
  if (!wb.ok()) {
    Log(LogLevel::kError,
        absl::StrFormat("writing back cached data at shutdown failed: %s",
                        wb.message()));
  }
  const bool clean = state_.MarkCleanAtStop();
  if (clean && !roster_.failed()) bitmap_.ClearAtStop();
}

ArrayInfo ArrayImpl::Info() const {
  // One shape for the whole answer (a reshape may end meanwhile).
  const Shape& sh = CurrentShape();
  const uint64_t C = sh.geo.chunk_bytes();
  ArrayInfo info{.geometry = sh.geo};
  {
    MutexLock lock(roster_.mu());
    const Superblock& sb = roster_.TemplateLocked();
    info.uuid = sb.set_uuid;
    info.name = sb.set_name;
    info.events = sb.events;
    info.ctime = sb.ctime;
    info.utime = sb.utime;
    info.ppl = sb.has_ppl();
  }
  info.clean = state_.clean();
  info.data_offset_bytes = sh.data_offset;
  info.switched_read_only = state_.switched_read_only();
  info.read_only = read_only_ || info.switched_read_only;
  info.failed = roster_.failed();
  info.resyncing = resync_stripe_.load() < sh.geo.stripe_count();
  info.resync_bytes = resync_stripe_.load() * C;
  int gone = 0;
  {
    MutexLock lock(roster_.mu());
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
        si.recovery_bytes = s.front.load() * C;
      }
      si.bad_blocks = s.bad.size();
      si.bad_sectors = s.bad.sectors();
      si.want_replacement = s.want_replacement.load();
      constexpr auto kRelaxed = std::memory_order_relaxed;
      si.read_errors = s.stats.read_errors.load(kRelaxed);
      si.write_errors = s.stats.write_errors.load(kRelaxed);
      si.corrected_read_errors = s.read_errors.load(kRelaxed);
      si.bad_block_records = s.stats.bad_block_records.load(kRelaxed);
      si.ios = s.stats.ios.load(kRelaxed);
      si.io_ns = s.stats.io_ns.load(kRelaxed);
      si.latency_ns = static_cast<uint64_t>(
          std::max<int64_t>(s.stats.latency_ns.load(kRelaxed), 0));
      gone += si.state != SlotState::kActive;
      info.slots.push_back(si);
      if (std::shared_ptr<Member> r = s.replacement.load(); r != nullptr) {
        SlotInfo ri;
        ri.slot = -1;
        ri.state = SlotState::kSpare;
        ri.name = r->Name();
        ri.dev_number = s.repl_id.dev_number;
        ri.device_uuid = s.repl_id.device_uuid;
        ri.bad_blocks = s.repl_bad.size();
        ri.bad_sectors = s.repl_bad.sectors();
        info.spares.push_back(ri);
      }
    }
    for (const Spare& sp : roster_.SparesLocked()) {
      SlotInfo si;
      si.slot = -1;
      si.state = SlotState::kSpare;
      si.name = sp.member->Name();
      si.dev_number = sp.id.dev_number;
      si.device_uuid = sp.id.device_uuid;
      info.spares.push_back(si);
    }
  }
  // Degraded: lost some but not more than the parity covers (RAID6: two).
  info.degraded = gone >= 1 && gone <= info.geometry.parity_disks();
  info.job = jobs_.current();
  info.last_job = jobs_.last();
  info.speed = jobs_.speed();
  if (info.job.kind == JobKind::kNone && resync_.running()) {
    info.job.kind = JobKind::kResync;
    info.job.total_bytes = sh.geo.member_bytes();
    info.job.done_bytes = info.resync_bytes;
  }
  info.counters = counters_.Snapshot();
  if (const ReshapeState* r = reshape_.state();
      r != nullptr && reshape_.running()) {
    info.reshape.active = true;
    info.reshape.from = r->from->geo;
    info.reshape.to = r->to->geo;
    info.reshape.position_bytes = r->front.load();
    info.reshape.to_data_offset_bytes = r->to->data_offset;
  }
  info.bitmap = bitmap_.Info();
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
absl::StatusOr<JobInfo> Array::CheckParityReport() {
  return impl_->CheckParityReport();
}
uint64_t Array::size() const { return impl_->geometry().array_bytes(); }
const Geometry& Array::geometry() const { return impl_->geometry(); }
bool Array::read_only() const { return impl_->read_only(); }
absl::Status Array::SetReadOnly(bool read_only) {
  return impl_->SetReadOnly(read_only);
}
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
