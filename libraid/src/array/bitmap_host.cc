// SPDX-License-Identifier: MIT
// The array as its write-intent bitmap's host (meta/array_bitmap.h): which
// members carry the bitmap, and what a failed bitmap write does to them.

#include "absl/strings/str_format.h"
#include "array/array_impl.h"

namespace uraid {

std::vector<BitmapHost::Carrier> ArrayImpl::BitmapCarriers() const {
  std::vector<Carrier> carriers;
  for (int i = 0; i < SlotCount(); ++i) {
    if (slots_.Present(i)) {
      if (auto m = slots_[i]->member.load()) carriers.push_back({m, i, false});
    }
    if (auto r = slots_[i]->replacement.load()) {
      carriers.push_back({r, i, true});
    }
  }
  return carriers;
}

std::vector<absl::Status> ArrayImpl::WriteDurablyOn(
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
  io_.RunTogether(tasks);
  return statuses;
}

absl::Status ArrayImpl::FlushAllSlots() {
  return writer_.FlushSlots(std::vector<bool>(SlotCount(), true));
}

void ArrayImpl::BitmapCarrierFailed(const Carrier& c, const std::string& why) {
  if (c.replacement) {
    const Applied a = ApplyEdit(edit::DropReplacement{
        c.slot, c.member, absl::InternalError(why), /*report=*/true,
        edit::DropReplacement::kIfDropped});
    if (a.outcome != Applied::kRefused) {
      RecordBackgroundError(
          a.status,
          absl::StrFormat("the loss of slot %d's replacement", c.slot));
    }
    return;
  }
  // Only while it still holds the slot (the roster checks under its mutex).
  RecordBackgroundError(
      FailSlot(c.slot, "bitmap write failed: " + why, c.member.get()),
      absl::StrFormat("the failure of slot %d", c.slot));
}

void ArrayImpl::UpdateBitmapDegraded() {
  bitmap_.SetDegraded(slots_.Gone() > 0);
}

std::vector<std::string> ArrayImpl::MemberNames() const {
  std::vector<std::string> names;
  for (const auto& slot : slots_) {
    if (auto m = slot->member.load()) names.push_back(m->Name());
    if (auto r = slot->replacement.load()) names.push_back(r->Name());
  }
  for (const Spare& sp : roster_.Spares()) names.push_back(sp.member->Name());
  return names;
}

}  // namespace uraid
