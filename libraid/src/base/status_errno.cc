// SPDX-License-Identifier: MIT
// absl::StatusCode -> errno: the table and its reasons are in
// uraid/status_errno.h; keep the two in step.

#include "uraid/status_errno.h"

#include <cerrno>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

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

absl::Status WithErrno(absl::Status status, int err) {
  if (status.ok() || err <= 0) return status;
  status.SetPayload(kErrnoPayloadUrl, absl::Cord(std::to_string(err)));
  return status;
}

int StatusToErrno(const absl::Status& status) {
  if (!status.ok()) {
    if (auto p = status.GetPayload(kErrnoPayloadUrl); p.has_value()) {
      int err = 0;
      if (absl::SimpleAtoi(std::string(*p), &err) && err > 0) return err;
    }
  }
  return StatusCodeToErrno(status.code());
}

}  // namespace uraid
