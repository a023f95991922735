// SPDX-License-Identifier: MIT
#include "stripe/stripe_locks.h"

#include <utility>

namespace uraid {

void StripeLocks::Lock(uint64_t stripe) {
  Shard& shard = ShardFor(stripe);
  std::pair<Shard*, uint64_t> arg(&shard, stripe);
  shard.mu.LockWhen(Condition(
      +[](std::pair<Shard*, uint64_t>* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !a->first->held.contains(a->second);
      },
      &arg));
  shard.held.insert(stripe);
  shard.mu.Unlock();
}

bool StripeLocks::TryLock(uint64_t stripe) {
  Shard& shard = ShardFor(stripe);
  MutexLock lock(&shard.mu);
  return shard.held.insert(stripe).second;
}

void StripeLocks::Unlock(uint64_t stripe) {
  Shard& shard = ShardFor(stripe);
  MutexLock lock(&shard.mu);
  shard.held.erase(stripe);
}

}  // namespace uraid
