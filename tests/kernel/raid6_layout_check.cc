// SPDX-License-Identifier: MIT
// raid6_layout_check: judges uraid's RAID6 geometry and P+Q codec against
// members the kernel's md made and wrote (tests/kernel, case kind
// "raid6_md_layout").
//
//   raid6_layout_check [--slots=md|data-index] [--expect-blocks=N] MEMBER...
//
// Reads each member's v1.2 superblock (level 6, layout, chunk, raid disks,
// data offset, size, role), then, using only uraid::Geometry and
// parity/raid6.h:
//  * every stripe: P and Q computed from the data chunks in Geometry's Q
//    slot order equal md's P and Q chunks on the P and Q disks;
//  * every 4 KiB data block: all zeros, or guest.py's pattern (tag, block)
//    repeated whose block number is the one Geometry::Unmap gives for where
//    it was found (so Map finds every written block where md put it);
//  * --expect-blocks=N: exactly N pattern blocks were found.
// --slots=data-index orders Q by data index instead of md's slot order: the
// control that shows the P/Q check can tell them apart (it must fail for
// layouts where the two orders differ, which the tool reports).
//
// Prints one summary line; exit 0 when everything matched, 1 on a mismatch
// (the first few named), 2 on bad usage or an unreadable member.

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
#include "parity/parity.h"
#include "parity/raid6.h"
#include "uraid/geometry.h"
#include "uraid/superblock.h"

namespace {

using uraid::Geometry;

constexpr uint64_t kBlock = 4096;
constexpr int kMaxReports = 5;

struct Member {
  std::string path;
  int fd = -1;
  uraid::Superblock sb;
};

bool ReadAt(int fd, void* buf, size_t len, uint64_t off) {
  auto* p = static_cast<uint8_t*>(buf);
  while (len > 0) {
    const ssize_t n = pread(fd, p, len, static_cast<off_t>(off));
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
    off += static_cast<uint64_t>(n);
  }
  return true;
}

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "raid6_layout_check: %s\nusage: raid6_layout_check "
               "[--slots=md|data-index] [--expect-blocks=N] MEMBER...\n",
               why.c_str());
  return 2;
}

// What a 4 KiB block holds: -1 zeros, -2 something else, else the block
// number its pattern names (guest.py block_bytes: (tag, block) as two
// little-endian u64, repeated, tag != 0).
int64_t PatternBlock(const uint8_t* b) {
  if (uraid::IsAllZero(b, kBlock)) return -1;
  uint64_t tag, blk;
  std::memcpy(&tag, b, 8);
  std::memcpy(&blk, b + 8, 8);
  if (tag == 0) return -2;
  for (uint64_t i = 16; i < kBlock; i += 16) {
    if (std::memcmp(b, b + i, 16) != 0) return -2;
  }
  return static_cast<int64_t>(blk);
}

}  // namespace

