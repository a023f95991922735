// SPDX-License-Identifier: MIT
// PPL area placement and initialisation (see meta/ppl_log.h).

#include "meta/ppl_log.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "base/aligned_buffer.h"
#include "base/status_macros.h"
#include "format/ppl_format.h"

namespace uraid {
namespace {

constexpr uint64_t kSectorBytes = 512;
// The kernel's minimum: a header and one stripe_head's page of partial
// parity (ppl_validate_rdev).
constexpr uint64_t kMinAreaBytes = kPplHeaderBytes + 4096;

}  // namespace

absl::StatusOr<PplArea> PplAreaOf(const Superblock& sb) {
  if (!sb.has_ppl()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "feature_map 0x%x has no PPL: ppl.offset and ppl.size are not set",
        sb.feature_map));
  }
  const int64_t start = static_cast<int64_t>(sb.super_offset) + sb.ppl_offset();
  const uint64_t size = uint64_t{sb.ppl_size()} * kSectorBytes;
  if (size < kMinAreaBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ppl.size %u sectors is below the %u bytes of a header and one row",
        sb.ppl_size(), kMinAreaBytes));
  }
  // The superblock's own 4 KiB block, and the data, are off limits.
  const int64_t sb_end = static_cast<int64_t>(sb.super_offset) + 8;
  const int64_t end = start + sb.ppl_size();
  const bool overlaps_sb =
      start < sb_end && end > static_cast<int64_t>(sb.super_offset);
  const bool overlaps_data =
      end > static_cast<int64_t>(sb.data_offset) &&
      start < static_cast<int64_t>(sb.data_offset + sb.data_size);
  if (start < 0 || overlaps_sb || overlaps_data) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ppl.offset %d sectors (area %d..%d) overlaps the superblock at "
        "sector %u or the data at %u..%u",
        sb.ppl_offset(), start, end, sb.super_offset, sb.data_offset,
        sb.data_offset + sb.data_size));
  }
  return PplArea{static_cast<uint64_t>(start) * kSectorBytes, size};
}

absl::Status InitPplArea(Member& member, const Superblock& sb) {
  ASSIGN_OR_RETURN(const PplArea area, PplAreaOf(sb));
  auto named = [&](const absl::Status& st) {
    return absl::Status(st.code(),
                        absl::StrFormat("%s: writing the PPL area: %s",
                                        member.Name(), st.message()));
  };
  // Zero first, so no older log (of another array, or of md's
  // MULTIPLE_PPLS units) survives behind the new header.
  constexpr size_t kStep = 256 * 1024;
  AlignedBuffer zeros(std::min<uint64_t>(kStep, area.size_bytes), true);
  for (uint64_t off = kPplHeaderBytes; off < area.size_bytes;) {
    const size_t n = std::min<uint64_t>(zeros.size(), area.size_bytes - off);
    if (absl::Status st =
            member.Write(zeros.data(), n, area.offset_bytes + off);
        !st.ok()) {
      return named(st);
    }
    off += n;
  }
  PplHeader empty;
  empty.signature = PplSignature(sb.set_uuid);
  const std::vector<uint8_t> header = EncodePplHeader(empty);
  AlignedBuffer buf(header.size());
  std::memcpy(buf.data(), header.data(), header.size());
  if (absl::Status st = member.Write(buf.data(), buf.size(), area.offset_bytes);
      !st.ok()) {
    return named(st);
  }
  if (absl::Status st = member.Flush(); !st.ok()) return named(st);
  return absl::OkStatus();
}

}  // namespace uraid
