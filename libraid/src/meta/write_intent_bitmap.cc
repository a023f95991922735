// SPDX-License-Identifier: MIT
// WriteIntentBitmap: md's write-intent protocol (set before write, group
// commit of bitmap pages, lazy clear after idle + flush). The contract and
// the invariants are in uraid/bitmap.h; md reference §3.3.

#include <algorithm>
#include <bit>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "base/sync.h"
#include "uraid/bitmap.h"

namespace uraid {
namespace {

// Dirty pages at most this many clean pages apart go out in one persist
// call, clean pages included. Each call costs a write and a flush on every
// member, while rewriting up to 64 KiB of unchanged pages costs far less
// than one more flush on any disk. A clean page holds exactly what is on
// disk (the batch in flight is this one), so rewriting it changes nothing,
// even if torn by a crash.
constexpr uint64_t kMaxBridgedPages = 16;

}  // namespace

// The whole state of a WriteIntentBitmap; its methods are the class's.
struct WriteIntentBitmap::Impl {
  // Part of the batch being persisted: `bytes` at `offset` of the area.
  struct Run {
    uint64_t offset;
    std::vector<uint8_t> bytes;
    // The dirty pages it carries, with the modification number taken.
    std::vector<std::pair<uint64_t, uint64_t>> taken;
  };
  struct Idle {
    Clock::time_point eligible_at;  // may be cleared from then on
    uint64_t seq;                   // tells a later idle period apart
  };

  Impl(const BitmapSuper& sb, std::span<const uint8_t> bits,
       BitmapPersistFn persist, WriteIntentBitmapOptions options);

  // The public methods, as documented in uraid/bitmap.h.
  absl::Status StartWrite(uint64_t member_offset_bytes, uint64_t len);
  void EndWrite(uint64_t member_offset_bytes, uint64_t len, bool success);
  absl::Status Tick(absl::FunctionRef<absl::Status()> flush_data);
  absl::Status Sync();
  void SetDegraded(bool degraded);
  absl::Status SetEvents(uint64_t events);
  absl::Status MarkAllDirty();
  void ClearChunk(uint64_t chunk);
  uint64_t DirtyChunks() const;
  bool IsChunkDirty(uint64_t chunk) const;
  void ForEachDirtyChunk(absl::FunctionRef<void(uint64_t chunk)> fn) const;
  uint64_t events() const;
  uint64_t events_cleared() const;
  BitmapSuper super() const;
  std::vector<uint8_t> AreaImage() const;

