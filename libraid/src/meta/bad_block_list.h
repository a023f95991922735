// SPDX-License-Identifier: MIT
// Internal: one member's bad-block list in memory (md's rdev->badblocks):
// the ranges of the member that could not be read or written and are kept
// out of service until a write that covers them succeeds. Ranges are in
// absolute member sectors (512 bytes, from the start of the device), as md
// keeps them and as the on-disk log (uraid/bad_blocks.h) stores them.
//
// The list does no I/O: the array persists it (log first, then the
// superblock's BAD_BLOCKS bit) under its superblock mutex before anything
// relying on an entry is acknowledged.

#ifndef URAID_SRC_META_BAD_BLOCK_LIST_H_
#define URAID_SRC_META_BAD_BLOCK_LIST_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/sync.h"
#include "uraid/bad_blocks.h"

namespace uraid {

// Thread-safe. empty() is lock-free so the healthy data path pays one
// atomic load per slot for a list that has never held an entry.
class BadBlockList {
 public:
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  size_t size() const { return count_.load(std::memory_order_acquire); }
  // Total sectors recorded.
  uint64_t sectors() const;

  // Whether any recorded range overlaps [sector, sector + sectors).
  bool Overlaps(uint64_t sector, uint64_t sectors) const;
  // The recorded ranges overlapping [sector, sector + sectors), whole, in
  // order.
  std::vector<BadBlock> Find(uint64_t sector, uint64_t sectors) const;
  // Adds the range, merged with any it overlaps or touches. Returns false
  // (and changes nothing) when it is already covered.
  bool Add(uint64_t sector, uint64_t sectors);
  // Removes the range from every entry (splitting one it falls inside).
  // Returns whether anything changed.
  bool Clear(uint64_t sector, uint64_t sectors);
  // Replaces the whole list (sorted and merged here).
  void Reset(std::vector<BadBlock> blocks);
  std::vector<BadBlock> Snapshot() const;

  // Whether the superblocks on this member say BAD_BLOCKS as the list
  // needs them to: set by the superblock writer once they are durable
  // (the roster's superblock fan-out), read by the recorder to decide
  // whether a superblock update must follow a log write.
  std::atomic<bool> flag_durable{false};

 private:
  void Normalize() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::vector<BadBlock> blocks_ ABSL_GUARDED_BY(mu_);  // sorted, disjoint
  std::atomic<size_t> count_{0};
};

}  // namespace uraid

#endif  // URAID_SRC_META_BAD_BLOCK_LIST_H_
