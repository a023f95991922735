// SPDX-License-Identifier: MIT
// The request router of a running reshape (ArrayImpl::RouteDuringReshape,
// entered from Route in array_impl.h once shapes_.reshaping() is set): below
// the reshape's front a request runs in the new shape, at or past it in the old
// one, and a request touching the window being copied waits for it
// (ReshapeGate). The stripe engine (StripeReader, StripeWriter) runs
// unchanged in either shape: each piece is handed the Shape that holds it
// (shape.h), so the old and new shapes' stripe routines run side by side.
// The reshape job itself is jobs/reshape_job.h.

#include <algorithm>
#include <cstdint>

#include "array/array_impl.h"
#include "base/status_macros.h"

namespace uraid {

absl::Status ArrayImpl::Dispatch(ReqKind kind, const Shape* shaped, void* buf,
                                 size_t len, uint64_t offset, bool fua) {
  switch (kind) {
    case ReqKind::kRead:
      return shaped ? engine_.reader().Read(*shaped, buf, len, offset)
                    : Read(buf, len, offset);
    case ReqKind::kWrite:
      return shaped ? engine_.writer().Write(*shaped, buf, len, offset, fua)
                    : Write(buf, len, offset, fua);
    case ReqKind::kTrim:
      return shaped ? engine_.writer().Trim(*shaped, len, offset, fua)
                    : Trim(len, offset, fua);
    case ReqKind::kZero:
      return shaped ? engine_.writer().Zero(*shaped, len, offset, fua)
                    : Zero(len, offset, fua);
  }
  return absl::InternalError("unknown request kind");
}

absl::Status ArrayImpl::RouteDuringReshape(ReqKind kind, void* buf, size_t len,
                                           uint64_t offset, bool fua) {
  ReshapeState& r = *jobs_.reshape().state();
  static constexpr const char* kOps[] = {"read", "write", "trim", "zero"};
  // The exported size is the current shape's: the old one's until the
  // reshape ends (ReshapeJob::Finish makes the new one current first).
  RETURN_IF_ERROR(
      CheckRange(CurrentShape(), kOps[static_cast<int>(kind)], len, offset));
  const uint64_t end = offset + len;
  r.gate.Enter(offset, end);
  if (!shapes_.reshaping()) {
    // Finished while we waited (ReshapeJob::Finish cleared the flag before it
    // opened the gate): the new shape is current now, under its own lock
    // tag, so start over on the plain path.
    r.gate.Leave(offset, end);
    return Dispatch(kind, /*shaped=*/nullptr, buf, len, offset, fua);
  }
  // The front cannot cross [offset, end) while we hold it.
  const uint64_t front = r.front.load();
  struct Part {
    const Shape* shape;
    uint64_t lo, hi;
  };
  Part parts[2] = {{r.to, offset, std::min(end, front)},
                   {r.from, std::max(offset, front), end}};
  absl::Status st;
  for (const Part& p : parts) {
    if (p.lo >= p.hi && !(len == 0 && p.shape == r.from)) continue;
    auto* at = static_cast<uint8_t*>(buf) + (buf ? p.lo - offset : 0);
    const size_t n = p.hi > p.lo ? p.hi - p.lo : 0;
    st = Dispatch(kind, p.shape, at, n, p.lo, fua);
    if (!st.ok()) break;
  }
  r.gate.Leave(offset, end);
  return st;
}

}  // namespace uraid
