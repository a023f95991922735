// SPDX-License-Identifier: MIT
// absl::StatusCode -> errno: the table and its reasons are in
// uraid/status_errno.h; keep the two in step.

#include "uraid/status_errno.h"

#include <cerrno>

#include "absl/status/status.h"

namespace uraid {

int StatusCodeToErrno(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 0;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return EINVAL;
    case absl::StatusCode::kFailedPrecondition:
      return EPERM;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return EACCES;
    case absl::StatusCode::kNotFound:
      return ENOENT;
    case absl::StatusCode::kAlreadyExists:
      return EEXIST;
    case absl::StatusCode::kResourceExhausted:
      return ENOMEM;
    case absl::StatusCode::kUnimplemented:
      return EOPNOTSUPP;
    case absl::StatusCode::kDeadlineExceeded:
      return ETIMEDOUT;
    case absl::StatusCode::kCancelled:
      return ECANCELED;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDataLoss:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
      return EIO;
    default:
      // A value outside the canonical codes (absl reserves room for more).
      return EIO;
  }
}

int StatusToErrno(const absl::Status& status) {
  return StatusCodeToErrno(status.code());
}

}  // namespace uraid
