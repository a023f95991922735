// SPDX-License-Identifier: MIT
// File: uraid/array.h
//
// An md-compatible RAID4/RAID5 array over `Member`s: creation, assembly from
// superblocks, the read and write paths, flush, trim, write-zeroes, member
// failure, and the clean/active state md keeps in the superblocks.
//
// Thread-safety: every public method may be called concurrently from any
// number of threads (nbdkit's PARALLEL model). Requests lock the stripes they
// touch, never the whole array. Overlapping requests in flight at the same
// time complete in some order, as on any block device. The destructor is the
// exception: no other call may be in flight or start once it runs.
//
// Ownership and lifetime: Create and Assemble take ownership of the members.
// They live as long as the Array (files stay open, locks held) and are
// destroyed with it, or before Create/Assemble return an error. An Array
// holds no global state; any number of arrays may be open in one process.
//
// Units: bytes everywhere. Offsets are logical array offsets. Requests may
// have any length and alignment (0 bytes is a no-op that still reports an
// unusable array); requests aligned to whole stripes are the fastest
// (geometry().stripe_data_bytes(), PreferredIoBytes()).
//
// Member failures: every member I/O that fails is retried once. A read
// error on a working member is rebuilt from parity and rewritten to it
// (md's read-error correction; past kMaxCorrectedReadErrors the member is
// failed). Any other member error marks its slot faulty (in the other
// members' superblocks, unless read-only), the request is completed around
// it from parity, the array runs degraded, and a spare (if any) is rebuilt
// into the slot in the background. Only when a second slot is gone does the
// array fail: writes then return Unavailable, while reads still succeed
// wherever their bytes lie on working members and fail (Unavailable, naming
// the member) where they do not. No exception crosses this API.
//
// Errors: absl::Status; the message names the member and offset at fault.
//   InvalidArgument  - bad parameters
//   OutOfRange       - a request that leaves the array (read, write, trim,
//                      zero, extents past the end; errno EINVAL, as NBD)
//   FailedPrecondition - members that cannot form this array (stale, foreign,
//                      duplicate, dirty+degraded, too small, locked by
//                      another process, ...); a write to a read-only array
//   NotFound, PermissionDenied, ... - opening a member file (the errno)
//   Unimplemented    - md features uraid does not handle (levels other
//                      than 4 and 5, journal/PPL/clustered arrays, md's
//                      replacement devices, a shrinking reshape, a
//                      clustered or lockless bitmap)
//   DataLoss         - corrupt metadata
//   Unavailable      - the array has failed (two members gone)
//   Internal and the errno-derived codes - member I/O errors that could not
//                      be absorbed

#ifndef URAID_ARRAY_H_
#define URAID_ARRAY_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "uraid/clock.h"
#include "uraid/consistency_policy.h"
#include "uraid/counters.h"
#include "uraid/events.h"
#include "uraid/export.h"
#include "uraid/geometry.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {

class ArrayImpl;

// Logger (log lines with a severity) and events: see uraid/events.h.

// The write-back stripe cache that gathers partial-stripe writes into
// full-stripe writes. Data in it is not durable until a flush or FUA write
// (NBD's contract); it is written back after `max_age_ms`, when it is full,
// at every flush, and before the array is marked clean.
struct CacheOptions {
  // Memory bound for cached stripes, in bytes; caching is off when fewer
  // than four stripes fit (0 turns it off).
  uint64_t bytes = 64ull << 20;
  // Longest time a cached write waits for its stripe to fill.
  uint32_t max_age_ms = 100;
  // While flushes arrive more often than this on average (milliseconds),
  // a gathered write is acknowledged only once its stripe is on the
  // members, and only writes of half a stripe or more are gathered: each
  // flush would write half-gathered stripes back as partial stripes, and
  // the flushing client would wait for them. 0 gathers and acknowledges
  // whatever the flush rate (tests of the cache use it).
  uint32_t bypass_flush_interval_ms = 10;
};

