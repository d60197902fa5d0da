// The plain-data input of one forward pass: which tokens, at which positions, in which sequences,
// where their K/V go, and which rows need logits. The engine's ModelRunner builds it from a
// StepPlan; the model only reads it.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace kvserve {

struct ForwardBatch {
  std::vector<int32_t> tokens;     // [n_tokens]
  std::vector<int32_t> positions;  // [n_tokens], position of each token in its sequence
  std::vector<int32_t> seq_index;  // [n_tokens], index into block_tables
  std::vector<int64_t> slots;      // [n_tokens], physical KV slot (kv/kv_layer_view.h KvSlot)
  // Per sequence, the physical block of each logical block; must cover positions 0..max position.
  std::vector<std::vector<int32_t>> block_tables;
  std::vector<int32_t> logit_rows;  // token indices whose logits are wanted, in output order

  int n_tokens() const { return static_cast<int>(tokens.size()); }
  AttentionBatch attention() const {
    return AttentionBatch{
        .positions = positions, .seq_index = seq_index, .block_tables = block_tables};
  }
  void Clear() {
    tokens.clear();
    positions.clear();
    seq_index.clear();
    slots.clear();
    block_tables.clear();
    logit_rows.clear();
  }
};

}  // namespace kvserve