  Clock::time_point Now() const;
  bool MemBit(uint64_t chunk) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bit is set on disk whatever becomes of the batch in flight.
  bool DurableBit(uint64_t chunk) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetMemBit(uint64_t chunk, bool value) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkPageDirty(uint64_t page) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UpdateHeader() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts one write less on each chunk of [first, last].
  void ReleaseLocked(uint64_t first, uint64_t last, bool success)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs batches (or waits for others') until `done` holds.
  absl::Status PersistUntil(absl::FunctionRef<bool()> done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Until every page dirtied so far is durable.
  absl::Status PersistAllLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the dirty pages once; drops mu_ during the callbacks.
  absl::Status RunBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t chunks_;
  const uint64_t chunk_bytes_;
  const uint64_t sync_bytes_;
  const Clock::duration daemon_sleep_;
  const BitmapPersistFn persist_;
  const std::function<Clock::time_point()> clock_;

  mutable Mutex mu_;
  BitmapSuper sb_ ABSL_GUARDED_BY(mu_);
  // The area as it should be (image_) and as of the last completed batch
  // (disk_); both BitmapAreaSectors * 512 bytes, header included.
  std::vector<uint8_t> image_ ABSL_GUARDED_BY(mu_);
  std::vector<uint8_t> disk_ ABSL_GUARDED_BY(mu_);
  uint64_t dirty_count_ ABSL_GUARDED_BY(mu_) = 0;
  // Writes in progress per chunk (absent = none).
  absl::flat_hash_map<uint64_t, uint32_t> active_ ABSL_GUARDED_BY(mu_);
  // Chunks with a set bit, no write in progress, and not pinned.
  absl::flat_hash_map<uint64_t, Idle> idle_ ABSL_GUARDED_BY(mu_);
  // Chunks whose bit must stay until ClearChunk (md's NEEDED).
  std::vector<bool> pinned_ ABSL_GUARDED_BY(mu_);
  uint64_t idle_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool degraded_ ABSL_GUARDED_BY(mu_) = false;

  // Page bookkeeping for group commit. Every change to a page takes a new
  // modification number; a batch persists the page content as of the
  // number it saw; a waiter for a change waits until durable_seq_ reaches
  // that number.
  uint64_t mod_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> page_mod_seq_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> page_durable_seq_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> dirty_pages_ ABSL_GUARDED_BY(mu_);  // not yet taken
  bool persisting_ ABSL_GUARDED_BY(mu_) = false;
  // The batch being persisted (set while persisting_); the runs are not
  // changed until it completes, so the persisting thread reads them
  // without the lock.
  const std::vector<Run>* inflight_ ABSL_GUARDED_BY(mu_) = nullptr;
};

absl::StatusOr<std::unique_ptr<WriteIntentBitmap>> WriteIntentBitmap::Create(
    const BitmapSuper& sb, std::span<const uint8_t> bits,
    BitmapPersistFn persist, WriteIntentBitmapOptions options) {
  RETURN_IF_ERROR(CheckBitmapSuper(sb));
  if (sb.sync_size > ~0ull / 512) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bitmap sync_size %u sectors does not fit in 64-bit bytes",
        sb.sync_size));
  }
  const uint64_t need = BitmapBitBytes(BitmapChunks(sb));
  if (bits.size() < need) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bitmap bits too short: %u bytes, %u chunks need %u",
                        bits.size(), BitmapChunks(sb), need));
  }
  if (!persist) {
    return absl::InvalidArgumentError("bitmap needs a persist callback");
  }
  return std::unique_ptr<WriteIntentBitmap>(
      new WriteIntentBitmap(std::make_unique<Impl>(sb, bits, std::move(persist),
                                                   std::move(options))));
}

WriteIntentBitmap::WriteIntentBitmap(std::unique_ptr<Impl> impl)
    : chunks_(impl->chunks_),
      chunk_bytes_(impl->chunk_bytes_),
      impl_(std::move(impl)) {}

WriteIntentBitmap::~WriteIntentBitmap() = default;

absl::Status WriteIntentBitmap::StartWrite(uint64_t member_offset_bytes,
                                           uint64_t len) {
  return impl_->StartWrite(member_offset_bytes, len);
}
void WriteIntentBitmap::EndWrite(uint64_t member_offset_bytes, uint64_t len,
                                 bool success) {
  impl_->EndWrite(member_offset_bytes, len, success);
}
absl::Status WriteIntentBitmap::Tick(
    absl::FunctionRef<absl::Status()> flush_data) {
  return impl_->Tick(flush_data);
}
absl::Status WriteIntentBitmap::Sync() { return impl_->Sync(); }
void WriteIntentBitmap::SetDegraded(bool degraded) {
  impl_->SetDegraded(degraded);
}
absl::Status WriteIntentBitmap::SetEvents(uint64_t events) {
  return impl_->SetEvents(events);
}
absl::Status WriteIntentBitmap::MarkAllDirty() { return impl_->MarkAllDirty(); }
void WriteIntentBitmap::ClearChunk(uint64_t chunk) { impl_->ClearChunk(chunk); }
uint64_t WriteIntentBitmap::DirtyChunks() const { return impl_->DirtyChunks(); }
bool WriteIntentBitmap::IsChunkDirty(uint64_t chunk) const {
  return impl_->IsChunkDirty(chunk);
}
void WriteIntentBitmap::ForEachDirtyChunk(
    absl::FunctionRef<void(uint64_t chunk)> fn) const {
  impl_->ForEachDirtyChunk(fn);
}
uint64_t WriteIntentBitmap::events() const { return impl_->events(); }
uint64_t WriteIntentBitmap::events_cleared() const {
  return impl_->events_cleared();
}
BitmapSuper WriteIntentBitmap::super() const { return impl_->super(); }
std::vector<uint8_t> WriteIntentBitmap::AreaImage() const {
  return impl_->AreaImage();
}

