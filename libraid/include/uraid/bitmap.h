// SPDX-License-Identifier: MIT
// File: uraid/bitmap.h
//
// md's write-intent bitmap: the on-disk format (`bitmap_super_t` followed by
// one bit per bitmap chunk) and WriteIntentBitmap, the in-memory bitmap that
// follows md's protocol: a chunk's bit is durable before the first data
// write into it, and is cleared lazily once the chunk has been idle and its
// data is durable. See the md reference §3.
//
// The bitmap area (what md stores at super_offset + bitmap_offset sectors on
// every member, byte 8192 of a 1.2 member by default) is:
//
//   [0, 256)         bitmap_super_t, little-endian
//   [256, ...)       the bits: chunk i at byte 256 + i/8, bit i%8 (LSB
//                    first), one chunk = `chunksize` bytes of each member's
//                    data area, counted from data_offset
//
// Units: chunksize and every "bytes" name are bytes; sync_size and every
// "sectors" name are 512-byte sectors; daemon_sleep is seconds.
//
// This module never reads or writes a member: the codec takes and returns
// bytes, and WriteIntentBitmap writes through a callback the caller supplies
// (which makes the write durable on every member).

#ifndef URAID_BITMAP_H_
#define URAID_BITMAP_H_

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "uraid/export.h"

namespace uraid {

inline constexpr uint32_t kBitmapMagic = 0x6d746962;  // "bitm" as LE u32
// Version 4 is md's normal bitmap, bits little-endian. Version 3 stored the
// bits in host-endian words; on a little-endian host (the only kind uraid
// supports) that is the same byte layout, so 3 is accepted on decode and
// rewritten as 4. 5 (clustered) and 6 (llbitmap) are other formats.
inline constexpr uint32_t kBitmapVersion = 4;
inline constexpr uint32_t kBitmapVersionHostEndian = 3;
inline constexpr size_t kBitmapSuperBytes = 256;
// WriteIntentBitmap writes the area in these units, as md does (see the
// class comment for why).
inline constexpr uint64_t kBitmapPageBytes = 4096;

// `state` bits (md's enum bitmap_state holds bit numbers; these are masks).
inline constexpr uint32_t kBitmapStateStale = 1u << 1;        // BITMAP_STALE
inline constexpr uint32_t kBitmapStateWriteError = 1u << 2;   // WRITE_ERROR
inline constexpr uint32_t kBitmapStateHostEndian = 1u << 15;  // HOSTENDIAN

inline constexpr uint32_t kBitmapMinChunkBytes = 512;
inline constexpr uint32_t kBitmapDefaultChunkBytes = 64u << 20;  // 64 MiB
inline constexpr uint32_t kBitmapDefaultDaemonSleep = 5;         // seconds
// md's COUNTER_MAX: the kernel refuses a larger write_behind.
inline constexpr uint32_t kBitmapMaxWriteBehind = 16383;
// The kernel refuses daemon_sleep 0, and daemon_sleep * HZ beyond
// MAX_SCHEDULE_TIMEOUT. This bound (LONG_MAX of a 32-bit kernel at
// HZ=1000, about 24.8 days) is accepted by every md build.
inline constexpr uint32_t kBitmapMaxDaemonSleep = 2147483;

// bitmap_super_t, field for field (md reference §3.2). Fields are md's.
struct BitmapSuper {
  uint32_t version = kBitmapVersion;
  std::array<uint8_t, 16> uuid{};  // the array's set_uuid
  uint64_t events = 0;             // md events at the last bitmap sb write
  uint64_t events_cleared = 0;     // md events when bits were last cleared
  uint64_t sync_size = 0;          // sectors covered: RAID5 component size
  uint32_t state = 0;              // kBitmapState* bits
  uint32_t chunksize = kBitmapDefaultChunkBytes;      // bytes, power of two
  uint32_t daemon_sleep = kBitmapDefaultDaemonSleep;  // seconds
  uint32_t write_behind = 0;      // RAID1 only; 0 = "Normal" write mode
  uint32_t sectors_reserved = 0;  // space reserved for the area; 0 unknown
  uint32_t nodes = 0;             // md-cluster only
  std::string cluster_name;       // at most 64 bytes; trailing NULs stripped

