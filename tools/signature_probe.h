// SPDX-License-Identifier: MIT
// What else a would-be member holds: a filesystem, a partition table, a
// RAID or volume-manager signature, probed with libblkid as mdadm and
// wipefs do, so that `uraid create` does not silently overwrite it.

#ifndef URAID_TOOLS_SIGNATURE_PROBE_H_
#define URAID_TOOLS_SIGNATURE_PROBE_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace uraid::tool {

// One signature libblkid found.
struct Signature {
  // "filesystem", "raid", "crypto", "other" (libblkid's USAGE), or
  // "partition table".
  std::string usage;
  // libblkid's TYPE ("ext4", "linux_raid_member", "LVM2_member") or the
  // partition table's PTTYPE ("gpt", "dos").
  std::string type;
  std::string uuid;     // UUID or PTUUID; may be empty
  std::string label;    // LABEL; may be empty
  std::string version;  // VERSION (md's superblock version, ...); may be empty
};

// Probes the file or block device at `path` read-only for superblocks and
// partition tables. Returns the first signature found, or nullopt when it
// holds none (a new or zeroed file). An error when `path` cannot be
// opened or probed; an ambiguous probe (two signatures) is reported as
// the first of them.
absl::StatusOr<std::optional<Signature>> ProbeSignature(
    const std::string& path);

// "an ext4 filesystem (UUID 0e5c..., label data)", "a gpt partition table
// (PTUUID ...)", "a linux_raid_member RAID signature (version 1.1, UUID
// ...)": the words of
// create's refusal.
std::string DescribeSignature(const Signature& sig);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_SIGNATURE_PROBE_H_
