// SPDX-License-Identifier: MIT
// libFuzzer target for the md v1.2 superblock codec.
//
// Properties checked on every input:
//  * DecodeSuperblock never crashes, reads out of bounds or hits UB
//    (ASan/UBSan), and fails only with the documented status codes.
//  * Whatever it accepts re-encodes to exactly the bytes it read (the first
//    256 + 2*max_dev; the rest of the block is zero), and that encoding
//    decodes again to the same superblock.
// Random bytes almost never carry a valid checksum, so each input is also
// tried with its checksum (and the expected super_offset) patched in; that
// lets the fuzzer reach the checks that follow the checksum.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "uraid/superblock.h"

namespace {

constexpr size_t kOffSuperOffset = 144;
constexpr size_t kOffSbCsum = 216;
constexpr size_t kOffMaxDev = 220;

uint64_t LoadLe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void StoreLe32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void CheckDecode(std::span<const uint8_t> in, uint64_t expected_super_offset) {
  absl::StatusOr<uraid::Superblock> sb =
      uraid::DecodeSuperblock(in, expected_super_offset);
  if (!sb.ok()) {
    const absl::StatusCode code = sb.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss ||
               code == absl::StatusCode::kInvalidArgument ||
               code == absl::StatusCode::kUnimplemented);
    FUZZ_CHECK(!sb.status().message().empty());
    return;
  }
  FUZZ_CHECK(sb->max_dev <= uraid::kSbMaxDevLimit);
  FUZZ_CHECK(sb->dev_roles.size() == sb->max_dev);
  FUZZ_CHECK(sb->set_name.size() <= 32);

  const std::vector<uint8_t> enc = uraid::EncodeSuperblock(*sb);
  FUZZ_CHECK(enc.size() == uraid::kSbBlockBytes);
  const size_t used = uraid::kSbFixedBytes + 2 * size_t{sb->max_dev};
  FUZZ_CHECK(in.size() >= used);
  FUZZ_CHECK(std::memcmp(enc.data(), in.data(), used) == 0);
  for (size_t i = used; i < enc.size(); ++i) FUZZ_CHECK(enc[i] == 0);

  absl::StatusOr<uraid::Superblock> again =
      uraid::DecodeSuperblock(enc, expected_super_offset);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->events == sb->events);
  FUZZ_CHECK(again->set_uuid == sb->set_uuid);
  FUZZ_CHECK(again->set_name == sb->set_name);
  FUZZ_CHECK(again->dev_roles == sb->dev_roles);
  FUZZ_CHECK(again->sb_csum == sb->sb_csum);
  // Every other field: equal encodings mean equal superblocks.
  FUZZ_CHECK(uraid::EncodeSuperblock(*again) == enc);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> in(data, size);
  CheckDecode(in, uraid::kSb12OffsetSectors);

  if (size < uraid::kSbFixedBytes) return 0;
  const uint64_t max_dev = LoadLe(data + kOffMaxDev, 4);
  if (max_dev > uraid::kSbMaxDevLimit ||
      size < uraid::kSbFixedBytes + 2 * max_dev) {
    return 0;
  }
  std::vector<uint8_t> fixed(data, data + size);
  StoreLe32(fixed.data() + kOffSbCsum,
            uraid::SuperblockChecksum(fixed, static_cast<uint32_t>(max_dev)));
  CheckDecode(fixed, LoadLe(data + kOffSuperOffset, 8));
  return 0;
}
