// SPDX-License-Identifier: MIT
// absl::StatusCode -> errno: the table and its reasons are in
// uraid/status_errno.h; keep the two in step.

#include "uraid/status_errno.h"

#include <cerrno>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"

namespace uraid {

namespace {

// The codes that do not map to EIO. EIO, the default, takes the rest:
// kUnavailable, kDataLoss, kAborted, kInternal, kUnknown and any value
// outside the canonical codes (absl reserves room for more).
constexpr std::pair<absl::StatusCode, int> kNotEio[] = {
    {absl::StatusCode::kOk, 0},
    {absl::StatusCode::kInvalidArgument, EINVAL},
    {absl::StatusCode::kOutOfRange, EINVAL},
    {absl::StatusCode::kFailedPrecondition, EPERM},
    {absl::StatusCode::kPermissionDenied, EACCES},
    {absl::StatusCode::kUnauthenticated, EACCES},
    {absl::StatusCode::kNotFound, ENOENT},
    {absl::StatusCode::kAlreadyExists, EEXIST},
    {absl::StatusCode::kResourceExhausted, ENOMEM},
    {absl::StatusCode::kUnimplemented, EOPNOTSUPP},
    {absl::StatusCode::kDeadlineExceeded, ETIMEDOUT},
    {absl::StatusCode::kCancelled, ECANCELED},
};

}  // namespace

int StatusCodeToErrno(absl::StatusCode code) {
  for (const auto& [c, err] : kNotEio) {
    if (c == code) return err;
  }
  return EIO;
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
