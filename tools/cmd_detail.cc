// SPDX-License-Identifier: MIT
// `uraid detail`: the assembled view of an array (like mdadm --detail):
// state, members, the running job, counters and the mkfs alignment hints.
// Offline it assembles read-only from the members' superblocks; on a served
// array that shows what the superblocks say, not live state. With
// --control SOCKET it asks the server (the live state, rendered the same
// way), and --watch / --wait follow the running job until it ends.
// --test adds mdadm --detail --test's exit codes (array_health.h).

#include <cctype>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "array_health.h"
#include "commands.h"
#include "common.h"
#include "control_client.h"
#include "job_progress.h"
#include "nlohmann/json.hpp"
#include "size_parse.h"
#include "uraid/array.h"
#include "uraid/geometry.h"
#include "uraid/info_json.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

using json = nlohmann::ordered_json;

struct DetailArgs {
  bool json = false;
  bool force = false;
  bool watch = false;
  bool wait = false;
  bool test = false;  // exit with md's health code (Health)
  bool scan = false;  // every served array: `uraid status`
  std::string control;
  std::string bitmap;  // external bitmap file, empty: none
  std::vector<std::string> members;
};

// Alignment for filesystems with 4 KiB blocks: ext4 counts in fs blocks,
// xfs in bytes and data disks.
struct MkfsHints {
  uint64_t ext4_stride = 0;        // chunk / 4096
  uint64_t ext4_stripe_width = 0;  // stride * data disks
  std::string ext4;
  std::string xfs;
};

MkfsHints HintsFor(const Geometry& g) {
  MkfsHints h;
  h.ext4_stride = g.chunk_bytes() / 4096;
  h.ext4_stripe_width = h.ext4_stride * g.data_disks();
  h.ext4 = absl::StrFormat("mkfs.ext4 -b 4096 -E stride=%d,stripe-width=%d",
                           h.ext4_stride, h.ext4_stripe_width);
  // mkfs.xfs reads lower-case unit suffixes.
  std::string su = FormatSize(g.chunk_bytes());
  for (char& c : su) c = static_cast<char>(std::tolower(c));
  h.xfs = absl::StrFormat("mkfs.xfs -d su=%s,sw=%d", su, g.data_disks());
  return h;
}

// A slot's state for the table: "rebuilding (37%)" while it recovers.
std::string SlotStateText(const SlotInfo& s, const Geometry& g) {
  std::string text = SlotStateName(s.state);
  if (s.state == SlotState::kRebuilding && g.member_bytes() > 0) {
    absl::StrAppendFormat(&text, " (%d%%)",
                          s.recovery_bytes * 100 / g.member_bytes());
  }
  return text;
}

// The job lines, in mdadm's "<Label> Status : N% complete" form.
void PrintJob(const ArrayInfo& info) {
  const JobInfo& job = info.job;
  const std::string label = absl::StrCat(JobStatusLabel(job.kind), " Status");
  std::printf("%15s : %d%% complete\n", label.c_str(),
              static_cast<int>(JobPercent(job)));
  std::printf("          Speed : %s\n", FormatRate(job.bytes_per_s).c_str());
  std::printf("            ETA : %s\n", FormatEta(JobEtaSeconds(job)).c_str());
  if (!job.target.empty()) {
    std::printf("         Target : %s (slot %d)\n", job.target.c_str(),
                job.slot);
  }
  if (job.kind == JobKind::kCheck || job.kind == JobKind::kRepair) {
    std::printf("     Mismatches : %llu stripes so far\n",
                static_cast<unsigned long long>(job.mismatches));
  }
}

