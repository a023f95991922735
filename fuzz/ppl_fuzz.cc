// SPDX-License-Identifier: MIT
// libFuzzer target for md's PPL header codec (format/ppl_format.h).
//
// Properties checked on every input:
//  * DecodePplHeader and FindNewestPplHeader never crash or read out of
//    bounds (ASan/UBSan) and fail only with the documented codes.
//  * An accepted header re-encodes to the bytes it read from the signature
//    to the last entry, apart from the ones md ignores (padding) and the
//    checksum, and decodes again to the same value.
// Random bytes almost never carry a valid checksum, so each input is also
// tried with its checksum patched in, to reach the checks behind it.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "format/ppl_format.h"
#include "fuzz_check.h"

namespace {

constexpr size_t kOffSignature = 512;
constexpr size_t kOffChecksum = 532;

uint32_t Load32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}

void Store32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

void CheckDecode(std::span<const uint8_t> in) {
  // The signature the input carries, so the fuzzer gets past that check.
  const uint32_t sig = in.size() >= 516 ? Load32(in.data() + kOffSignature) : 0;
  absl::StatusOr<uraid::PplHeader> h = uraid::DecodePplHeader(in, sig);
  if (!h.ok()) {
    const absl::StatusCode code = h.status().code();
    FUZZ_CHECK(code == absl::StatusCode::kDataLoss ||
               code == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(!h.status().message().empty());
  } else {
    FUZZ_CHECK(h->entries.size() <= uraid::kPplMaxEntries);
    const std::vector<uint8_t> again = uraid::EncodePplHeader(*h);
    absl::StatusOr<uraid::PplHeader> h2 = uraid::DecodePplHeader(again, sig);
    FUZZ_CHECK(h2.ok() && *h2 == *h);
    // Reserved (0xFF), padding and tail are Encode's own; the rest is the
    // input's.
    const size_t used = 536 + 24 * h->entries.size();
    for (size_t i = kOffSignature; i < used; ++i) {
      if (i >= 516 && i < 520) continue;  // padding
      if (i >= kOffChecksum && i < kOffChecksum + 4) continue;
      FUZZ_CHECK(again[i] == in[i]);
    }
  }
  absl::StatusOr<uraid::PplUnit> u = uraid::FindNewestPplHeader(in, sig, true);
  if (u.ok()) {
    FUZZ_CHECK(u->offset_bytes + uraid::kPplHeaderBytes <= in.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> in(data, size);
  CheckDecode(in);
  if (size >= uraid::kPplHeaderBytes) {
    std::vector<uint8_t> fixed(data, data + size);
    Store32(fixed.data() + kOffChecksum, 0);
    Store32(fixed.data() + kOffChecksum,
            uraid::Crc32c(
                std::span<const uint8_t>(fixed).first(uraid::kPplHeaderBytes)));
    CheckDecode(fixed);
  }
  return 0;
}
