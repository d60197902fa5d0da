// Attention over a paged KV store. K and V of every token live in per-layer pools of fixed-size
// blocks; a sequence's block table maps its logical block i to a physical block. A query walks its
// keys in position order (so block order), whatever mix of cached and new tokens is present: the
// result depends only on the query and the keys, never on the batch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cpu/kernels.h"
#include "kv/kv_layer_view.h"

namespace kvserve {

// Writes one token's K and V ([n_kv_heads * head_dim] floats each) to physical slot
// `slot` = block * block_size + offset, rounding to the KV type.
void StoreKv(const KvLayerView& kv, int64_t slot, const float* k, const float* v);

// A window and a soft-cap of AttendHead (AttendJob's first_key and soft_cap).
struct AttendLimits {
  int first_key = 0;            // the first key read; 0 = every key
  float soft_cap = 0.0f;        // 0 = none
  float sink = -INFINITY;       // a learned sink's logit (AttendJob::sink); -infinity = none
  const float* bias = nullptr;  // [n_keys - first_key], AttendJob::bias; nullptr = none
};

// The kernel's job (kernels.h AttendJob) for one query head of a token at position n_keys - 1:
// out = softmax(q · K[first..n_keys)ᵀ · scale) · V[first..n_keys), with K and V of KV head
// `kv_head` (scores soft-capped where limits say so). q, out: [head_dim]. block_table: physical
// block of each logical block of the sequence. scratch: at least
// AttentionScratchFloats(n_keys - first, head_dim) floats. Run it with a table's attend_head, or
// hand several of one token to attend_group.
AttendJob AttentionJob(const KvLayerView& kv, const float* q, int kv_head,
                       const int32_t* block_table, int n_keys, float scale, float* out,
                       float* scratch, const AttendLimits& limits = {});
size_t AttentionScratchFloats(int n_keys, int head_dim);

}  // namespace kvserve