WriteIntentBitmap::Impl::Impl(const BitmapSuper& sb,
                              std::span<const uint8_t> bits,
                              BitmapPersistFn persist,
                              WriteIntentBitmapOptions options)
    : chunks_(BitmapChunks(sb)),
      chunk_bytes_(sb.chunksize),
      sync_bytes_(sb.sync_size * 512),
      daemon_sleep_(std::chrono::seconds(sb.daemon_sleep)),
      persist_(std::move(persist)),
      clock_(options.clock ? std::move(options.clock)
                           : std::function<Clock::time_point()>(Clock::now)) {
  MutexLock lock(&mu_);
  sb_ = sb;
  // We always write little-endian bits, which is what version 3 meant on
  // the little-endian hosts we run on; say so in the header we write.
  sb_.version = kBitmapVersion;
  sb_.state &= ~kBitmapStateHostEndian;

  const size_t area = BitmapAreaSectors(chunks_) * 512;
  image_.assign(area, 0);
  const size_t copy = std::min(bits.size(), area - kBitmapSuperBytes);
  std::copy_n(bits.begin(), copy, image_.begin() + kBitmapSuperBytes);
  const std::vector<uint8_t> on_disk_header = EncodeBitmapSuper(sb);
  std::copy(on_disk_header.begin(), on_disk_header.end(), image_.begin());
  disk_ = image_;
  const std::vector<uint8_t> header = EncodeBitmapSuper(sb_);
  std::copy(header.begin(), header.end(), image_.begin());

  const size_t pages = (area + kBitmapPageBytes - 1) / kBitmapPageBytes;
  page_mod_seq_.assign(pages, 0);
  page_durable_seq_.assign(pages, 0);
  pinned_.assign(chunks_, false);
  const Clock::time_point eligible = Now() + daemon_sleep_;
  for (uint64_t c = 0; c < chunks_; ++c) {
    if (c % 8 == 0 && image_[kBitmapSuperBytes + c / 8] == 0) {
      c += 7;  // a clean byte: skip its chunks
      continue;
    }
    if (!MemBit(c)) continue;
    ++dirty_count_;
    if (options.array_clean) {
      idle_[c] = Idle{eligible, ++idle_seq_};
    } else {
      pinned_[c] = true;
    }
  }
}

WriteIntentBitmap::Clock::time_point WriteIntentBitmap::Impl::Now() const {
  return clock_();
}

bool WriteIntentBitmap::Impl::MemBit(uint64_t chunk) const {
  return (image_[kBitmapSuperBytes + chunk / 8] >> (chunk % 8)) & 1;
}

bool WriteIntentBitmap::Impl::DurableBit(uint64_t chunk) const {
  const uint64_t pos = kBitmapSuperBytes + chunk / 8;
  const int shift = chunk % 8;
  if (!((disk_[pos] >> shift) & 1)) return false;
  // A batch in flight may be clearing it (a Tick's clear, snapshotted just
  // before a new write set the bit again in memory): until that batch
  // completes the bit may be either value on disk.
  if (inflight_ != nullptr) {
    for (const Run& run : *inflight_) {
      if (pos >= run.offset && pos - run.offset < run.bytes.size()) {
        return (run.bytes[pos - run.offset] >> shift) & 1;
      }
    }
  }
  return true;
}

void WriteIntentBitmap::Impl::SetMemBit(uint64_t chunk, bool value) {
  const size_t byte = kBitmapSuperBytes + chunk / 8;
  const uint8_t mask = static_cast<uint8_t>(1u << (chunk % 8));
  if (((image_[byte] & mask) != 0) == value) return;
  if (value) {
    image_[byte] |= mask;
    ++dirty_count_;
  } else {
    image_[byte] &= static_cast<uint8_t>(~mask);
    --dirty_count_;
  }
  MarkPageDirty(byte / kBitmapPageBytes);
}

