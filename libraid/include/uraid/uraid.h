/* SPDX-License-Identifier: MIT */
/* File: uraid/uraid.h
 *
 * The C API of libraid: an md-compatible RAID4/RAID5 array for C programs
 * and FFI users (Python ctypes, Rust, Go, ...). It is a thin layer over the
 * C++ API in uraid/array.h and uraid/member.h; read those for the full
 * semantics of each operation. Link with `-luraid` (pkg-config: `uraid-c`;
 * CMake: `uraid::raid`). Linked against liburaid.so a C program needs
 * nothing else; liburaid.a also needs the C++ runtime and libraid's private
 * dependencies (ISA-L, Abseil, ...), which `pkg-config --static --libs
 * uraid-c` and CMake's `uraid::raid_static` add. ABI and versioning:
 * docs/embedding.md.
 *
 * Conventions:
 * - Every function that can fail returns 0 on success or a negative errno:
 *     -EINVAL   bad parameters, a request past the end of the array
 *     -EPERM    members that cannot form this array (stale, foreign,
 *               duplicate, dirty and degraded without force, ...), a
 *               write to a read-only array, or a state that forbids the
 *               call (another job running, degraded for a scrub, ...)
 *     -EBUSY    a member file locked by another process (flock)
 *     -E2BIG    an options struct from a newer library version whose
 *               unknown trailing fields are not zero
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
 * - Extensible structs: every options and info struct starts with
 *   `size_t struct_size`. Set it to sizeof(the struct) (URAID_INIT does),
 *   or leave it 0, which means the size of its first version (the one in
 *   this header, 0.2); never leave it uninitialised (URAID_INIT, or
 *   `= {0}`). The library reads an options struct only up to
 *   struct_size (fields past it are their defaults) and writes an info
 *   struct only up to struct_size, so a program compiled against an older
 *   or newer header keeps working; fields are only ever appended.
 * - Background threads: an open array runs md's safemode timer (marks it
 *   clean 200 ms after writes stop) and, for an array that was not shut
 *   down cleanly, a resync. Do not fork() while an array is open.
 */

#ifndef URAID_URAID_H_
#define URAID_URAID_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h> /* memset, for URAID_INIT */

#include "uraid/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An open array. Opaque. */
typedef struct uraid_array uraid_array;

/** Flag for uraid_write, uraid_trim and uraid_zero: the data is durable on
 * every member the request touched before the call returns. */
#define URAID_FUA 1u

/** The most members an array can have (md's limit for uraid's levels). */
#define URAID_MAX_DISKS 64

/** Zero-initialises *p and sets its struct_size:
 *   uraid_create_options o; URAID_INIT(&o); */
#define URAID_INIT(p)                \
  do {                               \
    memset((p), 0, sizeof(*(p)));    \
    (p)->struct_size = sizeof(*(p)); \
  } while (0)

/** Severities of log lines (syslog's). */
enum {
  URAID_LOG_DEBUG = 0,
  URAID_LOG_INFO = 1,
  URAID_LOG_NOTICE = 2,
  URAID_LOG_WARNING = 3,
  URAID_LOG_ERROR = 4,
  URAID_LOG_CRITICAL = 5,
};

/** Receives the array's log lines (create/assemble options). `message` is
 * valid only during the call. Runs on the library's threads, possibly with
 * internal locks held: must be thread-safe, return quickly and never call
 * back into the library. */
typedef void (*uraid_log_fn)(void* user, int level, const char* message);

/** Write-intent bitmap at create (uraid_create_options::bitmap). */
enum {
  URAID_BITMAP_DEFAULT = 0,  /* internal */
  URAID_BITMAP_INTERNAL = 1, /* on every member (md's --bitmap internal) */
  URAID_BITMAP_NONE = 2,
  URAID_BITMAP_FILE = 3, /* in bitmap_file (md's --bitmap FILE) */
};

/** cache_bytes value that turns the write-back stripe cache off. */
#define URAID_CACHE_OFF UINT64_MAX

/** Options of uraid_create. Zero-initialise (URAID_INIT, or `= {0}`) and set
 * what you need: every zero field means "the default". */