// A reshape in progress, in mdadm's words: how far (KiB of the new shape's
// array, as mdadm prints md's reshape_position) and what changes.
void PrintReshape(const ArrayInfo& info) {
  const ReshapeInfo& r = info.reshape;
  if (!r.active || !r.from || !r.to) return;
  const Geometry& from = *r.from;
  const Geometry& to = *r.to;
  const uint64_t end = to.array_bytes();
  std::printf("  Reshape pos'n : %llu KiB (%d%%)\n",
              static_cast<unsigned long long>(r.position_bytes >> 10),
              end ? static_cast<int>(r.position_bytes * 100 / end) : 0);
  if (to.raid_disks() != from.raid_disks()) {
    std::printf("  Delta Devices : %+d, (%d->%d)\n",
                to.raid_disks() - from.raid_disks(), from.raid_disks(),
                to.raid_disks());
  }
  if (to.level() != from.level()) {
    std::printf("      New Level : %s\n", LevelName(to.level()).c_str());
  }
  if (to.layout() != from.layout() || to.level() != from.level()) {
    std::printf("     New Layout : %s\n",
                std::string(LayoutName(to.layout())).c_str());
  }
  if (to.chunk_bytes() != from.chunk_bytes()) {
    std::printf("  New Chunksize : %lluK\n",
                static_cast<unsigned long long>(to.chunk_bytes() >> 10));
  }
}

// Counter names, in print order, with their values.
std::vector<std::pair<const char*, uint64_t>> CounterList(const Counters& c) {
  std::vector<std::pair<const char*, uint64_t>> out;
  for (const auto& [name, field] : CounterFields()) {
    out.emplace_back(name, c.*field);
  }
  return out;
}

