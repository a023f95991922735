// SPDX-License-Identifier: MIT
#include "array_health.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid::tool {
namespace {

// The member's superblock, or nullopt when it cannot be opened or read or
// holds none (a missing or truncated file is simply a member that is gone).
std::optional<Superblock> ReadSuperblock(const std::string& path) {
  MemberOptions options;
  options.read_only = true;
  options.lock = false;  // a served array's members are locked by nbdkit
  options.nbd_timeout_ms = 5000;
  absl::StatusOr<std::unique_ptr<Member>> member = OpenMember(path, options);
  if (!member.ok()) return std::nullopt;
  if ((*member)->Size() < kSb12OffsetBytes + kSbBlockBytes) return std::nullopt;
  std::vector<uint8_t> block(kSbBlockBytes);
  if (!(*member)->Read(block.data(), block.size(), kSb12OffsetBytes).ok()) {
    return std::nullopt;
  }
  absl::StatusOr<Superblock> sb = DecodeSuperblock(block);
  if (!sb.ok()) return std::nullopt;
  return *std::move(sb);
}

}  // namespace

Health HealthOf(const ArrayInfo& info) {
  if (info.failed) return Health::kFailed;
  if (info.degraded) return Health::kDegraded;
  return Health::kHealthy;
}

absl::StatusOr<SuperblockCensus> CountGoneSlots(
    const std::vector<std::string>& members) {
  std::vector<Superblock> sbs;
  for (const std::string& path : members) {
    std::optional<Superblock> sb = ReadSuperblock(path);
    if (sb) sbs.push_back(*std::move(sb));
  }
  if (sbs.empty()) {
    return absl::NotFoundError("no member has a readable md superblock");
  }
  // The array is the first readable member's; members of other arrays are
  // not part of it and hold none of its slots.
  const std::array<uint8_t, 16> uuid = sbs.front().set_uuid;
  const Superblock* freshest = nullptr;
  for (const Superblock& sb : sbs) {
    if (sb.set_uuid != uuid) continue;
    if (freshest == nullptr || sb.events > freshest->events) freshest = &sb;
  }
  std::set<uint32_t> working;
  for (const Superblock& sb : sbs) {
    if (sb.set_uuid != uuid) continue;
    const uint16_t role = sb.role();
    if (role >= freshest->raid_disks) continue;  // spare, faulty, reserved
    // The freshest view decides: a member that was failed while others
    // carried on still calls itself active in its own (stale) superblock.
    const uint16_t fresh_role = sb.dev_number < freshest->dev_roles.size()
                                    ? freshest->dev_roles[sb.dev_number]
                                    : kRoleSpare;
    if (fresh_role != role) continue;
    working.insert(role);
  }
  SuperblockCensus census;
  census.raid_disks = static_cast<int>(freshest->raid_disks);
  census.gone = census.raid_disks - static_cast<int>(working.size());
  std::set<uint16_t> held;
  for (const uint16_t role : freshest->dev_roles) {
    if (role < freshest->raid_disks) held.insert(role);
  }
  census.recorded_gone = census.raid_disks - static_cast<int>(held.size());
  census.uuid = FormatUuid(uuid);
  return census;
}

}  // namespace uraid::tool
