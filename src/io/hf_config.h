// config.json of a Hugging Face model, read generically: the JSON (a multimodal config's
// text_config merged up, as llama.cpp's converter does), typed keys whose errors name the file,
// the key and the bad value, and RoPE scaling. HfConfig holds the hyper-parameters kvserve's
// families convert; which keys a family reads, its defaults and what it refuses live in its
// architecture file (model/arch/<name>.cc), with the shared parts in model/hf_families.h.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace kvserve {

enum class HfRopeScaling { kNone, kLinear, kLlama3, kYarn };

struct HfConfig {
  std::string architecture;  // the class, e.g. "LlamaForCausalLM" (from model_type when absent)
  std::string gguf_arch;     // the GGUF general.architecture it converts to ("llama" for Mistral)
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
  int rope_original_ctx = 8192;        // llama3's and yarn's original_max_position_embeddings
  int original_ctx = 0;                // phi3: original_max_position_embeddings
  int sliding_window = 0;              // 0: none
  int sliding_window_pattern = 0;      // gemma3: every Nth layer is global
  double rope_local_theta = 0;         // gemma3: rope_local_base_freq; 0: not given
  double attn_softcap = 0;             // gemma2
  double final_softcap = 0;            // gemma2; gemma3 where given
  int n_experts = 0;                   // qwen3moe, qwen35moe
  int n_experts_used = 0;
  int n_ff_expert = 0;
  int n_ff_shared_expert = 0;  // qwen35moe: shared_expert_intermediate_size
  bool tie_word_embeddings = false;
  // gemma4: head_dim of the sliding-window layers (head_dim above is the global layers'), their
  // rotated dimensions, the layers reading another layer's cache, the per-layer input width, one
  // flag per layer (true: sliding window) and one feed-forward width per layer (empty: n_ff).
  int head_dim_swa = 0;
  int rope_dims_swa = 0;
  int n_kv_shared_layers = 0;
  int n_embd_per_layer = 0;
  std::vector<bool> swa_layers;
  std::vector<int> n_ff_layers;
  // gemma4-assistant: backbone_hidden_size, the hidden width of the target it drafts for.
  int n_embd_out = 0;
  // qwen35: the Gated DeltaNet layers' key and value heads (linear_num_key_heads,
  // linear_num_value_heads) of ssm_head_dim (linear_key_head_dim = linear_value_head_dim), their
  // conv kernel, one attention layer per full_attention_interval, the rotated dimensions of an
  // attention head (0: head_dim), the M-RoPE sections (empty: none) and the MTP layers after the
  // main stack (mtp_num_hidden_layers).
  int ssm_k_heads = 0;
  int ssm_v_heads = 0;
  int ssm_head_dim = 0;
  int ssm_conv_kernel = 0;
  int full_attention_interval = 0;
  int rope_dims = 0;
  std::vector<int> rope_sections;
  int n_nextn_layers = 0;
  // t5: the decoder's blocks (num_decoder_layers; 0: not given, as many as the encoder's
  // n_layers), the relative position buckets (relative_attention_num_buckets) and the decoder's
  // first token (decoder_start_token_id).
  int n_decoder_layers = 0;
  int rel_buckets = 0;
  int64_t decoder_start_token_id = -1;
  // A generated rope_freqs.weight ([head_dim / 2] frequency divisors) other than llama3's
  // (gemma4's proportional RoPE); empty: none.
  std::vector<float> rope_freqs;
  // Numbers one family alone reads (Granite's multipliers), by the GGUF key after "<arch>." they
  // become: its config reader fills them, AddHfDecoderMetadata writes them as float32.
  std::map<std::string, double> family_floats;
  int64_t bos_token_id = -1;  // -1: not given
  int64_t eos_token_id = -1;
};

// Which RoPE scalings a family computes exactly; others are refused with `supported` as the
// reason ("kvserve implements default and linear").
struct HfRopeRules {
  bool linear = true;
  bool llama3 = false;
  bool yarn = false;  // with llama.cpp's betas (fast 32, slow 1) only
  const char* supported = "kvserve implements default and linear";
};

// One parsed config.json. Every reader leaves `out` untouched when the key is absent or null.
class HfConfigReader {
 public:
  // `source` names the file in errors.
  static Result<HfConfigReader> Parse(std::string_view json_text, const std::string& source);
  static Result<HfConfigReader> Load(const std::string& path);

  const std::string& source() const;
  const std::string& architecture() const;  // architectures[0]; empty when absent
  const std::string& model_type() const;    // empty when absent

  // Keys may name a member of an object: "quantization_config.quant_method".
  bool Has(const char* key) const;  // present and not null
  // The first of `keys` present, as a positive integer up to `max`; missing: `fallback` unless 0,
  // else an error naming the first key.
  Status Count(std::initializer_list<const char*> keys, int64_t max, int* out,
               int fallback = 0) const;
  Status Float(const char* key, double* out, bool required) const;  // a positive number
  Status Bool(const char* key, bool* out) const;
  Status TokenId(const char* key, int64_t* out) const;  // a list gives its first element
  // A string that must be absent or one of `allowed`.
  Status OneOf(const char* key, std::initializer_list<const char*> allowed) const;
  // A boolean that must be absent, null or `wanted` (or, with `absent_ok` false, present).
  Status RequireBool(const char* key, bool wanted, bool absent_ok, const std::string& why) const;
  // A number that must be absent, null or `wanted`.
  Status RequireNumber(const char* key, double wanted, const std::string& why) const;
  // A key that must be absent, null or (lists) empty.
  Status RequireAbsent(const char* key, const std::string& why) const;
  // A list of strings of exactly `size` entries.
  Result<std::vector<std::string>> StringList(const char* key, size_t size,
                                              const std::string& why) const;
  // A list of at most `max_size` integers from 0 to INT32_MAX (may be empty).
  Result<std::vector<int64_t>> IntList(const char* key, size_t max_size,
                                       const std::string& why) const;
  // "<source>: '<key>' = <value> is not supported (<why>)".
  Status Unsupported(const char* key, const std::string& why) const;

  // rope_parameters (transformers 5) or rope_scaling: the scaling kind and its factors into `c`
  // (a rope_theta inside wins over the top-level one; per layer type, the local layers' base
  // into rope_local_theta).
  Status ReadRope(const HfRopeRules& rules, HfConfig& c) const;

 private:
  struct Parsed;
  explicit HfConfigReader(std::shared_ptr<const Parsed> parsed) : parsed_(std::move(parsed)) {}
  std::shared_ptr<const Parsed> parsed_;
};

}  // namespace kvserve
