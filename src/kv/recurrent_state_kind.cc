#include "kv/recurrent_state_kind.h"

#include <algorithm>

namespace kvserve {

KvCacheKindPtr RecurrentStateKind::Make(int interval) {
  return std::make_shared<RecurrentStateKind>(std::max(1, interval));
}

int RecurrentStateKind::FirstLiveBlock(int next_position, int block_size) const {
  return std::max(0, next_position - 1) / block_size;
}

int RecurrentStateKind::BlocksPerChunk(int n_tokens, int block_size) const {
  return (n_tokens + block_size - 1) / block_size / interval_ + 2;
}

int RecurrentStateKind::BlocksPerSequence(int n_tokens, int block_size) const {
  return std::min((n_tokens + block_size - 1) / block_size, 2);
}

}  // namespace kvserve
