// SPDX-License-Identifier: MIT
#include "mdstat_format.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "job_progress.h"
#include "uraid/geometry.h"
#include "uraid/info_json.h"
#include "uraid/member.h"

namespace uraid::tool {
namespace {

// What md would print for a device: a file's base name; a URI as given.
std::string ShortMemberName(const std::string& name) {
  if (IsMemberUri(name)) return name;
  const std::string base = std::filesystem::path(name).filename().string();
  return base.empty() ? name : base;
}

// md's sync_action words, as mdstat prints them; "repair" is uraid's (md
// prints a repair as "resync").
const char* MdstatJobWord(JobKind kind) {
  switch (kind) {
    case JobKind::kRecover:
    case JobKind::kReplace:
      return "recovery";
    case JobKind::kResync:
      return "resync";
    case JobKind::kCheck:
      return "check";
    case JobKind::kRepair:
      return "repair";
    case JobKind::kReshape:
      return "reshape";
    case JobKind::kNone:
      break;
  }
  return "idle";
}

}  // namespace

std::string MdstatSlotMap(const ArrayInfo& info) {
  std::string map;
  int working = 0;
  for (const SlotInfo& s : info.slots) {
    const bool up = s.state == SlotState::kActive;
    working += up ? 1 : 0;
    map.push_back(up ? 'U' : '_');
  }
  return absl::StrFormat("[%d/%d] [%s]", info.geometry.raid_disks(), working,
                         map);
}

std::string MdstatJobLine(const ArrayInfo& info) {
  const JobInfo& job = info.job;
  if (job.kind == JobKind::kNone) {
    // A dirty PPL array is not resynced: its log is replayed when it is
    // assembled writable. A writable array that is merely active (being
    // written) has nothing pending either.
    if (info.ppl && info.read_only) return "";
    return info.resyncing || (!info.clean && info.read_only) ? "resync=PENDING"
                                                             : "";
  }
  // md: per mille, 20 steps of 5%.
  const int permille = static_cast<int>(JobPercent(job) * 10);
  const int steps = std::clamp(permille / 50, 0, 20);
  std::string bar = "[";
  bar.append(static_cast<size_t>(steps), '=');
  bar.push_back('>');
  bar.append(static_cast<size_t>(20 - steps), '.');
  bar.push_back(']');
  std::string line = absl::StrFormat(
      "%s  %s =%3d.%d%% (%d/%d)", bar, MdstatJobWord(job.kind), permille / 10,
      permille % 10, job.done_bytes >> 10, job.total_bytes >> 10);
  const int64_t eta = JobEtaSeconds(job);
  if (eta >= 0) {
    absl::StrAppendFormat(&line, " finish=%d.%dmin", eta / 60, eta % 60 / 6);
  }
  absl::StrAppendFormat(
      &line, " speed=%dK/sec",
      static_cast<uint64_t>(std::max(0.0, job.bytes_per_s)) / 1024);
  return line;
}

std::string MdstatBlock(const std::string& name, const std::string& control,
                        const ArrayInfo& info) {
  const Geometry& g = info.geometry;
  std::string out =
      absl::StrCat(name, " : active", info.read_only ? " (read-only)" : "", " ",
                   absl::StrCat("raid", g.level()));
  for (const SlotInfo& s : info.slots) {
    if (s.name.empty()) continue;  // md lists no missing device
    absl::StrAppendFormat(&out, " %s[%d]%s", ShortMemberName(s.name), s.slot,
                          s.state == SlotState::kFaulty ? "(F)" : "");
  }
  if (info.job.kind == JobKind::kReplace && !info.job.target.empty()) {
    absl::StrAppendFormat(&out, " %s[%d](R)", ShortMemberName(info.job.target),
                          info.job.slot);
  }
  for (const SlotInfo& s : info.spares) {
    absl::StrAppendFormat(&out, " %s[%d](S)", ShortMemberName(s.name),
                          s.dev_number);
  }
  out += "\n";
  absl::StrAppendFormat(
      &out, "      %d blocks super 1.2 level %d, %dk chunk, algorithm %d %s\n",
      g.array_bytes() >> 10, g.level(), g.chunk_bytes() >> 10,
      static_cast<int>(g.layout()), MdstatSlotMap(info));
  if (const std::string job = MdstatJobLine(info); !job.empty()) {
    absl::StrAppend(&out, "      ", job, "\n");
  }
  if (info.bitmap.present) {
    absl::StrAppendFormat(&out,
                          "      bitmap: %d/%d chunks dirty, %dKB chunk%s\n",
                          info.bitmap.dirty_chunks, info.bitmap.chunks,
                          info.bitmap.chunk_bytes >> 10,
                          info.bitmap.offset_bytes == 0 ? ", file" : "");
  }
  absl::StrAppend(&out, "      state: ", ArrayStateText(info),
                  info.ppl ? "; ppl" : "", "; control ", control, "\n");
  return out;
}

}  // namespace uraid::tool
