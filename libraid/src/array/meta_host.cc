// SPDX-License-Identifier: MIT
// MetaHost (meta_host.h): which members carry the write-intent bitmap,
// what a failed bitmap write does to them, and what the roster asks before
// it writes the superblocks.

#include "array/meta_host.h"

#include <functional>

#include "absl/strings/str_format.h"

namespace uraid {

std::vector<BitmapHost::Carrier> MetaHost::BitmapCarriers() const {
  std::vector<Carrier> carriers;
  for (int i = 0; i < roster_.SlotCount(); ++i) {
    if (roster_.slots().Present(i)) {
      if (auto m = roster_.slots()[i]->member.load())
        carriers.push_back({m, i, false});
    }
    if (auto r = roster_.slots()[i]->replacement.load()) {
      carriers.push_back({r, i, true});
    }
  }
  return carriers;
}

std::vector<absl::Status> MetaHost::WriteDurablyOn(
    std::span<const Carrier> carriers, const void* buf, size_t len,
    uint64_t raw) {
  std::vector<absl::Status> statuses(carriers.size());
  std::vector<std::function<void()>> tasks;
  tasks.reserve(carriers.size());
  for (size_t i = 0; i < carriers.size(); ++i) {
    tasks.emplace_back([&, i] {
      statuses[i] = WriteDurably(*carriers[i].member, buf, len, raw);
    });
  }
  engine_.io().RunTogether(tasks);
  return statuses;
}

absl::Status MetaHost::FlushAllSlots() {
  return engine_.writer().FlushSlots(
      std::vector<bool>(roster_.SlotCount(), true));
}

void MetaHost::BitmapCarrierFailed(const Carrier& c, const std::string& why) {
  if (c.replacement) {
    const Applied a = faults_.ApplyEdit(edit::DropReplacement{
        c.slot, c.member, absl::InternalError(why), /*report=*/true,
        edit::DropReplacement::kIfDropped});
    if (a.outcome != Applied::kRefused) {
      faults_.RecordBackgroundError(
          a.status,
          absl::StrFormat("the loss of slot %d's replacement", c.slot));
    }
    return;
  }
  // Only while it still holds the slot (the roster checks under its mutex).
  faults_.RecordBackgroundError(
      faults_.FailSlot(c.slot, "bitmap write failed: " + why, c.member.get()),
      absl::StrFormat("the failure of slot %d", c.slot));
}

std::vector<std::string> MetaHost::MemberNames() const {
  std::vector<std::string> names;
  for (const auto& slot : roster_.slots()) {
    if (auto m = slot->member.load()) names.push_back(m->Name());
    if (auto r = slot->replacement.load()) names.push_back(r->Name());
  }
  for (const Spare& sp : roster_.Spares()) names.push_back(sp.member->Name());
  return names;
}

uint64_t MetaHost::DirtyResyncSectors() const {
  // Writes since assembly may have torn stripes anywhere: dirty from the
  // start. Else only resync has written: stripes below its front are in
  // sync.
  if (state_.wrote_since_open()) return 0;
  return resync_front_.load() * shapes_.current().geo.chunk_bytes() / 512;
}

void MetaHost::WriteBitmapEvents(uint64_t events) {
  if (bitmap_.intent() == nullptr) return;
  absl::Status bs = bitmap_.intent()->SetEvents(events);
  if (!bs.ok()) {
    reporter_.Log(
        LogLevel::kError,
        absl::StrFormat("bitmap: writing events %d: %s", events, bs.message()));
  }
}

std::optional<BitmapSuper> MetaHost::BitmapHeader() const {
  if (bitmap_.intent() == nullptr) return std::nullopt;
  return bitmap_.intent()->super();
}

}  // namespace uraid
