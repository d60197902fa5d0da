// "Did you mean" for a mistyped flag or command: the nearest known name by edit distance.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvserve {

// Insertions, deletions, substitutions and swaps of two neighbouring characters, each costing 1
// (optimal string alignment distance).
size_t EditDistance(std::string_view a, std::string_view b);

// The first of `names` nearest to `typed`, leading dashes ignored on both sides, when it is near
// enough to be a typo: at most a third of the typed length (at least 1, at most 3) edits, and
// fewer edits than the typed length. nullopt when none is.
std::optional<std::string> NearestName(std::string_view typed,
                                       const std::vector<std::string>& names);

// " (did you mean '--temp'?)" for NearestName's answer, "" when there is none.
std::string DidYouMean(std::string_view typed, const std::vector<std::string>& names);

}  // namespace kvserve
