// File: uraid/array.h
//
// An md-compatible RAID4/RAID5 array over `Member`s: creation, assembly from
// superblocks, the read and write paths, flush, trim, write-zeroes, member
// failure, and the clean/active state md keeps in the superblocks.
//
// Thread-safety: every public method may be called concurrently from any
// number of threads (nbdkit's PARALLEL model). Requests lock the stripes they
// touch, never the whole array. Overlapping requests in flight at the same
// time complete in some order, as on any block device.
//
// Units: bytes everywhere. Offsets are logical array offsets.
//
// Errors: absl::Status; the message names the member and offset at fault.
//   InvalidArgument  - bad parameters or a request past the end
//   FailedPrecondition - members that cannot form this array (stale, foreign,
//                      duplicate, dirty+degraded, ...)
//   DataLoss         - corrupt metadata
//   Unavailable      - the array has failed (two members gone)
//   Internal/IO      - member I/O errors that could not be absorbed

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
#include "uraid/geometry.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {

class ArrayImpl;

// Receives one human-readable line per notable event (member failed, resync
// finished, ...). Called from any thread; must be thread-safe.
using Logger = std::function<void(const std::string& line)>;

struct CreateOptions {
  int level = 5;
  Layout layout = Layout::kLeftSymmetric;
  uint64_t chunk_bytes = 512 * 1024;
  // md's set_name (at most 32 bytes).
  std::string name = "uraid";
  // Bytes of each member used for data; 0 = the most every member allows.
  uint64_t member_bytes = 0;
  // Data offset in bytes; 0 = mdadm's rule (headroom, 1 MiB aligned).
  uint64_t data_offset_bytes = 0;
  // Skip making parity consistent (md's --assume-clean).
  bool assume_clean = false;
  // Overwrite members that already hold an md superblock.
  bool force = false;
  // Fixed array uuid (tests); random when unset.
  std::optional<std::array<uint8_t, 16>> uuid;
};

struct AssembleOptions {
  // Start an array that is both dirty and degraded (md refuses by default:
  // parity of stripes written at the crash may be stale).
  bool force = false;
  // Never write anything, not even the active/clean flag.
  bool read_only = false;
};

enum class SlotState { kActive, kFaulty, kMissing };

struct SlotInfo {
  int slot = 0;
  SlotState state = SlotState::kMissing;
  std::string name;  // member name, empty when missing
  uint32_t dev_number = 0;
  std::array<uint8_t, 16> device_uuid{};
};

// Member-I/O and request counters, monotonic since the array was opened.
struct Counters {
  uint64_t member_reads = 0;
  uint64_t member_read_bytes = 0;
  uint64_t member_writes = 0;
  uint64_t member_write_bytes = 0;
  uint64_t member_flushes = 0;
  uint64_t full_stripe_writes = 0;  // stripes written with no reads
  uint64_t rmw_writes = 0;          // stripes updated by read-modify-write
  uint64_t rcw_writes = 0;          // stripes updated by reconstruct-write
  uint64_t degraded_writes = 0;     // stripes written around a missing member
  uint64_t reconstructions = 0;     // read pieces rebuilt from parity
  uint64_t resynced_stripes = 0;    // stripes checked by resync
  uint64_t resync_repairs = 0;      // stripes whose parity resync rewrote
};

struct ArrayInfo {
  Geometry geometry;
  std::array<uint8_t, 16> uuid{};
  std::string name;
  uint64_t data_offset_bytes = 0;
  uint64_t events = 0;
  uint64_t ctime = 0;
  uint64_t utime = 0;
  bool clean = true;      // resync_offset == MaxSector in the superblocks
  bool degraded = false;  // one slot missing or faulty
  bool failed = false;    // more than one slot gone
  bool read_only = false;
  // Resync: true while parity is being recomputed; resync_bytes is how far
  // (member bytes) it has got.
  bool resyncing = false;
  uint64_t resync_bytes = 0;
  std::vector<SlotInfo> slots;
  Counters counters;
};

class Array {
 public:
  // Writes new superblocks to `members` (a null entry is a missing slot;
  // slot order is list order) and, unless assume_clean, makes parity
  // consistent before returning. Refuses, writing nothing, when more than
  // one slot is missing, a member is too small, a member already holds an md
  // superblock (unless force), or the geometry is invalid.
  static absl::StatusOr<std::unique_ptr<Array>> Create(
      std::vector<std::unique_ptr<Member>> members,
      const CreateOptions& options, Logger logger = nullptr);

  // Reads every member's superblock and forms the array; member order does
  // not matter. Refuses, writing nothing, on: no or corrupt superblock,
  // members of different arrays, the same device twice, a stale member, a
  // member marked faulty, disagreeing geometry, more than one slot missing,
  // a member too small, or a dirty degraded array without force.
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

  // Healthy pieces go from the members straight into `buf`; pieces on a
  // missing member are rebuilt from parity.
  absl::Status Read(void* buf, size_t len, uint64_t offset);
  // With fua, the data is durable on every member it touched before return.
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

  // Recomputes parity of every stripe from the resync point to the end,
  // synchronously, then marks the array clean. Safe to run while serving.
  absl::Status Resync();

  // Marks `slot` faulty as if its member had failed (tests, `uraid fail`).
  absl::Status FailSlot(int slot);

  // Checks every stripe's parity (reads only). Returns the number of
  // stripes whose parity does not match; `first_bad` gets up to 16 of them.
  absl::StatusOr<uint64_t> CheckParity(std::vector<uint64_t>* first_bad);

  uint64_t size() const;
  const Geometry& geometry() const;
  bool read_only() const;
  ArrayInfo Info() const;

 private:
  explicit Array(std::unique_ptr<ArrayImpl> impl);
  std::unique_ptr<ArrayImpl> impl_;
};

}  // namespace uraid

#endif  // URAID_ARRAY_H_