  bool stale() const { return (state & kBitmapStateStale) != 0; }
};

// Serialises into kBitmapSuperBytes bytes, every field as given (the pad is
// zero). REQUIRES: cluster_name.size() <= 64.
URAID_EXPORT std::vector<uint8_t> EncodeBitmapSuper(const BitmapSuper& sb);

// Parses the first 256 bytes of `bytes` and checks what the kernel checks
// in md_bitmap_read_sb, plus sync_size != 0:
//   InvalidArgument  fewer than 256 bytes
//   DataLoss         bad magic, unknown version, chunksize below 512 or not
//                    a power of two, daemon_sleep 0 or above
//                    kBitmapMaxDaemonSleep, write_behind above 16383,
//                    sync_size 0
//   Unimplemented    version 5 (clustered) or 6 (llbitmap)
// The message names the field and the value seen.
URAID_EXPORT absl::StatusOr<BitmapSuper> DecodeBitmapSuper(
    std::span<const uint8_t> bytes);

// The same field checks as DecodeBitmapSuper, on a struct.
URAID_EXPORT absl::Status CheckBitmapSuper(const BitmapSuper& sb);

// --- Geometry of the area. ---

// Number of bitmap chunks (bits): ceil(sync_size * 512 / chunk_bytes).
// REQUIRES: chunk_bytes is a power of two >= 512.
URAID_EXPORT uint64_t BitmapChunks(uint64_t sync_size_sectors,
                                   uint64_t chunk_bytes);
inline uint64_t BitmapChunks(const BitmapSuper& sb) {
  return BitmapChunks(sb.sync_size, sb.chunksize);
}
// Bytes of the bit array: ceil(chunks / 8).
URAID_EXPORT uint64_t BitmapBitBytes(uint64_t chunks);
// Bytes of the whole area, header included: 256 + BitmapBitBytes(chunks).
URAID_EXPORT uint64_t BitmapAreaBytes(uint64_t chunks);
// The area rounded up to whole 512-byte sectors (what md's last page write
// covers with 512-byte logical blocks), as a count of sectors.
URAID_EXPORT uint64_t BitmapAreaSectors(uint64_t chunks);
// The area rounded up to whole 4 KiB pages (what mdadm writes at create
// time), as a count of pages.
URAID_EXPORT uint64_t BitmapAreaPages(uint64_t chunks);

// The chunk a new bitmap should use: 64 MiB (mdadm's default), doubled
// until the bits for `member_data_bytes` (one member's data size) fit in
// `space_bytes` minus the 256-byte header. mdadm caps the space it
// considers at 128 KiB unless the user picks a chunk; pass
// min(reserved, 128 KiB) to match it. InvalidArgument when even a 2 GiB
// chunk does not fit (or space_bytes <= 256).
URAID_EXPORT absl::StatusOr<uint32_t> DefaultBitmapChunkBytes(
    uint64_t member_data_bytes, uint64_t space_bytes);

// The area mdadm writes for a new bitmap: the header followed by bits all
// set (0xFF, so the kernel's first start treats every chunk as dirty),
// BitmapAreaPages(...) * 4096 bytes long. REQUIRES: CheckBitmapSuper ok.
URAID_EXPORT std::vector<uint8_t> NewBitmapArea(const BitmapSuper& sb);

// Bit `chunk` of a bit array (the bytes after the header).
// REQUIRES: chunk / 8 < bits.size().
inline bool BitmapBit(std::span<const uint8_t> bits, uint64_t chunk) {
  return (bits[chunk / 8] >> (chunk % 8)) & 1;
}
// Set bits among the first `chunks` bits. REQUIRES: bits holds them.
URAID_EXPORT uint64_t CountBitmapDirty(std::span<const uint8_t> bits,
                                       uint64_t chunks);

// --- Matching a bitmap to its array. ---

// How far to trust a bitmap that belongs to the array.
enum class BitmapVerdict {
  // The set bits cover every region that may be inconsistent.
  kCurrent,
  // Out of date (events behind the superblock's) or marked STALE: writes
  // may have happened that it does not record. md prints "bitmap file is
  // out of date -- forcing full recovery" and treats every chunk as dirty;
  // do the same with WriteIntentBitmap::MarkAllDirty before any write.
  kStale,
};

// Checks a decoded bitmap against the array's freshest superblock:
// `array_uuid` its set_uuid, `sb_events` its events, `member_data_sectors`
// its `size` (the component size md's RAID5 sets resync_max_sectors to).
//
// Events: md writes the bitmap superblock *before* the member superblocks,
// so a crash between the two leaves the bitmap exactly one event ahead;
// that bitmap is current (its bits were set before any data write). md
// never leaves it further ahead, so more than one ahead means the bitmap
// comes from some other history (a copied or foreign member): DataLoss.
// Behind means the bitmap missed updates: kStale, as md does.
//
// Errors (the message names the field and both values):
//   FailedPrecondition  uuid differs (the bitmap of another array)
//   DataLoss            sync_size differs from the component size (md
//                       rewrites it silently; we refuse, because the bits
//                       would not describe this geometry), or events more
//                       than one ahead
URAID_EXPORT absl::StatusOr<BitmapVerdict> ValidateBitmapForArray(
    const BitmapSuper& sb, const std::array<uint8_t, 16>& array_uuid,
    uint64_t sb_events, uint64_t member_data_sectors);

// --- The in-memory bitmap. ---

// Writes `bytes` at `offset` bytes from the start of the bitmap area and
// makes them durable on every member holding the bitmap before returning.
// Offsets are multiples of kBitmapPageBytes; lengths are whole pages except
// for the area's last page, which ends at the area's last 512-byte sector.
// At most one call is in flight at a time. Non-OK fails the operation that
// needed the write (the bits stay pending and are retried later); the call
// may have landed in part, so nothing in its range is trusted to be on disk
// until a later call succeeds.
using BitmapPersistFn = std::function<absl::Status(
    uint64_t offset, std::span<const uint8_t> bytes)>;

struct WriteIntentBitmapOptions {
  using Clock = std::chrono::steady_clock;
  // Time source for idle timing. Default (empty): Clock::now. Only
  // differences of it are used, so any monotonic source will do: an array
  // passes its own uraid::Clock (uraid/clock.h) here, as a time_point.
  std::function<Clock::time_point()> clock;
  // What the bits found set on disk mean. false (default): the array was
  // not shut down cleanly (superblock resync_offset != MaxSector), so each
  // set bit marks a chunk that needs resync; it stays set until
  // ClearChunk. true: the array was clean, so set bits are leftovers of the
  // lazy clear and go at the first Tick, as in md.
  bool array_clean = false;
};

// md's write-intent protocol over one bitmap area.
//
//   StartWrite(range) -> member data writes -> EndWrite(range)
//   ... every daemon_sleep or so: Tick(flush_data)
//
// Invariants it keeps:
//  * Set before write: StartWrite returns only once the bit of every chunk
//    in the range is durable (a persist call that wrote it returned OK, and
//    no call in flight is clearing it).
//  * Clear after durable: a bit is cleared only by Tick, only for a chunk
//    with no write in progress and idle for daemon_sleep, only after
//    Tick's flush_data callback (run after the chunk's last EndWrite)
//    returned OK, and only after events_cleared = events is durable.
//  * Never cleared while degraded (SetDegraded) or after a failed write
//    (EndWrite success=false) until ClearChunk.
//
// Group commit: bit changes mark their 4 KiB page dirty. A thread that
// needs a page written runs the batch itself if no persist call is in
// flight, taking every page dirtied so far; otherwise it waits for the
// batch in flight and then either finds its bits durable or runs the next
// batch. So there is at most one persist call in flight, and a StartWrite
// whose bits are already durable does no I/O and never waits. A batch is
// one persist call covering its dirty pages and the clean pages between
// them (rewritten unchanged: cheaper than another write+flush round on
// every member), split only where dirty pages are more than 64 KiB apart.
//
// Why pages, not sectors: md does its bitmap I/O in 4 KiB pages, so the
// write pattern on the members is md's; a 4 KiB write costs the same as a
// 512-byte one on disks and SSDs; and members on 4Kn devices or opened
// O_DIRECT would turn a 512-byte write into a read-modify-write of the
// page. The last page ends at the area's last sector, as md's does, so
// nothing past the bitmap area is ever written.
//
// Thread-safety: every method may be called concurrently from any thread.
// The persist and flush callbacks run without the internal lock held, so
// they may take their own locks. flush_data may call into this object
// (writes it lets through are simply not cleared by that Tick); persist
// must not, since callers wait for it to finish.
class URAID_EXPORT WriteIntentBitmap {
 public:
  using Clock = WriteIntentBitmapOptions::Clock;

