// The random-weight recipe of llama.cpp's qwen35 architecture (Qwen3.5 dense): Gated DeltaNet
// layers with a gated full-attention layer every full_attention_interval layers, for
// `kvserve synth` (synthetic_model.h). The architecture's entry (src/model/arch/qwen35.cc) points
// its Architecture::synthetic here.
#pragma once

#include "model/synthetic_model.h"

namespace kvserve {

// Tensors (llama.cpp's names; GGML dims [n_in, n_out]), per layer under blk.<i>.:
//   every layer: attn_norm, post_attention_norm {n_embd}; ffn_gate, ffn_up [n_embd -> n_ff];
//     ffn_down [n_ff -> n_embd]
//   delta-net layers: attn_qkv [n_embd -> 2 key_dim + value_dim] (q, k, v), attn_gate (z)
//     [n_embd -> value_dim], ssm_conv1d {conv_kernel, 2 key_dim + value_dim} (F32, as llama.cpp
//     never quantizes it), ssm_dt.bias {v_heads} (random), ssm_a {v_heads} (negative random:
//     -exp(A_log) in llama.cpp's files), ssm_beta, ssm_alpha [n_embd -> v_heads], ssm_norm
//     {state_size} (ones), ssm_out [value_dim -> n_embd]; key_dim = state_size * k_heads,
//     value_dim = state_size * v_heads
//   attention layers: attn_q [n_embd -> 2 n_head head_dim] (per head: q, then its output gate),
//     attn_k, attn_v [n_embd -> n_kv_head head_dim], attn_q_norm, attn_k_norm {head_dim},
//     attn_output [n_head head_dim -> n_embd]
// and token_embd, output_norm, output (unless tied). Presets: qwen35-tiny (tests), qwen35-0.8b.
const SyntheticRecipe& Qwen35Synthetic();

}  // namespace kvserve
