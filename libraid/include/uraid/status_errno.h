// SPDX-License-Identifier: MIT
// File: uraid/status_errno.h
//
// The one way from an absl::Status back to an errno. libraid reports every
// error as an absl::Status; an edge that must speak errno (the C API in
// uraid/uraid.h, the nbdkit plugin, an embedder's own FFI) converts with
// StatusToErrno, so the same failure gives the same errno everywhere.
//
// The table (absl::StatusCode -> errno), and why:
//
//   kOk                  0
//   kInvalidArgument     EINVAL      bad parameters or geometry
//   kOutOfRange          EINVAL      a request past the end of the array:
//                                    what read(2)/pread(2) callers and NBD
//                                    clients expect for a bad offset
//   kFailedPrecondition  EPERM       the array's state forbids it: members
//                                    that cannot form this array, a write
//                                    to a read-only array, dirty and
//                                    degraded without force
//   kPermissionDenied    EACCES      the OS refused access (open(2) gave
//                                    EACCES, EPERM or EROFS; absl's
//                                    ErrnoToStatus folds all three here)
//   kUnauthenticated     EACCES      no valid credentials: access refused
//   kNotFound            ENOENT      a member path, slot or bitmap that
//                                    does not exist
//   kAlreadyExists       EEXIST      the thing to create is already there
//   kResourceExhausted   ENOMEM      out of memory or another bounded
//                                    resource (role table, connections)
//   kUnimplemented       EOPNOTSUPP  a feature uraid does not handle, or a
//                                    member that cannot do the operation
//                                    (discard); lets nbdkit fall back from
//                                    zero to write
//   kDeadlineExceeded    ETIMEDOUT   a member (NBD) did not answer in time
//   kCancelled           ECANCELED   stopped by request
//   kUnavailable         EIO         a member missing or failed, a failed
//                                    array
//   kDataLoss            EIO         beyond redundancy, corrupt metadata
//   kAborted             EIO         a job or request abandoned part-way
//                                    (its target failed): an I/O failure
//   kInternal            EIO         a broken invariant
//   kUnknown             EIO         an error from elsewhere (an errno
//                                    absl had no code for)
//   any other value      EIO
//
// One refinement overrides the table: a status carrying an errno payload
// (WithErrno) gives that errno. The library sets it where the code alone
// says too little for an errno user: a member file locked by another
// process (or a bitmap file so locked) is FailedPrecondition (it cannot
// join this array) but EBUSY, as open(2) of a busy device would say; an
// options struct from a newer library with unknown fields set is
// InvalidArgument but E2BIG.
//
// EIO is the default on purpose: a caller that only knows "I/O failed"
// treats it correctly, and the message (which names the member and offset
// at fault) carries the detail.
//
// Transports that carry fewer errnos narrow this table rather than keep
// their own: NBD, for instance, transmits only EPERM, EIO, ENOMEM, EINVAL,
// ENOSPC, EOVERFLOW, ENOTSUP and ESHUTDOWN (the nbdkit plugin's
// NbdErrno, nbdplugin/nbd_errno.h).
//
// Thread-safety: a pure function.

#ifndef URAID_STATUS_ERRNO_H_
#define URAID_STATUS_ERRNO_H_

#include "absl/status/status.h"
#include "uraid/export.h"

namespace uraid {

// The type URL of the errno payload (its value: the errno in decimal).
inline constexpr char kErrnoPayloadUrl[] = "uraid.dev/errno";

// `status` (not OK) with an errno payload: StatusToErrno then returns
// `err` (positive) instead of the table's value. OK stays OK.
URAID_EXPORT absl::Status WithErrno(absl::Status status, int err);

// The errno for `status`: its payload (WithErrno) if any, else the table
// above: 0 for OK, otherwise a
// positive errno value (never 0). Callers that return negative errnos
// (the C API) negate it.
URAID_EXPORT int StatusToErrno(const absl::Status& status);

// The same for a bare code, for callers that carry codes without a
// Status. StatusToErrno(s) == StatusCodeToErrno(s.code()).
URAID_EXPORT int StatusCodeToErrno(absl::StatusCode code);

}  // namespace uraid

#endif  // URAID_STATUS_ERRNO_H_