// md's write-intent bitmap (see uraid/bitmap.h): records which regions may
// have writes in flight, so that after a crash only those are resynced.
// kInternal keeps it on every member (md's --bitmap internal); kFile keeps
// it in a separate file in md's external format (md's --bitmap FILE: the
// 256-byte bitmap_super_t at byte 0, the bits right after it), which the
// superblocks do not mention: it must be named again at every assembly
// (AssembleOptions::bitmap_file).
enum class BitmapMode { kNone, kInternal, kFile };

// Every field has mdadm's default; see Geometry::Make for what is valid.
struct CreateOptions {
  // 5 or 4.
  int level = 5;
  // md's layout; level 4 requires Layout::kParityLast (set it explicitly).
  Layout layout = Layout::kLeftSymmetric;
  // A power of two in [kMinChunkBytes, kMaxChunkBytes].
  uint64_t chunk_bytes = 512 * 1024;
  // md's set_name (at most 32 bytes).
  std::string name = "uraid";
  // Bytes of each member used for data, rounded down to the chunk; 0 = the
  // most the smallest member allows. The array exports
  // (members - 1) * member_bytes.
  uint64_t member_bytes = 0;
  // Data offset in bytes (a multiple of 4096, past the superblock); 0 =
  // mdadm's rule (bitmap space and reshape headroom, 1 MiB aligned).
  uint64_t data_offset_bytes = 0;
  // Skip making parity consistent (md's --assume-clean).
  bool assume_clean = false;
  // Without assume_clean: return as soon as the superblocks are written
  // (they say "resync from stripe 0") instead of computing parity first;
  // StartBackground then runs that resync in the background, where
  // closing the array stops it at its next stripe and a later assembly
  // resumes it (the bitmap, if any, keeps the progress). For callers that
  // must stay interruptible (`uraid create` and Ctrl-C).
  bool defer_resync = false;
  // Internal bitmap (md's place: 4 KiB after the superblock, up to the
  // data) unless kNone. The uraid default is on: it costs one small
  // metadata write per 64 MiB region per few seconds of writing.
  BitmapMode bitmap = BitmapMode::kInternal;
  // kFile: the bitmap file's path. It must be a regular file that is not
  // one of the members, nor stored on this array (a crash would lose the
  // bits with the data they describe). A missing file is created (mode
  // 0644 before umask); an existing empty one is used (mktemp); an
  // existing non-empty one is refused unless `force` (mdadm refused any
  // existing file without --force; an empty file holds nothing to lose).
  // It is written with every bit set (or clear with assume_clean) and made
  // durable, directory entry included, before the superblocks.
  std::string bitmap_file;
  // Bytes of member data per bitmap bit; 0 = 64 MiB, doubled until the
  // bits fit the space before data_offset (kFile: until they fit 128 KiB,
  // as for internal bitmaps, so the two cost the same bitmap writes).
  uint64_t bitmap_chunk_bytes = 0;
  // md's consistency policy "ppl" (--consistency-policy=ppl): a partial
  // parity log in each member's metadata area (ppl.offset +8 sectors,
  // ppl.size 1 MiB, the data offset raised to make room) in place of a
  // bitmap. REQUIRES: level 5, bitmap == kNone. Default: false (the policy
  // is "bitmap", or "resync" with BitmapMode::kNone). Writes to such an
  // array must be in whole 512-byte sectors (md's log entries count
  // sectors; others fail with InvalidArgument, nothing written), and its
  // chunk at most 1020 KiB; it cannot be reshaped.
  bool ppl = false;
  // md's bad-block log on every member: mdadm's 8 sectors (512 entries)
  // after the bitmap's pages, the PPL area or, without either, the room
  // mdadm keeps for a bitmap, when that fits before the data (else none).
  // false: no log, as mdadm.conf's `CREATE bbl=no`. The log bounds a
  // later switch to ppl (md's area stops at it): on members under 8 GiB
  // without a bitmap it leaves no room for one, as with mdadm.
  bool bad_block_log = true;
  // Overwrite members that already hold an md superblock.
  bool force = false;
  // Fixed array uuid (tests); random when unset.
  std::optional<std::array<uint8_t, 16>> uuid;
  CacheOptions cache;
  // The clock the array's jobs run on (see uraid/clock.h); null: the real
  // one.
  std::shared_ptr<Clock> clock;
};

