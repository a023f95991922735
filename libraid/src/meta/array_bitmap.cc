// SPDX-License-Identifier: MIT
// See meta/array_bitmap.h.

#include "meta/array_bitmap.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "member/bitmap_file.h"
#include "uraid/bad_blocks.h"

namespace uraid {
namespace {

// Where an internal bitmap at `area_offset` must end on a member: the data,
// or the bad-block log when it lies between (mdadm puts it right after the
// bitmap).
uint64_t AreaLimit(const Superblock& sb, uint64_t area_offset,
                   uint64_t data_offset) {
  if (const std::optional<BadBlockLogArea> log = BadBlockLogAreaOf(sb);
      log.has_value() && log->offset_bytes > area_offset &&
      log->offset_bytes < data_offset) {
    return log->offset_bytes;
  }
  return data_offset;
}

}  // namespace
namespace {

// md's daemon wakes every few seconds; bits go after daemon_sleep idle,
// so ticking once a second (of the array's clock) keeps clears prompt
// without extra flushes.
constexpr int64_t kTickIntervalNs = 1'000'000'000;

Event MetadataWriteFailed(const std::string& member, std::optional<int> slot,
                          const absl::Status& st, const char* what) {
  Event e;
  e.name = "MetadataWriteFailed";
  e.member = member;
  e.slot = slot;
  e.details.emplace_back("error", std::string(st.message()));
  e.details.emplace_back("what", std::string(what));
  return e;
}

}  // namespace

ArrayBitmap::ArrayBitmap(BitmapHost* host, bool read_only, Clock& clock)
    : host_(host), read_only_(read_only), clock_(clock) {}

absl::Status ArrayBitmap::Persist(uint64_t offset,
                                  std::span<const uint8_t> bytes) {
  if (file_ != nullptr) {
    // md's file ends with the last byte of bits; the page the bitmap
    // writes runs on to the area's last sector, and that tail is padding
    // (the kernel's own writes stop at the file's end too).
    const uint64_t size = file_->Size();
    if (offset >= size) return absl::OkStatus();
    const size_t len =
        static_cast<size_t>(std::min<uint64_t>(bytes.size(), size - offset));
    absl::Status st = file_->Write(bytes.data(), len, offset);
    if (st.ok()) st = file_->Flush();
    if (!st.ok()) {
      // md kicks a failing bitmap file and carries on without a bitmap;
      // here the writes that need the bits fail instead, so no data ever
      // reaches the members unrecorded (a later crash would resync too
      // little). Writes under bits already set still go through.
      host_->Report(
          LogLevel::kError,
          MetadataWriteFailed(file_->Name(), std::nullopt, st, "bitmap file"),
          absl::StrFormat("bitmap file write failed: %s", st.message()));
    }
    return st;
  }
  const std::vector<BitmapHost::Carrier> carriers = host_->BitmapCarriers();
  const uint64_t raw = area_offset_ + offset;
  // One round trip on every member at once: this is on the first write to
  // a region, so it is latency the client sees.
  const std::vector<absl::Status> statuses =
      host_->WriteDurablyOn(carriers, bytes.data(), bytes.size(), raw);
  int written = 0;
  absl::Status first;
  for (size_t i = 0; i < carriers.size(); ++i) {
    const BitmapHost::Carrier& c = carriers[i];
    const absl::Status& st = statuses[i];
    if (st.ok()) {
      ++written;
      continue;
    }
    host_->Report(
        LogLevel::kError,
        MetadataWriteFailed(c.member->Name(), c.slot, st, "bitmap"),
        absl::StrFormat("member %s failed writing the bitmap at %d: %s",
                        c.member->Name(), raw, st.message()));
    if (first.ok()) first = st;
    // Failing the slot writes superblocks, which write the bitmap header:
    // not from inside the bitmap. The failure is handed over right after
    // the bitmap call returns (HandOverFailures), before data is written
    // under the bits.
    MutexLock lock(&failures_mu_);
    failures_.emplace_back(c, std::string(st.message()));
    has_failures_.store(true);
  }
  if (written == 0 && !carriers.empty()) {
    return absl::UnavailableError(absl::StrFormat(
        "bitmap write failed on every member: %s", first.message()));
  }
  return absl::OkStatus();
}

absl::Status ArrayBitmap::StartWrite(uint64_t offset, uint64_t len) {
  if (bitmap_ == nullptr) return absl::OkStatus();
  absl::Status st = bitmap_->StartWrite(offset, len);
  HandOverFailures();
  return st;
}

void ArrayBitmap::HandOverFailures() {
  if (!has_failures_.exchange(false)) return;
  std::vector<std::pair<BitmapHost::Carrier, std::string>> todo;
  {
    MutexLock lock(&failures_mu_);
    todo.swap(failures_);
  }
  for (const auto& [carrier, why] : todo)
    host_->BitmapCarrierFailed(carrier, why);
}

void ArrayBitmap::SetDegraded(bool degraded) {
  if (bitmap_ != nullptr) bitmap_->SetDegraded(degraded);
}

absl::Status ArrayBitmap::Create(const BitmapSuper& bs,
                                 std::span<const uint8_t> bits,
                                 bool array_clean) {
  WriteIntentBitmapOptions opts;
  opts.array_clean = array_clean;
  // The array's clock, as the time_point the bitmap's option takes (only
  // differences of it are ever used).
  opts.clock = [this] {
    return WriteIntentBitmap::Clock::time_point(
        std::chrono::duration_cast<WriteIntentBitmap::Clock::duration>(
            std::chrono::nanoseconds(clock_.NowNs() + clock_skew_ns_.load())));
  };
  ASSIGN_OR_RETURN(bitmap_,
                   WriteIntentBitmap::Create(
                       bs, bits,
                       [this](uint64_t off, std::span<const uint8_t> b) {
                         return Persist(off, b);
                       },
                       opts));
  return absl::OkStatus();
}

void ArrayBitmap::ClearIdleLocked(const char* why) {
  // Regions idle "long enough" at once: nothing is being written any more
  // and Tick flushes the data before it clears a bit. The skew is taken
  // back after the pass, so the lazy clear keeps its daemon_sleep when
  // the array goes on (after a read-only spell).
  const int64_t skew =
      (int64_t{bitmap_->super().daemon_sleep} + 1) * 1'000'000'000;
  clock_skew_ns_.fetch_add(skew);
  absl::Status st = bitmap_->Tick([this] { return host_->FlushAllSlots(); });
  clock_skew_ns_.fetch_sub(skew);
  if (!st.ok())
    host_->Log(LogLevel::kError,
               absl::StrFormat("bitmap: clear %s: %s", why, st.message()));
}

void ArrayBitmap::ClearAtStop() {
  if (bitmap_ == nullptr) return;
  MutexLock lock(&tick_mu_);
  if (!frozen_) ClearIdleLocked("at stop");
}

void ArrayBitmap::Freeze(bool frozen) {
  if (bitmap_ == nullptr) return;
  {
    MutexLock lock(&tick_mu_);
    if (frozen && !frozen_) ClearIdleLocked("at the read-only switch");
    frozen_ = frozen;
  }
  HandOverFailures();
}

void ArrayBitmap::Tick() {
  if (bitmap_ == nullptr) return;
  {
    MutexLock lock(&tick_mu_);
    if (frozen_) return;
    const int64_t now = clock_.NowNs();
    if (last_tick_ns_.has_value() && now - *last_tick_ns_ < kTickIntervalNs) {
      return;
    }
    last_tick_ns_ = now;
    absl::Status st = bitmap_->Tick([this] { return host_->FlushAllSlots(); });
    if (!st.ok())
      host_->Log(LogLevel::kError,
                 absl::StrFormat("bitmap: lazy clear: %s", st.message()));
  }
  HandOverFailures();
}

namespace {

// Reads and checks the 256-byte header of the area at `offset` of
// `source` against the array's freshest superblock. `where` names the area
// in errors.
absl::StatusOr<std::pair<BitmapSuper, BitmapVerdict>> ReadBitmapHeader(
    Member& source, uint64_t offset, const Superblock& sb,
    const std::string& where) {
  std::vector<uint8_t> head(kBitmapSuperBytes);
  if (absl::Status st = source.Read(head.data(), head.size(), offset);
      !st.ok()) {
    return absl::Status(
        st.code(), absl::StrFormat("%s: reading it: %s", where, st.message()));
  }
  absl::StatusOr<BitmapSuper> bs = DecodeBitmapSuper(head);
  if (!bs.ok()) {
    return absl::DataLossError(
        absl::StrFormat("%s is corrupt: %s", where, bs.status().message()));
  }
  absl::StatusOr<BitmapVerdict> verdict =
      ValidateBitmapForArray(*bs, sb.set_uuid, sb.events, sb.size);
  if (!verdict.ok()) {
    return absl::Status(verdict.status().code(),
                        absl::StrFormat("%s does not belong to this array: %s",
                                        where, verdict.status().message()));
  }
  return std::make_pair(*bs, *verdict);
}

}  // namespace

absl::Status ArrayBitmap::Attach(Member* internal_source, const Superblock& sb,
                                 const std::string& bitmap_file,
                                 uint64_t data_offset) {
  if (sb.feature_map & kFeatureBitmapOffset) {
    if (!bitmap_file.empty()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "bitmap file %s given, but the array has an internal bitmap "
          "(feature map 0x%x): an array has one bitmap; leave the file out",
          bitmap_file, sb.feature_map));
    }
    if (internal_source == nullptr) {
      return absl::FailedPreconditionError(
          "the array has an internal bitmap but no in-sync member to read "
          "it from");
    }
    return Load(*internal_source, sb, data_offset);
  }
  if (!bitmap_file.empty()) return LoadFile(bitmap_file, sb);
  if (!sb.clean() && !sb.has_ppl()) {
    // md behaves the same: the superblocks cannot say that an external
    // bitmap exists, so without it nothing narrows the resync. (A PPL
    // array has no bitmap by design: its log is replayed instead.)
    host_->Log(
        LogLevel::kNotice,
        "no write-intent bitmap (none on the members, no bitmap file "
        "given): the resync covers the whole array from its checkpoint. An "
        "array created with --bitmap FILE resyncs only dirty regions when "
        "assembled with that file (uraid --bitmap FILE, plugin bitmap=FILE; "
        "md's --assemble --bitmap=FILE)");
  }
  return absl::OkStatus();
}