  // `sb` passes CheckBitmapSuper; `bits` holds at least
  // BitmapBitBytes(BitmapChunks(sb)) bytes as read after the header (more,
  // up to the area's last sector, is kept and written back unchanged).
  // Version 3 and the HOSTENDIAN flag are normalised to version 4 on the
  // first header write. No I/O. InvalidArgument if `bits` is short,
  // `persist` is empty or sync_size * 512 overflows; the CheckBitmapSuper
  // errors otherwise.
  static absl::StatusOr<std::unique_ptr<WriteIntentBitmap>> Create(
      const BitmapSuper& sb, std::span<const uint8_t> bits,
      BitmapPersistFn persist, WriteIntentBitmapOptions options = {});

  WriteIntentBitmap(const WriteIntentBitmap&) = delete;
  WriteIntentBitmap& operator=(const WriteIntentBitmap&) = delete;
  ~WriteIntentBitmap();

  // Announces a write of `len` bytes at `member_offset_bytes` of each
  // member's data area (bytes from data_offset). Returns once every chunk
  // it touches has its bit durable; only then may the caller write. On
  // error (OutOfRange past sync_size, or the persist error) nothing is
  // counted: do not write, and do not call EndWrite. len 0 is a no-op.
  absl::Status StartWrite(uint64_t member_offset_bytes, uint64_t len);

