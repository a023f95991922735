// SPDX-License-Identifier: MIT
// `uraid examine`: prints one member's superblock the way `mdadm --examine`
// does, so the two can be diffed. Reads the member directly (O_RDONLY, no
// lock, no library member backend): examine must work on anything, including
// members of a running server and members the array code would refuse. An
// NBD URI has no such direct route: it is read through the library's NBD
// member, read-only.

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "array_lookup.h"
#include "commands.h"
#include "common.h"
#include "examine_bad_blocks.h"
#include "nlohmann/json.hpp"
#include "size_parse.h"
#include "uraid/member.h"
#include "uraid/member_scan.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

using json = nlohmann::ordered_json;

struct ExamineArgs {
  bool json = false;
  bool scan = false;
  bool bad_blocks = false;  // only the bad-block logs (--examine-badblocks)
  std::string config;       // --scan without MEMBER: its DEVICE lines
  std::vector<std::string> members;
};

// What examine needs from the raw member: the superblock block and the
// device size (for "Unused Space"), plus the bitmap superblock when there is
// one (its size decides where the metadata ends) and the bad-block log.
struct RawMember {
  std::vector<uint8_t> sb_block;
  uint64_t size_bytes = 0;
  std::vector<uint8_t> bitmap_sb;  // empty unless the superblock has one
  BadBlockLogView bad_blocks;      // read when the superblock decodes
};

absl::Status ErrnoError(const std::string& what) {
  return absl::ErrnoToStatus(errno, what);
}