struct AssembleOptions {
  // Start an array that is both dirty and degraded (md refuses by default:
  // parity of stripes written at the crash may be stale).
  bool force = false;
  // Start degraded although a slot the newest superblock lists as active
  // was not given (md's --run). Without it such an assembly is refused,
  // naming the slot and the device last seen there: a member simply
  // forgotten would otherwise become stale at the first write. A slot
  // already recorded as failed or missing (the array stopped degraded)
  // needs no `run`; `force` implies it (mdadm's --force starts a partial
  // array too).
  bool run = false;
  // Never write anything, not even the active/clean flag.
  bool read_only = false;
  // The external bitmap file of an array created with BitmapMode::kFile
  // (md's --assemble --bitmap=FILE). It is checked like an internal bitmap
  // and refused, naming the file, when it is corrupt, truncated, belongs
  // to another array or another size, is one of the members, or the array
  // already has an internal bitmap. A file older than the superblocks
  // (the array ran without it) is trusted for nothing: every region is
  // resynced. Empty: no file. As in md, an array whose bitmap file is not
  // given assembles without a bitmap, so a crash then means a full resync
  // (the superblocks do not record that a file exists). Writable arrays
  // hold an exclusive flock on the file, as on members.
  std::string bitmap_file;
  CacheOptions cache;
  // md's spares=N (mdadm.conf): with fewer spares than this the array
  // reports SparesMissing (in its state and when a spare is used up or
  // removed). 0: no expectation.
  int expected_spares = 0;
  // md's safe_mode_delay: once no write has come for this long, the
  // superblocks are marked clean again (a crash after that needs no
  // resync). 0: never while the array runs, only at its stop (md's "0
  // disables safemode"). Measured on `clock`.
  uint32_t safe_mode_delay_ms = 200;
  // The clock the array's jobs run on (see uraid/clock.h); null: the real
  // one.
  std::shared_ptr<Clock> clock;
};

// kRebuilding: a member being recovered into the slot; bytes below
// SlotInfo::recovery_bytes are in sync, the rest is rebuilt from parity.
// kSpare: a member that belongs to the array but holds no slot yet
// (SlotInfo::slot is -1); a degraded array rebuilds onto it.
enum class SlotState { kActive, kFaulty, kMissing, kRebuilding, kSpare };

struct SlotInfo {
  int slot = 0;  // -1 for a spare
  SlotState state = SlotState::kMissing;
  // kRebuilding: member data bytes already recovered (md's recovery_offset).
  uint64_t recovery_bytes = 0;
  std::string name;  // member name, empty when missing
  uint32_t dev_number = 0;
  std::array<uint8_t, 16> device_uuid{};
  // The member's bad-block log: ranges listed and the sectors they cover.
  uint64_t bad_blocks = 0;
  uint64_t bad_sectors = 0;
  // A write error was recorded in the log instead of failing the member
  // (md's want_replacement): it should be replaced (a spare in the pool
  // starts the copy by itself).
  bool want_replacement = false;
  // Since this member took the slot (reset when another one does; zero for
  // spares, and the replace target's own I/O is not counted): member I/O
  // that failed after the engine's retry, reads and the rest (writes,
  // flushes, discards); read errors corrected by rewriting from parity
  // (md's per-device "errors"); ranges recorded in its bad-block log; the
  // data reads and writes that succeeded, their total time and a moving
  // average of it (1/8 weight per I/O).
  uint64_t read_errors = 0;
  uint64_t write_errors = 0;
  uint64_t corrected_read_errors = 0;
  uint64_t bad_block_records = 0;
  uint64_t ios = 0;
  uint64_t io_ns = 0;
  uint64_t latency_ns = 0;
};

