// SPDX-License-Identifier: MIT
// Array::Extents: which logical ranges are holes, from the members' own
// hole maps mapped through the layout. A hole reported wrongly would make
// a copying client (nbdcopy, qemu-img convert) skip real data, so every
// doubt answers "data".

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "array/array_impl.h"
#include "base/status_macros.h"
#include "uraid/array.h"

namespace uraid {
namespace {

// Chunk pieces one call looks at before returning what it has: bounds the
// member probes per NBD block-status request (the client asks again).
constexpr uint64_t kMaxPiecesPerCall = 16384;

// The last probe of one member: [probe, next) has no data. Probes are
// monotonic within a call (pieces go forward), so one interval per member
// saves most of them.
struct HoleMemo {
  uint64_t probe = 1;  // empty: probe > next
  uint64_t next = 0;
};

}  // namespace

absl::StatusOr<std::vector<Extent>> ArrayImpl::Extents(uint64_t offset,
                                                       uint64_t len) {
  RETURN_IF_ERROR(CheckRange(CurrentShape(), "extents", len, offset));
  std::vector<Extent> out;
  const auto add = [&out](uint64_t off, uint64_t n, bool zero) {
    if (!out.empty() && out.back().zero == zero) {
      out.back().length += n;
    } else {
      out.push_back(Extent{off, n, zero});
    }
  };
  if (len == 0) return out;
  if (jobs_.reshape().running() || roster_.failed()) {
    add(offset, len, false);
    return out;
  }
  // Outside a reshape (during one, everything is reported as data) the
  // current shape is the only one. Loaded after the check: a reshape that
  // has just ended made its shape current before it cleared reshaping().
  const Shape& sh = CurrentShape();
  const uint64_t C = sh.geo.chunk_bytes();
  const uint64_t base = sh.data_offset;
  std::vector<HoleMemo> memo(slots_.size());
  // Whether member `slot` has no data in [at, at + n) (member data offsets).
  const auto hole = [&](int slot, uint64_t at, uint64_t n) {
    HoleMemo& m = memo[slot];
    if (!(m.probe <= at && at < m.next)) {
      std::shared_ptr<Member> member = slots_[slot]->member.load();
      if (member == nullptr) return false;
      absl::StatusOr<uint64_t> d = member->NextDataOffset(base + at);
      if (!d.ok() || *d < base + at) return false;
      m.probe = at;
      m.next = *d - base;
    }
    return at + n <= m.next;
  };
  uint64_t pos = offset;
  const uint64_t end = offset + len;
  for (uint64_t pieces = 0; pos < end && pieces < kMaxPiecesPerCall; ++pieces) {
    const Location loc = sh.geo.Map(pos);
    const uint64_t n = std::min(end - pos, C - loc.chunk_offset);
    bool zero = false;
    if (!engine_.cache().MayContain(loc.stripe)) {
      if (slots_.UsableAt(loc.disk, loc.stripe)) {
        zero = hole(loc.disk, loc.member_offset, n);
      } else {
        // Rebuilt from the others: zeros only if all of them are holes.
        zero = true;
        for (int i = 0; i < sh.geo.raid_disks() && zero; ++i) {
          if (i == loc.disk) continue;
          zero =
              slots_.UsableAt(i, loc.stripe) && hole(i, loc.member_offset, n);
        }
      }
    }
    add(pos, n, zero);
    pos += n;
  }
  // A reshape that began meanwhile may have moved what was looked at.
  if (jobs_.reshape().running()) {
    out.clear();
    add(offset, len, false);
  }
  return out;
}

absl::StatusOr<std::vector<Extent>> Array::Extents(uint64_t offset,
                                                   uint64_t len) {
  return impl_->Extents(offset, len);
}

}  // namespace uraid
