// SPDX-License-Identifier: MIT
// "Did you mean ...?" for mistyped command names: the closest of the known
// names by edit distance, when it is close enough to be what was meant.

#ifndef URAID_TOOLS_SUGGEST_H_
#define URAID_TOOLS_SUGGEST_H_

#include <string>
#include <string_view>
#include <vector>

namespace uraid::tool {

// Optimal string alignment distance: insertions, deletions, substitutions
// and swaps of two adjacent characters each cost 1 ("detial" -> "detail"
// is 1).
int EditDistance(std::string_view a, std::string_view b);

// The name in `names` closest to `word`, or "" when none is close: a
// distance of at most 2 (at most 1 for words of up to 4 characters) and
// less than the word's length. A name that `word` is a prefix of (at least
// 3 characters: "exa" -> "examine") also counts. Ties go to the name
// listed first.
std::string ClosestName(std::string_view word,
                        const std::vector<std::string>& names);

}  // namespace uraid::tool

#endif  // URAID_TOOLS_SUGGEST_H_
