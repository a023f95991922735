// SPDX-License-Identifier: MIT
// The one absl::StatusCode -> errno table (uraid/status_errno.h), checked
// code by code, and the plugin's narrowing of it to the errnos an NBD reply
// can carry (nbdplugin/nbd_errno.h).

#include "uraid/status_errno.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <iterator>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "nbd_errno.h"

namespace uraid {
namespace {

struct Row {
  absl::StatusCode code;
  int c_errno;    // StatusToErrno: the C API, embedders
  int nbd_errno;  // plugin::NbdErrno: what an NBD client sees
};

// Every canonical code, kOk (0) through kUnauthenticated (16).
constexpr Row kTable[] = {
    {absl::StatusCode::kOk, 0, 0},
    {absl::StatusCode::kCancelled, ECANCELED, EIO},
    {absl::StatusCode::kUnknown, EIO, EIO},
    {absl::StatusCode::kInvalidArgument, EINVAL, EINVAL},
    {absl::StatusCode::kDeadlineExceeded, ETIMEDOUT, EIO},
    {absl::StatusCode::kNotFound, ENOENT, EIO},
    {absl::StatusCode::kAlreadyExists, EEXIST, EIO},
    {absl::StatusCode::kPermissionDenied, EACCES, EPERM},
    {absl::StatusCode::kResourceExhausted, ENOMEM, ENOMEM},
    {absl::StatusCode::kFailedPrecondition, EPERM, EPERM},
    {absl::StatusCode::kAborted, EIO, EIO},
    {absl::StatusCode::kOutOfRange, EINVAL, EINVAL},
    {absl::StatusCode::kUnimplemented, EOPNOTSUPP, EOPNOTSUPP},
    {absl::StatusCode::kInternal, EIO, EIO},
    {absl::StatusCode::kUnavailable, EIO, EIO},
    {absl::StatusCode::kDataLoss, EIO, EIO},
    {absl::StatusCode::kUnauthenticated, EACCES, EPERM},
};

TEST(StatusErrnoTest, TableCoversEveryCanonicalCode) {
  std::set<int> codes;
  for (const Row& row : kTable) codes.insert(static_cast<int>(row.code));
  for (int c = 0; c <= static_cast<int>(absl::StatusCode::kUnauthenticated);
       ++c) {
    EXPECT_TRUE(codes.count(c)) << "code " << c << " has no row";
  }
  EXPECT_EQ(codes.size(), std::size(kTable)) << "a code has two rows";
}

TEST(StatusErrnoTest, EveryCodeHasItsErrno) {
  for (const Row& row : kTable) {
    const absl::Status st(row.code, row.code == absl::StatusCode::kOk
                                        ? ""
                                        : "m1: pread at 4096: boom");
    SCOPED_TRACE(absl::StatusCodeToString(row.code));
    EXPECT_EQ(StatusToErrno(st), row.c_errno);
    EXPECT_EQ(StatusCodeToErrno(row.code), row.c_errno);
    EXPECT_EQ(plugin::NbdErrno(st), row.nbd_errno);
  }
}

TEST(StatusErrnoTest, OnlyOkIsZero) {
  for (const Row& row : kTable) {
    if (row.code == absl::StatusCode::kOk) continue;
    SCOPED_TRACE(absl::StatusCodeToString(row.code));
    EXPECT_GT(StatusToErrno(absl::Status(row.code, "x")), 0);
    EXPECT_GT(plugin::NbdErrno(absl::Status(row.code, "x")), 0);
  }
}

TEST(StatusErrnoTest, CodesOutsideTheCanonicalOnesAreEio) {
  for (int c : {17, 20, 1000}) {
    const absl::Status st(static_cast<absl::StatusCode>(c), "from the future");
    SCOPED_TRACE(absl::StrFormat("code %d", c));
    EXPECT_EQ(StatusToErrno(st), EIO);
    EXPECT_EQ(plugin::NbdErrno(st), EIO);
  }
}

// The message never changes the errno: only the code does.
TEST(StatusErrnoTest, MessageDoesNotMatter) {
  EXPECT_EQ(StatusToErrno(absl::NotFoundError("")), ENOENT);
  EXPECT_EQ(StatusToErrno(absl::NotFoundError("permission denied: EACCES")),
            ENOENT);
}

// An errno the library turned into a Status at a syscall (absl's
// ErrnoToStatus) comes back as itself where the table has room for it.
TEST(StatusErrnoTest, SyscallErrnosRoundTrip) {
  for (int err :
       {ENOENT, EACCES, EEXIST, EINVAL, ETIMEDOUT, ECANCELED, ENOMEM}) {
    SCOPED_TRACE(absl::StrFormat("errno %d", err));
    EXPECT_EQ(StatusToErrno(absl::ErrnoToStatus(err, "open m0.img")), err);
  }
  // EPERM and EROFS fold into kPermissionDenied with EACCES: access refused.
  EXPECT_EQ(StatusToErrno(absl::ErrnoToStatus(EPERM, "open")), EACCES);
  EXPECT_EQ(StatusToErrno(absl::ErrnoToStatus(EROFS, "open")), EACCES);
  EXPECT_EQ(StatusToErrno(absl::ErrnoToStatus(EOPNOTSUPP, "discard")),
            EOPNOTSUPP);
}

// NBD carries EPERM, EIO, ENOMEM, EINVAL, ENOSPC, EOVERFLOW, ENOTSUP and
// ESHUTDOWN; nbdkit turns anything else into EINVAL ("bad request") except
// EROFS (EPERM) and EOPNOTSUPP (kept for its zero-to-write fallback).
TEST(NbdErrnoTest, NarrowsToWhatNbdCarries) {
  const std::set<int> carried = {0,         EPERM,     EIO,       ENOMEM,
                                 EINVAL,    ENOSPC,    EOVERFLOW, ENOTSUP,
                                 ESHUTDOWN, EOPNOTSUPP};
  for (int c = 0; c <= 20; ++c) {
    const absl::Status st(static_cast<absl::StatusCode>(c), "x");
    SCOPED_TRACE(absl::StrFormat("code %d", c));
    EXPECT_TRUE(carried.count(plugin::NbdErrno(st)));
  }
  for (int err : carried) EXPECT_EQ(plugin::NarrowToNbdErrno(err), err);
  EXPECT_EQ(plugin::NarrowToNbdErrno(EACCES), EPERM);
  EXPECT_EQ(plugin::NarrowToNbdErrno(ETIMEDOUT), EIO);
  EXPECT_EQ(plugin::NarrowToNbdErrno(ENOENT), EIO);
  EXPECT_EQ(plugin::NarrowToNbdErrno(EEXIST), EIO);
  EXPECT_EQ(plugin::NarrowToNbdErrno(ECANCELED), EIO);
  EXPECT_EQ(plugin::NarrowToNbdErrno(EAGAIN), EIO);
  // A write to an array switched read-only: EROFS reaches nbdkit as such
  // (nbdkit sends NBD's EPERM), never EIO, which reads as a failed disk.
  EXPECT_EQ(plugin::NarrowToNbdErrno(EROFS), EROFS);
  EXPECT_EQ(
      plugin::NbdErrno(WithErrno(absl::FailedPreconditionError("ro"), EROFS)),
      EROFS);
}

}  // namespace
}  // namespace uraid
