/* SPDX-License-Identifier: MIT */
/* File: uraid/uraid.h
 *
 * The C API of libraid: an md-compatible RAID4/RAID5 array for C programs
 * and FFI users (Python ctypes, Rust, Go, ...). It is a thin layer over the
 * C++ API in uraid/array.h and uraid/member.h; read those for the full
 * semantics of each operation. Link with `-luraid` (pkg-config: `uraid`;
 * CMake: `uraid::raid`). Linked against liburaid.so a C program needs
 * nothing else; liburaid.a also needs the C++ runtime and libraid's private
 * dependencies (ISA-L, ...), which `pkg-config --static --libs uraid` and
 * CMake's `uraid::raid_static` add.
 *
 * Conventions:
 * - Every function that can fail returns 0 on success or a negative errno:
 *     -EINVAL   bad parameters, a request past the end of the array
 *     -EPERM    members that cannot form this array (stale, foreign,
 *               duplicate, dirty and degraded without force, locked by
 *               another process, ...), or a write to a read-only array
 *     -ENOENT   a member path that does not exist
 *     -EACCES   a member the process may not open
 *     -EOPNOTSUPP  a feature uraid does not handle (levels other than 4
 *               and 5, journal or PPL, a shrinking reshape, ...)
 *     -ENOMEM   out of memory
 *     -ETIMEDOUT  an NBD member that did not answer in time
 *     -EIO      member I/O that could not be absorbed, a failed array
 *               (more than one member gone), corrupt metadata
 *   (the whole table, one errno per absl::StatusCode, is StatusToErrno in
 *   uraid/status_errno.h; the nbdkit plugin narrows the same table to the
 *   errnos NBD carries)
 *   and, when `err` is not NULL and `err_len` > 0, copies a human-readable
 *   message naming the member and offset at fault into `err` (truncated to
 *   `err_len` - 1 bytes, always NUL-terminated). On success `err` is left
 *   unchanged. No function calls exit() or abort() on bad input, and no C++
 *   exception escapes.
 * - Units: bytes everywhere. Offsets are logical array offsets. Requests of
 *   any size and alignment are accepted; whole stripes are fastest.
 * - Thread-safety: every function taking a `uraid_array*` may be called
 *   concurrently from any number of threads on the same array, except
 *   uraid_close, which must be the last call on that array.
 * - Ownership: the library owns a `uraid_array` from uraid_create or
 *   uraid_assemble until uraid_close. Strings and structs passed in are
 *   copied; the caller may free them when the call returns.
 * - Background threads: an open array runs md's safemode timer (marks it
 *   clean 200 ms after writes stop) and, for an array that was not shut
 *   down cleanly, a resync. Do not fork() while an array is open.
 */

#ifndef URAID_URAID_H_
#define URAID_URAID_H_

#include <stddef.h>
#include <stdint.h>

#include "uraid/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* An open array. Opaque. */
typedef struct uraid_array uraid_array;

/* Flag for uraid_write, uraid_trim and uraid_zero: the data is durable on
 * every member the request touched before the call returns. */
#define URAID_FUA 1u

/* The most members an array can have (md's limit for uraid's levels). */
#define URAID_MAX_DISKS 64

/* Options of uraid_create. Zero-initialise (`uraid_create_options o = {0};`)
 * and set what you need: every zero field means "the default". */
typedef struct uraid_create_options {
  /* 4 or 5; 0 = 5. */
  int level;
  /* md's name ("left-symmetric", "ls", ...) or "0".."5"; NULL =
   * left-symmetric (parity-last for level 4, its only layout). */
  const char* layout;
  /* A power of two, 4 KiB..16 MiB; 0 = 512 KiB. */
  uint64_t chunk_bytes;
  /* md's set name, at most 32 bytes; NULL = "uraid". */
  const char* name;
  /* Data bytes per member (rounded down to the chunk); 0 = the most the
   * smallest member allows. */
  uint64_t member_bytes;
  /* Where data starts on each member (a multiple of 4096); 0 = mdadm's
   * rule. */
  uint64_t data_offset_bytes;
  /* Nonzero: skip making parity consistent. Only for members known to be
   * all zeros (new sparse files): otherwise parity is computed before
   * uraid_create returns, which reads and writes every member in full. */
  int assume_clean;
  /* Nonzero: overwrite members that already hold an md superblock. */
  int force;
  /* Nonzero: open member files with O_DIRECT. */
  int direct;
} uraid_create_options;

