#include "kv/full_causal_kind.h"

namespace kvserve {

KvCacheKindPtr FullCausalKind::Make() {
  static const KvCacheKindPtr kind = std::make_shared<FullCausalKind>();
  return kind;
}

int FullCausalKind::BlocksPerSequence(int n_tokens, int block_size) const {
  return (n_tokens + block_size - 1) / block_size;
}

}  // namespace kvserve
