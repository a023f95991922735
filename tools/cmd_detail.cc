// `uraid detail`: the assembled view of an array (like mdadm --detail):
// state, members, counters and the mkfs alignment hints. Offline it
// assembles read-only from the members' superblocks; on a served array that
// shows what the superblocks say, not live state (that needs --control).

#include <cctype>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commands.h"
#include "common.h"
#include "nlohmann/json.hpp"
#include "size_parse.h"
#include "uraid/array.h"
#include "uraid/geometry.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

using json = nlohmann::ordered_json;

struct DetailArgs {
  bool json = false;
  bool force = false;
  std::string control;
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

std::string StateText(const ArrayInfo& info) {
  std::vector<std::string> words = {info.clean ? "clean" : "active"};
  if (info.failed) {
    words.push_back("failed");
  } else if (info.degraded) {
    words.push_back("degraded");
  }
  // A read-only assembly never resyncs: unfinished parity is only pending
  // (mdadm's word for it) until a writable open picks it up.
  if (info.resyncing) {
    words.push_back(info.read_only ? "resyncing (PENDING)" : "resyncing");
  }
  return absl::StrJoin(words, ", ");
}

const char* SlotStateName(SlotState state) {
  switch (state) {
    case SlotState::kActive:
      return "active";
    case SlotState::kFaulty:
      return "faulty";
    case SlotState::kMissing:
      return "missing";
  }
  return "?";
}

// Counter names, in print order, with their values.
std::vector<std::pair<const char*, uint64_t>> CounterList(const Counters& c) {
  return {
      {"member_reads", c.member_reads},
      {"member_read_bytes", c.member_read_bytes},
      {"member_writes", c.member_writes},
      {"member_write_bytes", c.member_write_bytes},
      {"member_flushes", c.member_flushes},
      {"full_stripe_writes", c.full_stripe_writes},
      {"rmw_writes", c.rmw_writes},
      {"rcw_writes", c.rcw_writes},
      {"degraded_writes", c.degraded_writes},
      {"reconstructions", c.reconstructions},
      {"resynced_stripes", c.resynced_stripes},
      {"resync_repairs", c.resync_repairs},
  };
}

void PrintText(const ArrayInfo& info) {
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
  std::printf("    Update Time : %s\n", FormatMdTime(info.utime).c_str());
  std::printf("          State : %s\n", StateText(info).c_str());
  std::printf(" Active Devices : %d\n", active);
  std::printf(" Failed Devices : %d\n", failed);
  std::printf("         Layout : %s\n",
              std::string(LayoutName(g.layout())).c_str());
  std::printf("     Chunk Size : %lluK\n",
              static_cast<unsigned long long>(g.chunk_bytes() >> 10));
  std::printf("    Data Offset : %llu sectors\n",
              static_cast<unsigned long long>(info.data_offset_bytes / 512));
  std::printf("         Events : %llu\n",
              static_cast<unsigned long long>(info.events));
  if (info.resyncing || !info.clean) {
    const uint64_t pct =
        g.member_bytes() ? info.resync_bytes * 100 / g.member_bytes() : 0;
    std::printf(
        "  Resync Status : %llu%% complete%s\n",
        static_cast<unsigned long long>(pct),
        info.read_only ? " (pending: runs when the array is served)" : "");
  }
  std::printf("\n    Slot   State     Device\n");
  for (const SlotInfo& s : info.slots) {
    std::printf("    %4d   %-8s  %s\n", s.slot, SlotStateName(s.state),
                s.name.empty() ? "-" : s.name.c_str());
  }

  std::printf("\nCounters (since this process opened the array):\n");
  for (const auto& [name, value] : CounterList(info.counters)) {
    std::printf("  %-20s %llu\n", name, static_cast<unsigned long long>(value));
  }

  const MkfsHints hints = HintsFor(g);
  std::printf("\nAlignment for a filesystem with 4 KiB blocks:\n");
  std::printf("  %s DEVICE\n", hints.ext4.c_str());
  std::printf("  %s DEVICE\n", hints.xfs.c_str());
}

json ToJson(const ArrayInfo& info) {
  const Geometry& g = info.geometry;
  json j;
  j["uuid"] = FormatUuid(info.uuid);
  j["name"] = info.name;
  j["creation_time"] = FormatMdTime(info.ctime);
  j["creation_time_unix"] = info.ctime & 0xFFFFFFFFFFull;
  j["update_time"] = FormatMdTime(info.utime);
  j["update_time_unix"] = info.utime & 0xFFFFFFFFFFull;
  j["raid_level"] = LevelName(g.level());
  j["level"] = g.level();
  j["layout"] = std::string(LayoutName(g.layout()));
  j["layout_number"] = static_cast<int>(g.layout());
  j["chunk_bytes"] = g.chunk_bytes();
  j["raid_devices"] = g.raid_disks();
  j["data_disks"] = g.data_disks();
  j["array_bytes"] = g.array_bytes();
  j["member_bytes"] = g.member_bytes();
  j["data_offset_bytes"] = info.data_offset_bytes;
  j["events"] = info.events;
  j["state"] = StateText(info);
  j["clean"] = info.clean;
  j["degraded"] = info.degraded;
  j["failed"] = info.failed;
  j["read_only"] = info.read_only;
  j["resyncing"] = info.resyncing;
  j["resync_bytes"] = info.resync_bytes;
  json slots = json::array();
  for (const SlotInfo& s : info.slots) {
    slots.push_back({{"slot", s.slot},
                     {"state", SlotStateName(s.state)},
                     {"name", s.name},
                     {"dev_number", s.dev_number},
                     {"device_uuid", FormatUuid(s.device_uuid)}});
  }
  j["slots"] = std::move(slots);
  json counters = json::object();
  for (const auto& [name, value] : CounterList(info.counters)) {
    counters[name] = value;
  }
  j["counters"] = std::move(counters);
  const MkfsHints hints = HintsFor(g);
  j["mkfs"] = {{"ext4_stride", hints.ext4_stride},
               {"ext4_stripe_width", hints.ext4_stripe_width},
               {"ext4", hints.ext4},
               {"xfs_su_bytes", g.chunk_bytes()},
               {"xfs_sw", g.data_disks()},
               {"xfs", hints.xfs}};
  return j;
}

int RunDetail(const DetailArgs& args) {
  if (!args.control.empty()) {
    return Fail("the control channel is not implemented yet (issue 5)");
  }
  if (args.members.empty()) {
    std::fprintf(stderr, "uraid: detail needs MEMBER... or --control SOCKET\n");
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Array>> array =
      AssembleReadOnly(args.members, args.force);
  if (!array.ok()) return Fail(array.status());
  const ArrayInfo info = (*array)->Info();
  if (args.json) {
    std::printf("%s\n", ToJson(info).dump(2).c_str());
  } else {
    PrintText(info);
  }
  return 0;
}

}  // namespace

void AddDetailCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<DetailArgs>();
  CLI::App* sub = app.add_subcommand(
      "detail",
      "Assemble read-only and describe the array (like mdadm "
      "--detail), with mkfs alignment hints");
  sub->add_flag("--json", args->json, "Print one JSON object");
  sub->add_flag("--force", args->force,
                "Describe an array that is both dirty and degraded (nothing "
                "is written either way)");
  CLI::Option* control = sub->add_option(
      "--control", args->control, "Ask a running server (not implemented)");
  sub->add_option("MEMBER", args->members, "Member files, devices or NBD URIs")
      ->excludes(control);
  sub->final_callback(
      [args, action] { *action = [args] { return RunDetail(*args); }; });
}

}  // namespace uraid::tool
