// SPDX-License-Identifier: MIT
// The external write-intent bitmap file: opening and creating it with the
// checks md makes (a regular file, not one of the members) and the lock
// members get, and a Member over it for the array's bitmap I/O.

#include "member/bitmap_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "member/file_member.h"
#include "uraid/status_errno.h"

namespace uraid {
namespace {

const char* FileTypeName(mode_t mode) {
  return S_ISDIR(mode)    ? "a directory"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISFIFO(mode) ? "a FIFO"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a regular file";
}

absl::Status NotRegular(const std::string& path, mode_t mode) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "bitmap file %s is %s; an external bitmap must be a regular file (as "
      "md requires)",
      path, FileTypeName(mode)));
}

// The bitmap must not share storage with a member: its writes would land
// in the member's data (or the member's in the bitmap).
absl::Status CheckNotAMember(const std::string& path, const struct stat& st,
                             const std::vector<std::string>& member_names) {
  for (const std::string& name : member_names) {
    struct stat ms;
    if (IsMemberUri(name) || ::stat(name.c_str(), &ms) != 0) continue;
    if (ms.st_dev == st.st_dev && ms.st_ino == st.st_ino) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bitmap file %s is the array's member %s: the bitmap must be a "
          "separate file, not on the array",
          path, name));
    }
  }
  return absl::OkStatus();
}

absl::Status Lock(int fd, const std::string& path) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return absl::OkStatus();
  const int err = errno;
  if (err == EWOULDBLOCK) {
    // EBUSY for errno users, as for a locked member (uraid/status_errno.h).
    return WithErrno(
        absl::FailedPreconditionError(absl::StrFormat(
            "bitmap file %s is in use by another uraid process (locked)",
            path)),
        EBUSY);
  }
  return absl::ErrnoToStatus(err,
                             absl::StrFormat("bitmap file %s: flock", path));
}

// Makes the file's directory entry durable: without it a crash right
// after create can leave superblocks that rely on a file that is gone.
absl::Status SyncDirectory(const std::string& path) {
  // Built in one expression: assigning "." to the string afterwards made
  // gcc 12 warn -Wstringop-overflow inside char_traits::copy (a false
  // positive of its inlined bounds).
  const std::filesystem::path parent =
      std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrFormat("bitmap file %s: open directory %s to "
                               "sync it",
                               path, dir));
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) {
    return absl::ErrnoToStatus(
        err, absl::StrFormat("bitmap file %s: fsync directory %s", path, dir));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Member>> OpenBitmapFile(
    const std::string& path, bool read_only,
    const std::vector<std::string>& member_names) {
  // Look before opening: opening a FIFO blocks until a writer appears.
  struct stat pre;
  if (::stat(path.c_str(), &pre) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrFormat("bitmap file %s", path));
  }
  if (!S_ISREG(pre.st_mode)) return NotRegular(path, pre.st_mode);
  const int fd =
      ::open(path.c_str(), (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrFormat("bitmap file %s: open", path));
  }
  struct stat st;
  absl::Status status;
  if (::fstat(fd, &st) != 0) {
    status = absl::ErrnoToStatus(
        errno, absl::StrFormat("bitmap file %s: fstat", path));
  } else if (!S_ISREG(st.st_mode)) {
    status = NotRegular(path, st.st_mode);
  } else {
    status = CheckNotAMember(path, st, member_names);
  }
  if (status.ok() && !read_only) status = Lock(fd, path);
  if (!status.ok()) {
    ::close(fd);
    return status;
  }
  return AdoptFileMember(path, fd, static_cast<uint64_t>(st.st_size),
                         read_only);
}

absl::StatusOr<std::unique_ptr<Member>> CreateBitmapFile(
    const std::string& path, std::span<const uint8_t> area, bool force,
    const std::vector<std::string>& member_names) {
  struct stat pre;
  const bool existed = ::stat(path.c_str(), &pre) == 0;
  if (existed && !S_ISREG(pre.st_mode)) return NotRegular(path, pre.st_mode);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrFormat(
          "bitmap file %s: cannot create it: its directory does not exist",
          path));
    }
    return absl::ErrnoToStatus(err,
                               absl::StrFormat("bitmap file %s: create", path));
  }
  // Undo a file this call created, so a refused create leaves nothing.
  auto fail = [&](absl::Status status) {
    ::close(fd);
    if (!existed) ::unlink(path.c_str());
    return status;
  };
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    return fail(absl::ErrnoToStatus(
        errno, absl::StrFormat("bitmap file %s: fstat", path)));
  }
  if (!S_ISREG(st.st_mode)) return fail(NotRegular(path, st.st_mode));
  // Before anything is truncated: the path may name a member.
  if (absl::Status s = CheckNotAMember(path, st, member_names); !s.ok()) {
    return fail(s);
  }
  if (st.st_size != 0 && !force) {
    return fail(absl::FailedPreconditionError(absl::StrFormat(
        "bitmap file %s already exists (%d bytes); use --force to overwrite "
        "it",
        path, st.st_size)));
  }
  if (absl::Status s = Lock(fd, path); !s.ok()) return fail(s);
  std::unique_ptr<Member> member =
      AdoptFileMember(path, fd, area.size(), /*read_only=*/false);
  if (::ftruncate(fd, 0) != 0) {
    const int err = errno;
    member.reset();  // closes fd
    if (!existed) ::unlink(path.c_str());
    return absl::ErrnoToStatus(
        err, absl::StrFormat("bitmap file %s: truncate", path));
  }
  absl::Status status = member->Write(area.data(), area.size(), 0);
  if (status.ok()) status = member->Flush();
  if (status.ok()) status = SyncDirectory(path);
  if (!status.ok()) {
    member.reset();
    if (!existed) ::unlink(path.c_str());
    return status;
  }
  return member;
}

}  // namespace uraid