  // Ends a write StartWrite accepted, after its member writes completed
  // (durable or not: Tick flushes). `success` false (a member write failed
  // or was skipped because the stripe is degraded: md's !success) keeps
  // the chunks' bits until ClearChunk.
  void EndWrite(uint64_t member_offset_bytes, uint64_t len,
                bool success = true);

  // The lazy clear, meant to run every daemon_sleep seconds (md's daemon).
  // Chooses the chunks with no write in progress that have been idle for
  // daemon_sleep; if there are any and the array is not degraded, calls
  // `flush_data` (which must make every completed member write durable),
  // then makes events_cleared = events durable if it was behind, then
  // clears their bits and persists the pages. Chunks written again while
  // flush_data ran are left for a later Tick. The flush or persist error is
  // returned: nothing is cleared after a flush error, and after a persist
  // error the bits are set again in memory (to be retried by the next Tick,
  // not carried to disk later by some other write).
  absl::Status Tick(absl::FunctionRef<absl::Status()> flush_data);

  // Persists every page with changes not yet durable (left over from a
  // failed persist), so that the on-disk area equals the in-memory one. No
  // I/O when there are none. For the array's flush and clean shutdown.
  absl::Status Sync();

  // While degraded no bit is cleared and events_cleared does not advance,
  // so a returning member can be recovered from the bits (re-add). Call
  // SetDegraded(false) only once the array is whole again (the rebuild or
  // bitmap-based recovery finished).
  void SetDegraded(bool degraded);

  // Follows the md superblock events: call with the new value before
  // writing the member superblocks (md writes the bitmap first). Persists
  // the header; events_cleared is lowered to `events` if above it (md does
  // so when events go back on a clean transition).
  absl::Status SetEvents(uint64_t events);

  // For a kStale bitmap (ValidateBitmapForArray): sets every chunk's bit,
  // keeps them until ClearChunk (the caller resyncs), persists all bits and
  // only then the header with STALE cleared, so a crash in between leaves
  // a bitmap that is still stale. Call SetEvents afterwards.
  absl::Status MarkAllDirty();

  // After the caller resynced `chunk` (parity consistent): the bit is
  // released and goes at the next Tick (after its flush_data). Out-of-range
  // chunks are ignored.
  void ClearChunk(uint64_t chunk);

  // --- Queries (in-memory state: a set bit may still be on its way to
  // --- disk, a cleared one may not be cleared on disk yet). ---
  uint64_t chunks() const { return chunks_; }
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  // The chunk holding `member_offset_bytes`.
  uint64_t ChunkOf(uint64_t member_offset_bytes) const {
    return member_offset_bytes / chunk_bytes_;
  }
  uint64_t DirtyChunks() const;
  bool IsChunkDirty(uint64_t chunk) const;
  // Calls `fn` for each set bit in ascending order, on a snapshot taken
  // under the lock; `fn` runs without it and may call this object.
  void ForEachDirtyChunk(absl::FunctionRef<void(uint64_t chunk)> fn) const;
  uint64_t events() const;
  uint64_t events_cleared() const;
  BitmapSuper super() const;
  // The in-memory area: header (as it will next be written) and bits,
  // BitmapAreaSectors(chunks()) * 512 bytes.
  std::vector<uint8_t> AreaImage() const;

 private:
  // The bits, the page bookkeeping of group commit and the mutex over them
  // (write_intent_bitmap.cc): behind a pointer so that the class layout,
  // and with it this header, depends on no mutex type (the library's TSan
  // build swaps them).
  struct URAID_NO_EXPORT Impl;

  URAID_NO_EXPORT explicit WriteIntentBitmap(std::unique_ptr<Impl> impl);

  // Fixed at Create; copies of the Impl's, for the inline queries.
  const uint64_t chunks_;
  const uint64_t chunk_bytes_;
  const std::unique_ptr<Impl> impl_;
};

}  // namespace uraid

#endif  // URAID_BITMAP_H_
