// SPDX-License-Identifier: MIT
// ArrayInfo <-> nlohmann-json values, for the library's own code (the
// control server, events) and white-box tests. The public, JSON-library-free
// face of the same codec, with the shape and the state words, is
// uraid/info_json.h.

#ifndef URAID_SRC_INFO_JSON_H_
#define URAID_SRC_INFO_JSON_H_

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "uraid/array.h"
#include "uraid/info_json.h"  // IWYU pragma: export

namespace uraid {

nlohmann::ordered_json InfoToJson(const ArrayInfo& info);
absl::StatusOr<ArrayInfo> InfoFromJson(const nlohmann::ordered_json& j);

}  // namespace uraid

#endif  // URAID_SRC_INFO_JSON_H_
