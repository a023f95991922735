// SPDX-License-Identifier: MIT
// File: uraid/counters.h
//
// The array's counters, listed once. URAID_COUNTERS(X) expands X(name, help)
// for every counter, in display order (the order of uraid::Counters, of
// `uraid detail`'s table, of the JSON codec's "counters" object and of the
// plugin's stats=FILE). Everything that names the counters one by one is
// written as an expansion of this list: the Counters struct (uraid/array.h),
// CounterFields() (uraid/info_json.h) and what is built on it.
//
// Why an X-macro and not a table of {name, member pointer, help}: a table
// needs the struct declared beside it, a second list of the same names that
// only a size check ties to the first; the macro declares the struct's
// fields from the same lines, and can equally declare the engine's atomic
// twin of the struct and its snapshot, where member pointers to
// std::atomic fields of another type cannot help.
//
// Adding a counter: one line here (append it where it belongs in the
// display order); JSON, `uraid detail`, `uraid metrics` and stats= follow.
// The C API's uraid_info carries three counters at fixed offsets (its ABI)
// and does not follow.

#ifndef URAID_COUNTERS_H_
#define URAID_COUNTERS_H_

// X(name, help): `name` is the field and its JSON/metric name; `help` says
// what it counts.
#define URAID_COUNTERS(X)                                                  \
  X(member_reads, "member reads issued")                                   \
  X(member_read_bytes, "bytes of those reads")                             \
  X(member_writes, "member writes issued")                                 \
  X(member_write_bytes, "bytes of those writes")                           \
  X(member_flushes, "member flushes issued")                               \
  /* Of member_writes, those written with FUA (durable when done, no flush \
     needed): a PPL stripe alone in its log batch. */                      \
  X(member_fua_writes, "member writes issued with FUA")                    \
  X(full_stripe_writes, "stripes written with no reads")                   \
  X(rmw_writes, "stripes updated by read-modify-write")                    \
  X(rcw_writes, "stripes updated by reconstruct-write")                    \
  X(degraded_writes, "stripes written around a missing member")            \
  X(reconstructions, "read pieces rebuilt from parity")                    \
  X(resynced_stripes, "stripes checked by resync")                         \
  X(resync_repairs, "stripes whose parity resync rewrote")                 \
  X(cached_writes, "write pieces gathered in the cache")                   \
  X(cache_writebacks, "cache entries written to members")                  \
  X(cache_evictions, "writebacks forced by a full cache")                  \
  X(read_errors_corrected, "reads rebuilt from parity and rewritten")      \
  X(recovered_stripes, "stripes rebuilt onto a new member")                \
  X(scrubbed_stripes, "stripes read by check/repair")                      \
  X(resync_bitmap_chunks, "bitmap chunks resync went through")             \
  X(resync_bytes, "member bytes resync read, per member")                  \
  X(cache_full_writes,                                                     \
    "write pieces the cache would have gathered but, full, wrote through") \
  X(cache_held_writes,                                                     \
    "write pieces gathered while the array could not spare a member, "     \
    "acknowledged once their stripe was on the members")                   \
  X(cache_hold_timeouts,                                                   \
    "held pieces whose stripe did not fill in time and went out partial")

#endif  // URAID_COUNTERS_H_