// Member-I/O and request counters, monotonic since the array was opened.
// Each is read atomically, but a snapshot is not one instant across fields.
// The fields, what each counts and their order: uraid/counters.h.
struct Counters {
#define URAID_COUNTER_FIELD(name, help) uint64_t name = 0;
  URAID_COUNTERS(URAID_COUNTER_FIELD)
#undef URAID_COUNTER_FIELD
};

// A run of the array's bytes (Array::Extents): `zero` when every byte of
// it reads as zero because no member holds data for it (a hole), else
// data (which may still be zeros).
struct Extent {
  uint64_t offset = 0;
  uint64_t length = 0;
  bool zero = false;
};

// Background jobs, in md's words (sync_action): resync after an unclean
// shutdown, recover onto a spare, replace a member by copying it, check and
// repair parity (scrub), reshape (grow, layout or chunk change).
enum class JobKind {
  kNone,
  kResync,
  kRecover,
  kReplace,
  kCheck,
  kRepair,
  kReshape
};

// md's "resync" / "recover" / "replace" / "check" / "repair" / "reshape" /
// "idle".
URAID_EXPORT const char* JobKindName(JobKind kind);

// md's sync_speed_min / sync_speed_max, in KiB/s of member data per member:
// a job never runs faster than max_kib_s; while clients are doing I/O it
// yields to them down to min_kib_s, never below. md's defaults.
// md's limits, in KiB/s per member: a job never runs above max_kib_s; while
// clients are busy it slows to min_kib_s. md's fixed minimum lets a rebuild
// under steady client load crawl (1000 KiB/s: 46 days for 4 TB, the window
// in which a second failure loses the array), so uraid adds a share: while
// busy the job also keeps busy_share_pct percent of its time (it rests
// (100 - pct) / pct times as long as its last window took), whichever of
// the two is faster, and still never above max_kib_s. 0 gives md's plain
// behaviour. With min = max (a test or a user pinning the speed) the share
// changes nothing.
struct SpeedLimits {
  uint64_t min_kib_s = 1000;
  uint64_t max_kib_s = 200000;
  uint32_t busy_share_pct = 25;  // 0..90
};

// Progress of the running job, or the outcome of the last one.
struct JobInfo {
  JobKind kind = JobKind::kNone;
  // Per-member data bytes processed and in all (stripes x chunk).
  uint64_t done_bytes = 0;
  uint64_t total_bytes = 0;
  // Recent rate over the last few seconds, member bytes per second.
  double bytes_per_s = 0;
  // Recover / replace: the slot being rebuilt and the target's name.
  int slot = -1;
  std::string target;
  // Recover or replace: a second slot done in the same pass, and its
  // target's name; -1 and empty otherwise. A recovery's second is a
  // second spare (RAID6) or a replace under way (any level); a replace's
  // is a gone slot whose rebuild onto a spare joined the running copy (a
  // member failing mid-replace, or a spare arriving for a slot already
  // gone), at any level. `kind` stays the job's first.
  int second_slot = -1;
  std::string second_target;
  // Check / repair: stripes whose parity did not match (md's mismatch_cnt
  // counts sectors; this counts stripes) and the first of them.
  uint64_t mismatches = 0;
  std::vector<uint64_t> first_mismatches;  // at most kMaxListedMismatches
  // Check / repair at level 6, every member present: of `mismatches`, the
  // stripes whose one bad chunk P and Q locate (mdadm's raid6check: a data
  // chunk, P or Q, every mismatched byte naming the same one), the first
  // of them and, parallel, the slot holding that chunk. Repair rewrote the
  // located chunk in these stripes and recomputed P and Q from the data
  // (md's repair) in the others. Always 0 and empty at level 5.
  uint64_t located_mismatches = 0;
  std::vector<uint64_t> first_located;        // at most kMaxListedMismatches
  std::vector<uint64_t> first_located_slots;  // parallel to first_located
  // Recover / replace: target bytes that could not be rebuilt (a source
  // unreadable there too, or listed bad) and were recorded in the target's
  // bad-block log instead, and the first of their array byte offsets
  // (member offsets of parity are not listed).
  uint64_t unrecovered_bytes = 0;
  std::vector<uint64_t> first_unrecovered;  // at most kMaxListedMismatches
  // Check / repair: per-member bytes of rows not checked (nor repaired)
  // because a member lists them in its bad-block log (its bytes there are
  // not trusted), and the first of their stripes.
  uint64_t unchecked_bytes = 0;
  std::vector<uint64_t> first_unchecked;  // at most kMaxListedMismatches
  // For a finished job: how it ended ("completed", "interrupted", or the
  // error); empty while running.
  std::string result;
};
inline constexpr size_t kMaxListedMismatches = 16;

