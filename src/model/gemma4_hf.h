// Hugging Face's Gemma 4 text model as llama.cpp's converter reads it (conversion/gemma.py,
// Gemma4Model over Gemma3Model): the classes Gemma4ForConditionalGeneration (text_config, the
// "language_model." names; vision and audio towers skipped) and Gemma4ForCausalLM, which the gemma4
// architecture (arch/gemma4.cc) lists as its own. Kept apart from the loader's file.
//
// config.json -> GGUF gemma4.* keys:
//   layer_types                      -> attention.sliding_window_pattern (true: sliding_attention)
//   global_head_dim, head_dim        -> attention.key_length/value_length, *_swa (full, sliding)
//   rope_parameters.full_attention   -> rope.freq_base and the rope_freqs.weight tensor: its
//     (rope_type "proportional")        partial_rotary_factor f rotates int(D f / 2) of the D / 2
//                                       pairs (divisor 1), the rest not at all (divisor 1e30);
//                                       rope.dimension_count = D
//   rope_parameters.sliding_attention -> rope.freq_base_swa; rope.dimension_count_swa = head_dim
//   num_kv_shared_layers             -> attention.shared_kv_layers
//   hidden_size_per_layer_input      -> embedding_length_per_layer_input (0 when absent)
//   use_double_wide_mlp              -> feed_forward_length per layer (2 x in the shared layers)
//   num_experts, top_k_experts, expert_intermediate_size -> expert_count, _used_count,
//                                       expert_feed_forward_length
//   sliding_window, final_logit_softcapping, and Gemma 3's defaults for the common keys.
// Norm weights are taken as stored (no + 1); router.scale -> ffn_gate_inp.scale,
// router.per_expert_scale -> ffn_down_exps.scale, layer_scalar -> layer_output_scale.weight,
// experts.gate_up_proj -> ffn_gate_up_exps (fused, as stored). Refused by key: what kvserve's
// gemma4 loader does not compute (attention_k_eq_v, a num_global_key_value_heads of its own,
// per_layer_config, other RoPE types and factors).
//
// Gemma 4's assistant (Gemma4AssistantModel: Gemma4AssistantForCausalLM and
// Gemma4UnifiedAssistantForCausalLM, for arch/gemma4_assistant.cc) reads the same keys into
// gemma4-assistant.*, plus
//   backbone_hidden_size             -> embedding_length_out (the target's width; required)
//   num_hidden_layers                -> nextn_predict_layers
// and maps pre_projection -> nextn.pre_projection, post_projection -> nextn.post_projection and
// its layers' q-only attention; masked_embedding.* is skipped. Refused by key: experts,
// per-layer inputs, a backbone_hidden_size equal to hidden_size; tensors outside its list by name.
#pragma once

#include <vector>

#include "model/architecture.h"

namespace kvserve {

// Gemma4ForConditionalGeneration and Gemma4ForCausalLM, for the gemma4 architecture's entry.
std::vector<HfClass> Gemma4HfClasses();

// Gemma4AssistantForCausalLM and Gemma4UnifiedAssistantForCausalLM (Gemma 4's drafter), for the
// gemma4-assistant architecture's entry.
std::vector<HfClass> Gemma4AssistantHfClasses();

// The rope_freqs.weight of proportional RoPE: [head_dim / 2] divisors, 1 for the first
// int(head_dim * partial_rotary_factor / 2) pairs, 1e30 (not turned) for the others.
std::vector<float> ProportionalRopeFreqs(int head_dim, double partial_rotary_factor);

}  // namespace kvserve
