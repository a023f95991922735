// SPDX-License-Identifier: MIT
#include "stripe/stripe_cache.h"

#include <algorithm>

namespace uraid {

void RangeSet::Add(uint64_t start, uint64_t end) {
  if (start >= end) return;
  // Merge with every range that overlaps or touches [start, end).
  auto it = ranges_.upper_bound(start);
  if (it != ranges_.begin()) {
    auto prev = std::prev(it);
    if (prev->second >= start) it = prev;
  }
  while (it != ranges_.end() && it->first <= end) {
    start = std::min(start, it->first);
    end = std::max(end, it->second);
    it = ranges_.erase(it);
  }
  ranges_.emplace(start, end);
}

bool RangeSet::Covers(uint64_t size) const {
  return ranges_.size() == 1 && ranges_.begin()->first == 0 &&
         ranges_.begin()->second >= size;
}

bool RangeSet::CoversWith(uint64_t start, uint64_t end, uint64_t size) const {
  const auto gap_inside = [&](uint64_t lo, uint64_t hi) {
    return lo >= hi || (start <= lo && hi <= end);
  };
  uint64_t pos = 0;
  for (const auto& [s, e] : ranges_) {
    if (s >= size) break;
    if (!gap_inside(pos, s)) return false;
    pos = std::max(pos, e);
  }
  return gap_inside(pos, size);
}

bool StripeCache::MayContain(uint64_t stripe) const {
  if (entries_.load(std::memory_order_acquire) == 0) return false;
  MutexLock lock(&mu_);
  return map_.contains(stripe);
}

StripeCache::Entry* StripeCache::Find(uint64_t stripe) {
  MutexLock lock(&mu_);
  auto it = map_.find(stripe);
  return it == map_.end() ? nullptr : it->second.get();
}

StripeCache::Entry* StripeCache::Create(uint64_t stripe, int64_t now_ns,
                                        bool held) {
  // Reserve the entry's room first: concurrent creators (each holding its
  // own stripe's lock) cannot all pass the check and then all insert.
  const uint64_t sb = stripe_bytes_.load();
  size_t n = entries_.load(std::memory_order_relaxed);
  do {
    if ((n + 1) * sb > capacity_.load()) return nullptr;
  } while (
      !entries_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel));
  // Allocate outside the index lock; only this stripe's lock holder can be
  // here for `stripe`, so nobody else inserts it meanwhile.
  auto e = std::make_unique<Entry>();
  e->stripe = stripe;
  e->data = TakeBuffer();
  e->since_ns = now_ns;
  if (held) e->held = std::make_shared<absl::Notification>();
  Entry* raw = e.get();
  MutexLock lock(&mu_);
  map_.emplace(stripe, std::move(e));
  return raw;
}

void StripeCache::Erase(uint64_t stripe) {
  std::unique_ptr<Entry> victim;  // freed outside the lock
  ReleasableMutexLock lock(&mu_);
  auto it = map_.find(stripe);
  if (it == map_.end()) return;
  victim = std::move(it->second);
  map_.erase(it);
  entries_.fetch_sub(1, std::memory_order_release);
  lock.Release();
  if (victim->held != nullptr) victim->held->Notify();
  ReturnBuffer(std::move(victim->data));
}

AlignedBuffer StripeCache::TakeBuffer() {
  {
    MutexLock lock(&free_mu_);
    if (!free_.empty()) {
      AlignedBuffer b = std::move(free_.back());
      free_.pop_back();
      return b;
    }
  }
  return AlignedBuffer(stripe_bytes_.load());
}

void StripeCache::ReturnBuffer(AlignedBuffer b) {
  MutexLock lock(&free_mu_);
  // Keep what the capacity allows beside the live entries.
  if ((free_.size() + entries_.load()) * stripe_bytes_.load() <
      capacity_.load()) {
    free_.push_back(std::move(b));
  }
}

std::vector<uint64_t> StripeCache::Oldest(size_t max,
                                          std::optional<int64_t> older_than_ns,
                                          bool unheld_only) {
  std::vector<std::pair<int64_t, uint64_t>> all;
  {
    MutexLock lock(&mu_);
    for (const auto& [stripe, e] : map_) {
      if (unheld_only && e->held != nullptr) continue;
      if (!older_than_ns || e->since_ns < *older_than_ns) {
        all.emplace_back(e->since_ns, stripe);
      }
    }
  }
  size_t n = std::min(max, all.size());
  std::partial_sort(all.begin(), all.begin() + n, all.end());
  std::vector<uint64_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(all[i].second);
  return out;
}

void StripeCache::ResetStripeBytes(uint64_t stripe_bytes) {
  MutexLock lock(&free_mu_);
  free_.clear();
  stripe_bytes_.store(stripe_bytes);
}

}  // namespace uraid