// The write-intent bitmap as the array holds it (ArrayInfo::bitmap).
struct BitmapInfo {
  bool present = false;
  // Of the area on each member; 0 for an external bitmap file (the area
  // starts the file).
  uint64_t offset_bytes = 0;
  uint64_t chunk_bytes = 0;  // member data bytes per bit
  uint64_t chunks = 0;
  uint64_t dirty_chunks = 0;  // bits set (in memory)
  uint64_t events = 0;
  uint64_t events_cleared = 0;
  uint64_t sync_size_bytes = 0;  // member data bytes covered
  uint32_t daemon_sleep_s = 0;
};

// A reshape (Array::Grow): the new shape. Unset fields keep the array's.
struct GrowOptions {
  int raid_devices = 0;          // 0: unchanged; more than now: grow
  std::optional<Layout> layout;  // md's, valid at the target level
  uint64_t chunk_bytes = 0;      // 0: unchanged
  int level = 0;  // 0: unchanged; 4, 5 or 6 (md: 4 <-> 5, 5 <-> 6)
  // New members (one per added device), given slots raid_disks.. in order.
  std::vector<std::unique_ptr<Member>> add;
  // false: no background job; the caller copies the windows itself with
  // Array::StepReshape (tests that interleave I/O with each window; tools
  // that want to drive the pace).
  bool start_job = true;
};

// A reshape in progress (ArrayInfo::reshape), md's superblock view.
struct ReshapeInfo {
  bool active = false;
  // The old shape (array bytes at or past the position) and the new one
  // (array bytes below it); set while active.
  std::optional<Geometry> from;
  std::optional<Geometry> to;
  uint64_t position_bytes = 0;        // md's reshape_position, in bytes
  uint64_t to_data_offset_bytes = 0;  // data offset of the new shape
};

// A snapshot of the array (Array::Info): a plain value, safe to keep.
struct ArrayInfo {
  Geometry geometry;
  std::array<uint8_t, 16> uuid{};
  std::string name;
  uint64_t data_offset_bytes = 0;
  uint64_t events = 0;
  uint64_t ctime = 0;
  uint64_t utime = 0;
  bool clean = true;      // resync_offset == MaxSector in the superblocks
  bool ppl = false;       // consistency policy "ppl" (the PPL feature bit)
  bool degraded = false;  // one slot missing or faulty (RAID6: or two)
  bool failed = false;    // more slots gone than parity covers
  // Read-only: opened so (AssembleOptions::read_only) or switched by
  // SetReadOnly; switched_read_only only in the second case (writes get
  // EROFS, jobs are frozen, SetReadOnly(false) undoes it).
  bool read_only = false;
  bool switched_read_only = false;
  // Resync: true while parity is being recomputed; resync_bytes is how far
  // (member bytes) it has got.
  bool resyncing = false;
  uint64_t resync_bytes = 0;
  std::vector<SlotInfo> slots;   // one per raid slot, in slot order
  std::vector<SlotInfo> spares;  // members waiting to be rebuilt onto
  JobInfo job;                   // kind kNone when idle
  JobInfo last_job;              // the last finished job (kNone if none)
  SpeedLimits speed;
  BitmapInfo bitmap;
  ReshapeInfo reshape;
  Counters counters;
};

