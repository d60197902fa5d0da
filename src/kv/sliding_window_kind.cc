#include "kv/sliding_window_kind.h"

#include <algorithm>
#include <cassert>

namespace kvserve {

KvCacheKindPtr SlidingWindowKind::Make(int window) {
  assert(window >= 1);
  return std::make_shared<SlidingWindowKind>(window);
}

int SlidingWindowKind::FirstLiveBlock(int next_position, int block_size) const {
  return std::max(0, next_position - window_ + 1) / block_size;
}

int SlidingWindowKind::BlocksPerSequence(int n_tokens, int block_size) const {
  const int full = (n_tokens + block_size - 1) / block_size;
  return std::min(full, (window_ - 1 + block_size - 1) / block_size + 1);
}

}  // namespace kvserve
