// SPDX-License-Identifier: MIT
// The errno the plugin hands nbdkit for a failed request: libraid's one
// table (uraid/status_errno.h) narrowed to what reaches an NBD client.
//
// NBD replies carry only EPERM, EIO, ENOMEM, EINVAL, ENOSPC, EOVERFLOW,
// ENOTSUP and ESHUTDOWN. nbdkit 1.32 sends EROFS as EPERM, ENOTSUP and
// EOPNOTSUPP as EINVAL (ENOTSUP for a fast zero, and it falls back from
// zero to write on either), EOVERFLOW as EINVAL (EOVERFLOW only with the DF
// flag), and every other errno as EINVAL, which a client reads as "your
// request was bad". So the errnos of the table that NBD cannot carry are
// mapped here to the nearest one it can:
//
//   EACCES     -> EPERM  access refused: NBD's word for it
//   EBUSY      -> EPERM  a member locked by another process (what the
//                        table gave before it had EBUSY)
//   E2BIG      -> EPERM  an options struct from a newer library
//   ETIMEDOUT  -> EIO    a member that did not answer is a member failure,
//                        and a failed member is EIO to the client
//   ENOENT, EEXIST, ECANCELED, anything else -> EIO
//                        not the client's fault, so not EINVAL
//
// EPERM, EIO, ENOMEM, EINVAL, ENOSPC, EOVERFLOW, ESHUTDOWN, ENOTSUP and
// EOPNOTSUPP pass unchanged (nbdkit needs EOPNOTSUPP as such for the
// zero-to-write fallback), and so does EROFS (a write to an array switched
// read-only by `uraid readonly`), which nbdkit itself turns into EPERM.

#ifndef URAID_NBDPLUGIN_NBD_ERRNO_H_
#define URAID_NBDPLUGIN_NBD_ERRNO_H_

#include "absl/status/status.h"

namespace uraid::plugin {

// For an errno from uraid::StatusToErrno, one the NBD
// protocol carries (see above). 0 stays 0.
int NarrowToNbdErrno(int err);

// NarrowToNbdErrno(uraid::StatusToErrno(status)): what the plugin sets as
// errno before returning -1 from a callback.
int NbdErrno(const absl::Status& status);

}  // namespace uraid::plugin

#endif  // URAID_NBDPLUGIN_NBD_ERRNO_H_
