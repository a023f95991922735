// SPDX-License-Identifier: MIT
// Internal: the array's side of md's write-intent bitmap: where the area
// lives (on every member, or in a file), loading it at assembly, writing a
// new one at create, the persist callback that puts bitmap pages on the
// members, copies for members that join, and the lazy clear ("daemon")
// tick. The protocol itself (which bits, when) is WriteIntentBitmap's
// (uraid/bitmap.h); the array reaches its members and its failure
// handling only through BitmapHost.
//
// Every slot member holds an identical copy of the area (md writes the
// bitmap to every in-sync and recovering device; spares get a copy when
// they join so that any member can be read back).
//
// An external bitmap (md's --bitmap FILE) holds the same area in a file
// instead: header at byte 0, bits right after it. The superblocks do not
// mention it, the members carry no copy, and it is named again at every
// assembly. Everything above the persist callback (group commit, lazy
// clear, resync from the bits after a crash) is the same code.

#ifndef URAID_SRC_META_ARRAY_BITMAP_H_
#define URAID_SRC_META_ARRAY_BITMAP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/sync.h"
#include "uraid/array.h"
#include "uraid/bitmap.h"
#include "uraid/clock.h"
#include "uraid/events.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {

// What ArrayBitmap needs of its array (array/meta_host.h).
class BitmapHost {
 public:
  // A member that carries the internal bitmap.
  struct Carrier {
    std::shared_ptr<Member> member;
    int slot = -1;
    bool replacement = false;  // the slot's replace target
  };
  // Each slot's member while it takes writes, and each replace target.
  virtual std::vector<Carrier> BitmapCarriers() const = 0;
  // Writes and flushes `len` bytes at raw member offset `raw` on every
  // carrier at once (each call retried once, as data I/O is), through the
  // array's member-I/O executor; the status of each, in order.
  virtual std::vector<absl::Status> WriteDurablyOn(
      std::span<const Carrier> carriers, const void* buf, size_t len,
      uint64_t raw) = 0;
  // Makes every slot member's data durable (before bits are cleared).
  virtual absl::Status FlushAllSlots() = 0;
  // `c` failed a bitmap write: fail its slot (or end the replace).
  // Called by HandOverFailures, never from inside a bitmap call: failing
  // a slot writes superblocks, and they write the bitmap's header.
  virtual void BitmapCarrierFailed(const Carrier& c,
                                   const std::string& why) = 0;
  // Names of every member of the array (a bitmap file must be none).
  virtual std::vector<std::string> MemberNames() const = 0;
  // Event `e` to the listeners and `line` to the log (the reporter).
  virtual void Report(LogLevel level, Event e,
                      const std::string& line) const = 0;
  virtual void Log(LogLevel level, const std::string& line) const = 0;

 protected:
  ~BitmapHost() = default;
};

// Thread-safety: Attach/Init run once, before any I/O and before other
// threads exist; after that every method may be called from any thread
// (the WriteIntentBitmap is thread-safe; the failure list has its own
// lock; Tick is called by one thread, the array's writeback loop).
class ArrayBitmap {
 public:
  // `host` outlives this. `read_only`: a loaded bitmap keeps only its
  // header (for Info); nothing is ever written. `clock`: the array's
  // (outlives this); daemon_sleep and the tick cadence are measured on
  // it, so a test on a simulated clock sees bits cleared without waiting.
  ArrayBitmap(BitmapHost* host, bool read_only, Clock& clock);
  ArrayBitmap(const ArrayBitmap&) = delete;
  ArrayBitmap& operator=(const ArrayBitmap&) = delete;

  // Assembly: attaches the bitmap of the array whose freshest superblock
  // is `sb`: the internal one (read from `internal_source`, the freshest
  // in-sync member) when sb has the bitmap feature, else the external
  // `bitmap_file` when one is given, else none (logged when the array is
  // dirty: the resync then covers everything). Refuses a bitmap file for
  // an array with an internal bitmap. `data_offset`: where the members'
  // data starts (the area must end before it).
  absl::Status Attach(Member* internal_source, const Superblock& sb,
                      const std::string& bitmap_file, uint64_t data_offset);
  // Create: writes a new area for the array of `sb` (uuid, events, size,
  // bitmap_offset) to every carrier, or, with a non-empty `file`, to a new
  // bitmap file there (see CreateOptions::bitmap_file; `force` overwrites
  // an existing one). Every region dirty when `all_dirty`.
  absl::Status Init(const Superblock& sb, uint64_t data_offset,
                    uint64_t chunk_bytes, bool all_dirty,
                    const std::string& file, bool force);
  // Writes the whole in-memory area to `member` (a member joining); a
  // no-op without a bitmap or with an external one.
  absl::Status CopyTo(Member& member);

