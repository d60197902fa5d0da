// The layout of a Qwen3.5 stack (llama.cpp's qwen35 and qwen35moe read it alike): which layers
// are Gated DeltaNet layers and which gated full attention, the delta net's sizes, and the
// attention's partial split-half RoPE, from the file's keys. Layer i is recurrent when
// (i + 1) % full_attention_interval != 0 (default 4), or as attention.recurrent_layers lists;
// the nextn_predict_layers MTP layers that follow the main stack in block_count are gated
// attention layers (qwen35_nextn.h).
#pragma once

#include <vector>

#include "io/gguf_reader.h"
#include "kernels/backend.h"
#include "kv/kv_spec.h"
#include "model/gated_delta_net_block.h"
#include "model/model_config.h"
#include "util/status.h"

namespace kvserve {

struct Qwen35Layout {
  DeltaNetShape delta;
  RopeParams rope;              // the first rope.dimension_count dims of a head, split halves
  std::vector<bool> recurrent;  // [n_layers]: a delta-net layer, else gated attention
  int n_nextn = 0;              // nextn_predict_layers: MTP layers past the main stack

  // Whether layer `il` (main stack or MTP) is a delta-net layer.
  bool IsRecurrent(int il) const {
    return il < static_cast<int>(recurrent.size()) && recurrent[il];
  }

  // Reads the keys; sets config's norm_eps (attention.layer_norm_rms_epsilon), RoPE scaling and
  // n_layers (block_count less nextn_predict_layers). M-RoPE sections (rope.dimension_sections)
  // must rotate every pair of the rope dims by a text position; errors name the keys and values.
  static Result<Qwen35Layout> Read(const GgufFile& file, ModelConfig& config);

  // Two groups: the attention layers' full causal K/V, and the recurrent layers' states
  // (kv/recurrent_state_kind.h), whose full blocks are checkpoints the prefix cache keeps. With
  // `nextn`, the MTP layers (c.n_layers, ...) join the attention group and each state gains
  // c.n_embd floats (qwen35_nextn.h: the hidden row the MTP layer reads next).
  KvSpec Spec(const ModelConfig& c, bool nextn) const;
};

}  // namespace kvserve
