// SPDX-License-Identifier: MIT
#include "stripe/survivor_cache.h"

#include <algorithm>
#include <cstring>

namespace uraid {

void SurvivorCache::Put(uint64_t shape, uint64_t stripe,
                        uint64_t writes_started, std::vector<Rows> rows) {
  uint64_t bytes = 0;
  for (const Rows& r : rows) bytes += r.data->size();
  MutexLock lock(&mu_);
  // Stale entries go (they would serve nothing again).
  // (The lambda runs under mu_, which the analysis cannot see.)
  std::erase_if(entries_, [&](const Entry& e) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (e.tag == writes_started) return false;
    for (const Rows& r : e.rows) bytes_ -= r.data->size();
    return true;
  });
  if (bytes == 0 || bytes > kMaxBytes) {
    CountLocked();
    return;
  }
  // Rows of the same stripe put since the same write count are as current
  // as the new ones: they join them. Requests smaller than a chunk each put
  // their own rows of a stripe, and the one whose chunk is lost needs rows
  // another request fetched several requests before it; replacing the
  // entry dropped those (measured: 3 members, 1 MiB chunks, 64 KiB
  // sequential reads, 1.33 member bytes read per byte delivered).
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) {
    return e.shape == shape && e.stripe == stripe;
  });
  Entry e = it != entries_.end() ? std::move(*it)
                                 : Entry{shape, stripe, writes_started, {}};
  if (it != entries_.end()) entries_.erase(it);
  for (Rows& r : rows) e.rows.push_back(std::move(r));
  bytes_ += bytes;
  // The stripe is the newest: it goes last (oldest first out).
  entries_.push_back(std::move(e));
  while (entries_.size() > kMaxEntries || bytes_ > kMaxBytes) {
    for (const Rows& r : entries_.front().rows) bytes_ -= r.data->size();
    entries_.pop_front();
  }
  CountLocked();
}

bool SurvivorCache::Get(uint64_t shape, uint64_t stripe,
                        uint64_t writes_started, int slot, uint64_t x,
                        uint64_t len, uint8_t* dst) {
  return Find(shape, stripe, writes_started, slot, x, len, dst) == Lookup::kHit;
}

SurvivorCache::Lookup SurvivorCache::Find(uint64_t shape, uint64_t stripe,
                                          uint64_t writes_started, int slot,
                                          uint64_t x, uint64_t len,
                                          uint8_t* dst, uint64_t* claim,
                                          Held* held) {
  if (claim != nullptr) *claim = 0;
  Held got;
  {
    MutexLock lock(&mu_);
    if (!TakeLocked(shape, stripe, writes_started, slot, x, len, &got)) {
      if (ClaimedLocked(shape, stripe, slot, x, len)) return Lookup::kClaimed;
      if (claim != nullptr) {
        *claim = next_ticket_++;
        claims_.push_back(Claimed{*claim, shape, stripe, slot, x, len});
        CountLocked();
      }
      return Lookup::kMiss;
    }
  }
  if (held != nullptr) {
    *held = std::move(got);
  } else {
    std::memcpy(dst, got.data, len);
  }
  return Lookup::kHit;
}

void SurvivorCache::Release(uint64_t ticket) {
  // Waiters' conditions are evaluated by the mutex on unlock.
  MutexLock lock(&mu_);
  std::erase_if(claims_, [&](const Claimed& c) { return c.ticket == ticket; });
  CountLocked();
}

void SurvivorCache::AwaitUnclaimed(uint64_t shape, uint64_t stripe, int slot,
                                   uint64_t x, uint64_t len) {
  MutexLock lock(&mu_);
  // Evaluated with mu_ held (Await's contract).
  auto unclaimed = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !ClaimedLocked(shape, stripe, slot, x, len);
  };
  mu_.Await(Condition(&unclaimed));
}

bool SurvivorCache::TakeLocked(uint64_t shape, uint64_t stripe,
                               uint64_t writes_started, int slot, uint64_t x,
                               uint64_t len, Held* out) {
  for (Entry& e : entries_) {
    if (e.shape != shape || e.stripe != stripe) continue;
    if (e.tag != writes_started) return false;
    for (auto r = e.rows.begin(); r != e.rows.end(); ++r) {
      if (r->slot != slot || x < r->x || r->x + r->data->size() < x + len) {
        continue;
      }
      out->data = r->data->data() + (x - r->x);
      out->rows = r->data;
      r->taken += len;
      if (r->taken >= uint64_t{r->uses} * r->data->size()) {
        // Every reader that wanted the rows has had them (the last one
        // holds them until it has copied them).
        bytes_ -= r->data->size();
        e.rows.erase(r);
        if (e.rows.empty()) {
          std::erase_if(entries_,
                        [](const Entry& en) { return en.rows.empty(); });
          CountLocked();
        }
      }
      return true;
    }
    return false;
  }
  return false;
}

bool SurvivorCache::ClaimedLocked(uint64_t shape, uint64_t stripe, int slot,
                                  uint64_t x, uint64_t len) const {
  return std::any_of(claims_.begin(), claims_.end(), [&](const Claimed& c) {
    return c.shape == shape && c.stripe == stripe && c.slot == slot &&
           c.x <= x && x + len <= c.x + c.len;
  });
}

void SurvivorCache::CountLocked() {
  count_.store(entries_.size() + claims_.size(), std::memory_order_relaxed);
}

}  // namespace uraid