absl::Status PreadAll(int fd, std::vector<uint8_t>& buf, uint64_t offset,
                      uint64_t device_size) {
  if (offset + buf.size() > device_size) {
    return absl::OutOfRangeError(
        absl::StrFormat("too small (%d bytes) to hold %d bytes at %d",
                        device_size, buf.size(), offset));
  }
  size_t done = 0;
  while (done < buf.size()) {
    ssize_t n = pread(fd, buf.data() + done, buf.size() - done,
                      static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(absl::StrCat("pread at ", offset + done));
    if (n == 0) {
      return absl::OutOfRangeError(
          absl::StrCat("short read at ", offset + done));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads buf.size() bytes at `offset` of the member, or fails.
using ReadAtFn =
    std::function<absl::Status(std::vector<uint8_t>& buf, uint64_t offset)>;

// Fills raw.sb_block and, when the superblock has them, raw.bitmap_sb and
// raw.bad_blocks.
absl::Status ReadMetadata(const ReadAtFn& read_at, RawMember& raw) {
  raw.sb_block.resize(kSbBlockBytes);
  if (absl::Status s = read_at(raw.sb_block, kSb12OffsetBytes); !s.ok()) {
    return s;
  }
  // The bitmap superblock is optional extra detail: a member whose bitmap
  // cannot be read still examines (mdadm does the same).
  absl::StatusOr<Superblock> sb = DecodeSuperblock(raw.sb_block);
  if (sb.ok() && (sb->feature_map & kFeatureBitmapOffset)) {
    const int64_t at =
        (static_cast<int64_t>(sb->super_offset) + sb->bitmap_offset) * 512;
    std::vector<uint8_t> bitmap(256);
    if (at >= 0 && read_at(bitmap, static_cast<uint64_t>(at)).ok()) {
      raw.bitmap_sb = std::move(bitmap);
    }
  }
  if (sb.ok()) raw.bad_blocks = ReadBadBlockLog(*sb, read_at);
  return absl::OkStatus();
}

// An NBD member, through the library's backend. Its messages already name
// the URI, which RunExamine adds again: drop it here.
absl::StatusOr<RawMember> ReadRawUri(const std::string& uri) {
  auto unnamed = [&uri](const absl::Status& s) {
    absl::string_view msg = s.message();
    if (absl::StartsWith(msg, uri + ": ")) msg.remove_prefix(uri.size() + 2);
    return absl::Status(s.code(), msg);
  };
  MemberOptions options;
  options.read_only = true;
  absl::StatusOr<std::unique_ptr<Member>> member = OpenMember(uri, options);
  if (!member.ok()) return unnamed(member.status());
  RawMember raw;
  raw.size_bytes = (*member)->Size();
  absl::Status s = ReadMetadata(
      [&](std::vector<uint8_t>& buf, uint64_t offset) -> absl::Status {
        if (offset + buf.size() > raw.size_bytes) {
          return absl::OutOfRangeError(
              absl::StrFormat("too small (%d bytes) to hold %d bytes at %d",
                              raw.size_bytes, buf.size(), offset));
        }
        return unnamed((*member)->Read(buf.data(), buf.size(), offset));
      },
      raw);
  if (!s.ok()) return s;
  return raw;
}

absl::StatusOr<RawMember> ReadRaw(const std::string& path) {
  if (IsMemberUri(path)) return ReadRawUri(path);
  // Refuse what is not a file or block device before opening it (opening a
  // FIFO would block until a writer appears).
  struct stat pre;
  if (stat(path.c_str(), &pre) == 0 && !S_ISREG(pre.st_mode) &&
      !S_ISBLK(pre.st_mode)) {
    return absl::InvalidArgumentError(
        S_ISDIR(pre.st_mode)
            ? "is a directory, not a regular file or block device"
            : "is not a regular file or block device (FIFO, socket or "
              "character device)");
  }
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open");
  // Closes fd on every return path below.
  std::unique_ptr<int, void (*)(int*)> closer(new int(fd), [](int* p) {
    close(*p);
    delete p;
  });

  RawMember raw;
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoError("fstat");
  if (S_ISBLK(st.st_mode)) {
    if (ioctl(fd, BLKGETSIZE64, &raw.size_bytes) != 0) {
      return ErrnoError("BLKGETSIZE64");
    }
  } else {
    raw.size_bytes = static_cast<uint64_t>(st.st_size);
  }

  absl::Status s = ReadMetadata(
      [&](std::vector<uint8_t>& buf, uint64_t offset) {
        return PreadAll(fd, buf, offset, raw.size_bytes);
      },
      raw);
  if (!s.ok()) return s;
  return raw;
}

uint64_t LeBytes(const std::vector<uint8_t>& b, size_t off, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | b[off + i];
  return v;
}

// mdadm's getinfo_super1 space_before: from the end of the metadata (at
// least 36 KiB past the superblock, as the kernel reserves) to data_offset.
uint64_t SpaceBeforeSectors(const Superblock& sb, const RawMember& raw) {
  uint64_t earliest = sb.super_offset + (32 + 4) * 2;
  if ((sb.feature_map & kFeatureBitmapOffset) && sb.bitmap_offset > 0 &&
      raw.bitmap_sb.size() >= 256) {
    const uint64_t sync_size = LeBytes(raw.bitmap_sb, 40, 8);
    const uint64_t chunk = LeBytes(raw.bitmap_sb, 52, 4);
    uint64_t bytes = 0;
    if (chunk >= 512) {
      bytes = (sync_size / (chunk >> 9) + 7) / 8;
    }
    bytes += 256;
    bytes = (bytes + 4095) / 4096 * 4096;
    const uint64_t bmend = sb.super_offset + sb.bitmap_offset + bytes / 512;
    if (bmend > earliest) earliest = bmend;
  }
  if (sb.has_ppl()) {
    // mdadm 4.2 counts the PPL's end as ppl.offset + ppl.size, without the
    // superblock's own offset (checked against its output for offsets 8
    // and 16): printed the same way, so the two agree byte for byte.
    const int64_t pplend = int64_t{sb.ppl_offset()} + sb.ppl_size();
    if (pplend > static_cast<int64_t>(earliest)) {
      earliest = static_cast<uint64_t>(pplend);
    }
  }
  if (sb.bblog_offset != 0 && sb.bblog_size != 0) {
    const uint64_t bbend = sb.super_offset + sb.bblog_offset + sb.bblog_size;
    if (bbend > earliest) earliest = bbend;
  }
  return earliest < sb.data_offset ? sb.data_offset - earliest : 0;
}

// mdadm measures the space after the data from `size` (what the array
// uses), not `data_size`, for every level with redundancy.
uint64_t UsedSectors(const Superblock& sb) {
  return sb.level > 0 ? sb.size : sb.data_size;
}

std::string ArrayState(const Superblock& sb) {
  // mdadm: per slot, count the devices claiming it; two means a
  // replacement is in progress.
  int slots = static_cast<int>(sb.raid_disks);
  if ((sb.feature_map & kFeatureReshapeActive) && sb.delta_disks < 0) {
    slots -= sb.delta_disks;
  }
  std::string state;
  for (int d = 0; d < slots; ++d) {
    int count = 0;
    for (uint16_t role : sb.dev_roles) {
      if (role == d) ++count;
    }
    state += count == 2 ? 'R' : count == 1 ? 'A' : count == 0 ? '.' : '?';
  }
  return state;
}

std::string DeviceRole(uint16_t role) {
  switch (role) {
    case kRoleSpare:
      return "spare";
    case kRoleFaulty:
      return "faulty";
    case kRoleJournal:
      return "Journal";
    default:
      return absl::StrCat("Active device ", role);
  }
}

std::string RoleKind(uint16_t role) {
  switch (role) {
    case kRoleSpare:
      return "spare";
    case kRoleFaulty:
      return "faulty";
    case kRoleJournal:
      return "journal";
    default:
      return role >= kRoleMax ? "unknown" : "active";
  }
}

std::string VersionText(const Superblock& sb) {
  // mdadm names the minor version after where the superblock sits.
  if (sb.super_offset <= 4) return "1.1";
  if (sb.super_offset <= 8) return "1.2";
  return "1.0";
}

// Prints one member in mdadm --examine's layout (super1.c, examine_super1),
// then, when BAD_BLOCKS is set, its list as --examine-badblocks prints it
// (mdadm prints only " - bad blocks present."). Returns PrintBadBlockLog's
// exit code.
int PrintText(const std::string& path, const Superblock& sb,
              const RawMember& raw, uint32_t expected_csum) {
  const int data_disks = sb.level == 4 || sb.level == 5
                             ? static_cast<int>(sb.raid_disks) - 1
                         : sb.level == 6 ? static_cast<int>(sb.raid_disks) - 2
                                         : 0;
  std::printf("%s:\n", path.c_str());
  std::printf("          Magic : %08x\n", kSbMagic);
  std::printf("        Version : %s\n", VersionText(sb).c_str());
  std::printf("    Feature Map : 0x%x\n", sb.feature_map);
  std::printf("     Array UUID : %s\n", FormatUuid(sb.set_uuid).c_str());
  std::printf("           Name : %s\n", sb.set_name.c_str());
  std::printf("  Creation Time : %s\n", FormatMdTime(sb.ctime).c_str());
  std::printf("     Raid Level : %s\n", LevelName(sb.level).c_str());
  std::printf("   Raid Devices : %u\n", sb.raid_disks);
  std::printf("\n");
  std::printf(" Avail Dev Size : %llu sectors%s\n",
              static_cast<unsigned long long>(sb.data_size),
              MdHumanSize(sb.data_size << 9).c_str());
  if (data_disks > 0) {
    const uint64_t array_bytes = (sb.size << 9) * data_disks;
    std::printf("     Array Size : %llu KiB%s\n",
                static_cast<unsigned long long>(array_bytes >> 10),
                MdHumanSize(array_bytes).c_str());
  }
  if (sb.size != sb.data_size) {
    std::printf("  Used Dev Size : %llu sectors%s\n",
                static_cast<unsigned long long>(sb.size),
                MdHumanSize(sb.size << 9).c_str());
  }
  if (sb.data_offset != 0) {
    std::printf("    Data Offset : %llu sectors\n",
                static_cast<unsigned long long>(sb.data_offset));
  }
  if (sb.new_offset != 0 && (sb.feature_map & kFeatureNewOffset)) {
    std::printf(
        "     New Offset : %llu sectors\n",
        static_cast<unsigned long long>(sb.data_offset + sb.new_offset));
  }
  std::printf("   Super Offset : %llu sectors\n",
              static_cast<unsigned long long>(sb.super_offset));
  if (sb.feature_map & kFeatureRecoveryOffset) {
    std::printf("Recovery Offset : %llu sectors\n",
                static_cast<unsigned long long>(sb.recovery_offset));
  }
  const uint64_t device_sectors = raw.size_bytes >> 9;
  const int64_t space_after = static_cast<int64_t>(device_sectors) -
                              static_cast<int64_t>(UsedSectors(sb)) -
                              static_cast<int64_t>(sb.data_offset);
  if (!(sb.feature_map & kFeatureNewOffset)) {
    std::printf("   Unused Space : before=%llu sectors, ",
                static_cast<unsigned long long>(SpaceBeforeSectors(sb, raw)));
    if (space_after >= 0) {
      std::printf("after=%lld sectors\n", static_cast<long long>(space_after));
    } else {
      std::printf("after=%lld sectors DEVICE TOO SMALL\n",
                  static_cast<long long>(space_after));
    }
  }
  std::printf("          State : %s%s\n", sb.clean() ? "clean" : "active",
              space_after < 0 ? " TRUNCATED DEVICE" : "");
  std::printf("    Device UUID : %s\n", FormatUuid(sb.device_uuid).c_str());
  std::printf("\n");
  if (sb.feature_map & kFeatureBitmapOffset) {
    std::printf("Internal Bitmap : %ld sectors from superblock\n",
                static_cast<long>(sb.bitmap_offset));
  } else if (sb.has_ppl()) {
    // mdadm's examine_super1 line for the partial parity log.
    std::printf(
        "            PPL : %u sectors at offset %d sectors from "
        "superblock\n",
        sb.ppl_size(), sb.ppl_offset());
  }
  if (sb.feature_map & kFeatureReshapeActive) {
    std::printf("  Reshape pos'n : %llu%s\n",
                static_cast<unsigned long long>(sb.reshape_position / 2),
                MdHumanSize(sb.reshape_position << 9).c_str());
    if (sb.delta_disks != 0) {
      std::printf("  Delta Devices : %d (%d->%u)\n", sb.delta_disks,
                  static_cast<int>(sb.raid_disks) - sb.delta_disks,
                  sb.raid_disks);
    }
    if (sb.new_level != static_cast<uint32_t>(sb.level)) {
      std::printf("      New Level : %s\n",
                  LevelName(static_cast<int>(sb.new_level)).c_str());
    }
    if (sb.new_layout != sb.layout && sb.level == 5) {
      std::printf("     New Layout : %s\n",
                  LayoutNameOrUnknown(sb.new_layout).c_str());
    }
    if (sb.new_chunk != sb.chunksize) {
      std::printf("  New Chunksize : %uK\n", sb.new_chunk / 2);
    }
    std::printf("\n");
  }
  if (sb.devflags != 0) {
    std::printf("          Flags :%s%s\n",
                (sb.devflags & 1) ? " write-mostly" : "",
                (sb.devflags & 2) ? " failfast" : "");
  }
  std::printf("    Update Time : %s\n", FormatMdTime(sb.utime).c_str());
  if (sb.bblog_size != 0 && sb.bblog_offset != 0) {
    std::printf(
        "  Bad Block Log : %d entries available at offset %ld "
        "sectors%s\n",
        sb.bblog_size * 512 / 8, static_cast<long>(sb.bblog_offset),
        (sb.feature_map & kFeatureBadBlocks) ? " - bad blocks present." : "");
  }
  if (expected_csum == sb.sb_csum) {
    std::printf("       Checksum : %x - correct\n", sb.sb_csum);
  } else {
    std::printf("       Checksum : %x - expected %x\n", sb.sb_csum,
                expected_csum);
  }
  std::printf("         Events : %llu\n",
              static_cast<unsigned long long>(sb.events));
  std::printf("\n");
  if (sb.level == 5 || sb.level == 6) {
    std::printf("         Layout : %s\n",
                LayoutNameOrUnknown(sb.layout).c_str());
  }
  if (sb.level == 4 || sb.level == 5 || sb.level == 6) {
    std::printf("     Chunk Size : %uK\n", sb.chunksize / 2);
  }
  std::printf("\n");
  std::printf("   Device Role : %s\n", DeviceRole(sb.role()).c_str());
  std::printf(
      "   Array State : %s ('A' == active, '.' == missing, 'R' == "
      "replacing)\n",
      ArrayState(sb).c_str());
  if (sb.feature_map & kFeatureBadBlocks) {
    return PrintBadBlockLog(path, raw.bad_blocks);
  }
  return 0;
}

json ToJson(const std::string& path, const Superblock& sb, const RawMember& raw,
            uint32_t expected_csum) {
  const int data_disks = sb.level == 4 || sb.level == 5
                             ? static_cast<int>(sb.raid_disks) - 1
                         : sb.level == 6 ? static_cast<int>(sb.raid_disks) - 2
                                         : 0;
  json j;
  j["device"] = path;
  j["magic"] = absl::StrFormat("%08x", kSbMagic);
  j["version"] = VersionText(sb);
  j["feature_map"] = sb.feature_map;
  j["array_uuid"] = FormatUuid(sb.set_uuid);
  j["name"] = sb.set_name;
  j["creation_time"] = FormatMdTime(sb.ctime);
  j["creation_time_unix"] = sb.ctime & 0xFFFFFFFFFFull;
  j["raid_level"] = LevelName(sb.level);
  j["level"] = sb.level;
  j["raid_devices"] = sb.raid_disks;
  j["avail_dev_size_sectors"] = sb.data_size;
  j["array_size_kib"] = ((sb.size << 9) * data_disks) >> 10;
  j["used_dev_size_sectors"] = sb.size;
  j["data_offset_sectors"] = sb.data_offset;
  j["super_offset_sectors"] = sb.super_offset;
  j["unused_space_before_sectors"] = SpaceBeforeSectors(sb, raw);
  j["unused_space_after_sectors"] = static_cast<int64_t>(raw.size_bytes >> 9) -
                                    static_cast<int64_t>(UsedSectors(sb)) -
                                    static_cast<int64_t>(sb.data_offset);
  j["state"] = sb.clean() ? "clean" : "active";
  j["resync_offset_sectors"] =
      sb.clean() ? json(nullptr) : json(sb.resync_offset);
  j["device_uuid"] = FormatUuid(sb.device_uuid);
  j["update_time"] = FormatMdTime(sb.utime);
  j["update_time_unix"] = sb.utime & 0xFFFFFFFFFFull;
  j["checksum"] = absl::StrFormat("%x", sb.sb_csum);
  j["checksum_correct"] = expected_csum == sb.sb_csum;
  j["events"] = sb.events;
  j["layout"] = LayoutNameOrUnknown(sb.layout);
  j["layout_number"] = sb.layout;
  j["chunk_size_kib"] = sb.chunksize / 2;
  j["dev_number"] = sb.dev_number;
  j["device_role"] = DeviceRole(sb.role());
  j["role"] = RoleKind(sb.role());
  j["slot"] = RoleKind(sb.role()) == "active" ? json(sb.role()) : json(nullptr);
  j["array_state"] = ArrayState(sb);
  if (sb.feature_map & kFeatureBitmapOffset) {
    j["bitmap_offset_sectors"] = sb.bitmap_offset;
  } else if (sb.has_ppl()) {
    j["ppl_offset_sectors"] = sb.ppl_offset();
    j["ppl_size_sectors"] = sb.ppl_size();
  }
  j["consistency_policy"] = sb.has_ppl() ? "ppl"
                            : (sb.feature_map & kFeatureBitmapOffset)
                                ? "bitmap"
                                : "resync";
  if (sb.feature_map & kFeatureReshapeActive) {
    j["reshape_position_sectors"] = sb.reshape_position;
    j["delta_disks"] = sb.delta_disks;
    j["new_level"] = sb.new_level;
    j["new_layout"] = LayoutNameOrUnknown(sb.new_layout);
    j["new_chunk_size_kib"] = sb.new_chunk / 2;
  }
  AddBadBlockLogJson(sb, raw.bad_blocks, j);
  return j;
}

// --scan: one ARRAY line per array among the candidates (MEMBER..., or the
// config's DEVICE lines), from its freshest superblock, ready to paste into
// uraid.conf (mdadm --examine --scan). Names are made unique with -2, -3.
int RunExamineScan(const ExamineArgs& args) {
  std::vector<std::string> candidates;
  if (!args.members.empty()) {
    candidates = ExpandDevices(args.members);
  } else {
    absl::StatusOr<ConfigFile> config = LoadToolConfig(args.config);
    if (!config.ok()) return Fail(config.status());
    candidates = ExpandDevices(config->devices);
  }
  std::vector<ScannedMember> scanned =
      ScanCandidates(candidates, MemberOptions{});
  std::vector<std::array<uint8_t, 16>> uuids;
  for (const ScannedMember& m : scanned) {
    if (std::find(uuids.begin(), uuids.end(), m.sb.set_uuid) == uuids.end()) {
      uuids.push_back(m.sb.set_uuid);
    }
  }
  std::vector<std::string> names;
  json all = json::array();
  for (const auto& uuid : uuids) {
    const ScannedMember* top = nullptr;
    int count = 0;
    for (const ScannedMember& m : scanned) {
      if (m.sb.set_uuid != uuid) continue;
      ++count;
      if (top == nullptr || m.sb.events > top->sb.events) top = &m;
    }
    const std::string base = ConfigNameFor(top->sb.set_name, uuid);
    std::string name = base;
    for (int i = 2; std::find(names.begin(), names.end(), name) != names.end();
         ++i) {
      name = absl::StrCat(base, "-", i);
    }
    names.push_back(name);
    if (args.json) {
      all.push_back({{"name", name},
                     {"uuid", FormatUuid(uuid)},
                     {"raid_devices", top->sb.raid_disks},
                     {"candidates", count},
                     {"events", top->sb.events}});
    } else {
      std::printf("ARRAY %s uuid=%s\n", name.c_str(), FormatUuid(uuid).c_str());
    }
  }
  if (args.json) std::printf("%s\n", all.dump(2).c_str());
  return 0;
}

int RunExamine(const ExamineArgs& args) {
  if (args.scan) return RunExamineScan(args);
  int rc = 0;
  json all = json::array();
  for (const std::string& path : args.members) {
    absl::StatusOr<RawMember> raw = ReadRaw(path);
    absl::StatusOr<Superblock> sb =
        raw.ok() ? DecodeSuperblock(raw->sb_block) : raw.status();
    if (!sb.ok()) {
      rc = Fail(absl::StrCat(path, ": ", sb.status().message()));
      continue;
    }
    const uint32_t expected_csum =
        SuperblockChecksum(raw->sb_block, sb->max_dev);
    const bool unreadable_list =
        raw->bad_blocks.area.has_value() && !raw->bad_blocks.blocks.ok();
    if (args.bad_blocks && args.json) {
      json j;
      j["device"] = path;
      AddBadBlockLogJson(*sb, raw->bad_blocks, j);
      all.push_back(std::move(j));
      if (unreadable_list) rc = 1;
    } else if (args.bad_blocks) {
      if (PrintBadBlockLog(path, raw->bad_blocks) != 0) rc = 1;
    } else if (args.json) {
      all.push_back(ToJson(path, *sb, *raw, expected_csum));
      if (unreadable_list) rc = 1;
    } else if (PrintText(path, *sb, *raw, expected_csum) != 0) {
      rc = 1;
    }
  }
  if (args.json) std::printf("%s\n", all.dump(2).c_str());
  return rc;
}

}  // namespace

void AddExamineCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<ExamineArgs>();
  CLI::App* sub = app.add_subcommand(
      "examine", "Print each member's md superblock (like mdadm --examine)");
  sub->add_flag("--json", args->json, "Print a JSON array, one object each");
  CLI::Option* scan = sub->add_flag(
      "--scan,-s", args->scan,
      "Print an ARRAY line per array found (for uraid.conf), from MEMBER... "
      "(globs too) or the config's DEVICE lines");
  sub->add_flag("--badblocks,--examine-badblocks", args->bad_blocks,
                "Print only each member's bad-block list, as mdadm "
                "--examine-badblocks")
      ->excludes(scan);
  sub->add_option("--config,-c", args->config,
                  "--scan without MEMBER: the config whose DEVICE lines to "
                  "scan (default $URAID_CONFIG, else /etc/uraid/uraid.conf)")
      ->needs(scan);
  sub->add_option("MEMBER", args->members, "Member files, devices or NBD URIs");
  sub->final_callback([args, action] {
    if (args->members.empty() && !args->scan) {
      throw CLI::RequiredError("MEMBER");
    }
    *action = [args] { return RunExamine(*args); };
  });
}

}  // namespace uraid::tool
