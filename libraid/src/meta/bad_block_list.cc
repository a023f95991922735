// SPDX-License-Identifier: MIT
// One member's bad-block list in memory (bad_block_list.h).
#include "meta/bad_block_list.h"

#include <algorithm>
#include <utility>

namespace uraid {

void BadBlockList::Normalize() {
  std::erase_if(blocks_, [](const BadBlock& b) { return b.sectors == 0; });
  std::sort(
      blocks_.begin(), blocks_.end(),
      [](const BadBlock& x, const BadBlock& y) { return x.sector < y.sector; });
  std::vector<BadBlock> merged;
  for (const BadBlock& b : blocks_) {
    if (!merged.empty() &&
        merged.back().sector + merged.back().sectors >= b.sector) {
      BadBlock& last = merged.back();
      last.sectors =
          std::max(last.sector + last.sectors, b.sector + b.sectors) -
          last.sector;
    } else {
      merged.push_back(b);
    }
  }
  blocks_ = std::move(merged);
  count_.store(blocks_.size(), std::memory_order_release);
}

uint64_t BadBlockList::sectors() const {
  MutexLock lock(&mu_);
  uint64_t n = 0;
  for (const BadBlock& b : blocks_) n += b.sectors;
  return n;
}

bool BadBlockList::Overlaps(uint64_t sector, uint64_t sectors) const {
  if (empty() || sectors == 0) return false;
  MutexLock lock(&mu_);
  // The first entry ending after `sector`.
  auto it = std::upper_bound(
      blocks_.begin(), blocks_.end(), sector,
      [](uint64_t s, const BadBlock& b) { return s < b.sector + b.sectors; });
  return it != blocks_.end() && it->sector < sector + sectors;
}

std::vector<BadBlock> BadBlockList::Find(uint64_t sector,
                                         uint64_t sectors) const {
  std::vector<BadBlock> out;
  if (empty() || sectors == 0) return out;
  MutexLock lock(&mu_);
  for (const BadBlock& b : blocks_) {
    if (b.sector >= sector + sectors) break;
    if (b.sector + b.sectors > sector) out.push_back(b);
  }
  return out;
}

bool BadBlockList::Add(uint64_t sector, uint64_t sectors) {
  if (sectors == 0) return false;
  MutexLock lock(&mu_);
  for (const BadBlock& b : blocks_) {
    if (b.sector <= sector && sector + sectors <= b.sector + b.sectors) {
      return false;
    }
  }
  blocks_.push_back(BadBlock{sector, sectors});
  Normalize();
  return true;
}

bool BadBlockList::Clear(uint64_t sector, uint64_t sectors) {
  if (empty() || sectors == 0) return false;
  MutexLock lock(&mu_);
  const uint64_t end = sector + sectors;
  bool changed = false;
  std::vector<BadBlock> out;
  for (const BadBlock& b : blocks_) {
    const uint64_t bend = b.sector + b.sectors;
    if (bend <= sector || b.sector >= end) {
      out.push_back(b);
      continue;
    }
    changed = true;
    if (b.sector < sector) out.push_back(BadBlock{b.sector, sector - b.sector});
    if (bend > end) out.push_back(BadBlock{end, bend - end});
  }
  if (changed) {
    blocks_ = std::move(out);
    Normalize();
  }
  return changed;
}

void BadBlockList::Reset(std::vector<BadBlock> blocks) {
  MutexLock lock(&mu_);
  blocks_ = std::move(blocks);
  Normalize();
}

std::vector<BadBlock> BadBlockList::Snapshot() const {
  MutexLock lock(&mu_);
  return blocks_;
}

}  // namespace uraid
