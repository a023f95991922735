// SPDX-License-Identifier: MIT
// File: uraid/member_scan.h
//
// Finding an array's members among candidate devices by superblock (md's
// `mdadm --assemble --scan`): expand DEVICE globs, read each candidate's
// v1.2 superblock, and pick the members of one array uuid.
//
// ExpandDevices, ScanCandidates and FindConfiguredMembers do I/O (glob,
// realpath, one 4 KiB read per candidate, read-only and without a lock, so a
// served member can be looked at); SelectMembers is pure. Used by the `uraid`
// tool (serve, examine --scan) and the plugin (array= config=); public so that
// they need only the installed headers. Thread-compatible; no state.

#ifndef URAID_MEMBER_SCAN_H_
#define URAID_MEMBER_SCAN_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "uraid/config_file.h"
#include "uraid/export.h"
#include "uraid/member.h"
#include "uraid/superblock.h"

namespace uraid {

// DEVICE words -> candidate specs, in order, each once: an NBD URI as it
// is; a glob expanded (glob(3), sorted), keeping regular files and block
// devices, each by its realpath (so /dev/disk/by-id/x and /dev/sdb are one
// candidate). A pattern that matches nothing adds nothing, as in mdadm.
// The word "partitions" is mdadm's: every device /proc/partitions lists.
URAID_EXPORT std::vector<std::string> ExpandDevices(
    const std::vector<std::string>& words);

// A candidate whose superblock decoded.
struct ScannedMember {
  std::string spec;
  Superblock sb;
};

// Reads every candidate's superblock (MemberOptions read_only, no lock;
// NBD URIs with `options`' NBD settings). Candidates that cannot be opened
// or hold no valid superblock are skipped (most of /dev/sd* belongs to no
// array); each is described in *skipped when given ("PATH: why").
URAID_EXPORT std::vector<ScannedMember> ScanCandidates(
    const std::vector<std::string>& specs, const MemberOptions& options,
    std::vector<std::string>* skipped = nullptr);

// The members chosen for one array, and why the others were left out.
struct MemberSelection {
  std::vector<std::string> members;  // specs, in slot order, spares last
  // One line per candidate of this array left out: "PATH: why" (stale by
  // events, marked faulty, an older copy of a slot).
  std::vector<std::string> left_out;
  uint64_t events = 0;  // the freshest superblock's
  std::string name;     // its set_name
};

// Picks the members of array `uuid` among `scanned`, as mdadm's assemble
// does: the freshest superblock (highest events) decides; a member more
// than one event behind it is stale and left out (md accepts one behind:
// an interrupted superblock update), as is one the freshest superblock
// marks faulty. Two candidates claiming one slot (or one device uuid):
// the fresher is kept and the other left out; at equal events there is no
// telling which is right, so it is FailedPrecondition naming both (md's
// "very similar superblocks"). No candidate of the array: NotFound.
URAID_EXPORT absl::StatusOr<MemberSelection> SelectMembers(
    const std::vector<ScannedMember>& scanned,
    const std::array<uint8_t, 16>& uuid);

// An array named by the user (`uraid serve NAME|UUID`, the plugin's
// array=NAME|UUID): its ARRAY line when the config has one, and its uuid.
struct ArrayRef {
  std::optional<ConfigArray> entry;
  std::array<uint8_t, 16> uuid{};
};

// `ref` as an ARRAY name or uuid of `config` (FindConfigArray), else as a
// bare uuid (an array the config does not list, found by its members).
// Neither: NotFound, "no ARRAY named 'REF' in PATH and not a uuid"; the
// tool and the plugin word their own message from the code.
URAID_EXPORT absl::StatusOr<ArrayRef> ResolveArrayRef(const ConfigFile& config,
                                                      const std::string& ref);

// The members of array `uuid` among the DEVICE candidates of `config`:
// ExpandDevices, ScanCandidates with `options`, SelectMembers, whose
// status is returned as it is (the caller names the array and the
// config). *candidates, when given, is set to the number of candidates
// looked at, also on error.
URAID_EXPORT absl::StatusOr<MemberSelection> FindConfiguredMembers(
    const ConfigFile& config, const std::array<uint8_t, 16>& uuid,
    const MemberOptions& options, size_t* candidates = nullptr);

}  // namespace uraid

#endif  // URAID_MEMBER_SCAN_H_
