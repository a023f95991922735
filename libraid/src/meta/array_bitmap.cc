// SPDX-License-Identifier: MIT
// The array's side of md's write-intent bitmap: where the area lives on
// each member, loading it at assembly, writing a new one at create, the
// persist callback that puts bitmap pages on every member, and the lazy
// clear ("daemon") tick. The protocol itself is WriteIntentBitmap's.
//
// Every slot member holds an identical copy of the area (md writes the
// bitmap to every in-sync and recovering device; spares get a copy when
// they join so that any member can be read back).
//
// An external bitmap (md's --bitmap FILE) holds the same area in a file
// instead: header at byte 0, bits right after it. The superblocks do not
// mention it, the members carry no copy, and it is named again at every
// assembly. Everything above the persist callback (group commit, lazy
// clear, resync from the bits after a crash) is the same code.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array/array_impl.h"
#include "base/status_macros.h"
#include "member/bitmap_file.h"

namespace uraid {
namespace {

// md's daemon wakes every few seconds; bits go after daemon_sleep idle,
// so ticking once a second keeps clears prompt without extra flushes.
constexpr auto kTickInterval = std::chrono::seconds(1);

}  // namespace

absl::Status ArrayImpl::PersistBitmap(uint64_t offset,
                                      std::span<const uint8_t> bytes) {
  if (bitmap_file_ != nullptr) {
    // md's file ends with the last byte of bits; the page the bitmap
    // writes runs on to the area's last sector, and that tail is padding
    // (the kernel's own writes stop at the file's end too).
    const uint64_t size = bitmap_file_->Size();
    if (offset >= size) return absl::OkStatus();
    const size_t len =
        static_cast<size_t>(std::min<uint64_t>(bytes.size(), size - offset));
    absl::Status st = bitmap_file_->Write(bytes.data(), len, offset);
    if (st.ok()) st = bitmap_file_->Flush();
    if (!st.ok()) {
      // md kicks a failing bitmap file and carries on without a bitmap;
      // here the writes that need the bits fail instead, so no data ever
      // reaches the members unrecorded (a later crash would resync too
      // little). Writes under bits already set still go through.
      Event e = MakeEvent("MetadataWriteFailed", bitmap_file_->Name());
      e.details.emplace_back("error", std::string(st.message()));
      e.details.emplace_back("what", std::string("bitmap file"));
      Report(LogLevel::kError, std::move(e),
             absl::StrFormat("bitmap file write failed: %s", st.message()));
    }
    return st;
  }
  struct Target {
    std::shared_ptr<Member> member;
    int slot;
    bool replacement;
    absl::Status status;
  };
  std::vector<Target> targets;
  for (int i = 0; i < SlotCount(); ++i) {
    if (SlotPresent(i)) {
      if (auto m = slots_[i]->member.load()) targets.push_back({m, i, false});
    }
    if (auto r = slots_[i]->replacement.load()) {
      targets.push_back({r, i, true});
    }
  }
  const uint64_t raw = bitmap_area_offset_ + offset;
  std::vector<std::function<void()>> tasks;
  for (Target& t : targets) {
    tasks.emplace_back([&t, raw, bytes] {
      t.status = WriteDurably(*t.member, bytes.data(), bytes.size(), raw);
    });
  }
  // One round trip on every member at once: this is on the first write to
  // a region, so it is latency the client sees.
  RunTogether(tasks);
  int written = 0;
  absl::Status first;
  for (Target& t : targets) {
    if (t.status.ok()) {
      ++written;
      continue;
    }
    {
      Event e = MakeEvent("MetadataWriteFailed", t.member->Name(), t.slot);
      e.details.emplace_back("error", std::string(t.status.message()));
      e.details.emplace_back("what", std::string("bitmap"));
      Report(LogLevel::kError, std::move(e),
             absl::StrFormat("member %s failed writing the bitmap at %d: %s",
                             t.member->Name(), raw, t.status.message()));
    }
    if (first.ok()) first = t.status;
    // FailSlot writes superblocks, which writes the bitmap header: not
    // from inside the bitmap. The failure is handled right after the
    // bitmap call returns (ProcessDeferredFailures), before data is
    // written under the bits.
    MutexLock lock(&deferred_mu_);
    deferred_.push_back(DeferredFailure{t.slot, t.replacement, t.member,
                                        std::string(t.status.message())});
    deferred_sb_update_.store(true);
  }
  if (written == 0 && !targets.empty()) {
    return absl::UnavailableError(absl::StrFormat(
        "bitmap write failed on every member: %s", first.message()));
  }
  return absl::OkStatus();
}

void ArrayImpl::ProcessDeferredFailures() {
  if (!deferred_sb_update_.exchange(false)) return;
  std::vector<DeferredFailure> todo;
  {
    MutexLock lock(&deferred_mu_);
    todo.swap(deferred_);
  }
  for (DeferredFailure& d : todo) {
    Slot& s = *slots_[d.slot];
    if (d.replacement) {
      if (s.replacement.compare_exchange_strong(d.member, nullptr)) {
        ReportReplacementFailed(d.member->Name(), d.slot,
                                absl::InternalError(d.why));
        RecordBackgroundError(
            WriteSuperblocks(std::nullopt),
            absl::StrFormat("the loss of slot %d's replacement", d.slot));
      }
    } else {
      // Only while it still holds the slot (FailSlot checks under sb_mu_).
      RecordBackgroundError(
          FailSlot(d.slot, "bitmap write failed: " + d.why, d.member.get()),
          absl::StrFormat("the failure of slot %d", d.slot));
    }
  }
}

void ArrayImpl::UpdateBitmapDegraded() {
  if (bitmap_ != nullptr) bitmap_->SetDegraded(GoneSlots() > 0);
}

WriteIntentBitmapOptions ArrayImpl::BitmapOptions(bool array_clean) {
  WriteIntentBitmapOptions opts;
  opts.array_clean = array_clean;
  opts.clock = [this] {
    return std::chrono::steady_clock::now() +
           std::chrono::nanoseconds(bitmap_clock_skew_ns_.load());
  };
  return opts;
}

void ArrayImpl::ClearBitmapAtStop() {
  if (bitmap_ == nullptr) return;
  // Regions idle "long enough" at once: nothing is being written any more
  // and Tick flushes the data before it clears a bit.
  bitmap_clock_skew_ns_.fetch_add((int64_t{bitmap_->super().daemon_sleep} + 1) *
                                  1'000'000'000);
  absl::Status st = bitmap_->Tick(
      [this] { return FlushSlots(std::vector<bool>(SlotCount(), true)); });
  if (!st.ok())
    Log(LogLevel::kError,
        absl::StrFormat("bitmap: clear at stop: %s", st.message()));
}

void ArrayImpl::BitmapTick() {
  if (bitmap_ == nullptr) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_tick_ < kTickInterval) return;
  last_tick_ = now;
  absl::Status st = bitmap_->Tick(
      [this] { return FlushSlots(std::vector<bool>(SlotCount(), true)); });
  if (!st.ok())
    Log(LogLevel::kError,
        absl::StrFormat("bitmap: lazy clear: %s", st.message()));
  ProcessDeferredFailures();
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

std::vector<std::string> ArrayImpl::MemberNames() const {
  std::vector<std::string> names;
  for (const auto& slot : slots_) {
    if (auto m = slot->member.load()) names.push_back(m->Name());
    if (auto r = slot->replacement.load()) names.push_back(r->Name());
  }
  MutexLock lock(&sb_mu_);
  for (const Spare& sp : spares_) names.push_back(sp.member->Name());
  return names;
}

absl::Status ArrayImpl::AttachBitmap(Member* internal_source,
                                     const Superblock& sb,
                                     const std::string& bitmap_file) {
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
    return LoadBitmap(*internal_source, sb);
  }
  if (!bitmap_file.empty()) return LoadBitmapFile(bitmap_file, sb);
  if (!sb.clean()) {
    // md behaves the same: the superblocks cannot say that an external
    // bitmap exists, so without it nothing narrows the resync.
    Log(LogLevel::kNotice,
        "no write-intent bitmap (none on the members, no bitmap file "
        "given): the resync covers the whole array from its checkpoint. An "
        "array created with --bitmap FILE resyncs only dirty regions when "
        "assembled with that file (uraid --bitmap FILE, plugin bitmap=FILE; "
        "md's --assemble --bitmap=FILE)");
  }
  return absl::OkStatus();
}

absl::Status ArrayImpl::LoadBitmap(Member& member, const Superblock& sb) {
  bitmap_area_offset_ =
      kSb12OffsetBytes + static_cast<int64_t>(sb.bitmap_offset) * 512;
  const std::string where =
      absl::StrFormat("%s: the write-intent bitmap at byte %d", member.Name(),
                      bitmap_area_offset_);
  ASSIGN_OR_RETURN(auto header,
                   ReadBitmapHeader(member, bitmap_area_offset_, sb, where));
  const auto& [bs, verdict] = header;
  const uint64_t chunks = BitmapChunks(bs);
  const uint64_t area = BitmapAreaBytes(chunks);
  if (bitmap_area_offset_ + area > CurrentShape().data_offset) {
    return absl::DataLossError(absl::StrFormat(
        "%s: the bitmap (%d bytes at %d) overlaps the data at %d",
        member.Name(), area, bitmap_area_offset_, CurrentShape().data_offset));
  }
  std::vector<uint8_t> bits(area - kBitmapSuperBytes);
  RETURN_IF_ERROR(member.Read(bits.data(), bits.size(),
                              bitmap_area_offset_ + kBitmapSuperBytes));
  return InstallBitmap(bs, bits, verdict, sb,
                       absl::StrCat("on ", member.Name()));
}

absl::Status ArrayImpl::LoadBitmapFile(const std::string& path,
                                       const Superblock& sb) {
  ASSIGN_OR_RETURN(std::unique_ptr<Member> file,
                   OpenBitmapFile(path, read_only_, MemberNames()));
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
  bitmap_area_offset_ = 0;
  if (!read_only_) bitmap_file_ = std::move(file);
  return InstallBitmap(bs, bits, verdict, sb, absl::StrCat("file ", path));
}

absl::Status ArrayImpl::InstallBitmap(const BitmapSuper& bs,
                                      std::span<const uint8_t> bits,
                                      BitmapVerdict verdict,
                                      const Superblock& sb,
                                      const std::string& where) {
  bitmap_super_ = bs;
  bitmap_dirty_at_load_ = CountBitmapDirty(bits, BitmapChunks(bs));
  if (read_only_) return absl::OkStatus();
  WriteIntentBitmapOptions opts =
      BitmapOptions(sb.clean() && verdict == BitmapVerdict::kCurrent);
  ASSIGN_OR_RETURN(bitmap_,
                   WriteIntentBitmap::Create(
                       bs, bits,
                       [this](uint64_t off, std::span<const uint8_t> b) {
                         return PersistBitmap(off, b);
                       },
                       opts));
  UpdateBitmapDegraded();
  if (verdict == BitmapVerdict::kStale) {
    Log(LogLevel::kWarning,
        absl::StrFormat("bitmap %s is older than the superblocks (events %d < "
                        "%d) or marked "
                        "stale: treating every region as dirty",
                        where, bs.events, sb.events));
    RETURN_IF_ERROR(bitmap_->MarkAllDirty());
    SetResyncStart(0);
  }
  return absl::OkStatus();
}

absl::Status ArrayImpl::InitBitmap(uint64_t chunk_bytes, bool all_dirty,
                                   const std::string& file, bool force) {
  BitmapSuper bs;
  {
    MutexLock lock(&sb_mu_);
    bs.uuid = sb_.set_uuid;
    bs.events = sb_.events;
    bs.events_cleared = sb_.events;
    bs.sync_size = sb_.size;
    bitmap_area_offset_ =
        file.empty()
            ? kSb12OffsetBytes + static_cast<int64_t>(sb_.bitmap_offset) * 512
            : 0;
  }
  bs.chunksize = static_cast<uint32_t>(chunk_bytes);
  // A file reserves nothing on the members (mdadm leaves it 0 there too).
  bs.sectors_reserved =
      file.empty()
          ? static_cast<uint32_t>(
                (CurrentShape().data_offset - bitmap_area_offset_) / 512)
          : 0;
  std::vector<uint8_t> area = NewBitmapArea(bs);
  const uint64_t chunks = BitmapChunks(bs);
  // mdadm writes whole pages of ones; a clean start wants the bits zero.
  if (!all_dirty) {
    std::fill(area.begin() + kBitmapSuperBytes, area.end(), 0);
  }
  if (!file.empty()) {
    // md's file: the header and the bits, nothing after them.
    area.resize(BitmapAreaBytes(chunks));
    ASSIGN_OR_RETURN(bitmap_file_,
                     CreateBitmapFile(file, area, force, MemberNames()));
  } else {
    area.resize(std::min<uint64_t>(
        area.size(), CurrentShape().data_offset - bitmap_area_offset_));
    for (int i = 0; i < SlotCount(); ++i) {
      std::shared_ptr<Member> m = slots_[i]->member.load();
      if (m == nullptr) continue;
      absl::Status st = m->Write(area.data(), area.size(), bitmap_area_offset_);
      if (!st.ok()) {
        return absl::Status(
            st.code(), absl::StrFormat("%s: writing the bitmap: %s", m->Name(),
                                       st.message()));
      }
    }
  }
  bitmap_super_ = bs;
  std::span<const uint8_t> bits(area.data() + kBitmapSuperBytes,
                                BitmapBitBytes(chunks));
  ASSIGN_OR_RETURN(bitmap_,
                   WriteIntentBitmap::Create(
                       bs, bits,
                       [this](uint64_t off, std::span<const uint8_t> b) {
                         return PersistBitmap(off, b);
                       },
                       BitmapOptions(false)));
  UpdateBitmapDegraded();
  return absl::OkStatus();
}

absl::Status ArrayImpl::CopyBitmapTo(Member& member) {
  // An external bitmap is shared by the whole array: a joining member
  // needs no copy (and offset 0 of a member is not the bitmap's place).
  if (bitmap_ == nullptr || bitmap_file_ != nullptr) return absl::OkStatus();
  std::vector<uint8_t> area = bitmap_->AreaImage();
  absl::Status st = member.Write(area.data(), area.size(), bitmap_area_offset_);
  if (st.ok()) st = member.Flush();
  if (!st.ok()) {
    return absl::Status(
        st.code(), absl::StrFormat("%s: writing the bitmap: %s", member.Name(),
                                   st.message()));
  }
  return absl::OkStatus();
}

}  // namespace uraid
