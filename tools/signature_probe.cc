// SPDX-License-Identifier: MIT
#include "signature_probe.h"

#include <blkid/blkid.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace uraid::tool {
namespace {

struct ProbeDeleter {
  void operator()(blkid_probe p) const { blkid_free_probe(p); }
};
using Probe = std::unique_ptr<std::remove_pointer_t<blkid_probe>, ProbeDeleter>;

std::string Value(blkid_probe pr, const char* name) {
  const char* data = nullptr;
  size_t len = 0;
  if (blkid_probe_lookup_value(pr, name, &data, &len) != 0 || !data) {
    return "";
  }
  return std::string(data, strnlen(data, len));
}

}  // namespace

absl::StatusOr<std::optional<Signature>> ProbeSignature(
    const std::string& path) {
  errno = 0;
  Probe pr(blkid_new_probe_from_filename(path.c_str()));
  if (!pr) {
    return absl::ErrnoToStatus(errno ? errno : EIO,
                               absl::StrCat(path, ": cannot probe it"));
  }
  // Superblocks of every kind (filesystems, RAID, LVM, LUKS, swap), with
  // the values the message names; and partition tables, magic only (as
  // wipefs: a table is reported even if its entries are odd).
  blkid_probe_enable_superblocks(pr.get(), 1);
  blkid_probe_set_superblocks_flags(
      pr.get(), BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE | BLKID_SUBLKS_UUID |
                    BLKID_SUBLKS_LABEL | BLKID_SUBLKS_VERSION |
                    BLKID_SUBLKS_MAGIC);
  blkid_probe_enable_partitions(pr.get(), 1);
  blkid_probe_set_partitions_flags(pr.get(), BLKID_PARTS_MAGIC);
  // blkid_do_probe (not safeprobe): ambiguous results (two signatures on
  // one device) are exactly what must stop create, so take the first.
  const int rc = blkid_do_probe(pr.get());
  if (rc < 0) {
    return absl::InternalError(absl::StrCat(path, ": libblkid probe failed"));
  }
  if (rc == 1) return std::nullopt;
  Signature sig;
  if (std::string pt = Value(pr.get(), "PTTYPE"); !pt.empty()) {
    sig.usage = "partition table";
    sig.type = pt;
    sig.uuid = Value(pr.get(), "PTUUID");
    return sig;
  }
  sig.type = Value(pr.get(), "TYPE");
  sig.usage = Value(pr.get(), "USAGE");
  sig.uuid = Value(pr.get(), "UUID");
  sig.label = Value(pr.get(), "LABEL");
  sig.version = Value(pr.get(), "VERSION");
  if (sig.type.empty()) sig.type = "unknown";
  return sig;
}

std::string DescribeSignature(const Signature& sig) {
  std::string what;
  if (sig.usage == "filesystem") {
    // "an ext4 filesystem", "a btrfs filesystem" (by the first letter).
    const bool vowel = std::strchr("aeiouAEIOU", sig.type[0]) != nullptr;
    what = absl::StrFormat("%s %s filesystem", vowel ? "an" : "a", sig.type);
  } else if (sig.usage == "partition table") {
    what = absl::StrFormat("a %s partition table", sig.type);
  } else if (sig.usage == "raid") {
    what = absl::StrFormat("a %s RAID signature", sig.type);
  } else {
    what = absl::StrFormat("a %s signature", sig.type);
  }
  std::vector<std::string> ids;
  if (sig.usage == "raid" && !sig.version.empty()) {
    ids.push_back(absl::StrCat("version ", sig.version));
  }
  if (!sig.uuid.empty()) {
    ids.push_back(absl::StrCat(
        sig.usage == "partition table" ? "PTUUID " : "UUID ", sig.uuid));
  }
  if (!sig.label.empty()) ids.push_back(absl::StrCat("label ", sig.label));
  if (!ids.empty()) absl::StrAppend(&what, " (", absl::StrJoin(ids, ", "), ")");
  return what;
}

}  // namespace uraid::tool