int main(int argc, char** argv) {
  bool data_index_order = false;
  int64_t expect_blocks = -1;
  std::vector<Member> members;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--slots=md") {
      data_index_order = false;
    } else if (a == "--slots=data-index") {
      data_index_order = true;
    } else if (absl::StartsWith(a, "--expect-blocks=")) {
      if (!absl::SimpleAtoi(a.substr(16), &expect_blocks)) {
        return Usage("bad " + a);
      }
    } else if (absl::StartsWith(a, "--")) {
      return Usage("unknown option " + a);
    } else {
      members.push_back({a});
    }
  }
  if (members.empty()) return Usage("no members");

  std::vector<Member*> by_role;
  for (Member& m : members) {
    m.fd = open(m.path.c_str(), O_RDONLY);
    if (m.fd < 0) return Usage(m.path + ": " + std::strerror(errno));
    std::vector<uint8_t> block(uraid::kSbBlockBytes);
    if (!ReadAt(m.fd, block.data(), block.size(), uraid::kSb12OffsetBytes)) {
      return Usage(m.path + ": cannot read the superblock");
    }
    absl::StatusOr<uraid::Superblock> sb = uraid::DecodeSuperblock(block);
    if (!sb.ok())
      return Usage(m.path + ": " + std::string(sb.status().message()));
    m.sb = *sb;
  }
  const uraid::Superblock& top = members[0].sb;
  if (top.level != 6) {
    return Usage(
        absl::StrFormat("%s: level %d, not 6", members[0].path, top.level));
  }
  absl::StatusOr<Geometry> made = Geometry::Make(
      6, static_cast<uraid::Layout>(top.layout), uint64_t{top.chunksize} * 512,
      static_cast<int>(top.raid_disks), top.size * 512);
  if (!made.ok()) return Usage(std::string(made.status().message()));
  const Geometry& g = *made;
  const int n = g.raid_disks();
  by_role.assign(n, nullptr);
  for (Member& m : members) {
    const int role = m.sb.role();
    if (role < 0 || role >= n || by_role[role] != nullptr) {
      return Usage(absl::StrFormat("%s: role %d", m.path, role));
    }
    by_role[role] = &m;
  }
  for (int r = 0; r < n; ++r) {
    if (by_role[r] == nullptr)
      return Usage(absl::StrFormat("no member for role %d", r));
  }

  const uint64_t chunk = g.chunk_bytes();
  std::vector<uraid::AlignedBuffer> bufs;
  for (int d = 0; d < n; ++d) bufs.emplace_back(chunk);
  uraid::AlignedBuffer p(chunk), q(chunk);
  int bad = 0;
  uint64_t pattern_blocks = 0, differing_stripes = 0;
  auto report = [&](const std::string& what) {
    if (++bad <= kMaxReports) std::printf("MISMATCH %s\n", what.c_str());
  };
  for (uint64_t s = 0; s < g.stripe_count(); ++s) {
    for (int d = 0; d < n; ++d) {
      const Member& m = *by_role[d];
      if (!ReadAt(m.fd, bufs[d].data(), chunk,
                  m.sb.data_offset * 512 + s * chunk)) {
        return Usage(absl::StrFormat("%s: short read in stripe %d", m.path, s));
      }
    }
    const int pd = g.ParityDisk(s), qd = g.QDisk(s);
    std::vector<const void*> slots(g.SyndromeSlots(), nullptr);
    bool differs = false;
    for (int d = 0; d < n; ++d) {
      const int slot = g.QSlot(s, d);
      if (slot < 0) continue;
      const int k = g.DataIndex(s, d);
      differs |= slot != k;
      slots[data_index_order ? k : slot] = bufs[d].data();
    }
    differing_stripes += differs;
    uraid::ComputePQ(slots, p.data(), q.data(), chunk);
    if (std::memcmp(p.data(), bufs[pd].data(), chunk) != 0) {
      report(absl::StrFormat("stripe %d: P on disk %d", s, pd));
    }
    if (std::memcmp(q.data(), bufs[qd].data(), chunk) != 0) {
      report(absl::StrFormat("stripe %d: Q on disk %d", s, qd));
    }
    for (int d = 0; d < n; ++d) {
      if (d == pd || d == qd) continue;
      for (uint64_t off = 0; off < chunk; off += kBlock) {
        const int64_t named = PatternBlock(bufs[d].data() + off);
        if (named == -1) continue;
        const std::optional<uint64_t> logical = g.Unmap(d, s * chunk + off);
        if (named == -2 || !logical || *logical / kBlock != uint64_t(named)) {
          report(absl::StrFormat(
              "disk %d member offset %d: holds %s, Unmap says array block %d",
              d, s * chunk + off,
              named == -2 ? std::string("garbage")
                          : absl::StrFormat("block %d", named),
              logical ? *logical / kBlock : -1));
          continue;
        }
        ++pattern_blocks;
      }
    }
  }
  if (expect_blocks >= 0 && pattern_blocks != uint64_t(expect_blocks)) {
    report(absl::StrFormat("%d pattern blocks found, %d written",
                           pattern_blocks, expect_blocks));
  }
  std::fputs(
      absl::StrFormat(
          "raid6_layout_check: %s, %d disks, chunk %d, %d stripes (Q slot "
          "order differs from the data index in %d), %s slot order: %d "
          "pattern blocks in place, %s\n",
          uraid::LayoutName(g.layout()), n, chunk, g.stripe_count(),
          differing_stripes, data_index_order ? "data-index" : "md's",
          pattern_blocks,
          bad == 0 ? std::string("P and Q match")
                   : absl::StrFormat("%d MISMATCHES", bad))
          .c_str(),
      stdout);
  return bad == 0 ? 0 : 1;
}
