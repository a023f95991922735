// SPDX-License-Identifier: MIT
// md's RAID5 <-> RAID6 takeover layouts (takeover.h).
#include "format/takeover.h"

#include <string>

#include "absl/strings/str_format.h"

namespace uraid {

Layout Raid6WithQLast(Layout layout) {
  switch (layout) {
    case Layout::kLeftAsymmetric:
    case Layout::kLeftAsymmetric6:
      return Layout::kLeftAsymmetric6;
    case Layout::kRightAsymmetric:
    case Layout::kRightAsymmetric6:
      return Layout::kRightAsymmetric6;
    case Layout::kRightSymmetric:
    case Layout::kRightSymmetric6:
      return Layout::kRightSymmetric6;
    case Layout::kParityFirst:
    case Layout::kParityFirst6:
      return Layout::kParityFirst6;
    case Layout::kParityLast:
      // md's RAID6 parity-last (ALGORITHM_PARITY_N) already has P on the
      // next-to-last disk and Q on the last.
      return Layout::kParityLast;
    default:
      return Layout::kLeftSymmetric6;
  }
}

Layout Raid6TakeoverLayout(const Geometry& from) {
  return from.level() == 4 ? Layout::kParityLast
                           : Raid6WithQLast(from.layout());
}

absl::StatusOr<Layout> Raid5TakeoverLayout(const Geometry& from) {
  switch (from.layout()) {
    case Layout::kLeftAsymmetric6:
      return Layout::kLeftAsymmetric;
    case Layout::kRightAsymmetric6:
      return Layout::kRightAsymmetric;
    case Layout::kLeftSymmetric6:
      return Layout::kLeftSymmetric;
    case Layout::kRightSymmetric6:
      return Layout::kRightSymmetric;
    case Layout::kParityFirst6:
      return Layout::kParityFirst;
    case Layout::kParityLast:
      return Layout::kParityLast;
    default:
      return absl::InvalidArgumentError(absl::StrFormat(
          "a RAID6 in layout %s keeps Q on every disk in turn, so it has no "
          "disk to drop: restripe it to %s first (grow --layout %s), then "
          "change the level",
          std::string(LayoutName(from.layout())),
          std::string(LayoutName(Raid6WithQLast(from.layout()))),
          std::string(LayoutName(Raid6WithQLast(from.layout())))));
  }
}

}  // namespace uraid
