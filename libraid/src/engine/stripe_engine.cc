// SPDX-License-Identifier: MIT
// StripeEngine (stripe_engine.h): the cache's background writeback pass.

#include "engine/stripe_engine.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"

namespace uraid {

void StripeEngine::WritebackAged() {
  // Aged entries first, then the oldest while the cache is over 3/4 full;
  // every entry once one more member failure would lose them (a member
  // failed since they were gathered: StripeWriter::CacheSafe), except
  // those whose writers are held: they are not acknowledged yet, and
  // their writers put them out within StripeWriter::kHoldNs.
  const bool safe = writer_.CacheSafe();
  const int64_t deadline =
      safe ? clock_.NowNs() - max_age_ns_ : std::numeric_limits<int64_t>::max();
  for (uint64_t stripe :
       cache_.Oldest(SIZE_MAX, deadline, /*unheld_only=*/true)) {
    absl::Status st = writer_.WritebackStripe(stripe, /*unheld_only=*/true);
    if (!st.ok()) {
      reporter_.Log(LogLevel::kError,
                    absl::StrFormat("cache writeback of stripe %d failed: %s",
                                    stripe, st.message()));
      break;
    }
  }
  while (cache_.bytes() * 4 > cache_.capacity() * 3 && cache_.size() > 0) {
    std::vector<uint64_t> v = cache_.Oldest(1, std::nullopt);
    if (v.empty() || !writer_.WritebackStripe(v[0]).ok()) break;
  }
}

}  // namespace uraid