/* Options of uraid_assemble. Zero-initialise; zero fields are defaults. */
typedef struct uraid_assemble_options {
  int force;     /* nonzero: start an array that is dirty and degraded */
  int read_only; /* nonzero: never write anything to any member; member
                    files are opened O_RDONLY */
  int direct;    /* nonzero: open member files with O_DIRECT */
  int no_lock;   /* nonzero: do not take the exclusive flock() on member
                    files (lets you read members another process serves) */
  int run;       /* nonzero: start degraded although a member the
                    superblocks list as active was not given (md's --run);
                    zero refuses that, naming the slot */
} uraid_assemble_options;

/* A member backend implemented by the caller (uraid_create_members,
 * uraid_assemble_members): object storage, a test fake, a buffer.
 *
 * Callbacks receive the descriptor's `user` pointer. Offsets and lengths
 * are bytes from the start of the raw member (the md superblock is at 4096,
 * data at the data offset). Each returns 0 or a negative errno; a transfer
 * must be complete (no short reads or writes). Buffers may have any
 * alignment. The callbacks are called concurrently from several threads,
 * but never with two overlapping writes at once. */
typedef struct uraid_member_ops {
  /* Required. Fill buf with len bytes at offset. */
  int (*read)(void* user, void* buf, size_t len, uint64_t offset);
  /* Required (may fail with -EPERM for a read-only backend). */
  int (*write)(void* user, const void* buf, size_t len, uint64_t offset);
  /* Optional (NULL = nothing to do): make completed writes durable. */
  int (*flush)(void* user);
  /* Optional (NULL = discard unsupported): drop the range; afterwards it
   * MUST read back as zeros. */
  int (*discard)(void* user, size_t len, uint64_t offset);
  /* Optional: called exactly once when the library no longer uses the
   * member: when the array is closed, or when uraid_create_members /
   * uraid_assemble_members fail. Free `user` here if you own it. */
  void (*close)(void* user);
} uraid_member_ops;

typedef struct uraid_member_desc {
  const char* name;            /* used in messages; NULL = "member<i>" */
  uint64_t size;               /* raw size in bytes */
  const uraid_member_ops* ops; /* NULL = a missing slot (create only) */
  void* user;                  /* passed to every callback */
} uraid_member_desc;

/* Writes new md v1.2 superblocks to the member files `paths` (slot order is
 * list order; a NULL entry is a missing slot, which starts the array
 * degraded) and, unless assume_clean, makes parity consistent before
 * returning. `options` may be NULL for all defaults. On success stores the
 * open array in *out. Refuses, writing nothing, when more than one slot is
 * missing, a member is too small or already holds an md superblock (unless
 * force), or the geometry is invalid. */
URAID_EXPORT int uraid_create(const char* const* paths, size_t n,
                              const uraid_create_options* options,
                              uraid_array** out, char* err, size_t err_len);

/* Forms the array recorded in the superblocks of the member files `paths`
 * (any order; a missing member is simply left out). `options` may be NULL
 * for all defaults. Refuses, writing nothing, on corrupt or foreign
 * superblocks, stale or duplicate members, more than one member missing,
 * or a dirty degraded array without force. */
URAID_EXPORT int uraid_assemble(const char* const* paths, size_t n,
                                const uraid_assemble_options* options,
                                uraid_array** out, char* err, size_t err_len);

/* Like uraid_create and uraid_assemble, over caller-implemented members.
 * The `direct`, `no_lock` options do not apply. Every descriptor's close
 * callback is called exactly once, whatever the result. */
