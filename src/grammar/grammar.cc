#include "grammar/grammar.h"

#include <algorithm>

namespace kvserve {

bool CharSet::Contains(uint32_t cp) const {
  // First range whose upper end is at or past cp.
  auto it = std::lower_bound(ranges.begin(), ranges.end(), cp,
                             [](const auto& range, uint32_t v) { return range.second < v; });
  const bool inside = it != ranges.end() && it->first <= cp;
  return inside != negated;
}

bool CharSet::Intersects(uint32_t lo, uint32_t hi) const {
  if (!negated) {
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                               [](const auto& range, uint32_t v) { return range.second < v; });
    return it != ranges.end() && it->first <= hi;
  }
  // Negated: some point of [lo, hi] lies outside every range. Walk the ranges covering lo.
  uint32_t next = lo;
  for (const auto& [first, last] : ranges) {
    if (last < next) continue;
    if (first > next) return true;  // a gap at `next`
    if (last >= hi) return false;   // covered to the end
    next = last + 1;
  }
  return true;
}

bool CharSet::ContainsAll(uint32_t lo, uint32_t hi) const {
  if (negated) {  // no range may touch [lo, hi]
    auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                               [](const auto& range, uint32_t v) { return range.second < v; });
    return it == ranges.end() || it->first > hi;
  }
  // Ranges may be adjacent without being merged: follow them from lo while they touch.
  auto it = std::lower_bound(ranges.begin(), ranges.end(), lo,
                             [](const auto& range, uint32_t v) { return range.second < v; });
  uint32_t next = lo;
  for (; it != ranges.end() && it->first <= next; ++it) {
    if (it->second >= hi) return true;
    next = it->second + 1;
  }
  return false;
}

}  // namespace kvserve