// `live`: the state comes from a running server (--control).
void PrintText(const ArrayInfo& info, bool live) {
  const Geometry& g = info.geometry;
  int active = 0;
  int failed = 0;
  for (const SlotInfo& s : info.slots) {
    if (s.state == SlotState::kActive) ++active;
    if (s.state == SlotState::kFaulty) ++failed;
  }
  std::printf("           UUID : %s\n", FormatUuid(info.uuid).c_str());
  std::printf("           Name : %s\n", info.name.c_str());
  std::printf("  Creation Time : %s\n", FormatMdTime(info.ctime).c_str());
  std::printf("     Raid Level : %s\n", LevelName(g.level()).c_str());
  std::printf("     Array Size : %llu KiB%s\n",
              static_cast<unsigned long long>(g.array_bytes() >> 10),
              MdHumanSize(g.array_bytes()).c_str());
  std::printf("  Used Dev Size : %llu KiB%s\n",
              static_cast<unsigned long long>(g.member_bytes() >> 10),
              MdHumanSize(g.member_bytes()).c_str());
  std::printf("   Raid Devices : %d\n", g.raid_disks());
  if (info.bitmap.present) {
    // An external file's area starts at byte 0; an internal one never
    // does (it follows the superblock).
    std::printf(
        "  Intent Bitmap : %s (%s chunks, %llu of %llu dirty, "
        "events %llu)\n",
        info.bitmap.offset_bytes == 0 ? "External file" : "Internal",
        FormatSize(info.bitmap.chunk_bytes).c_str(),
        static_cast<unsigned long long>(info.bitmap.dirty_chunks),
        static_cast<unsigned long long>(info.bitmap.chunks),
        static_cast<unsigned long long>(info.bitmap.events));
  }
  std::printf("    Update Time : %s\n", FormatMdTime(info.utime).c_str());
  std::printf("          State : %s\n", ArrayStateText(info).c_str());
  std::printf(" Active Devices : %d\n", active);
  std::printf(" Failed Devices : %d\n", failed);
  if (!info.spares.empty()) {
    std::printf("  Spare Devices : %d\n", static_cast<int>(info.spares.size()));
  }
  std::printf("         Layout : %s\n",
              std::string(LayoutName(g.layout())).c_str());
  std::printf("     Chunk Size : %lluK\n",
              static_cast<unsigned long long>(g.chunk_bytes() >> 10));
  // mdadm --detail's line (Detail.c), md's names for the three policies.
  std::printf("Consistency Policy : %s\n", info.ppl              ? "ppl"
                                           : info.bitmap.present ? "bitmap"
                                                                 : "resync");
  std::printf("    Data Offset : %llu sectors\n",
              static_cast<unsigned long long>(info.data_offset_bytes / 512));
  std::printf("         Events : %llu\n",
              static_cast<unsigned long long>(info.events));
  if (info.job.kind != JobKind::kNone) {
    PrintJob(info);
  } else if (info.ppl && info.read_only && !info.clean) {
    // Not a resync: the log of the stripes being written is replayed
    // when the array is next assembled writable (served).
    std::printf(
        "  Resync Status : none needed (PPL: log replayed at "
        "assembly, when the array is next served)\n");
  } else if (info.resyncing || !info.clean) {
    const uint64_t pct =
        g.member_bytes() ? info.resync_bytes * 100 / g.member_bytes() : 0;
    std::printf("  Resync Status : %llu%% complete%s\n",
                static_cast<unsigned long long>(pct),
                info.switched_read_only
                    ? " (frozen: read-only; `uraid readwrite` resumes it)"
                : info.read_only ? " (pending: runs when the array is served)"
                                 : "");
  }
  PrintReshape(info);
  if (info.last_job.kind != JobKind::kNone) {
    std::printf("       Last Job : %s\n", JobOutcome(info.last_job).c_str());
  }
  if (live) {
    std::printf("   Speed Limits : min %llu KiB/s, max %llu KiB/s\n",
                static_cast<unsigned long long>(info.speed.min_kib_s),
                static_cast<unsigned long long>(info.speed.max_kib_s));
  }
  std::printf("\n    Slot   State     Device\n");
  for (const SlotInfo& s : info.slots) {
    // Errors the live engine saw (md's per-device counters), when any.
    const std::string errors =
        s.read_errors + s.write_errors + s.corrected_read_errors == 0
            ? ""
            : absl::StrFormat("  (errors: %d read, %d write, %d corrected)",
                              s.read_errors, s.write_errors,
                              s.corrected_read_errors);
    std::printf(
        "    %4d   %-8s  %s%s%s%s\n", s.slot, SlotStateText(s, g).c_str(),
        s.name.empty() ? "-" : s.name.c_str(),
        s.bad_blocks == 0 ? ""
                          : absl::StrFormat("  (bad blocks: %d, %d sectors)",
                                            s.bad_blocks, s.bad_sectors)
                                .c_str(),
        errors.c_str(), s.want_replacement ? "  (want replacement)" : "");
  }
  for (const SlotInfo& s : info.spares) {
    std::printf("       -   %-8s  %s\n", SlotStateName(s.state),
                s.name.c_str());
  }

  std::printf("\nCounters (since %s opened the array):\n",
              live ? "the server" : "this process");
  for (const auto& [name, value] : CounterList(info.counters)) {
    std::printf("  %-20s %llu\n", name, static_cast<unsigned long long>(value));
  }

  const MkfsHints hints = HintsFor(g);
  std::printf("\nAlignment for a filesystem with 4 KiB blocks:\n");
  std::printf("  %s DEVICE\n", hints.ext4.c_str());
  std::printf("  %s DEVICE\n", hints.xfs.c_str());
}

// The control protocol's encoding of the job (InfoToJsonText) plus its
// progress: percent done and seconds left (-1: unknown).
void AddJobProgress(const JobInfo& job, json* j) {
  (*j)["percent"] = JobPercent(job);
  (*j)["eta_seconds"] = JobEtaSeconds(job);
}

