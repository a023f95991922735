// SPDX-License-Identifier: MIT
// `uraid map`: where md puts a logical byte, from geometry alone (no
// members). For checking a layout by hand and for test authors.

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "commands.h"
#include "common.h"
#include "nlohmann/json.hpp"
#include "size_parse.h"
#include "uraid/geometry.h"

namespace uraid::tool {
namespace {

struct MapArgs {
  int level = 5;
  std::string layout;
  std::string chunk = "512K";
  int disks = 0;
  bool json = false;
  std::vector<std::string> offsets;
};

absl::StatusOr<Geometry> MakeGeometry(const MapArgs& args) {
  Layout layout =
      args.level == 4 ? Layout::kParityLast : Layout::kLeftSymmetric;
  if (!args.layout.empty()) {
    absl::StatusOr<Layout> parsed = ParseLayout(args.layout, args.level);
    if (!parsed.ok()) return parsed.status();
    layout = *parsed;
  }
  absl::StatusOr<uint64_t> chunk = ParseUnitSizeOption("--chunk", args.chunk);
  if (!chunk.ok()) return chunk.status();
  // The map does not depend on member size; pick 2^30 chunks per member so
  // every offset a real array can have is in range (4 TiB members at 4 KiB
  // chunks) while array_bytes stays far below 2^64 at 16 MiB x 64 disks.
  const uint64_t member_bytes =
      *chunk > 0 && *chunk <= kMaxChunkBytes ? *chunk << 30 : *chunk;
  return Geometry::Make(args.level, layout, *chunk, args.disks, member_bytes);
}

int RunMap(const MapArgs& args) {
  absl::StatusOr<Geometry> geometry = MakeGeometry(args);
  if (!geometry.ok()) return Fail(geometry.status());
  const Geometry& g = *geometry;

  // Parse everything first: a bad offset should not leave half a table.
  std::vector<uint64_t> offsets;
  for (const std::string& text : args.offsets) {
    absl::StatusOr<uint64_t> offset = ParseSize(text);
    if (!offset.ok()) return Fail(offset.status());
    if (*offset >= g.array_bytes()) {
      return Fail(
          absl::StrFormat("offset %s is past the largest array this "
                          "geometry can describe (%d bytes)",
                          text, g.array_bytes()));
    }
    offsets.push_back(*offset);
  }

  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  if (!args.json) {
    std::printf("%s, %s, chunk %s, %d disks\n", LevelName(g.level()).c_str(),
                std::string(LayoutName(g.layout())).c_str(),
                FormatSize(g.chunk_bytes()).c_str(), g.raid_disks());
    if (g.level() == 6) {
      std::printf("%20s %12s %6s %5s %7s %5s %20s %16s\n", "OFFSET", "STRIPE",
                  "INDEX", "DISK", "PARITY", "Q", "MEMBER_OFFSET",
                  "MEMBER_SECTOR");
    } else {
      std::printf("%20s %12s %6s %5s %7s %20s %16s\n", "OFFSET", "STRIPE",
                  "INDEX", "DISK", "PARITY", "MEMBER_OFFSET", "MEMBER_SECTOR");
    }
  }
  for (uint64_t offset : offsets) {
    const Location loc = g.Map(offset);
    if (args.json) {
      all.push_back({{"offset", offset},
                     {"stripe", loc.stripe},
                     {"data_index", loc.data_index},
                     {"disk", loc.disk},
                     {"parity_disk", loc.parity_disk},
                     {"member_offset", loc.member_offset},
                     {"member_sector", loc.member_offset / 512},
                     {"chunk_offset", loc.chunk_offset}});
      if (g.level() == 6) all.back()["q_disk"] = g.QDisk(loc.stripe);
    } else if (g.level() == 6) {
      std::printf("%20llu %12llu %6d %5d %7d %5d %20llu %16llu\n",
                  static_cast<unsigned long long>(offset),
                  static_cast<unsigned long long>(loc.stripe), loc.data_index,
                  loc.disk, loc.parity_disk, g.QDisk(loc.stripe),
                  static_cast<unsigned long long>(loc.member_offset),
                  static_cast<unsigned long long>(loc.member_offset / 512));
    } else {
      std::printf("%20llu %12llu %6d %5d %7d %20llu %16llu\n",
                  static_cast<unsigned long long>(offset),
                  static_cast<unsigned long long>(loc.stripe), loc.data_index,
                  loc.disk, loc.parity_disk,
                  static_cast<unsigned long long>(loc.member_offset),
                  static_cast<unsigned long long>(loc.member_offset / 512));
    }
  }
  if (args.json) {
    std::printf("%s\n", all.dump(2).c_str());
  } else {
    std::printf("(member offsets count from each member's data offset)\n");
  }
  return 0;
}

}  // namespace

void AddMapCommand(CLI::App& app, Action* action) {
  auto args = std::make_shared<MapArgs>();
  CLI::App* sub = app.add_subcommand(
      "map", "Show where md places logical byte offsets (geometry only)");
  sub->add_option("--layout,-p", args->layout,
                  "Layout name or 0-5 (default left-symmetric; parity-last "
                  "for level 4)");
  sub->add_option("--chunk,-c", args->chunk, "Chunk size, with a unit (64K)")
      ->check(UnitSizeValidator("--chunk"))
      ->capture_default_str();
  sub->add_option("--disks,-n", args->disks, "Number of raid devices")
      ->required()
      ->check(CLI::Range(kMinDisks, kMaxDisks));
  sub->add_option("--level,-l", args->level, "4, 5 or 6")
      ->check(CLI::IsMember({4, 5, 6}))
      ->capture_default_str();
  sub->add_flag("--json", args->json, "Print a JSON array");
  sub->add_option("OFFSET", args->offsets,
                  "Logical byte offsets (K/M/G/T suffixes)")
      ->required()
      ->check(SizeValidator());
  sub->final_callback(
      [args, action] { *action = [args] { return RunMap(*args); }; });
}

}  // namespace uraid::tool
