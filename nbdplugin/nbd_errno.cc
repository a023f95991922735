// SPDX-License-Identifier: MIT
// StatusToErrno narrowed to NBD's errnos; the reasons are in nbd_errno.h.

#include "nbd_errno.h"

#include <cerrno>

#include "absl/status/status.h"
#include "uraid/status_errno.h"

namespace uraid::plugin {

int NarrowToNbdErrno(int err) {
  switch (err) {
    case 0:
    case EPERM:
    case EIO:
    case ENOMEM:
    case EINVAL:
    case ENOSPC:
    case EOVERFLOW:
    case ESHUTDOWN:
    case EROFS:  // nbdkit sends it as NBD's EPERM, and logs it as EROFS
#if ENOTSUP != EOPNOTSUPP
    case ENOTSUP:
#endif
    case EOPNOTSUPP:
      return err;
    case EACCES:
    case EBUSY:  // a locked member: the operation is not permitted now
    case E2BIG:  // options from a newer library: not NBD's concern
      return EPERM;
    default:
      return EIO;
  }
}

int NbdErrno(const absl::Status& status) {
  return NarrowToNbdErrno(uraid::StatusToErrno(status));
}

}  // namespace uraid::plugin