absl::Status ArrayBitmap::Load(Member& member, const Superblock& sb,
                               uint64_t data_offset) {
  area_offset_ =
      kSb12OffsetBytes + static_cast<int64_t>(sb.bitmap_offset) * 512;
  const std::string where = absl::StrFormat(
      "%s: the write-intent bitmap at byte %d", member.Name(), area_offset_);
  ASSIGN_OR_RETURN(auto header,
                   ReadBitmapHeader(member, area_offset_, sb, where));
  const auto& [bs, verdict] = header;
  const uint64_t chunks = BitmapChunks(bs);
  const uint64_t area = BitmapAreaBytes(chunks);
  if (area_offset_ + area > data_offset) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the bitmap (%d bytes at %d) overlaps the data at %d",
        member.Name(), area, area_offset_, data_offset));
  }
  if (const uint64_t limit = AreaLimit(sb, area_offset_, data_offset);
      area_offset_ + area > limit) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the bitmap (%d bytes at %d) overlaps the bad-block log at %d",
        member.Name(), area, area_offset_, limit));
  }
  std::vector<uint8_t> bits(area - kBitmapSuperBytes);
  RETURN_IF_ERROR(
      member.Read(bits.data(), bits.size(), area_offset_ + kBitmapSuperBytes));
  return Install(bs, bits, verdict, sb, absl::StrCat("on ", member.Name()));
}

