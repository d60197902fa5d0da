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
//
// Qwen3.5 MoE (conversion/qwen.py's Qwen3_5MoeTextModel over the same bases, the experts as
// Qwen2MoeModel stacks them): Qwen3_5MoeForConditionalGeneration (qwen3_5_moe) and
// Qwen3_5MoeForCausalLM (qwen3_5_moe_text), for the qwen35moe architecture (arch/qwen35moe.cc).
// The dense keys and names above, the mixture in place of the MLP:
//   num_local_experts or num_experts -> expert_count; num_experts_per_tok (or
//   num_experts_per_token, top_k_experts) -> expert_used_count; moe_intermediate_size ->
//   expert_feed_forward_length; shared_expert_intermediate_size ->
//   expert_shared_feed_forward_length (both widths required: the converter writes them when given,
//   kvserve's qwen35moe needs them); intermediate_size -> feed_forward_length as in the dense
//   model (required: kvserve's loader reads it). norm_topk_prob is not read (the converter does
//   not; Qwen3.5 MoE and llama.cpp's graph always renormalise); a score function or expert groups
//   are refused.
//   mlp.gate -> ffn_gate_inp (F32); mlp.experts.E.{gate,up,down}_proj stacked into
//   ffn_{gate,up,down}_exps, or the fused mlp.experts.gate_up_proj split and mlp.experts.down_proj
//   as is (MapHfExperts); mlp.shared_expert.{gate,up,down}_proj -> ffn_{gate,up,down}_shexp;
//   mlp.shared_expert_gate [1, n_embd] -> ffn_gate_inp_shexp as the converter writes it, GGML
//   [n_embd, 1] in F32 (not squeezed; kvserve reads it as one row).
#pragma once

#include <vector>

#include "model/architecture.h"

namespace kvserve {

// Qwen3_5ForConditionalGeneration and Qwen3_5ForCausalLM, for the qwen35 architecture's entry.
std::vector<HfClass> Qwen35HfClasses();

// Qwen3_5MoeForConditionalGeneration and Qwen3_5MoeForCausalLM, for the qwen35moe architecture's.
std::vector<HfClass> Qwen35MoeHfClasses();

}  // namespace kvserve
