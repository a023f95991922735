// SPDX-License-Identifier: MIT
// ArrayImpl's core: construction (the parts wired together), the request
// entry points, the writeback thread, start and shutdown, Info, and the
// Array shell.

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

ArrayImpl::ArrayImpl(Geometry geometry, uint64_t data_offset_bytes,
                     Superblock sb, std::vector<std::unique_ptr<Slot>> slots,
                     std::vector<Spare> spares, bool read_only,
                     const CacheOptions& cache, Logger logger,
                     std::shared_ptr<Clock> clock)
    : shapes_(geometry, data_offset_bytes),
      read_only_(read_only),
      clock_(clock ? std::move(clock) : RealClock()),
      reporter_(std::move(logger), FormatUuid(sb.set_uuid), sb.set_name),
      roster_(meta_host_, std::move(slots), sb, std::move(spares), read_only),
      slots_(roster_.slots()),
      bitmap_(&meta_host_, read_only, *clock_),
      state_(hosts_, sb.clean(), sb.resync_offset, read_only, *clock_),
      resync_stripe_(geometry.stripe_count()),
      engine_(EngineWiring{.host = faults_,
                           .slots = slots_,
                           .replacement_failed =
                               [this](const std::string& name, int slot,
                                      const absl::Status& why) {
                                 roster_.ReportReplacementFailed(name, slot,
                                                                 why);
                               },
                           .shapes = shapes_,
                           .bitmap = bitmap_,
                           .ppl = ppl_,
                           .ppl_epochs = ppl_epochs_,
                           .resync_front = resync_stripe_,
                           .reporter = reporter_,
                           .cache = cache,
                           .clock = *clock_,
                           .read_only = read_only}),
      jobs_(JobParts{engine_.context(), roster_, shapes_, engine_.reader(),
                     engine_.writer(), bitmap_, state_, reporter_,
                     resync_stripe_, faults_, hosts_, read_only},
            *clock_) {}

ArrayImpl::~ArrayImpl() { Shutdown(); }

absl::Status ArrayImpl::Read(void* buf, size_t len, uint64_t offset) {
  return Route(ReqKind::kRead, buf, len, offset, false, [&] {
    return engine_.reader().Read(CurrentShape(), buf, len, offset);
  });
}

absl::Status ArrayImpl::Write(const void* buf, size_t len, uint64_t offset,
                              bool fua) {
  // The router only reads from `buf` for writes.
  return Route(ReqKind::kWrite, const_cast<void*>(buf), len, offset, fua, [&] {
    return engine_.writer().Write(CurrentShape(), buf, len, offset, fua);
  });
}

absl::Status ArrayImpl::Trim(size_t len, uint64_t offset, bool fua) {
  return Route(ReqKind::kTrim, nullptr, len, offset, fua, [&] {
    return engine_.writer().Trim(CurrentShape(), len, offset, fua);
  });
}

absl::Status ArrayImpl::Zero(size_t len, uint64_t offset, bool fua) {
  return Route(ReqKind::kZero, nullptr, len, offset, fua, [&] {
    return engine_.writer().Zero(CurrentShape(), len, offset, fua);
  });
}

// ------------------------------------------------- clean/active and threads

void ArrayImpl::StartBackground() {
  if (read_only_ || writeback_thread_.joinable()) return;
  state_.Start();
  // The cache's writeback and the bitmap's daemon, every 10 ms of real
  // time; each compares its timer against the array's clock.
  writeback_thread_ = std::thread([this] {
    while (!state_.WaitForStop(/*ms=*/10)) {
      engine_.WritebackAged();
      bitmap_.Tick();
    }
  });
  jobs_.StartQueued();
}

void ArrayImpl::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  state_.Stop();
  if (writeback_thread_.joinable()) writeback_thread_.join();
  jobs_.runner().Shutdown();
  absl::Status wb = engine_.writer().WritebackAll();
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
  info.job = jobs_.runner().current();
  info.last_job = jobs_.runner().last();
  info.speed = jobs_.runner().speed();
  if (info.job.kind == JobKind::kNone && jobs_.resync().running()) {
    info.job.kind = JobKind::kResync;
    info.job.total_bytes = sh.geo.member_bytes();
    info.job.done_bytes = info.resync_bytes;
  }
  info.counters = engine_.counters().Snapshot();
  if (const ReshapeState* r = jobs_.reshape().state();
      r != nullptr && jobs_.reshape().running()) {
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
absl::Status Array::Resync() { return impl_->jobs().Resync(); }
absl::Status Array::FailSlot(int slot) {
  return impl_->faults().FailSlot(slot, "failed by request");
}
absl::StatusOr<uint64_t> Array::CheckParity(std::vector<uint64_t>* first_bad) {
  return impl_->jobs().CheckParity(first_bad);
}
absl::StatusOr<JobInfo> Array::CheckParityReport() {
  return impl_->jobs().CheckParityReport();
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
  return impl_->members().Fail(name);
}
absl::Status Array::RemoveMember(const std::string& name) {
  return impl_->members().Remove(name);
}
absl::Status Array::AddMember(std::unique_ptr<Member> member) {
  return impl_->members().Add(std::move(member));
}
absl::Status Array::ReplaceMember(const std::string& old_name,
                                  std::unique_ptr<Member> replacement) {
  return impl_->members().Replace(old_name, std::move(replacement));
}
absl::Status Array::StartScrub(bool repair) {
  return impl_->jobs().StartScrub(repair);
}
absl::Status Array::Grow(GrowOptions options) {
  return impl_->Grow(std::move(options));
}
absl::StatusOr<bool> Array::StepReshape() {
  return impl_->jobs().reshape().Step();
}
absl::Status Array::StopJob() {
  impl_->jobs().runner().Stop();
  return absl::OkStatus();
}
absl::Status Array::WaitForJob() { return impl_->jobs().runner().Wait(); }
void Array::SetSpeedLimits(const SpeedLimits& limits) {
  impl_->jobs().runner().SetSpeedLimits(limits);
}

}  // namespace uraid