URAID_EXPORT int uraid_create_members(const uraid_member_desc* members,
                                      size_t n,
                                      const uraid_create_options* options,
                                      uraid_array** out, char* err,
                                      size_t err_len);
URAID_EXPORT int uraid_assemble_members(const uraid_member_desc* members,
                                        size_t n,
                                        const uraid_assemble_options* options,
                                        uraid_array** out, char* err,
                                        size_t err_len);

/* Flushes the members, marks the array clean (when writable) and frees it.
 * Always frees the array, even when the flush fails (the error is then
 * returned). NULL is a no-op. */
URAID_EXPORT int uraid_close(uraid_array* array, char* err, size_t err_len);

/* Reads len bytes at offset into buf; pieces on a missing member are
 * rebuilt from parity. */
URAID_EXPORT int uraid_read(uraid_array* array, void* buf, size_t len,
                            uint64_t offset, char* err, size_t err_len);
/* Writes len bytes from buf at offset, keeping parity consistent. flags:
 * 0 or URAID_FUA. */
URAID_EXPORT int uraid_write(uraid_array* array, const void* buf, size_t len,
                             uint64_t offset, unsigned flags, char* err,
                             size_t err_len);
/* Everything acknowledged before the call is durable on every member. */
URAID_EXPORT int uraid_flush(uraid_array* array, char* err, size_t err_len);
/* Advisory discard of the whole stripes inside the range (see Array::Trim).
 * flags: 0 or URAID_FUA. */
URAID_EXPORT int uraid_trim(uraid_array* array, size_t len, uint64_t offset,
                            unsigned flags, char* err, size_t err_len);
/* The range reads back as zeros afterwards. flags: 0 or URAID_FUA. */
URAID_EXPORT int uraid_zero(uraid_array* array, size_t len, uint64_t offset,
                            unsigned flags, char* err, size_t err_len);

/* Exported capacity in bytes: (raid_disks - 1) * member_bytes. */
URAID_EXPORT uint64_t uraid_size(const uraid_array* array);

enum {
  URAID_SLOT_ACTIVE = 0,
  URAID_SLOT_FAULTY = 1,
  URAID_SLOT_MISSING = 2,
};

/* A snapshot of the array's shape and state (see uraid::ArrayInfo). */
typedef struct uraid_info {
  int level;            /* 4 or 5 */
  int layout;           /* md's number 0..5 */
  char layout_name[24]; /* md's name, e.g. "left-symmetric" */
  uint64_t chunk_bytes;
  int raid_disks;
  uint64_t member_bytes;      /* data bytes of each member */
  uint64_t array_bytes;       /* == uraid_size() */
  uint64_t data_offset_bytes; /* where data starts on each member */
  uint8_t uuid[16];
  char uuid_string[36]; /* mdadm's form "xxxxxxxx:xxxxxxxx:..." */
  char name[33];
  uint64_t events;
  int clean;    /* superblocks say clean (no resync needed) */
  int degraded; /* one slot missing or faulty */
  int failed;   /* more than one slot gone: every I/O fails */
  int read_only;
  int resyncing;
  uint64_t resync_bytes;           /* member bytes resynced so far */
  int slot_state[URAID_MAX_DISKS]; /* URAID_SLOT_*, for 0..raid_disks-1 */
  uint64_t member_reads;
  uint64_t member_writes;
  uint64_t reconstructions; /* read pieces rebuilt from parity */
} uraid_info;

/* Fills *info. Returns 0, or -EINVAL for a NULL argument. */
URAID_EXPORT int uraid_get_info(const uraid_array* array, uraid_info* info);

/* Marks `slot` faulty as if its member had failed (tests). */
URAID_EXPORT int uraid_fail_slot(uraid_array* array, int slot, char* err,
                                 size_t err_len);

/* The version of the linked library, "MAJOR.MINOR.PATCH" (a static string;
 * uraid/version.h has the version compiled against). */
URAID_EXPORT const char* uraid_version(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* URAID_URAID_H_ */