absl::Status ArrayBitmap::LoadFile(const std::string& path,
                                   const Superblock& sb) {
  ASSIGN_OR_RETURN(std::unique_ptr<Member> file,
                   OpenBitmapFile(path, read_only_, host_->MemberNames()));
  if (file->Size() < kBitmapSuperBytes) {
    return absl::DataLossError(absl::StrFormat(
        "bitmap file %s is too short to be an md bitmap: %d bytes, the "
        "header alone is %d",
        path, file->Size(), kBitmapSuperBytes));
  }
  const std::string where = absl::StrFormat("bitmap file %s", path);
  ASSIGN_OR_RETURN(auto header, ReadBitmapHeader(*file, 0, sb, where));
  const auto& [bs, verdict] = header;
  const uint64_t chunks = BitmapChunks(bs);
  const uint64_t area = BitmapAreaBytes(chunks);
  if (file->Size() < area) {
    return absl::DataLossError(absl::StrFormat(
        "bitmap file %s is truncated: %d bytes, but %d bits need %d (256 "
        "header bytes + the bits)",
        path, file->Size(), chunks, area));
  }
  std::vector<uint8_t> bits(area - kBitmapSuperBytes);
  if (absl::Status st = file->Read(bits.data(), bits.size(), kBitmapSuperBytes);
      !st.ok()) {
    return st;
  }
  area_offset_ = 0;
  if (!read_only_) file_ = std::move(file);
  return Install(bs, bits, verdict, sb, absl::StrCat("file ", path));
}