void WriteIntentBitmap::Impl::MarkPageDirty(uint64_t page) {
  page_mod_seq_[page] = ++mod_seq_;
  dirty_pages_.insert(page);
}

void WriteIntentBitmap::Impl::UpdateHeader() {
  const std::vector<uint8_t> header = EncodeBitmapSuper(sb_);
  std::copy(header.begin(), header.end(), image_.begin());
  MarkPageDirty(0);
}

absl::Status WriteIntentBitmap::Impl::StartWrite(uint64_t member_offset_bytes,
                                                 uint64_t len) {
  if (len == 0) return absl::OkStatus();
  if (member_offset_bytes >= sync_bytes_ ||
      len > sync_bytes_ - member_offset_bytes) {
    return absl::OutOfRangeError(absl::StrFormat(
        "bitmap: write of %u bytes at member offset %u ends past the %u "
        "bytes the bitmap covers (sync_size)",
        len, member_offset_bytes, sync_bytes_));
  }
  const uint64_t first = member_offset_bytes / chunk_bytes_;
  const uint64_t last = (member_offset_bytes + len - 1) / chunk_bytes_;
  MutexLock lock(&mu_);
  for (uint64_t c = first; c <= last; ++c) {
    ++active_[c];
    idle_.erase(c);
    SetMemBit(c, true);
  }
  // Evaluated under mu_, possibly by another thread (as an Await condition).
  absl::Status status = PersistUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (uint64_t c = first; c <= last; ++c) {
      if (!DurableBit(c)) return false;
    }
    return true;
  });
  if (!status.ok()) ReleaseLocked(first, last, /*success=*/true);
  return status;
}

void WriteIntentBitmap::Impl::EndWrite(uint64_t member_offset_bytes,
                                       uint64_t len, bool success) {
  if (len == 0 || member_offset_bytes >= sync_bytes_) return;
  len = std::min(len, sync_bytes_ - member_offset_bytes);
  const uint64_t first = member_offset_bytes / chunk_bytes_;
  const uint64_t last = (member_offset_bytes + len - 1) / chunk_bytes_;
  MutexLock lock(&mu_);
  ReleaseLocked(first, last, success);
}

void WriteIntentBitmap::Impl::ReleaseLocked(uint64_t first, uint64_t last,
                                            bool success) {
  const Clock::time_point eligible = Now() + daemon_sleep_;
  for (uint64_t c = first; c <= last; ++c) {
    if (!success) pinned_[c] = true;
    auto it = active_.find(c);
    if (it == active_.end()) continue;  // an EndWrite without StartWrite
    if (--it->second > 0) continue;
    active_.erase(it);
    if (!pinned_[c] && MemBit(c)) idle_[c] = Idle{eligible, ++idle_seq_};
  }
}

