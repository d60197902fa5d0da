#include "cli/suggestion.h"

#include <algorithm>

namespace kvserve {

namespace {

std::string_view WithoutDashes(std::string_view word) {
  return word.substr(std::min(word.find_first_not_of('-'), word.size()));
}

}  // namespace

size_t EditDistance(std::string_view a, std::string_view b) {
  // distance[i][j]: between the first i characters of a and the first j of b.
  std::vector<std::vector<size_t>> distance(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) distance[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) distance[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = distance[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      size_t best = std::min({distance[i - 1][j] + 1, distance[i][j - 1] + 1, substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        best = std::min(best, distance[i - 2][j - 2] + 1);
      }
      distance[i][j] = best;
    }
  }
  return distance[a.size()][b.size()];
}

std::optional<std::string> NearestName(std::string_view typed,
                                       const std::vector<std::string>& names) {
  const std::string_view word = WithoutDashes(typed);
  const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  std::optional<std::string> nearest;
  size_t nearest_distance = limit + 1;
  for (const std::string& name : names) {
    const size_t distance = EditDistance(word, WithoutDashes(name));
    if (distance < nearest_distance && distance < word.size()) {
      nearest = name;
      nearest_distance = distance;
    }
  }
  return nearest;
}

std::string DidYouMean(std::string_view typed, const std::vector<std::string>& names) {
  const std::optional<std::string> nearest = NearestName(typed, names);
  return nearest ? " (did you mean '" + *nearest + "'?)" : "";
}

}  // namespace kvserve
