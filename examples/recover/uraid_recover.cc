// SPDX-License-Identifier: MIT
// Example (b): recovery. Copies the contents of an md RAID4/RAID5 array out
// of its member images into one file, without writing to the members.
//
//   uraid-recover [--force] -o OUTPUT MEMBER...
//
// The members (files or block devices, any order, at most one missing) are
// opened read-only and without a lock, so this also works on the images of
// an array another process is serving, and the array is assembled with
// AssembleOptions::read_only: not even md's clean/active flag is written.
// A missing member's data is rebuilt from parity. --force starts an array
// that is both dirty and degraded (md's start_dirty_degraded): the data of
// stripes written at the crash may then be wrong.
//
// The output is written sparse when it is a regular file: all-zero blocks
// become holes.

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "uraid/array.h"
#include "uraid/geometry.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace {

constexpr uint64_t kCopyTarget = 8 << 20;  // bytes per array read
constexpr size_t kHoleBlock = 64 * 1024;   // granularity of sparse output

int Usage() {
  std::fprintf(stderr,
               "usage: uraid-recover [--force] -o OUTPUT MEMBER...\n"
               "Copies an md RAID4/5 array's contents out of its member "
               "images (opened read-only).\n");
  return 2;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "uraid-recover: %s\n", what.c_str());
  return 1;
}

bool AllZero(const uint8_t* p, size_t n) {
  return n == 0 || (p[0] == 0 && std::memcmp(p, p + 1, n - 1) == 0);
}

absl::Status WriteAll(int fd, const uint8_t* p, size_t n, uint64_t offset,
                      const std::string& name) {
  while (n > 0) {
    ssize_t w = ::pwrite(fd, p, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return absl::ErrnoToStatus(
          w < 0 ? errno : EIO,
          absl::StrFormat("%s: write at %d", name, offset));
    }
    p += w;
    n -= static_cast<size_t>(w);
    offset += static_cast<uint64_t>(w);
  }
  return absl::OkStatus();
}

std::string Describe(const uraid::ArrayInfo& info) {
  const uraid::Geometry& g = info.geometry;
  std::string state = info.clean ? "clean" : "dirty";
  for (const uraid::SlotInfo& s : info.slots) {
    if (s.state != uraid::SlotState::kActive) {
      state += absl::StrFormat(", degraded (slot %d missing)", s.slot);
    }
  }
  return absl::StrFormat(
      "array %s \"%s\": raid%d %s, %d members, %d KiB chunk, %d bytes; %s",
      uraid::FormatUuid(info.uuid), info.name, g.level(),
      uraid::LayoutName(g.layout()), g.raid_disks(), g.chunk_bytes() >> 10,
      g.array_bytes(), state);
}

}  // namespace

int main(int argc, char** argv) {
  bool force = false;
  std::string output;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--force") {
      force = true;
    } else if ((arg == "-o" || arg == "--output") && i + 1 < argc) {
      output = argv[++i];
    } else if (arg == "-h" || arg == "--help") {
      Usage();
      return 0;
    } else if (!arg.empty() && arg[0] == '-') {
      return Usage();
    } else {
      paths.push_back(arg);
    }
  }
  if (output.empty() || paths.empty()) return Usage();

  // Read-only and unlocked: nothing is ever written to a member.
  uraid::FileMemberOptions member_options;
  member_options.read_only = true;
  member_options.lock = false;
  std::vector<std::unique_ptr<uraid::Member>> members;
  for (const std::string& path : paths) {
    auto member = uraid::OpenFileMember(path, member_options);
    if (!member.ok()) return Fail(std::string(member.status().message()));
    members.push_back(*std::move(member));
  }
  uraid::AssembleOptions options;
  options.read_only = true;
  options.force = force;
  // Copying out writes nothing, so a member left out cannot go stale: the
  // whole point is to read whatever members survive.
  options.run = true;
  auto assembled = uraid::Array::Assemble(
      std::move(members), options, [](const std::string& line) {
        std::fprintf(stderr, "uraid-recover: %s\n", line.c_str());
      });
  if (!assembled.ok()) {
    return Fail(std::string(assembled.status().message()));
  }
  std::unique_ptr<uraid::Array> array = *std::move(assembled);
  const uraid::ArrayInfo info = array->Info();
  std::fprintf(stderr, "uraid-recover: %s\n", Describe(info).c_str());

  int fd =
      ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Fail(absl::StrFormat("%s: open: %s", output, std::strerror(errno)));
  }
  struct stat st;
  const bool sparse = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);

  // Whole stripes per read: the array serves each from the members
  // straight into our buffer.
  const uint64_t size = array->size();
  const uint64_t sd = array->geometry().stripe_data_bytes();
  const uint64_t step = std::max<uint64_t>(1, kCopyTarget / sd) * sd;
  std::vector<uint8_t> buf(std::min(step, size));
  absl::Status status;
  for (uint64_t pos = 0; pos < size && status.ok(); pos += step) {
    const size_t n = static_cast<size_t>(std::min(step, size - pos));
    status = array->Read(buf.data(), n, pos);
    for (size_t off = 0; off < n && status.ok(); off += kHoleBlock) {
      const size_t len = std::min(kHoleBlock, n - off);
      if (sparse && AllZero(buf.data() + off, len)) continue;
      status = WriteAll(fd, buf.data() + off, len, pos + off, output);
    }
  }
  if (status.ok() && sparse && ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    status = absl::ErrnoToStatus(errno, output + ": ftruncate");
  }
  if (status.ok() && ::fsync(fd) != 0) {
    status = absl::ErrnoToStatus(errno, output + ": fsync");
  }
  ::close(fd);
  if (!status.ok()) return Fail(std::string(status.message()));
  std::fprintf(stderr,
               "uraid-recover: copied %" PRIu64 " bytes to %s (%" PRIu64
               " pieces rebuilt from parity)\n",
               size, output.c_str(), array->Info().counters.reconstructions);
  return 0;
}
