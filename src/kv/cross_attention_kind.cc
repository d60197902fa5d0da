#include "kv/cross_attention_kind.h"

namespace kvserve {

KvCacheKindPtr CrossAttentionKind::Make() {
  static const KvCacheKindPtr kind = std::make_shared<CrossAttentionKind>();
  return kind;
}

int CrossAttentionKind::BlocksPerSequence(int n_tokens, int block_size) const {
  return (n_tokens + block_size - 1) / block_size;
}

}  // namespace kvserve
