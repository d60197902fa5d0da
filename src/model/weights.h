// Typed, shape-checked views of a model's tensors inside the mapped GGUF file. Matrices stay in
// their stored type (no dequantized copy); only the small 1-D vectors (norm weights, biases) are
// decoded to float32 at load.
#pragma once

#include <memory>
#include <vector>

#include "io/gguf_reader.h"
#include "kernels/cpu/matmul.h"
#include "model/model_config.h"
#include "util/status.h"

namespace kvserve {

struct LayerWeights {
  std::vector<float> attn_norm, attn_norm_bias;  // [n_embd]; bias: gpt2
  std::vector<float> ffn_norm, ffn_norm_bias;    // [n_embd]; bias: gpt2
  // llama: separate projections.
  WeightMatrix wq, wk, wv;  // [n_heads*head_dim | n_kv_heads*head_dim, n_embd]
  // gpt2: fused QKV projection with bias.
  WeightMatrix wqkv;                  // [3*n_embd, n_embd]
  std::vector<float> bqkv;            // [3*n_embd]
  WeightMatrix wo;                    // [n_embd, n_heads*head_dim]
  std::vector<float> bo;              // [n_embd], gpt2
  WeightMatrix w_gate, w_up, w_down;  // gate: llama; up [n_ff, n_embd]; down [n_embd, n_ff]
  std::vector<float> b_up, b_down;    // gpt2
};

struct ModelWeights {
  WeightMatrix token_embd;     // [n_vocab, n_embd]
  WeightMatrix position_embd;  // [n_ctx_train, n_embd], gpt2
  std::vector<float> output_norm, output_norm_bias;
  WeightMatrix output;  // [n_vocab, n_embd]; the token embedding when tied
  std::vector<LayerWeights> layers;
  // The packed copies of the matrices (WeightMatrix::packed point in here); null unless
  // PackWeights (model/weight_packing.h) ran.
  std::shared_ptr<uint8_t> packed_storage;

  static Result<ModelWeights> FromGguf(const GgufFile& file, const ModelConfig& config);
};

}  // namespace kvserve
