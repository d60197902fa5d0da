// Reading a Hugging Face folder as llama.cpp's converter writes it, for every architecture: the
// entry points HfFolder (hf_folder.h) calls, which find the class in the architecture registry
// (architecture.h), and the shared parts the architecture files build their HfClass from: the
// config keys of a llama-like decoder, its tensor names and its metadata keys.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "model/architecture.h"
#include "util/status.h"

namespace kvserve {

// config.json's text as the registry's class reads it; `source` names the file in errors.
Result<HfConfig> ParseHfConfig(std::string_view json_text, const std::string& source);
Result<HfConfig> LoadHfConfig(const std::string& path);

// The GGUF name and transform of tensor `hf_name` of a `c.architecture` folder, or an error
// naming the tensor.
Result<HfMapping> MapHfTensor(std::string_view hf_name, const HfConfig& c);

// The converter's metadata keys for the class (general.architecture, general.name = model_name,
// hyper-parameters, RoPE, sliding window, soft-capping, experts). Tokenizer keys are not written.
void AddHfHyperParameters(const HfConfig& c, const std::string& model_name, GgufWriter& w);

// rope_freqs.weight of a llama3-scaled config: [head_dim / 2] frequency divisors, computed as
// llama.cpp's converter does (frequencies in f32, the smoothing in double, stored as f32).
std::vector<float> Llama3RopeFreqs(const HfConfig& c);

// --- Shared parts of the llama-like decoders (llama, qwen, phi3, gemma) ---

inline constexpr int64_t kMaxHfDim = 1 << 20;  // the largest hidden or feed-forward size read

// Llama 3's RoPE rules (default, linear and llama3 scaling), shared by the families that use it.
inline constexpr HfRopeRules kLlama3RopeRules{
    .linear = true, .llama3 = true, .supported = "kvserve implements default, linear and llama3"};

// The common keys of a decoder's config.json, with the family's defaults and rules.
struct HfDecoderKeys {
  int n_heads = 0;               // num_attention_heads when absent; 0: required
  int n_kv_heads = 0;            // num_key_value_heads when absent; 0: num_attention_heads
  int n_ctx = 0;                 // max_position_embeddings when absent; 0: required
  double norm_eps = 0;           // rms_norm_eps when absent; 0: required
  double rope_theta = 0;         // rope_theta when absent; 0: 10000
  int head_dim = 0;              // head_dim when absent (with head_dim_always); 0: required
  bool head_dim_always = false;  // head_dim is read (Gemma), not derived from the hidden size
  bool tied = false;             // tie_word_embeddings when absent
  bool gelu = false;             // gelu_pytorch_tanh (hidden_activation or hidden_act), not silu
  bool attention_bias = false;   // q/k/v biases allowed (Qwen 2)
  HfRopeRules rope;
};
Status ReadHfDecoderConfig(const HfConfigReader& r, const HfDecoderKeys& keys, HfConfig& c);
// head_dim when given (or, with `always`, read with `fallback` as its default), else
// hidden_size / heads; an odd one is refused (RoPE rotates pairs).
Status ReadHfHeadDim(const HfConfigReader& r, bool always, int fallback, HfConfig& c);
// c.head_dim = hidden_size / heads, refused naming both when it does not divide.
Status HeadDimFromHiddenSize(const HfConfigReader& r, HfConfig& c);

// HF name after "model.layers.N." -> GGUF name after "blk.N.".
using HfLayerNames = std::map<std::string_view, std::string_view>;
// Llama's layer: q/k/v/o, gate/up/down, input and post-attention norms.
HfLayerNames LlamaLayerNames();
// Gemma's: llama's with a norm after attention and a norm before and after the feed-forward.
HfLayerNames GemmaLayerNames();

struct HfDecoderTensors {
  HfLayerNames layer;
  const char* layer_prefix = "model.layers.";  // then "N.<name in `layer`>"
  const char* embedding = "model.embed_tokens.weight";
  const char* final_norm = "model.norm.weight";
  bool permute_qk = false;     // q/k rows from rotate-half to interleaved pairs (llama)
  bool norm_plus_one = false;  // RMSNorm weights w -> 1 + w (Gemma)
  bool lm_head_tied = false;   // lm_head is always skipped (Gemma's output is the embedding)
  // Layer tensors outside the table (Qwen3 MoE's experts): true when it mapped `rest`.
  bool (*map_layer)(const std::string& rest, const HfConfig& c, int layer,
                    HfMapping* out) = nullptr;
};
Result<HfMapping> MapHfDecoderTensor(std::string_view hf_name, const HfConfig& c,
                                     const HfDecoderTensors& tensors);

// Splits "<prefix>N.<rest>" into N and rest; false when `name` does not have that form.
bool SplitHfLayer(std::string_view name, std::string_view prefix, int* layer, std::string* rest);
// "blk.<layer>.<rest>".
std::string GgufBlockName(int layer, std::string_view rest);
// Qwen-style experts after "model.layers.N.", as Qwen2MoeModel's converter stacks them: one
// tensor per expert ("mlp.experts.E.{gate,up,down}_proj.weight", E < c.n_experts: slice E of
// ffn_{gate,up,down}_exps) or transformers 5's fused "mlp.experts.gate_up_proj" (split into
// ffn_gate_exps and ffn_up_exps) and "mlp.experts.down_proj", with or without ".weight". True
// when it mapped `rest`.
bool MapHfExperts(const std::string& rest, const HfConfig& c, int layer, HfMapping* out);

struct HfDecoderMetadata {
  bool rope_dimension_count = true;  // rope.dimension_count (not Gemma)
  bool vocab_size = false;           // <arch>.vocab_size (llama)
  bool window_always = false;        // attention.sliding_window even when 0 (phi3)
};
// The keys every decoder writes: shape, norm, RoPE base and linear scaling, sliding window, and
// the family's own numbers (HfConfig::family_floats).
void AddHfDecoderMetadata(const HfConfig& c, const HfDecoderMetadata& options, GgufWriter& w);

}  // namespace kvserve