class URAID_EXPORT Array {
 public:
  // Writes new superblocks to `members` (a null entry is a missing slot;
  // slot order is list order) and, unless assume_clean or defer_resync, makes
  // parity consistent before returning: that reads and writes every member in
  // full, so it takes as long as a resync (members that are holes, like
  // fresh sparse files, are skipped). Refuses, writing nothing, when more
  // than one slot is missing, a member is too small, a member already holds
  // an md superblock (unless force), or the geometry is invalid. A degraded
  // create starts clean (there is nothing to make consistent). The array is
  // returned writable and without background threads (StartBackground).
  static absl::StatusOr<std::unique_ptr<Array>> Create(
      std::vector<std::unique_ptr<Member>> members,
      const CreateOptions& options, Logger logger = nullptr);

  // Reads every member's superblock and forms the array; member order does
  // not matter, and a missing member is simply left out of `members`.
  // Refuses, writing nothing, on: no or corrupt superblock, members of
  // different arrays, the same device twice, a stale member, a member marked
  // faulty, disagreeing geometry, more than one slot missing, a member too
  // small, or a dirty degraded array without force. Once it succeeds,
  // assembly writes only to bring members level: when the superblocks'
  // events disagree (members one event behind after a crash during a
  // superblock update), every member's superblock is rewritten with the
  // freshest events, as mdadm does when it starts an array. Otherwise it
  // writes nothing; a writable array marks itself active (md's clean flag)
  // on its first write. With options.read_only nothing is ever written, so
  // members opened read-only (FileMemberOptions::read_only) are enough.
  // Assembly starts no thread, so a process may fork after it (nbdkit
  // assembles in config_complete); the first I/O after it may start the
  // array's I/O threads, and StartBackground its background ones.
  static absl::StatusOr<std::unique_ptr<Array>> Assemble(
      std::vector<std::unique_ptr<Member>> members,
      const AssembleOptions& options, Logger logger = nullptr);

  // Stops background work and, if writable and not failed, flushes and marks
  // the array clean (unless a resync is unfinished).
  ~Array();

  // Starts background threads: the idle timer that marks the array clean
  // 200 ms after writes stop (md's safemode), and the resync of an unclean
  // array. Call once, after any fork (nbdkit's after_fork). Without it the
  // array is correct but stays "active" until closed and resyncs only when
  // Resync() is called.
  void StartBackground();

  // Reads [offset, offset + len) into `buf` (which must hold len bytes).
  // Healthy pieces go from the members straight into `buf`; pieces on a
  // missing member are rebuilt from parity. On error `buf` may be partly
  // written.
  absl::Status Read(void* buf, size_t len, uint64_t offset);
  // Writes `len` bytes of `buf` at `offset`, keeping parity consistent
  // (full-stripe, read-modify-write or reconstruct-write per stripe). When
  // it returns OK the data reads back; it is durable after Flush(), or at
  // once with fua: then it is durable on every member it touched before
  // return. On error the range holds old or new data, stripe by stripe.
  absl::Status Write(const void* buf, size_t len, uint64_t offset,
                     bool fua = false);
  // Everything acknowledged before the call is durable on every member.
  absl::Status Flush();
  // Whole stripes inside the range are discarded on the members when every
  // member's discard reads back zeros (they then read as zeros); partial
  // stripes and other members are left unchanged (trim is advisory).
  absl::Status Trim(size_t len, uint64_t offset, bool fua = false);
  // The range reads back as zeros; parity stays consistent.
  absl::Status Zero(size_t len, uint64_t offset, bool fua = false);
  // Which parts of [offset, offset + len) are holes: a piece of a chunk is
  // one when the member holding it has a hole there (SEEK_DATA on files,
  // NBD block status reporting zero on NBD members), or, on a missing
  // member, when every other member of the stripe has one there. Bytes
  // waiting in the stripe cache, and everything during a reshape, count
  // as data; so does anything a member cannot tell. Contiguous extents
  // that start at `offset`; they may cover less than `len` (at least one
  // chunk piece) to bound the work of one call. Thread-safe; a racing
  // write may or may not be seen, as with Read.
  absl::StatusOr<std::vector<Extent>> Extents(uint64_t offset, uint64_t len);

