// Hugging Face's Qwen3.5 dense text model as llama.cpp's converter reads it (conversion/qwen.py,
// Qwen3_5TextModel over _LinearAttentionVReorderBase, Qwen3NextModel and _QwenMtpMixin): the
// classes Qwen3_5ForConditionalGeneration (model_type qwen3_5: text_config, the
// "model.language_model." names; the vision tower "model.visual.*" skipped) and
// Qwen3_5ForCausalLM (qwen3_5_text), which the qwen35 architecture (arch/qwen35.cc) lists as its
// own. Kept apart from the loader's file.
//
// config.json -> GGUF qwen35.* keys:
//   hidden_size, intermediate_size, num_attention_heads, num_key_value_heads,
//   max_position_embeddings, rms_norm_eps -> the decoder's keys; head_dim -> attention.key_length
//                                    and value_length (when given; else hidden_size / heads)
//   num_hidden_layers + mtp_num_hidden_layers -> block_count; mtp_num_hidden_layers (when > 0)
//                                    -> nextn_predict_layers
//   linear_conv_kernel_dim           -> ssm.conv_kernel
//   linear_key_head_dim              -> ssm.state_size
//   linear_num_key_heads             -> ssm.group_count
//   linear_num_value_heads           -> ssm.time_step_rank
//   linear_value_head_dim x linear_num_value_heads -> ssm.inner_size
//   full_attention_interval (4)      -> full_attention_interval; layer_types must agree with it
//   rope_parameters (or rope_scaling): rope_theta (or the top-level one) -> rope.freq_base;
//     head_dim x partial_rotary_factor (0.25), truncated -> rope.dimension_count;
//     mrope_section padded to 4 ([11, 11, 10, 0] when absent) -> rope.dimension_sections
//   tie_word_embeddings (false)      -> no output.weight
// Tensors (after "language_model." is dropped), "model.layers.N." -> "blk.N.":
//   input_layernorm, post_attention_layernorm, self_attn.q_norm / k_norm, model.norm: w -> 1 + w
//     (Qwen3.5's RMSNorm scales by 1 + w); linear_attn.norm (the gated ssm_norm): as stored
//   linear_attn.in_proj_qkv -> attn_qkv, in_proj_z -> attn_gate, in_proj_b -> ssm_beta,
//     in_proj_a -> ssm_alpha, out_proj -> ssm_out, conv1d [C, 1, K] -> ssm_conv1d [C, K] (F32),
//     A_log -> ssm_a = -exp(A_log), dt_bias -> ssm_dt.bias
//   with fewer key heads than value heads, the value heads of qkv's v rows, z, b, a, A_log,
//     dt_bias, conv1d's v channels and out_proj's columns from grouped by key head to tiled
//     (HfHeadTiling), as llama.cpp's graph repeats the key heads
//   self_attn.q_proj (per head q, then its gate) / k_proj / v_proj / o_proj, mlp.* as stored
//   mtp.layers.I.* -> blk.(num_hidden_layers + I).*; mtp.fc -> nextn.eh_proj,
//     mtp.pre_fc_norm_embedding -> nextn.enorm, mtp.pre_fc_norm_hidden -> nextn.hnorm,
//     mtp.norm -> nextn.shared_head_norm (norms + 1); kvserve's qwen35 does not run them.
// Refused by key: what kvserve's qwen35 does not compute (RoPE types other than default and
// mrope, attn_output_gate false, biases, other activations, value heads of another size than
// key heads, value heads not a multiple of key heads, layer_types off the interval, M-RoPE
// sections that turn some text pair by no position, an odd or empty rotated part).
#pragma once

#include <vector>

#include "model/architecture.h"

namespace kvserve {

// Qwen3_5ForConditionalGeneration and Qwen3_5ForCausalLM, for the qwen35 architecture's entry.
std::vector<HfClass> Qwen35HfClasses();

}  // namespace kvserve
