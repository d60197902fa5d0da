// config.json of a Hugging Face causal language model, reduced to the hyper-parameters kvserve
// runs, with the keys llama.cpp's converter reads for each family (see docs/hf-models.md):
//   GPT2LMHeadModel      n_embd, n_layer, n_head, n_positions (or n_ctx), n_inner (default
//                        4 * n_embd), layer_norm_epsilon; activation_function gelu_new.
//   LlamaForCausalLM,    hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads
//   MistralForCausalLM,  (default: heads), intermediate_size, rms_norm_eps, rope_theta,
//   Qwen2ForCausalLM,    max_position_embeddings, tie_word_embeddings, head_dim (default
//   Qwen3ForCausalLM,    hidden_size / heads), vocab_size; hidden_act silu; rope_scaling (or
//   Qwen3MoeForCausalLM, rope_parameters) absent, "default", "linear" or (llama/mistral)
//   Phi3ForCausalLM      "llama3". Qwen3 MoE adds num_experts, num_experts_per_tok,
//                        moe_intermediate_size (norm_topk_prob true, every layer sparse); Phi-3
//                        adds original_max_position_embeddings; Mistral's sliding_window.
//   Gemma2ForCausalLM,   as above plus head_dim, sliding_window, query_pre_attn_scalar (must be
//   Gemma3ForCausalLM    head_dim), hidden_activation gelu_pytorch_tanh; Gemma 2 the soft-caps,
//                        Gemma 3 rope_local_base_freq and sliding_window_pattern (or
//                        layer_types); Gemma 3 text defaults as its config class has them.
//                        Gemma3ForConditionalGeneration: its text_config keys, read as above.
// What kvserve cannot compute exactly (YaRN, LongRoPE, biases on llama, a Qwen sliding window,
// MoE without top-k renormalisation, ...) is refused naming the key.
// Errors name the file, the key and the bad value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace kvserve {

enum class HfArchitecture {
  kGpt2,
  kLlama,
  kMistral,
  kQwen2,
  kQwen3,
  kQwen3Moe,
  kPhi3,
  kGemma2,
  kGemma3
};

enum class HfRopeScaling { kNone, kLinear, kLlama3 };

struct HfConfig {
  HfArchitecture arch = HfArchitecture::kLlama;
  std::string architecture;  // as written in "architectures", e.g. "LlamaForCausalLM"
  int n_vocab = 0;
  int n_embd = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // per head; hidden_size / heads unless head_dim is given
  bool head_dim_given = false;
  int n_ff = 0;
  int n_ctx = 0;  // learned positions (gpt2) or max_position_embeddings
  double norm_eps = 0;
  double rope_theta = 10000.0;
  bool rope_theta_given = false;
  HfRopeScaling rope_scaling = HfRopeScaling::kNone;
  double rope_factor = 1.0;            // linear and llama3
  double rope_low_freq_factor = 1.0;   // llama3
  double rope_high_freq_factor = 4.0;  // llama3
  int rope_original_ctx = 8192;        // llama3's original_max_position_embeddings
  int original_ctx = 0;                // phi3: original_max_position_embeddings
  int sliding_window = 0;              // 0: none
  int sliding_window_pattern = 0;      // gemma3: every Nth layer is global
  double rope_local_theta = 0;         // gemma3: rope_local_base_freq; 0: not given
  double attn_softcap = 0;             // gemma2
  double final_softcap = 0;            // gemma2; gemma3 where given
  int n_experts = 0;                   // qwen3moe
  int n_experts_used = 0;
  int n_ff_expert = 0;
  bool tie_word_embeddings = false;
  int64_t bos_token_id = -1;  // -1: not given
  int64_t eos_token_id = -1;

  // The GGUF general.architecture of the family ("llama" for Mistral).
  std::string gguf_arch() const;
  // Whether q/k rows go from rotate-half to interleaved pairs (llama, mistral).
  bool permutes_qk() const;
  bool is_gemma() const {
    return arch == HfArchitecture::kGemma2 || arch == HfArchitecture::kGemma3;
  }

  // `source` names the file in errors.
  static Result<HfConfig> Parse(std::string_view json_text, const std::string& source);
  static Result<HfConfig> Load(const std::string& path);
};

}  // namespace kvserve