absl::Status ArrayBitmap::Install(const BitmapSuper& bs,
                                  std::span<const uint8_t> bits,
                                  BitmapVerdict verdict, const Superblock& sb,
                                  const std::string& where) {
  super_ = bs;
  dirty_at_load_ = CountBitmapDirty(bits, BitmapChunks(bs));
  if (read_only_) return absl::OkStatus();
  RETURN_IF_ERROR(
      Create(bs, bits, sb.clean() && verdict == BitmapVerdict::kCurrent));
  if (verdict == BitmapVerdict::kStale) {
    host_->Log(
        LogLevel::kWarning,
        absl::StrFormat("bitmap %s is older than the superblocks (events %d < "
                        "%d) or marked "
                        "stale: treating every region as dirty",
                        where, bs.events, sb.events));
    RETURN_IF_ERROR(bitmap_->MarkAllDirty());
    stale_at_load_ = true;
  }
  return absl::OkStatus();
}

absl::Status ArrayBitmap::Init(const Superblock& sb, uint64_t data_offset,
                               uint64_t chunk_bytes, bool all_dirty,
                               const std::string& file, bool force) {
  BitmapSuper bs;
  bs.uuid = sb.set_uuid;
  bs.events = sb.events;
  bs.events_cleared = sb.events;
  bs.sync_size = sb.size;
  area_offset_ = file.empty() ? kSb12OffsetBytes +
                                    static_cast<int64_t>(sb.bitmap_offset) * 512
                              : 0;
  bs.chunksize = static_cast<uint32_t>(chunk_bytes);
  // A file reserves nothing on the members (mdadm leaves it 0 there too).
  // On the members the room ends at the bad-block log when it follows the
  // bitmap (the kernel may grow the bitmap up to sectors_reserved).
  const uint64_t room_end = AreaLimit(sb, area_offset_, data_offset);
  bs.sectors_reserved =
      file.empty() ? static_cast<uint32_t>((room_end - area_offset_) / 512) : 0;
  std::vector<uint8_t> area = NewBitmapArea(bs);
  const uint64_t chunks = BitmapChunks(bs);
  // mdadm writes whole pages of ones; a clean start wants the bits zero.
  if (!all_dirty) {
    std::fill(area.begin() + kBitmapSuperBytes, area.end(), 0);
  }
  if (!file.empty()) {
    // md's file: the header and the bits, nothing after them.
    area.resize(BitmapAreaBytes(chunks));
    ASSIGN_OR_RETURN(file_,
                     CreateBitmapFile(file, area, force, host_->MemberNames()));
  } else {
    area.resize(std::min<uint64_t>(area.size(), room_end - area_offset_));
    for (const BitmapHost::Carrier& c : host_->BitmapCarriers()) {
      absl::Status st = c.member->Write(area.data(), area.size(), area_offset_);
      if (!st.ok()) {
        return absl::Status(st.code(),
                            absl::StrFormat("%s: writing the bitmap: %s",
                                            c.member->Name(), st.message()));
      }
    }
  }
  super_ = bs;
  std::span<const uint8_t> bits(area.data() + kBitmapSuperBytes,
                                BitmapBitBytes(chunks));
  return Create(bs, bits, /*array_clean=*/false);
}

absl::Status ArrayBitmap::CopyTo(Member& member) {
  // An external bitmap is shared by the whole array: a joining member
  // needs no copy (and offset 0 of a member is not the bitmap's place).
  if (bitmap_ == nullptr || file_ != nullptr) return absl::OkStatus();
  std::vector<uint8_t> area = bitmap_->AreaImage();
  absl::Status st = member.Write(area.data(), area.size(), area_offset_);
  if (st.ok()) st = member.Flush();
  if (!st.ok()) {
    return absl::Status(
        st.code(), absl::StrFormat("%s: writing the bitmap: %s", member.Name(),
                                   st.message()));
  }
  return absl::OkStatus();
}

uint64_t ArrayBitmap::AreaEnd() const {
  if (bitmap_ == nullptr || area_offset_ == 0) return 0;
  return area_offset_ + BitmapAreaPages(bitmap_->chunks()) * 4096;
}

BitmapInfo ArrayBitmap::Info() const {
  BitmapInfo b;
  if (!super_.has_value()) return b;
  b.present = true;
  b.offset_bytes = area_offset_;
  const BitmapSuper bs = bitmap_ ? bitmap_->super() : *super_;
  b.chunk_bytes = bs.chunksize;
  b.chunks = BitmapChunks(bs);
  b.dirty_chunks = bitmap_ ? bitmap_->DirtyChunks() : dirty_at_load_;
  b.events = bs.events;
  b.events_cleared = bs.events_cleared;
  b.sync_size_bytes = bs.sync_size * 512;
  b.daemon_sleep_s = bs.daemon_sleep;
  return b;
}

}  // namespace uraid
