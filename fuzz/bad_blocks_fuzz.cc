// SPDX-License-Identifier: MIT
// libFuzzer target for md's bad-block log codec (uraid/bad_blocks.h).
//
// Input: the first byte is bblog_shift, the rest the log area's bytes.
// Properties checked on every input:
//  * DecodeBadBlockLog never crashes, reads out of bounds or hits UB
//    (ASan/UBSan), and fails only with DataLoss and a message.
//  * What it accepts agrees with a decoding written here independently:
//    one range per entry before the first all-ones entry, each non-empty,
//    at most 512 units, aligned to the unit, ending within 64 bits.
//  * A sorted, non-overlapping result re-encodes into an area of the same
//    size (it fits: one entry per range) to exactly the input's entries,
//    all-ones after them, and decodes again to the same list; an unsorted
//    or overlapping one is refused with InvalidArgument.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "fuzz_check.h"
#include "uraid/bad_blocks.h"

namespace {

uint64_t Load64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Entries before the first all-ones one (or the end).
size_t EntriesBeforeTerminator(std::span<const uint8_t> area) {
  size_t n = 0;
  while (n < area.size() / 8 && Load64(area.data() + n * 8) != ~uint64_t{0}) {
    ++n;
  }
  return n;
}

bool SortedAndDisjoint(const std::vector<uraid::BadBlock>& v) {
  for (size_t i = 1; i < v.size(); ++i) {
    if (v[i].sector < v[i - 1].sector + v[i - 1].sectors) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t shift = data[0];
  const std::span<const uint8_t> area(data + 1, size - 1);

  absl::StatusOr<std::vector<uraid::BadBlock>> dec =
      uraid::DecodeBadBlockLog(area, shift);
  if (!dec.ok()) {
    FUZZ_CHECK(dec.status().code() == absl::StatusCode::kDataLoss);
    FUZZ_CHECK(!dec.status().message().empty());
    return 0;
  }
  const size_t n = EntriesBeforeTerminator(area);
  FUZZ_CHECK(dec->size() == n);
  for (size_t i = 0; i < n; ++i) {
    const uraid::BadBlock& b = (*dec)[i];
    const uint64_t raw = Load64(area.data() + i * 8);
    FUZZ_CHECK(shift < 64);  // any entry at all names a unit of 2^shift
    FUZZ_CHECK(b.sectors != 0);
    FUZZ_CHECK(b.sector <= ~uint64_t{0} - b.sectors);
    FUZZ_CHECK(b.sector >> shift == raw >> 10);
    FUZZ_CHECK(b.sectors >> shift == (raw & 1023));
    FUZZ_CHECK((raw & 1023) <= uraid::kBadBlockMaxUnits);
    FUZZ_CHECK(b.sector % (uint64_t{1} << shift) == 0);
    FUZZ_CHECK(b.sectors % (uint64_t{1} << shift) == 0);
  }

  absl::StatusOr<std::vector<uint8_t>> enc =
      uraid::EncodeBadBlockLog(*dec, shift, area.size());
  if (!SortedAndDisjoint(*dec)) {
    FUZZ_CHECK(enc.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  absl::StatusOr<size_t> entries = uraid::BadBlockLogEntries(*dec, shift);
  FUZZ_CHECK(entries.ok() && *entries == n);
  FUZZ_CHECK(enc.ok());
  FUZZ_CHECK(enc->size() == area.size());
  for (size_t i = 0; i < enc->size(); ++i) {
    FUZZ_CHECK((*enc)[i] == (i < n * 8 ? area[i] : 0xFF));
  }
  absl::StatusOr<std::vector<uraid::BadBlock>> again =
      uraid::DecodeBadBlockLog(*enc, shift);
  FUZZ_CHECK(again.ok() && *again == *dec);
  return 0;
}
