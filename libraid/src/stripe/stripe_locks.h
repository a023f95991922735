// SPDX-License-Identifier: MIT
// Internal: exclusive locks on individual stripes (by stripe number), so
// that requests on different stripes never wait for each other and the
// array is never locked as a whole on the data path.
//
// Deadlock rule: a thread holds at most one stripe lock at a time, or takes
// several in ascending stripe order. TryLock never waits, so it may be
// used in any order.
//
// Thread-safe.

#ifndef URAID_SRC_STRIPE_LOCKS_H_
#define URAID_SRC_STRIPE_LOCKS_H_

#include <array>
#include <cstdint>

#include "absl/container/flat_hash_set.h"
#include "base/sync.h"

namespace uraid {

class StripeLocks {
 public:
  void Lock(uint64_t stripe);
  // Takes the lock if no one holds it; false (and nothing held) otherwise.
  bool TryLock(uint64_t stripe);
  void Unlock(uint64_t stripe);

 private:
  // Sharded so that unrelated stripes do not contend on one mutex.
  struct Shard {
    Mutex mu;
    absl::flat_hash_set<uint64_t> held ABSL_GUARDED_BY(mu);
  };
  static constexpr int kShards = 32;
  Shard& ShardFor(uint64_t stripe) { return shards_[stripe % kShards]; }
  std::array<Shard, kShards> shards_;
};

// RAII holder for one stripe lock.
class StripeLock {
 public:
  StripeLock(StripeLocks* locks, uint64_t stripe)
      : locks_(locks), stripe_(stripe) {
    locks_->Lock(stripe_);
  }
  ~StripeLock() { locks_->Unlock(stripe_); }
  StripeLock(const StripeLock&) = delete;
  StripeLock& operator=(const StripeLock&) = delete;

 private:
  StripeLocks* locks_;
  uint64_t stripe_;
};

}  // namespace uraid

#endif  // URAID_SRC_STRIPE_LOCKS_H_
