// The plain-data input of one forward pass: which tokens, at which positions, in which sequences,
// where their K/V go, and which rows need logits. The engine's ModelRunner builds it from a
// StepPlan; the model only reads it.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace kvserve {

// Where one KV layer group's K/V go and are read: each group has its own block ids (kv_spec.h,
// BlockManager), so its own slots and block tables.
struct KvGroupBatch {
  std::vector<int64_t> slots;  // [n_tokens], physical KV slot (kv/kv_layer_view.h KvSlot)
  // Per sequence, the physical block of each logical block; must cover the positions attention
  // reads (a window group's entries before the window may be kNoBlock, never read).
  std::vector<std::vector<int32_t>> block_tables;
  // A non-causal group (an encoder-decoder's cross-attention): per sequence, the keys all of its
  // queries read (AttentionBatch::key_counts); empty for a causal group.
  std::vector<int32_t> key_counts;
};

struct ForwardBatch {
  std::vector<int32_t> tokens;          // [n_tokens]
  std::vector<int32_t> positions;       // [n_tokens], position of each token in its sequence
  std::vector<int32_t> seq_index;       // [n_tokens], index into each group's block_tables
  std::vector<KvGroupBatch> kv_groups;  // [n_groups], KvSpec::groups order
  std::vector<int32_t> logit_rows;      // token indices whose logits are wanted, in output order
  // When set: [logit_rows.size(), n_embd], where the forward leaves the rows the output matrix
  // multiplies (after the final norm; ProjectLogits), for drafters that read them.
  float* final_hidden = nullptr;

  int n_tokens() const { return static_cast<int>(tokens.size()); }
  const std::vector<int64_t>& slots(int group) const { return kv_groups[group].slots; }
  AttentionBatch attention(int group) const {
    return AttentionBatch{.positions = positions,
                          .seq_index = seq_index,
                          .block_tables = kv_groups[group].block_tables,
                          .key_counts = kv_groups[group].key_counts};
  }
  // Empties the batch, keeping n_groups (empty) groups.
  void Clear(int n_groups) {
    tokens.clear();
    positions.clear();
    seq_index.clear();
    kv_groups.resize(n_groups);
    for (KvGroupBatch& group : kv_groups) {
      group.slots.clear();
      group.block_tables.clear();
      group.key_counts.clear();
    }
    logit_rows.clear();
    final_hidden = nullptr;
  }
};

// The input of an encoder-decoder model's encode step (Model::Encode): each sequence's whole
// encoder input, its tokens one after another in order, and where the cross-attention K/V of
// each input position go. The encoder is bidirectional, so an input is never split between
// batches.
struct EncodeBatch {
  std::vector<int32_t> tokens;       // [n_tokens]
  std::vector<int32_t> lengths;      // [n_sequences]: input tokens of each, in batch order
  std::vector<int64_t> cross_slots;  // [n_tokens], slot of the position in the cross group
  // When set: [n_tokens, n_embd], where Encode leaves the encoder's output (after its final
  // norm), for tests and encoder-only use.
  float* encoder_output = nullptr;
  // When set (with encoder_output), encoder_output already holds the encoder's output of these
  // tokens: Encode skips the encoder and only computes and stores the cross-attention K/V from it
  // (`kvserve bench --cache-compare`'s run without a cross cache).
  bool cross_only = false;

  int n_tokens() const { return static_cast<int>(tokens.size()); }
  void Clear() {
    tokens.clear();
    lengths.clear();
    cross_slots.clear();
    encoder_output = nullptr;
    cross_only = false;
  }
};

}  // namespace kvserve
