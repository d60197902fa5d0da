#include "engine/proposer.h"

#include <algorithm>

namespace kvserve {

int NextSpecDepth(int depth, int n_draft, int n_accepted, int floor, int max) {
  const int next = n_accepted >= n_draft ? depth + 1 : n_accepted + 1;
  return std::clamp(next, std::max(floor, 1), std::max(max, 1));
}

}  // namespace kvserve
