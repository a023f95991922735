// SPDX-License-Identifier: MIT
// Internal: the names of a dense enum class (enumerators 0..N-1, in
// order), held as one array indexed by the enumerator, so that the name of
// a value and the value of a name come from the same list. Pure functions.

#ifndef URAID_SRC_ENUM_NAMES_H_
#define URAID_SRC_ENUM_NAMES_H_

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace uraid {

// names[value]; `unknown` for a value outside the table (a cast from a
// number no enumerator has).
template <typename E, size_t N>
const char* EnumName(const std::array<const char*, N>& names, E value,
                     const char* unknown) {
  const auto i = static_cast<size_t>(value);
  return i < N ? names[i] : unknown;
}

// The enumerator whose name is `name` exactly; nullopt for any other text.
template <typename E, size_t N>
std::optional<E> EnumFromName(const std::array<const char*, N>& names,
                              std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace uraid

#endif  // URAID_SRC_ENUM_NAMES_H_
