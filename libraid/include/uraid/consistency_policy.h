// SPDX-License-Identifier: MIT
// File: uraid/consistency_policy.h
//
// md's consistency policies (mdadm --consistency-policy): how an array
// makes its parity consistent after an unclean shutdown. "resync":
// recompute all of it; "bitmap": only the regions the write-intent bitmap
// marks; "ppl": replay the partial parity log (no resync). Their words are
// md's. Pure; thread-compatible.

#ifndef URAID_CONSISTENCY_POLICY_H_
#define URAID_CONSISTENCY_POLICY_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "uraid/export.h"

namespace uraid {

enum class ConsistencyPolicy { kResync, kBitmap, kPpl };

// "resync", "bitmap", "ppl".
URAID_EXPORT const char* ConsistencyPolicyName(ConsistencyPolicy policy);

// The inverse of ConsistencyPolicyName; InvalidArgument quoting `name` and
// listing the three words otherwise.
URAID_EXPORT absl::StatusOr<ConsistencyPolicy> ParseConsistencyPolicy(
    std::string_view name);

}  // namespace uraid

#endif  // URAID_CONSISTENCY_POLICY_H_
