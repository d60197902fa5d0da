// The random-weight recipes of llama.cpp's qwen35 and qwen35moe architectures (Qwen3.5 dense and
// mixture of experts): Gated DeltaNet layers with a gated full-attention layer every
// full_attention_interval layers, for `kvserve synth` (synthetic_model.h). The architectures'
// entries (src/model/arch/qwen35.cc, qwen35moe.cc) point their Architecture::synthetic here.
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
//   MTP layers (blk.<n_layers + j>, shape.nextn_layers of them; llama.cpp's load_block_mtp): an
//     attention layer's tensors above whatever the period says, and nextn.eh_proj
//     [2 n_embd -> n_embd], nextn.enorm, nextn.hnorm, nextn.shared_head_norm {n_embd} (F32,
//     1 + normal: SyntheticFill::kNearOne); no nextn.embed_tokens or nextn.shared_head_head.
//     block_count counts them, nextn_predict_layers is written.
// and token_embd, output_norm, output (unless tied). Presets: qwen35-tiny (tests, no MTP layer),
// qwen35-tiny-mtp (qwen35-tiny and one MTP layer, blk.8), qwen35-small (tests; rows multiples of
// the K-quants' 256), qwen35-0.8b (with its MTP layer).
const SyntheticRecipe& Qwen35Synthetic();

// qwen35's tensors with a mixture in place of each layer's ffn_gate, ffn_up, ffn_down:
// ffn_gate_inp [n_embd -> n_expert] (F32); ffn_gate_exps, ffn_up_exps [n_embd -> n_ff_expert] and
// ffn_down_exps [n_ff_expert -> n_embd], n_expert each; the shared expert ffn_gate_shexp,
// ffn_up_shexp [n_embd -> n_ff], ffn_down_shexp [n_ff -> n_embd] and its gate
// ffn_gate_inp_shexp {n_embd} (F32, random); the MTP layer's too. Presets: qwen35moe-tiny (tests,
// no MTP layer), qwen35moe-tiny-mtp (and one MTP layer), qwen35moe-small (tests; rows multiples
// of the K-quants' 256), qwen35moe-35b-a3b (with its MTP layer).
const SyntheticRecipe& Qwen35MoeSynthetic();

}  // namespace kvserve