  // Recomputes parity of every stripe from the resync point to the end,
  // synchronously, then marks the array clean. Safe to run while serving.
  // Returns OK at once, doing nothing, when the array is clean or
  // read-only, or when another thread's resync is running (it does not wait
  // for that one). FailedPrecondition when degraded: parity cannot be
  // recomputed without every member.
  absl::Status Resync();

  // Marks `slot` faulty as if its member had failed (tests, `uraid fail`).
  absl::Status FailSlot(int slot);

  // --- member management (md's --fail, --remove, --add, --replace) ---
  // Each names a member by Member::Name() (the path or URI it was opened
  // with) and writes the new roles to every member's superblock. All are
  // safe while serving; they return when the metadata is durable, not when
  // a resulting rebuild ends (see Info().job, WaitForJob).
  //
  // Marks the named active or rebuilding member faulty. FailedPrecondition
  // when that would fail the array (a second member gone), like md.
  absl::Status FailMember(const std::string& name);
  // Removes a faulty member or a spare, closing it (its lock is released).
  // FailedPrecondition for an active member ("fail it first", as md).
  absl::Status RemoveMember(const std::string& name);
  // Makes `member` a spare: writes it a superblock of this array (it must
  // be large enough and not already be one of this array's members). If
  // the array is degraded, recovery onto it starts at once in the
  // background. Refuses on a read-only or failed array.
  absl::Status AddMember(std::unique_ptr<Member> member);
  // Copies the active member `old_name` onto `replacement` while the old one
  // keeps serving (no degraded window); when the copy ends the replacement
  // takes the slot and the old member is released (the array lets go of it
  // as RemoveMember would, and the superblocks' role tables record it
  // faulty), so there is nothing left to remove.
  // If the old member fails during the copy, the copy continues as a
  // recovery from parity.
  absl::Status ReplaceMember(const std::string& old_name,
                             std::unique_ptr<Member> replacement);

  // Reshapes the array while it serves (md's --grow): adds members, or
  // changes layout, chunk or level (RAID4 <-> RAID5), restriping in the
  // background (a kReshape job) without a backup file: the new shape is
  // written below the old one, in the data-offset headroom, and each
  // window's progress is durable in the superblocks before the next, so a
  // crash resumes where it stopped. The exported size grows when the job
  // ends (Info().geometry then shows the new shape). FailedPrecondition
  // when degraded, read-only, another job or a resync is running, or there
  // is no headroom; InvalidArgument for a shape md cannot reshape to (a
  // shrink, a bad layout/chunk, the wrong number of new members). While a
  // reshape is in progress with no job running it (paused by StopJob),
  // Grow with no changes resumes it.
  absl::Status Grow(GrowOptions options);
  // Copies the next window of a reshape that has no job running (see
  // GrowOptions::start_job; an assembled array with a reshape in progress
  // before StartBackground). Returns true once the reshape has finished.
  // FailedPrecondition when no reshape is in progress or a job runs it.
  absl::StatusOr<bool> StepReshape();

  // Switches the consistency policy while the array serves (md's
  // --grow --consistency-policy), with md's rules: only between resync and
  // ppl, on RAID5. To ppl: InvalidArgument when the policy is bitmap (md:
  // "Cannot add PPL to array with bitmap"; no online bitmap removal yet)
  // or the space between superblock and data cannot hold the log;
  // FailedPrecondition while read-only, failed, reshaping or resyncing
  // (replaying a log over parity a resync has not made consistent would
  // mark the array clean wrongly). Each member's PPL area is initialised,
  // the log attached, the stripe writes that started without it waited
  // out and flushed, and only then do the superblocks name the policy, so
  // a crash at any point is recovered: by a resync before, by the log
  // after. To resync: the superblocks drop the PPL first (a crash from
  // then on resyncs), then the log is detached once the writes logging to
  // it have finished. To bitmap: InvalidArgument (md adds a bitmap with
  // --grow --bitmap, which uraid does not do online). AlreadyExists when
  // the policy is already `policy`. Clients keep reading and writing
  // throughout; no write waits for the switch.
  absl::Status SetConsistencyPolicy(ConsistencyPolicy policy);