// InfoToJsonText's object (the control protocol's detail, so that no ArrayInfo
// field is encoded twice), with the names `detail --json` has always used
// where they differ, and what only the tool adds: md's words and times,
// sizes derived from the geometry, state, live and the mkfs hints.
json ToJson(const ArrayInfo& info, bool live) {
  const Geometry& g = info.geometry;
  json j = json::parse(InfoToJsonText(info));
  // Here "layout" is the name; raid_devices, *_time_unix and speed_limits
  // stand for raid_disks, ctime, utime and speed.
  j["layout"] = std::string(LayoutName(g.layout()));
  j["layout_number"] = static_cast<int>(g.layout());
  j.erase("raid_disks");
  j["raid_devices"] = g.raid_disks();
  j.erase("ctime");
  j.erase("utime");
  j["creation_time"] = FormatMdTime(info.ctime);
  j["creation_time_unix"] = info.ctime & 0xFFFFFFFFFFull;
  j["update_time"] = FormatMdTime(info.utime);
  j["update_time_unix"] = info.utime & 0xFFFFFFFFFFull;
  json speed = std::move(j["speed"]);
  j.erase("speed");
  // md's two limits stay the speed_limits object scripts compare; the
  // busy share (uraid's own) is a field of its own.
  if (speed.contains("busy_share_pct")) {
    j["busy_share_pct"] = speed["busy_share_pct"];
    speed.erase("busy_share_pct");
  }
  j["speed_limits"] = std::move(speed);
  j["raid_level"] = LevelName(g.level());
  j["data_disks"] = g.data_disks();
  j["array_bytes"] = g.array_bytes();
  j["state"] = ArrayStateText(info);
  j["live"] = live;
  AddJobProgress(info.job, &j["job"]);
  AddJobProgress(info.last_job, &j["last_job"]);
  const MkfsHints hints = HintsFor(g);
  j["mkfs"] = {{"ext4_stride", hints.ext4_stride},
               {"ext4_stripe_width", hints.ext4_stripe_width},
               {"ext4", hints.ext4},
               {"xfs_su_bytes", g.chunk_bytes()},
               {"xfs_sw", g.data_disks()},
               {"xfs", hints.xfs}};
  return j;
}

