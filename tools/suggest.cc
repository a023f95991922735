// SPDX-License-Identifier: MIT
#include "suggest.h"

#include <algorithm>

namespace uraid::tool {

int EditDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  // d[i][j]: distance between a[0, i) and b[0, j); three rows suffice for
  // the adjacent swap, but the words are short: keep the full table.
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string ClosestName(std::string_view word,
                        const std::vector<std::string>& names) {
  const int limit = word.size() <= 4 ? 1 : 2;
  std::string best;
  int best_distance = limit + 1;
  for (const std::string& name : names) {
    int distance = EditDistance(word, name);
    if (word.size() >= 3 && name.size() > word.size() &&
        name.compare(0, word.size(), word) == 0) {
      distance = std::min(distance, 1);  // a prefix: "exa" for "examine"
    }
    if (distance < best_distance && distance < static_cast<int>(word.size())) {
      best = name;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace uraid::tool