absl::Status WriteIntentBitmap::Impl::Tick(
    absl::FunctionRef<absl::Status()> flush_data) {
  std::vector<std::pair<uint64_t, uint64_t>> ready;  // chunk, Idle::seq
  {
    MutexLock lock(&mu_);
    if (degraded_) return absl::OkStatus();
    const Clock::time_point now = Now();
    for (const auto& [chunk, idle] : idle_) {
      if (idle.eligible_at <= now) ready.emplace_back(chunk, idle.seq);
    }
    if (ready.empty()) return absl::OkStatus();
  }
  // Everything written under these bits completed before its EndWrite,
  // which was before the snapshot above; this makes it durable.
  RETURN_IF_ERROR(flush_data());

  MutexLock lock(&mu_);
  if (degraded_) return absl::OkStatus();
  if (sb_.events_cleared < sb_.events) {
    // A member that left at an event before this one may miss the writes
    // whose bits go now: the header must say so before any bit goes.
    sb_.events_cleared = sb_.events;
    UpdateHeader();
    RETURN_IF_ERROR(PersistAllLocked());
    if (degraded_) return absl::OkStatus();
  }
  std::vector<uint64_t> cleared;
  for (const auto& [chunk, seq] : ready) {
    auto it = idle_.find(chunk);
    // Written again (or released again) since the snapshot: its newest
    // data may not be durable yet.
    if (it == idle_.end() || it->second.seq != seq) continue;
    idle_.erase(it);
    SetMemBit(chunk, false);
    cleared.push_back(chunk);
  }
  absl::Status status = PersistAllLocked();
  if (!status.ok()) {
    // Put the bits back rather than let a later batch carry the clears to
    // disk after the conditions checked here may have changed (degraded,
    // events moved on). Setting a bit is always safe; the next Tick tries
    // again with a fresh flush.
    const Clock::time_point now = Now();
    for (uint64_t chunk : cleared) {
      if (MemBit(chunk) || active_.contains(chunk) || pinned_[chunk]) continue;
      SetMemBit(chunk, true);
      idle_[chunk] = Idle{now, ++idle_seq_};
    }
  }
  return status;
}

absl::Status WriteIntentBitmap::Impl::Sync() {
  MutexLock lock(&mu_);
  return PersistAllLocked();
}

void WriteIntentBitmap::Impl::SetDegraded(bool degraded) {
  MutexLock lock(&mu_);
  degraded_ = degraded;
}

absl::Status WriteIntentBitmap::Impl::SetEvents(uint64_t events) {
  MutexLock lock(&mu_);
  sb_.events = events;
  sb_.events_cleared = std::min(sb_.events_cleared, events);
  UpdateHeader();
  return PersistAllLocked();
}

absl::Status WriteIntentBitmap::Impl::MarkAllDirty() {
  MutexLock lock(&mu_);
  pinned_.assign(chunks_, true);
  idle_.clear();
  // A byte at a time: this can be a million chunks.
  const uint64_t whole = chunks_ / 8;
  uint64_t marked = ~0ull;
  for (uint64_t i = 0; i < whole; ++i) {
    uint8_t& byte = image_[kBitmapSuperBytes + i];
    if (byte == 0xFF) continue;
    dirty_count_ += 8 - std::popcount(byte);
    byte = 0xFF;
    const uint64_t page = (kBitmapSuperBytes + i) / kBitmapPageBytes;
    if (page != marked) MarkPageDirty(page);
    marked = page;
  }
  for (uint64_t c = whole * 8; c < chunks_; ++c) SetMemBit(c, true);
  RETURN_IF_ERROR(PersistAllLocked());
  if (sb_.stale()) {
    sb_.state &= ~kBitmapStateStale;
    UpdateHeader();
    RETURN_IF_ERROR(PersistAllLocked());
  }
  return absl::OkStatus();
}

void WriteIntentBitmap::Impl::ClearChunk(uint64_t chunk) {
  MutexLock lock(&mu_);
  if (chunk >= chunks_) return;
  pinned_[chunk] = false;
  if (!active_.contains(chunk) && MemBit(chunk)) {
    idle_[chunk] = Idle{Now(), ++idle_seq_};
  }
}

absl::Status WriteIntentBitmap::Impl::PersistUntil(
    absl::FunctionRef<bool()> done) {
  while (!done()) {
    if (persisting_) {
      // Wake as soon as the batch in flight made our change durable, even if
      // another thread starts the next batch first.
      auto ready = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !persisting_ || done();
      };
      mu_.Await(Condition(&ready));
      continue;
    }
    if (dirty_pages_.empty()) {
      return absl::InternalError(
          "bitmap: waiting for a page write that no batch holds");
    }
    RETURN_IF_ERROR(RunBatchLocked());
  }
  return absl::OkStatus();
}