  // --- jobs ---
  // Starts a background scrub: kCheck counts stripes whose parity does not
  // match; kRepair also rewrites their parity. FailedPrecondition when
  // another job runs or the array is degraded.
  absl::Status StartScrub(bool repair);
  // Stops the running job at its next stripe (md's "idle") and returns
  // once it has ended, so Info() then shows no job; resync and recovery
  // resume on the next assembly from their checkpoint. A resync does not
  // stop (parity must become trustworthy) and is not waited for. Must not
  // be called from a log or event callback.
  absl::Status StopJob();
  // Blocks until no job runs; returns the last job's outcome (OK when it
  // completed or none ran).
  absl::Status WaitForJob();
  void SetSpeedLimits(const SpeedLimits& limits);

  // Checks every stripe's parity (reads only). Returns the number of
  // stripes whose parity does not match; `first_bad` (may be nullptr) gets
  // up to 16 of their stripe numbers. FailedPrecondition when degraded.
  absl::StatusOr<uint64_t> CheckParity(std::vector<uint64_t>* first_bad);
  // The same check, reported as a check job's outcome is (kind kCheck,
  // result "completed"): the mismatches and, at level 6, the chunks P and
  // Q locate (JobInfo::located_mismatches and its lists).
  absl::StatusOr<JobInfo> CheckParityReport();

  // Changes the stripe cache's memory bound at any time (0 turns caching
  // off; cached data is written back as entries age).
  void SetCacheBytes(uint64_t bytes);

  // Exported capacity in bytes: geometry().array_bytes().
  uint64_t size() const;
  // The array's shape; the reference is valid as long as the Array.
  const Geometry& geometry() const;
  // Opened with AssembleOptions::read_only: every write-type call fails.
  // (A live switch by SetReadOnly shows in Info(), not here.)
  bool read_only() const;
  // md's --readonly / --readwrite on a live array. SetReadOnly(true)
  // closes the write gate (new Write/Trim/Zero and member or shape changes
  // fail with FailedPrecondition carrying EROFS, see uraid/status_errno.h),
  // waits for the writes already in flight, freezes the jobs at their next
  // window (rebuild, resync, reshape: they resume where they stopped; a
  // queued one waits), writes the cache back, flushes the members and
  // marks the superblocks clean (they stay dirty only while a resync is
  // unfinished, as in md). Reads and flushes go on. SetReadOnly(false)
  // reopens the gate and lets the jobs go on. Either is OK when the array
  // is already so; FailedPrecondition for SetReadOnly(false) on an array
  // opened read-only, Unavailable on a failed one. When flushing or
  // marking clean fails, the array stays writable and the error is
  // returned. Thread-safe; calls are serialised.
  absl::Status SetReadOnly(bool read_only);
  // State, slots and counters, consistent per field (see ArrayInfo). Cheap
  // enough to poll.
  ArrayInfo Info() const;

  // --- events (uraid/events.h) ---
  // Adds a listener of every event from now on; returns its id. Listeners
  // run on the thread where the event happened (see uraid/events.h for
  // what they may do).
  uint64_t AddEventListener(EventListener listener);
  // After it returns the listener is never called again (a delivery in
  // progress is waited out). Unknown ids are ignored. Must not be called
  // from a listener.
  void RemoveEventListener(uint64_t id);
  // The current state as events, as a monitor that starts now should see
  // it: NewArray (with "state"), then DegradedArray or ArrayFailed,
  // SparesMissing, and the running job's start event (RebuildStarted,
  // ResyncStarted, ReshapeStarted).
  std::vector<Event> StateEvents() const;

 private:
  URAID_NO_EXPORT explicit Array(std::unique_ptr<ArrayImpl> impl);
  std::unique_ptr<ArrayImpl> impl_;
};

}  // namespace uraid

#endif  // URAID_ARRAY_H_