  // The protocol, or null: no bitmap, or a read-only array.
  WriteIntentBitmap* intent() const { return bitmap_.get(); }
  // md's write-intent rule before data is written to member bytes
  // [offset, offset + len): the region's bit durable (intent()->StartWrite)
  // and any carrier that failed to persist it handed over
  // (HandOverFailures), in one call so that no writer forgets the second
  // half. OK without a bitmap. One that succeeds is followed by
  // intent()->EndWrite.
  absl::Status StartWrite(uint64_t offset, uint64_t len);
  // The loaded bitmap was stale (older than the superblocks): every
  // region is dirty and the whole array needs the resync.
  bool stale_at_load() const { return stale_at_load_; }
  // A bitmap is known: attached, or (read-only) its header loaded.
  bool known() const { return super_.has_value(); }
  // First member byte past the internal area; 0 when there is none.
  uint64_t AreaEnd() const;
  // Info's bitmap part (present = false without a bitmap).
  BitmapInfo Info() const;

  // Bits are kept (not cleared) while the array is degraded (md's rule).
  void SetDegraded(bool degraded);
  // The lazy clear, at most once a second of the array's clock; then
  // HandOverFailures.
  void Tick() ABSL_LOCKS_EXCLUDED(tick_mu_);
  // At a clean stop: clears every bit not needed (md's flush at stop); a
  // no-op while frozen.
  void ClearAtStop() ABSL_LOCKS_EXCLUDED(tick_mu_);
  // The read-only switch (`frozen`): clears every bit not needed, as at a
  // stop, then writes nothing (Tick and ClearAtStop do nothing) until
  // unfrozen. REQUIRES: no write in flight and none starting while frozen.
  void Freeze(bool frozen) ABSL_LOCKS_EXCLUDED(tick_mu_);
  // Hands carriers that failed a bitmap write to the host. Call after
  // every bitmap call that may persist, before data is written under the
  // bits it set: cheap when nothing failed.
  void HandOverFailures();

 private:
  absl::Status Load(Member& member, const Superblock& sb, uint64_t data_offset);
  absl::Status LoadFile(const std::string& path, const Superblock& sb);
  // The tail both loads share: keeps the checked header `bs` and `bits`,
  // read from `where` (named in the log), and unless read-only builds the
  // in-memory bitmap (all dirty when `verdict` is kStale).
  absl::Status Install(const BitmapSuper& bs, std::span<const uint8_t> bits,
                       BitmapVerdict verdict, const Superblock& sb,
                       const std::string& where);
  absl::Status Create(const BitmapSuper& bs, std::span<const uint8_t> bits,
                      bool array_clean);
  // The persist callback: `bytes` at `offset` of the area, onto every
  // carrier (or the file), each write flushed.
  absl::Status Persist(uint64_t offset, std::span<const uint8_t> bytes);
  // Clears every bit not needed: regions idle "long enough" at once.
  void ClearIdleLocked(const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);

  BitmapHost* const host_;
  const bool read_only_;
  // Set once by Attach/Init; null without a bitmap and on read-only
  // arrays (which keep super_ for Info only).
  std::unique_ptr<WriteIntentBitmap> bitmap_;
  std::optional<BitmapSuper> super_;
  uint64_t area_offset_ = 0;  // raw member bytes; 0 in a file
  uint64_t dirty_at_load_ = 0;
  bool stale_at_load_ = false;
  // The external bitmap file (BitmapMode::kFile), open and locked for the
  // array's life; null for an internal bitmap or none.
  std::unique_ptr<Member> file_;
  // Carriers whose bitmap write failed, not yet handed to the host.
  std::atomic<bool> has_failures_{false};
  Mutex failures_mu_;  // leaf
  std::vector<std::pair<BitmapHost::Carrier, std::string>> failures_
      ABSL_GUARDED_BY(failures_mu_);
  Clock& clock_;
  // The last Tick that looked at the bits (clock_'s ns); only the Tick
  // thread touches it. Empty before the first.
  std::optional<int64_t> last_tick_ns_;
  // Added to clock_ for the bitmap: ClearIdleLocked moves it on by
  // daemon_sleep for its one pass, so that every idle region's bit is
  // cleared at once.
  std::atomic<int64_t> clock_skew_ns_{0};
  // Serialises the clearing passes (Tick, ClearAtStop, Freeze) with the
  // read-only freeze: once Freeze(true) returns, no pass is running and
  // none writes until Freeze(false).
  Mutex tick_mu_;
  bool frozen_ ABSL_GUARDED_BY(tick_mu_) = false;
};

}  // namespace uraid

#endif  // URAID_SRC_META_ARRAY_BITMAP_H_