void Print(const ArrayInfo& info, bool json_output, bool live) {
  if (json_output) {
    std::printf("%s\n", ToJson(info, live)
                            .dump(2, ' ', false,
                                  nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else {
    PrintText(info, live);
  }
}

// The exit code once the detail is printed: md's health code with --test.
int ExitCode(const DetailArgs& args, const ArrayInfo& info) {
  return args.test ? static_cast<int>(HealthOf(info)) : 0;
}

// An error that leaves nothing to describe: reported, and with --test
// md's "cannot be read" code instead of 1.
int FailUnreadable(const DetailArgs& args, const absl::Status& status) {
  Fail(status);
  return args.test ? static_cast<int>(Health::kUnreadable) : 1;
}

// Offline --test when the library refused to assemble. The library refuses
// an array with more than one slot missing (it could not serve it), so a
// failed array never reaches HealthOf offline. Its superblocks still tell
// the story: when the freshest one records two or more slots failed or
// missing (an array that failed while served records the failure that
// failed it, as md does) the verdict is md's "unusable" (2); slots gone
// only because their members were not given, and any other refusal (no
// superblock, foreign or mismatched members, dirty and degraded without
// --force), are "cannot be read" (4), as md's --detail cannot open such an
// array either.
int RefusedAssemblyCode(const DetailArgs& args, const absl::Status& status) {
  Fail(status);
  if (!args.test) return 1;
  absl::StatusOr<SuperblockCensus> census = CountGoneSlots(args.members);
  if (census.ok() && census->recorded_gone >= 2) {
    std::fprintf(stderr,
                 "uraid: array %s has lost %d of its %d members (recorded "
                 "in its superblocks): failed\n",
                 census->uuid.c_str(), census->recorded_gone,
                 census->raid_disks);
    return static_cast<int>(Health::kFailed);
  }
  if (census.ok() && census->gone >= 2) {
    std::fprintf(stderr,
                 "uraid: array %s: %d of its %d members not given or "
                 "unreadable (its superblocks record %d failed); give them "
                 "all to judge it\n",
                 census->uuid.c_str(), census->gone, census->raid_disks,
                 census->recorded_gone);
  }
  return static_cast<int>(Health::kUnreadable);
}

int RunRemoteDetail(const DetailArgs& args) {
  absl::StatusOr<std::unique_ptr<ControlClient>> client =
      ControlClient::Connect(args.control);
  if (!client.ok()) return FailUnreadable(args, client.status());
  if (args.watch || args.wait) {
    absl::StatusOr<ArrayInfo> info = WaitForJobs(**client, args.watch);
    if (!info.ok()) return Fail(info.status());
    if (args.json) Print(*info, true, true);
    if (!JobSucceeded(info->last_job)) {
      return Fail(absl::StrCat("last job: ", JobOutcome(info->last_job)));
    }
    return 0;
  }
  absl::StatusOr<ArrayInfo> info = (*client)->Detail();
  if (!info.ok()) return FailUnreadable(args, info.status());
  Print(*info, args.json, true);
  return ExitCode(args, *info);
}

int RunDetail(const DetailArgs& args) {
  if (args.scan) return RunStatusScan(args.json, "");
  if (!args.control.empty()) return RunRemoteDetail(args);
  if (args.members.empty()) {
    std::fprintf(stderr, "uraid: detail needs MEMBER... or --control SOCKET\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Array>> array;
  if (args.bitmap.empty()) {
    array = AssembleReadOnly(args.members, args.force);
  } else {
    // AssembleReadOnly plus the bitmap file, read-only and unlocked too.
    MemberOptions member_options;
    member_options.read_only = true;
    member_options.lock = false;
    absl::StatusOr<std::vector<std::unique_ptr<Member>>> members =
        OpenMembers(args.members, member_options);
    if (!members.ok()) return RefusedAssemblyCode(args, members.status());
    AssembleOptions options;
    options.read_only = true;
    options.force = args.force;
    // Describing writes nothing: a member left out cannot go stale.
    options.run = true;
    options.bitmap_file = args.bitmap;
    array = Array::Assemble(*std::move(members), options);
  }
  if (!array.ok()) return RefusedAssemblyCode(args, array.status());
  const ArrayInfo info = (*array)->Info();
  Print(info, args.json, false);
  return ExitCode(args, info);
}

}  // namespace

void AddDetailCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<DetailArgs>();
  CLI::App* sub = app.add_subcommand(
      "detail",
      "Assemble read-only and describe the array (like mdadm "
      "--detail), with mkfs alignment hints");
  CLI::Option* json_flag =
      sub->add_flag("--json", args->json, "Print one JSON object");
  sub->add_flag("--force,-f", args->force,
                "Describe an array that is both dirty and degraded (nothing "
                "is written either way)");
  CLI::Option* control = sub->add_option(
      "--control,-C", args->control,
      "Ask the server of a running array through its control socket (the "
      "plugin's control=SOCKET): live state, jobs, speed limits");
  sub->add_option("MEMBER", args->members, "Member files, devices or NBD URIs")
      ->excludes(control);
  sub->add_flag("--scan,-s", args->scan,
                "Every array served on this machine (as `uraid status`)")
      ->excludes(control)
      ->excludes("MEMBER");
  sub->add_option("--bitmap,-b", args->bitmap,
                  "The array's external bitmap file (uraid create --bitmap "
                  "FILE), to show its state")
      ->excludes(control);
  CLI::Option* watch = sub->add_flag(
      "--watch,-w", args->watch,
      "With --control: draw the running job's progress every 0.5 s until "
      "it ends (exit 1 unless it completed)");
  sub->add_flag("--wait,-W", args->wait,
                "With --control: wait silently until no job runs (exit 1 "
                "unless the last job completed)")
      ->needs(control)
      ->excludes(watch);
  watch->needs(control);
  watch->excludes(json_flag);
  sub->add_flag("--test,-t", args->test,
                "Exit with md's health code after printing: 0 healthy, 1 "
                "degraded, 2 failed (two members gone), 4 cannot be read")
      ->excludes(watch)
      ->excludes("--wait");
  sub->final_callback(
      [args, action] { *action = [args] { return RunDetail(*args); }; });
}

}  // namespace uraid::tool
