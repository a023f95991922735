// SPDX-License-Identifier: MIT
#include "discover/member_scan.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uraid {
namespace {

// realpath, or "" when it does not resolve.
std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? std::string(buf) : "";
}

// mdadm's `DEVICE partitions`: /dev/NAME for every line of
// /proc/partitions ("major minor #blocks name") that is a block device
// here. None when the file cannot be read (no /proc).
std::vector<std::string> PartitionDevices() {
  std::vector<std::string> out;
  std::ifstream in("/proc/partitions");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    unsigned long major = 0;
    unsigned long minor = 0;
    unsigned long long blocks = 0;
    std::string name;
    if (!(words >> major >> minor >> blocks >> name)) continue;  // header
    const std::string dev = "/dev/" + name;
    struct stat st;
    if (stat(dev.c_str(), &st) == 0 && S_ISBLK(st.st_mode)) out.push_back(dev);
  }
  return out;
}

absl::StatusOr<Superblock> ReadOne(const std::string& spec,
                                   const MemberOptions& options) {
  absl::StatusOr<std::unique_ptr<Member>> member = OpenMember(spec, options);
  if (!member.ok()) return member.status();
  if ((*member)->Size() < kSb12OffsetBytes + kSbBlockBytes) {
    return absl::NotFoundError("too small to hold a superblock");
  }
  std::vector<uint8_t> block(kSbBlockBytes);
  absl::Status s =
      (*member)->Read(block.data(), block.size(), kSb12OffsetBytes);
  if (!s.ok()) return s;
  return DecodeSuperblock(block);
}

}  // namespace

std::vector<std::string> ExpandDevices(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& word : words) {
    if (IsMemberUri(word)) {
      if (seen.insert(word).second) out.push_back(word);
      continue;
    }
    if (word == "partitions") {
      for (const std::string& dev : PartitionDevices()) {
        std::string real = RealPath(dev);
        if (!real.empty() && seen.insert(real).second) out.push_back(real);
      }
      continue;
    }
    glob_t g{};
    if (glob(word.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) != 0 ||
            !(S_ISREG(st.st_mode) || S_ISBLK(st.st_mode))) {
          continue;
        }
        std::string real = RealPath(g.gl_pathv[i]);
        if (!real.empty() && seen.insert(real).second) out.push_back(real);
      }
    }
    globfree(&g);
  }
  return out;
}

std::vector<ScannedMember> ScanCandidates(const std::vector<std::string>& specs,
                                          const MemberOptions& options,
                                          std::vector<std::string>* skipped) {
  MemberOptions ro = options;
  ro.read_only = true;
  ro.lock = false;
  std::vector<ScannedMember> out;
  for (const std::string& spec : specs) {
    absl::StatusOr<Superblock> sb = ReadOne(spec, ro);
    if (!sb.ok()) {
      if (skipped != nullptr) {
        skipped->push_back(absl::StrCat(spec, ": ", sb.status().message()));
      }
      continue;
    }
    out.push_back(ScannedMember{spec, *std::move(sb)});
  }
  return out;
}

absl::StatusOr<MemberSelection> SelectMembers(
    const std::vector<ScannedMember>& scanned,
    const std::array<uint8_t, 16>& uuid) {
  std::vector<const ScannedMember*> of;
  for (const ScannedMember& m : scanned) {
    if (m.sb.set_uuid == uuid) of.push_back(&m);
  }
  if (of.empty()) {
    return absl::NotFoundError(absl::StrFormat(
        "no member of array %s among the %d candidate(s) with a superblock",
        FormatUuid(uuid), scanned.size()));
  }
  // Freshest first; ties keep the candidates' order.
  std::stable_sort(of.begin(), of.end(),
                   [](const ScannedMember* a, const ScannedMember* b) {
                     return a->sb.events > b->sb.events;
                   });
  const Superblock& top = of.front()->sb;
  MemberSelection sel;
  sel.events = top.events;
  sel.name = top.set_name;

  std::map<uint16_t, const ScannedMember*> by_slot;
  std::map<std::array<uint8_t, 16>, const ScannedMember*> by_device;
  std::vector<const ScannedMember*> spares;
  for (const ScannedMember* m : of) {
    const uint16_t role = m->sb.dev_number < top.dev_roles.size()
                              ? top.dev_roles[m->sb.dev_number]
                              : kRoleSpare;
    if (role == kRoleFaulty) {
      sel.left_out.push_back(absl::StrFormat(
          "%s: marked faulty in the array's newest superblock (events %d)",
          m->spec, top.events));
      continue;
    }
    if (m->sb.events + 1 < top.events) {
      sel.left_out.push_back(absl::StrFormat(
          "%s: stale (events %d, the array is at %d); add it back to the "
          "served array to rebuild it",
          m->spec, m->sb.events, top.events));
      continue;
    }
    const bool active = role < kRoleMax;
    const ScannedMember* other = nullptr;
    if (auto it = by_device.find(m->sb.device_uuid); it != by_device.end()) {
      other = it->second;
    } else if (active) {
      if (auto s = by_slot.find(role); s != by_slot.end()) other = s->second;
    }
    if (other != nullptr) {
      const std::string what =
          active ? absl::StrCat("slot ", role)
                 : absl::StrCat("device ", FormatUuid(m->sb.device_uuid));
      if (other->sb.events == m->sb.events) {
        return absl::FailedPreconditionError(absl::StrFormat(
            "%s and %s both hold %s of array %s at the same events (%d): "
            "copies of one device? Remove one from the DEVICE list, or zero "
            "its superblock",
            other->spec, m->spec, what, FormatUuid(uuid), m->sb.events));
      }
      sel.left_out.push_back(absl::StrFormat(
          "%s: an older copy of %s (events %d; %s has %d)", m->spec, what,
          m->sb.events, other->spec, other->sb.events));
      continue;
    }
    by_device[m->sb.device_uuid] = m;
    if (active) {
      by_slot[role] = m;
    } else {
      spares.push_back(m);
    }
  }
  for (const auto& [slot, m] : by_slot) sel.members.push_back(m->spec);
  for (const ScannedMember* m : spares) sel.members.push_back(m->spec);
  return sel;
}

absl::StatusOr<ArrayRef> ResolveArrayRef(const ConfigFile& config,
                                         const std::string& ref) {
  if (const ConfigArray* a = FindConfigArray(config, ref)) {
    return ArrayRef{.entry = *a, .uuid = a->uuid};
  }
  absl::StatusOr<std::array<uint8_t, 16>> uuid = ParseUuid(ref);
  if (!uuid.ok()) {
    return absl::NotFoundError(absl::StrCat("no ARRAY named '", ref, "' in ",
                                            config.path, " and not a uuid"));
  }
  return ArrayRef{.entry = std::nullopt, .uuid = *uuid};
}

absl::StatusOr<MemberSelection> FindConfiguredMembers(
    const ConfigFile& config, const std::array<uint8_t, 16>& uuid,
    const MemberOptions& options, size_t* candidates) {
  const std::vector<std::string> specs = ExpandDevices(config.devices);
  if (candidates != nullptr) *candidates = specs.size();
  return SelectMembers(ScanCandidates(specs, options), uuid);
}

}  // namespace uraid