absl::Status WriteIntentBitmap::Impl::PersistAllLocked() {
  std::vector<std::pair<uint64_t, uint64_t>> targets;  // page, mod seq
  for (uint64_t p = 0; p < page_mod_seq_.size(); ++p) {
    if (page_mod_seq_[p] > page_durable_seq_[p]) {
      targets.emplace_back(p, page_mod_seq_[p]);
    }
  }
  return PersistUntil([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const auto& [page, seq] : targets) {
      if (page_durable_seq_[page] < seq) return false;
    }
    return true;
  });
}

absl::Status WriteIntentBitmap::Impl::RunBatchLocked() {
  std::vector<Run> runs;
  uint64_t end_page = 0;  // of the last run, exclusive
  for (uint64_t page : dirty_pages_) {
    if (runs.empty() || page - end_page > kMaxBridgedPages) {
      runs.push_back(Run{page * kBitmapPageBytes, {}, {}});
    }
    end_page = page + 1;
    runs.back().bytes.resize(
        std::min<size_t>(end_page * kBitmapPageBytes, image_.size()) -
        runs.back().offset);
    runs.back().taken.emplace_back(page, page_mod_seq_[page]);
  }
  dirty_pages_.clear();
  for (Run& run : runs) {
    std::copy_n(image_.begin() + run.offset, run.bytes.size(),
                run.bytes.begin());
  }
  persisting_ = true;
  inflight_ = &runs;

  mu_.Unlock();
  absl::Status status;
  size_t written = 0;
  for (const Run& run : runs) {
    status = persist_(run.offset, run.bytes);
    if (!status.ok()) {
      status = absl::Status(
          status.code(),
          absl::StrFormat("bitmap write of %u bytes at area offset %u: %s",
                          run.bytes.size(), run.offset, status.message()));
      break;
    }
    ++written;
  }
  mu_.Lock();

  for (size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    if (r < written) {
      std::copy(run.bytes.begin(), run.bytes.end(), disk_.begin() + run.offset);
    } else if (r == written) {
      // The failed call may have written part of the run: a bit it was
      // clearing may be clear on disk now, one it was setting is not known
      // to be set. Keep only the bits set both before and in the run.
      for (size_t i = 0; i < run.bytes.size(); ++i) {
        disk_[run.offset + i] &= run.bytes[i];
      }
    }
    for (const auto& [page, seq] : run.taken) {
      if (r < written) {
        page_durable_seq_[page] = std::max(page_durable_seq_[page], seq);
      } else {
        dirty_pages_.insert(page);  // retried by the next batch
      }
    }
  }
  inflight_ = nullptr;
  persisting_ = false;
  return status;
}

uint64_t WriteIntentBitmap::Impl::DirtyChunks() const {
  MutexLock lock(&mu_);
  return dirty_count_;
}

bool WriteIntentBitmap::Impl::IsChunkDirty(uint64_t chunk) const {
  MutexLock lock(&mu_);
  return chunk < chunks_ && MemBit(chunk);
}

void WriteIntentBitmap::Impl::ForEachDirtyChunk(
    absl::FunctionRef<void(uint64_t chunk)> fn) const {
  std::vector<uint8_t> bits;
  {
    MutexLock lock(&mu_);
    bits.assign(image_.begin() + kBitmapSuperBytes,
                image_.begin() + kBitmapSuperBytes + BitmapBitBytes(chunks_));
  }
  for (uint64_t byte = 0; byte < bits.size(); ++byte) {
    if (bits[byte] == 0) continue;
    for (uint64_t c = byte * 8; c < std::min(chunks_, byte * 8 + 8); ++c) {
      if (BitmapBit(bits, c)) fn(c);
    }
  }
}

uint64_t WriteIntentBitmap::Impl::events() const {
  MutexLock lock(&mu_);
  return sb_.events;
}

uint64_t WriteIntentBitmap::Impl::events_cleared() const {
  MutexLock lock(&mu_);
  return sb_.events_cleared;
}

BitmapSuper WriteIntentBitmap::Impl::super() const {
  MutexLock lock(&mu_);
  return sb_;
}

std::vector<uint8_t> WriteIntentBitmap::Impl::AreaImage() const {
  MutexLock lock(&mu_);
  return image_;
}

}  // namespace uraid
