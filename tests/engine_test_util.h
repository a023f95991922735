// SPDX-License-Identifier: MIT
// Helpers of the white-box tests of the stripe engine's parts
// (io_executor_test, stripe_writer_test), which build the parts without an
// array: slots over in-memory members the test can inject faults into.

#ifndef URAID_TESTS_ENGINE_TEST_UTIL_H_
#define URAID_TESTS_ENGINE_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/slot_table.h"
#include "uraid/member.h"

namespace uraid::testutil {

// `n` active slots, slot i holding a FaultyMember over an in-memory member
// "m<i>" of `bytes` bytes; the members are appended to *members, so the
// test can set their fault plans and read what they hold.
inline std::vector<std::unique_ptr<Slot>> FaultySlots(
    int n, uint64_t bytes,
    std::vector<std::shared_ptr<FaultyMember>>* members) {
  std::vector<std::unique_ptr<Slot>> slots;
  for (int i = 0; i < n; ++i) {
    auto m = std::make_shared<FaultyMember>(
        NewMemoryMember("m" + std::to_string(i), bytes));
    members->push_back(m);
    auto s = std::make_unique<Slot>();
    s->member.store(m);
    s->state.store(SlotState::kActive);
    slots.push_back(std::move(s));
  }
  return slots;
}

}  // namespace uraid::testutil

#endif  // URAID_TESTS_ENGINE_TEST_UTIL_H_