typedef struct uraid_create_options {
  size_t struct_size; /* sizeof(uraid_create_options), or 0 */
  /** 4, 5 or 6; 0 = 5. */
  int level;
  /** md's name ("left-symmetric", "ls", ...) or number, as mdadm parses
   * --layout at `level` (uraid_parse_layout_level); NULL = left-symmetric
   * (parity-last for level 4, its only layout). */
  const char* layout;
  /** A power of two, 4 KiB..16 MiB; 0 = 512 KiB. */
  uint64_t chunk_bytes;
  /** md's set name, at most 32 bytes; NULL = "uraid". */
  const char* name;
  /** Data bytes per member (rounded down to the chunk); 0 = the most the
   * smallest member allows. */
  uint64_t member_bytes;
  /** Where data starts on each member (a multiple of 4096); 0 = mdadm's
   * rule. */
  uint64_t data_offset_bytes;
  /** Nonzero: skip making parity consistent. Only for members known to be
   * all zeros (new sparse files): otherwise parity is computed before
   * uraid_create returns, which reads and writes every member in full. */
  int assume_clean;
  /** Nonzero: overwrite members that already hold an md superblock. */
  int force;
  /** Nonzero: open member files with O_DIRECT. */
  int direct;
  /** URAID_BITMAP_*; 0 = internal. */
  int bitmap;
  /** URAID_BITMAP_FILE: the bitmap file's path (see CreateOptions). */
  const char* bitmap_file;
  /** Member data bytes per bitmap bit; 0 = 64 MiB (fitted to the space). */
  uint64_t bitmap_chunk_bytes;
  /** Stripe cache bound in bytes; 0 = 64 MiB, URAID_CACHE_OFF = none. */
  uint64_t cache_bytes;
  /** Log lines of at least `log_level` (URAID_LOG_*) go to log(log_user,
   * ...); NULL log = discarded. */
  uraid_log_fn log;
  void* log_user;
  int log_level;
} uraid_create_options;

/** Options of uraid_assemble. Zero-initialise; zero fields are defaults. */
typedef struct uraid_assemble_options {
  size_t struct_size; /* sizeof(uraid_assemble_options), or 0 */
  int force;          /* nonzero: start an array that is dirty and degraded */
  int read_only;      /* nonzero: never write anything to any member; member
                         files are opened O_RDONLY */
  int direct;         /* nonzero: open member files with O_DIRECT */
  int no_lock;        /* nonzero: do not take the exclusive flock() on member
                         files (lets you read members another process serves) */
  int run;            /* nonzero: start degraded although a member the
                         superblocks list as active was not given (md's --run);
                         zero refuses that, naming the slot */
  /** The external bitmap file of an array created with URAID_BITMAP_FILE
   * (it must be named at every assembly); NULL = none. */
  const char* bitmap_file;
  /** Stripe cache bound in bytes; 0 = 64 MiB, URAID_CACHE_OFF = none. */
  uint64_t cache_bytes;
  /** As in uraid_create_options. */
  uraid_log_fn log;
  void* log_user;
  int log_level;
} uraid_assemble_options;

/** A member backend implemented by the caller (uraid_create_members,
 * uraid_assemble_members): object storage, a test fake, a buffer.
 *
 * Callbacks receive the descriptor's `user` pointer. Offsets and lengths
 * are bytes from the start of the raw member (the md superblock is at 4096,
 * data at the data offset). Each returns 0 or a negative errno; a transfer
 * must be complete (no short reads or writes). Buffers may have any
 * alignment. The callbacks are called concurrently from several threads,
 * but never with two overlapping writes at once. */
