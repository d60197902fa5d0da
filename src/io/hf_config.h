// config.json of a Hugging Face causal language model, reduced to the hyper-parameters kvserve
// runs. Two families:
//   GPT2LMHeadModel  (model_type "gpt2"):  n_embd, n_layer, n_head, n_positions (or n_ctx),
//                    n_inner (default 4 * n_embd), layer_norm_epsilon, vocab_size;
//                    activation_function must be gelu_new (or absent).
//   LlamaForCausalLM (model_type "llama"): hidden_size, num_hidden_layers, num_attention_heads,
//                    num_key_value_heads (default: heads), intermediate_size, rms_norm_eps,
//                    rope_theta (default 10000), max_position_embeddings, tie_word_embeddings,
//                    vocab_size; head_dim (if given) must be hidden_size / heads; hidden_act
//                    must be silu; rope_scaling must be absent or null.
// Errors name the file, the key and the bad value.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "util/status.h"

namespace kvserve {

enum class HfArchitecture { kGpt2, kLlama };

struct HfConfig {
  HfArchitecture arch = HfArchitecture::kLlama;
  std::string architecture;  // as written in "architectures", e.g. "LlamaForCausalLM"
  int n_vocab = 0;
  int n_embd = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int n_ff = 0;
  int n_ctx = 0;  // learned positions (gpt2) or max_position_embeddings (llama)
  double norm_eps = 0;
  double rope_theta = 10000.0;  // llama only
  bool tie_word_embeddings = false;
  int64_t bos_token_id = -1;  // -1: not given
  int64_t eos_token_id = -1;

  // `source` names the file in errors.
  static Result<HfConfig> Parse(std::string_view json_text, const std::string& source);
  static Result<HfConfig> Load(const std::string& path);
};

}  // namespace kvserve
