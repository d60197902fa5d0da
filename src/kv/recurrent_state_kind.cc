#include "kv/recurrent_state_kind.h"

#include <algorithm>

namespace kvserve {

KvCacheKindPtr RecurrentStateKind::Make() {
  static const KvCacheKindPtr kind = std::make_shared<RecurrentStateKind>();
  return kind;
}

int RecurrentStateKind::FirstLiveBlock(int next_position, int block_size) const {
  return std::max(0, next_position - 1) / block_size;
}

int RecurrentStateKind::BlocksPerSequence(int n_tokens, int block_size) const {
  return std::min((n_tokens + block_size - 1) / block_size, 2);
}

}  // namespace kvserve