typedef struct uraid_member_ops {
  /** Required. Fill buf with len bytes at offset. */
  int (*read)(void* user, void* buf, size_t len, uint64_t offset);
  /** Required (may fail with -EPERM for a read-only backend). */
  int (*write)(void* user, const void* buf, size_t len, uint64_t offset);
  /** Optional (NULL = nothing to do): make completed writes durable. */
  int (*flush)(void* user);
  /** Optional (NULL = discard unsupported): drop the range; afterwards it
   * MUST read back as zeros. */
  int (*discard)(void* user, size_t len, uint64_t offset);
  /** Optional: called exactly once when the library no longer uses the
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

/** Writes new md v1.2 superblocks to the members `paths` (files, block
 * devices or NBD URIs: anything containing "://") (slot order is
 * list order; a NULL entry is a missing slot, which starts the array
 * degraded) and, unless assume_clean, makes parity consistent before
 * returning. `options` may be NULL for all defaults. On success stores the
 * open array in *out. Refuses, writing nothing, when more than one slot is
 * missing, a member is too small or already holds an md superblock (unless
 * force), or the geometry is invalid. */
URAID_EXPORT int uraid_create(const char* const* paths, size_t n,
                              const uraid_create_options* options,
                              uraid_array** out, char* err, size_t err_len);

/** Forms the array recorded in the superblocks of the members `paths`
 * (files, block devices or NBD URIs)
 * (any order; a missing member is simply left out). `options` may be NULL
 * for all defaults. Refuses, writing nothing, on corrupt or foreign
 * superblocks, stale or duplicate members, more than one member missing,
 * or a dirty degraded array without force. */
URAID_EXPORT int uraid_assemble(const char* const* paths, size_t n,
                                const uraid_assemble_options* options,
                                uraid_array** out, char* err, size_t err_len);

/** Like uraid_create and uraid_assemble, over caller-implemented members.
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

/** Flushes the members, marks the array clean (when writable) and frees it.
 * Always frees the array, even when the flush fails (the error is then
 * returned). NULL is a no-op. */
URAID_EXPORT int uraid_close(uraid_array* array, char* err, size_t err_len);

/** Reads len bytes at offset into buf; pieces on a missing member are
 * rebuilt from parity. */
URAID_EXPORT int uraid_read(uraid_array* array, void* buf, size_t len,
                            uint64_t offset, char* err, size_t err_len);
/** Writes len bytes from buf at offset, keeping parity consistent. flags:
 * 0 or URAID_FUA. */
URAID_EXPORT int uraid_write(uraid_array* array, const void* buf, size_t len,
                             uint64_t offset, unsigned flags, char* err,
                             size_t err_len);
/** Everything acknowledged before the call is durable on every member. */
URAID_EXPORT int uraid_flush(uraid_array* array, char* err, size_t err_len);
/** Advisory discard of the whole stripes inside the range (see Array::Trim).
 * flags: 0 or URAID_FUA. */
URAID_EXPORT int uraid_trim(uraid_array* array, size_t len, uint64_t offset,
                            unsigned flags, char* err, size_t err_len);
/** The range reads back as zeros afterwards. flags: 0 or URAID_FUA. */
URAID_EXPORT int uraid_zero(uraid_array* array, size_t len, uint64_t offset,
                            unsigned flags, char* err, size_t err_len);

/** Exported capacity in bytes: (raid_disks - 1) * member_bytes. */
URAID_EXPORT uint64_t uraid_size(const uraid_array* array);

enum {
  URAID_SLOT_ACTIVE = 0,
  URAID_SLOT_FAULTY = 1,
  URAID_SLOT_MISSING = 2,
  URAID_SLOT_REBUILDING = 3, /* being recovered or replaced into */
  URAID_SLOT_SPARE = 4,      /* uraid_get_member only: holds no slot */
};

/** A snapshot of the array's shape and state (see uraid::ArrayInfo). */
typedef struct uraid_info {
  size_t struct_size;   /* sizeof(uraid_info), or 0; set on return to the
                           bytes filled */
  int level;            /* 4, 5 or 6 */
  int layout;           /* md's number (URAID_LAYOUT_*) */
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
  int spares;               /* members waiting to be rebuilt onto */
  int bitmap;               /* nonzero: a write-intent bitmap is in use */
  uint64_t bitmap_chunk_bytes;
  uint64_t bitmap_dirty_chunks;
  int reshaping;                   /* a reshape is in progress */
  uint64_t reshape_position_bytes; /* md's reshape_position, bytes */
  int job; /* URAID_JOB_* running now (URAID_JOB_NONE when idle) */
} uraid_info;

/** Fills *info up to info->struct_size (info->struct_size may stop after
 * any field from `spares` on). Thread-safe. Returns 0, or -EINVAL for a
 * NULL argument or a struct_size that ends before `spares`. */
URAID_EXPORT int uraid_get_info(const uraid_array* array, uraid_info* info);

/** Marks `slot` faulty as if its member had failed (tests). */
URAID_EXPORT int uraid_fail_slot(uraid_array* array, int slot, char* err,
                                 size_t err_len);

/** The version of the linked library, "MAJOR.MINOR.PATCH" (a static string;
 * uraid/version.h has the version compiled against). */
URAID_EXPORT const char* uraid_version(void);

/* ------------------------------------------------------------ members */

/** A member opened or made by the caller, to create or assemble an array
 * from (uraid_create_from, uraid_assemble_from), add as a spare, replace
 * with, or grow by. Opaque and reference-counted: the array takes its own
 * reference, so the handle stays usable after it is given to an array (to
 * inject faults, or to assemble the same in-memory members again) and must
 * be freed with uraid_member_free whether or not it was given. A member
 * file stays open (and flock()ed) until the last reference is gone: the
 * handle's and every array's. Every function on a handle is
 * thread-safe. */
typedef struct uraid_member uraid_member;

/** Flags of uraid_member_open. */
#define URAID_MEMBER_READ_ONLY 1u /* never write (opened O_RDONLY) */
#define URAID_MEMBER_DIRECT 2u    /* files: O_DIRECT */
#define URAID_MEMBER_NO_LOCK 4u   /* files: no exclusive flock() */

/** Opens a file, a block device or an NBD URI ("nbd://...",
 * "nbd+unix:///?socket=..."). -ENOENT, -EACCES, -EBUSY (locked by another
 * process), -EINVAL (not a file or device), or the NBD connection's error. */
URAID_EXPORT int uraid_member_open(const char* spec, unsigned flags,
                                   uraid_member** out, char* err,
                                   size_t err_len);
/** A zero-filled member of `size` bytes in memory (allocated up front);
 * discard zeroes. name NULL = "mem". -ENOMEM. */
URAID_EXPORT int uraid_member_new_memory(const char* name, uint64_t size,
                                         uraid_member** out, char* err,
                                         size_t err_len);
/** Wraps `target` (which stays usable) in a fault injector: it forwards
 * every call until told to fail (uraid_member_set_failed,
 * uraid_member_fail_after, uraid_member_fail_range). Its name is the
 * target's. */
URAID_EXPORT int uraid_member_new_faulty(uraid_member* target,
                                         uraid_member** out, char* err,
                                         size_t err_len);
/** Faulty members only (-EINVAL otherwise): nonzero fails every later call
 * with EIO; zero heals it (the array does not take its slot back). */
URAID_EXPORT int uraid_member_set_failed(uraid_member* member, int failed);
/** Faulty members only: the next `ios` data I/Os succeed, then the member
 * fails as by uraid_member_set_failed(member, 1). */
URAID_EXPORT int uraid_member_fail_after(uraid_member* member, uint64_t ios);
/** Faulty members only: calls of kind `op` overlapping [offset, offset+len)
 * (raw member bytes) fail with EIO, `times` times (UINT64_MAX = always).
 * Adds one rule; rules accumulate. */
enum { URAID_OP_READ = 0, URAID_OP_WRITE = 1, URAID_OP_ANY = 2 };
URAID_EXPORT int uraid_member_fail_range(uraid_member* member, int op,
                                         uint64_t offset, uint64_t len,
                                         uint64_t times);
/** Raw member I/O, bypassing any array (tests inspecting md's placement,
 * or corrupting a chunk under an array to exercise repair). Offsets are
 * raw member bytes (the superblock is at 4096). Thread-safe as the member
 * is; a write under a running array races with it like any other writer. */
URAID_EXPORT int uraid_member_read(uraid_member* member, void* buf, size_t len,
                                   uint64_t offset, char* err, size_t err_len);
URAID_EXPORT int uraid_member_write(uraid_member* member, const void* buf,
                                    size_t len, uint64_t offset, char* err,
                                    size_t err_len);
/** Raw size in bytes; 0 for NULL. */
URAID_EXPORT uint64_t uraid_member_size(const uraid_member* member);
/** The name (path, URI or given name) arrays use for it; NULL for NULL.
 * Valid until uraid_member_free. */
URAID_EXPORT const char* uraid_member_name(const uraid_member* member);
/** Drops the caller's reference. NULL is a no-op. */
URAID_EXPORT void uraid_member_free(uraid_member* member);

/** Like uraid_create / uraid_assemble over handles (a NULL entry is a
 * missing slot, create only). The arrays take their own references. */
URAID_EXPORT int uraid_create_from(uraid_member* const* members, size_t n,
                                   const uraid_create_options* options,
                                   uraid_array** out, char* err,
                                   size_t err_len);
URAID_EXPORT int uraid_assemble_from(uraid_member* const* members, size_t n,
                                     const uraid_assemble_options* options,
                                     uraid_array** out, char* err,
                                     size_t err_len);

/** One slot or spare of the array (uraid_get_member). */
typedef struct uraid_member_info {
  size_t struct_size;      /* sizeof(uraid_member_info), or 0 */
  int slot;                /* raid slot; -1 for a spare */
  int state;               /* URAID_SLOT_* */
  uint64_t recovery_bytes; /* REBUILDING: member data bytes in sync */
  char name[1024];         /* "" when missing */
} uraid_member_info;

/** Fills *info for member `index`: 0..raid_disks-1 are the slots in order,
 * raid_disks..raid_disks+spares-1 the spares. -ENOENT past the last,
 * -ERANGE for a name longer than info->name holds. Thread-safe (a
 * snapshot: indexes shift when members come and go). */
URAID_EXPORT int uraid_get_member(const uraid_array* array, int index,
                                  uraid_member_info* info);

/** md's --fail, --remove, --add, --replace, naming a member by the name
 * uraid_get_member shows. Thread-safe, also while serving; each returns
 * when the new roles are durable in the superblocks, not when a resulting
 * rebuild ends (uraid_wait_job). Errors:
 *   uraid_fail     -ENOENT no such member; -EPERM when it would fail the
 *                  array (a second member gone)
 *   uraid_remove   -EPERM for an active member (fail it first)
 *   uraid_add      makes `member` a spare; a degraded array starts
 *                  recovery onto it at once. -EPERM on a read-only or
 *                  failed array, -EINVAL for a member too small
 *   uraid_replace  copies `old_name` onto `replacement` while the old one
 *                  keeps serving, then releases the old one */
URAID_EXPORT int uraid_fail(uraid_array* array, const char* name, char* err,
                            size_t err_len);
URAID_EXPORT int uraid_remove(uraid_array* array, const char* name, char* err,
                              size_t err_len);
URAID_EXPORT int uraid_add(uraid_array* array, uraid_member* member, char* err,
                           size_t err_len);
URAID_EXPORT int uraid_replace(uraid_array* array, const char* old_name,
                               uraid_member* replacement, char* err,
                               size_t err_len);

/* --------------------------------------------------------------- jobs */

/** The most stripes a job's outcome lists (uraid_progress). */
#define URAID_MAX_LISTED 16

/** Background jobs, md's sync_action words (uraid_progress::kind). */
enum {
  URAID_JOB_NONE = 0, /* "idle" */
  URAID_JOB_RESYNC = 1,
  URAID_JOB_RECOVER = 2,
  URAID_JOB_REPLACE = 3,
  URAID_JOB_CHECK = 4,
  URAID_JOB_REPAIR = 5,
  URAID_JOB_RESHAPE = 6,
};

/** The running job's progress and the last job's outcome. */
typedef struct uraid_progress {
  size_t struct_size;    /* sizeof(uraid_progress), or 0; set to bytes filled */
  int kind;              /* URAID_JOB_*; NONE when idle */
  char kind_name[16];    /* "recover", ..., "idle" */
  uint64_t done_bytes;   /* per-member data bytes processed */
  uint64_t total_bytes;  /* per-member data bytes in all */
  double percent;        /* 100 * done / total; 0 when idle */
  double bytes_per_s;    /* recent rate, member bytes per second */
  double eta_seconds;    /* (total - done) / rate; -1 when unknown */
  int slot;              /* recover/replace: the slot; else -1 */
  uint64_t mismatches;   /* check/repair: stripes whose parity differed */
  int last_kind;         /* the last finished job, URAID_JOB_* */
  char last_result[256]; /* "completed", "interrupted" or the error */
  uint64_t last_mismatches;
  /* Level 6 (appended; absent from callers built against older headers). */
  int second_slot;    /* recover: a second slot rebuilt in the same pass; -1 */
  int last_n_located; /* entries used in last_located_* below */
  /* check/repair: of `mismatches`, stripes whose one bad chunk P and Q
   * located (mdadm's raid6check); repair rewrote that chunk there. */
  uint64_t located_mismatches;
  uint64_t last_located_mismatches; /* the same for the last job */
  /* The last job's first located stripes (chunk rows, as uraid_map's
   * stripe) and, parallel, the slot holding the bad chunk in each. */
  uint64_t last_located_stripes[URAID_MAX_LISTED];
  int last_located_slots[URAID_MAX_LISTED];
  int last_slot;        /* the last recover/replace: its slot, else -1 */
  int last_second_slot; /* and its second slot at level 6, else -1 */
} uraid_progress;

/** Fills *progress up to its struct_size. Thread-safe; cheap to poll. */
URAID_EXPORT int uraid_get_progress(const uraid_array* array,
                                    uraid_progress* progress);
/** Starts a background scrub: repair zero = check (counts mismatches),
 * nonzero = repair (rewrites their parity). -EPERM when another job runs
 * or the array is degraded. */
URAID_EXPORT int uraid_check(uraid_array* array, int repair, char* err,
                             size_t err_len);
/** Stops the running job at its next stripe (md's "idle") and returns once
 * it has ended; resync and recovery resume at the next assembly. A resync
 * does not stop and is not waited for. 0 when none runs. Must not be called
 * from a log or event callback. */
URAID_EXPORT int uraid_stop_job(uraid_array* array, char* err, size_t err_len);
/** Blocks until no job runs. Returns the last job's outcome: 0 when it
 * completed (or none ran), else its error. Thread-safe; must not be
 * called from a log or event callback. */
URAID_EXPORT int uraid_wait_job(uraid_array* array, char* err, size_t err_len);
/** md's sync_speed_min/max in KiB/s per member; 0 keeps the current value.
 * -EINVAL when min > max after merging. */
URAID_EXPORT int uraid_set_speed(uraid_array* array, uint64_t min_kib_s,
                                 uint64_t max_kib_s, char* err, size_t err_len);
/** Changes the stripe cache bound (0 = off). Thread-safe. */
URAID_EXPORT int uraid_set_cache_bytes(uraid_array* array, uint64_t bytes);

/** A reshape (md's --grow): unset (zero/NULL) fields keep the array's. */
typedef struct uraid_grow_options {
  size_t struct_size; /* sizeof(uraid_grow_options), or 0 */
  int raid_devices;   /* more than now: grow by add[] */
  /* md's name or number, as mdadm reads --layout at the target level
   * (`level` if set, else the array's): RAID6's names only at level 6. */
  const char* layout;
  uint64_t chunk_bytes;
  int level; /* 4, 5 or 6 (md's takeovers: 4 <-> 5, 5 <-> 6) */
  /** New members, one per added device, given slots in order. The array
   * takes its own references. */
  uraid_member* const* add;
  size_t n_add;
  /** Nonzero: no background job; call uraid_reshape_step until done. */
  int manual;
} uraid_grow_options;

/** Starts a reshape that restripes in the background (URAID_JOB_RESHAPE);
 * the exported size grows when it ends. -EPERM when degraded, read-only,
 * busy with another job, or without headroom; -EINVAL for a shape md
 * cannot reshape to. Thread-safe. */
URAID_EXPORT int uraid_grow(uraid_array* array,
                            const uraid_grow_options* options, char* err,
                            size_t err_len);
/** Manual reshapes: copies the next window; *done (may be NULL) is set
 * nonzero once the reshape has finished. */
URAID_EXPORT int uraid_reshape_step(uraid_array* array, int* done, char* err,
                                    size_t err_len);

/* ------------------------------------------------------------- events */

/** One event, in mdadm --monitor's words (uraid/events.h lists them). All
 * pointers are valid only during the callback. */
typedef struct uraid_event {
  size_t struct_size; /* sizeof(uraid_event) of the library */
  const char* name;   /* "Fail", "RebuildFinished", ... */
  double time;        /* seconds since the Unix epoch */
  const char* member; /* "" when about no member */
  int slot;           /* the slot, -1 for a spare, -2 when none */
  /** The whole event as the control channel's JSON line (no newline):
   * {"event":NAME,"time":...,"array":UUID,...details}. */
  const char* json;
} uraid_event;

/** Called for every event of the array, on the thread where it happened,
 * possibly with internal locks held: thread-safe, quick, never blocking on
 * I/O, never calling back into the library (queue the work elsewhere). */
typedef void (*uraid_event_fn)(void* user, const uraid_event* event);

/** Adds a listener; *id (may be NULL) identifies it for removal. The
 * current state is not replayed. Thread-safe. */
URAID_EXPORT int uraid_add_event_listener(uraid_array* array, uraid_event_fn fn,
                                          void* user, uint64_t* id);
/** After it returns, the listener is never called again. Must not be
 * called from a callback. Unknown ids are ignored. */
URAID_EXPORT void uraid_remove_event_listener(uraid_array* array, uint64_t id);

/* ----------------------------------------------------- control server */

/** The live control channel (uraid/control.h) on a unix socket, so that
 * `uraid detail|fail|add|... --control SOCKET` manages this array. */
typedef struct uraid_control uraid_control;

/** Creates the socket (mode 0600) and serves the array from background
 * threads. The array must outlive the server: stop it first. -EPERM for a
 * live socket already there, -EINVAL for a path too long. */
URAID_EXPORT int uraid_control_start(uraid_array* array,
                                     const char* socket_path,
                                     uraid_control** out, char* err,
                                     size_t err_len);
/** Stops serving, joins the threads, removes the socket and frees the
 * server. NULL is a no-op. */
URAID_EXPORT void uraid_control_stop(uraid_control* server);

/* ------------------------------------------------- pure md arithmetic */

/** An array's shape for the pure functions below (no array needed). */
typedef struct uraid_geometry {
  size_t struct_size; /* sizeof(uraid_geometry), or 0 */
  int level;          /* 4, 5 or 6; 0 = 5 */
  /* md's number (URAID_LAYOUT_*): 0..5, and at level 6 also 8..10 and
   * 16..20 */
  int layout;
  uint64_t chunk_bytes;
  int raid_disks;
  /** Data bytes per member; 0 = as large as offsets need (2^62, chunk
   * aligned). */
  uint64_t member_bytes;
} uraid_geometry;

enum {
  URAID_LAYOUT_LEFT_ASYMMETRIC = 0,
  URAID_LAYOUT_RIGHT_ASYMMETRIC = 1,
  URAID_LAYOUT_LEFT_SYMMETRIC = 2,
  URAID_LAYOUT_RIGHT_SYMMETRIC = 3,
  URAID_LAYOUT_PARITY_FIRST = 4,
  URAID_LAYOUT_PARITY_LAST = 5,
  /* RAID6 only (md's algorithm_valid_raid6): the DDF layouts, whose Q
   * covers every disk by physical index, */
  URAID_LAYOUT_DDF_ZERO_RESTART = 8,
  URAID_LAYOUT_DDF_N_RESTART = 9,
  URAID_LAYOUT_DDF_N_CONTINUE = 10,
  /* and the RAID5 layouts over all disks but the last, which holds Q (the
   * shape of md's RAID5 -> RAID6 conversion). */
  URAID_LAYOUT_LEFT_ASYMMETRIC_6 = 16,
  URAID_LAYOUT_RIGHT_ASYMMETRIC_6 = 17,
  URAID_LAYOUT_LEFT_SYMMETRIC_6 = 18,
  URAID_LAYOUT_RIGHT_SYMMETRIC_6 = 19,
  URAID_LAYOUT_PARITY_FIRST_6 = 20,
};

/** Where md puts one logical byte. */
typedef struct uraid_location {
  uint64_t stripe;        /* chunk row */
  int data_index;         /* 0..data disks-1 within the stripe */
  int disk;               /* slot holding the byte */
  int parity_disk;        /* slot holding the stripe's parity (RAID6: P) */
  uint64_t member_offset; /* bytes from the data offset on `disk` */
} uraid_location;

/** md's layout name or number -> number; -EINVAL if unknown. As mdadm
 * parses --layout at level 5: the "-6" names and numbers 8-20 are
 * refused, and the ddf names are mdadm's RAID5 aliases. */
URAID_EXPORT int uraid_parse_layout(const char* name);
/** The same at `level` (4, 5 or 6; 0 = 5), as mdadm parses --layout for
 * it: level 6 also takes "ddf-zero-restart", "ddf-N-restart",
 * "ddf-N-continue", "left-asymmetric-6" ... "parity-first-6" and the
 * numbers 8-10 and 16-20. -EINVAL if unknown at that level. */
URAID_EXPORT int uraid_parse_layout_level(const char* name, int level);
/** Maps array byte `offset`. -EINVAL for a bad geometry (the message names
 * the parameter) or an offset past the end. Pure; thread-safe. */
URAID_EXPORT int uraid_map(const uraid_geometry* geometry, uint64_t offset,
                           uraid_location* out, char* err, size_t err_len);
/** The inverse: the array offset of member byte `member_offset` on `disk`.
 * -ENOENT when it is a parity byte, -EINVAL for bad arguments. */
URAID_EXPORT int uraid_unmap(const uraid_geometry* geometry, int disk,
                             uint64_t member_offset, uint64_t* offset,
                             char* err, size_t err_len);

/* ------------------------------------------- md v1.2 superblock codec */

#define URAID_SB_BYTES 4096   /* one superblock block */
#define URAID_SB_MAX_DEV 1920 /* role table entries in that block */
#define URAID_ROLE_SPARE 0xFFFF
#define URAID_ROLE_FAULTY 0xFFFE

/** md's mdp_superblock_1, field for field in host order (sizes in 512-byte
 * sectors as md stores them). */
typedef struct uraid_superblock {
  size_t struct_size; /* sizeof(uraid_superblock), or 0 */
  uint32_t feature_map;
  uint8_t set_uuid[16];
  char set_name[33];
  uint64_t ctime;
  int32_t level;
  uint32_t layout;
  uint64_t size;
  uint32_t chunksize;
  uint32_t raid_disks;
  int32_t bitmap_offset;
  uint32_t new_level;
  uint64_t reshape_position;
  int32_t delta_disks;
  uint32_t new_layout;
  uint32_t new_chunk;
  int32_t new_offset;
  uint64_t data_offset;
  uint64_t data_size;
  uint64_t super_offset;
  uint64_t recovery_offset;
  uint32_t dev_number;
  uint32_t cnt_corrected_read;
  uint8_t device_uuid[16];
  uint8_t devflags;
  uint8_t bblog_shift;  /* the bad-block log: units of 2^shift sectors, */
  uint16_t bblog_size;  /* its size in sectors, */
  int32_t bblog_offset; /* its offset from the superblock, sectors */
  uint64_t utime;
  uint64_t events;
  uint64_t resync_offset; /* UINT64_MAX = clean */
  uint32_t sb_csum;       /* decode: as read; encode: computed */
  uint32_t max_dev;
  uint32_t n_roles;                     /* entries used in dev_roles */
  uint16_t dev_roles[URAID_SB_MAX_DEV]; /* slot, or URAID_ROLE_* */
} uraid_superblock;

/** Decodes and validates (magic, version, checksum, offsets: like the
 * kernel's super_1_load) a superblock block read from byte 4096 of a
 * member. -EINVAL or -EIO (corrupt) with the failed check named. Pure. */
URAID_EXPORT int uraid_superblock_decode(const void* bytes, size_t len,
                                         uraid_superblock* out, char* err,
                                         size_t err_len);
/** Encodes into URAID_SB_BYTES bytes at `out` (out_len at least that),
 * with a fresh checksum. -EINVAL for a name over 32 bytes or too many
 * roles. Pure. */
URAID_EXPORT int uraid_superblock_encode(const uraid_superblock* sb, void* out,
                                         size_t out_len, char* err,
                                         size_t err_len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* URAID_URAID_H_ */
