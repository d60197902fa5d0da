// Hyper-parameters of a decoder-only transformer, read from GGUF metadata ("<arch>.*" keys).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "util/status.h"

namespace kvserve {

struct ModelConfig {
  std::string arch;  // general.architecture: the registry key (model/model.cc)
  std::string name;  // general.name, if present
  int n_vocab = 0;
  int n_embd = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;  // <arch>.attention.key_length where present, else n_embd / n_heads
  int n_ff = 0;      // the widest layer's where feed_forward_length is a list
  // feed_forward_length per layer where the file gives a list (Gemma 4); empty otherwise. An
  // architecture that reads only n_ff refuses a layer of another width by its tensor's shape.
  std::vector<int> n_ff_layers;
  int n_ctx_train = 0;
  float norm_eps = 1e-5f;
  float rope_freq_base = 10000.0f;   // <arch>.rope.freq_base, where the architecture uses RoPE
  int rope_dims = 0;                 // <arch>.rope.dimension_count (default head_dim)
  float rope_position_scale = 1.0f;  // 1 / rope.scaling.factor for linear scaling, else 1
  bool tied_output = false;          // output matrix shares the token embedding
  // rope.scaling.type yarn (ReadRopeScaling with allow_yarn); rope_position_scale is 1 / factor.
  struct RopeYarn {
    bool enabled = false;
    int original_context = 0;  // rope.scaling.original_context_length (default n_ctx_train)
    float attn_factor = 1.0f;  // rope.scaling.attn_factor
  };
  RopeYarn rope_yarn;

  // The hyper-parameters every decoder has; which of them an architecture uses is its business.
  static Result<ModelConfig> FromGguf(const GgufFile& file);
  // Sets norm_eps from "<arch>.<key>": each architecture names the key its norm uses
  // (attention.layer_norm_rms_epsilon, attention.layer_norm_epsilon).
  Status ReadNormEps(const GgufFile& file, const std::string& key);
  // Sets rope_position_scale from "<arch>.rope.scaling.*" (or rope.scale_linear): type none or
  // linear (with factor) is supported, and yarn where the architecture allows it (its rotary
  // embedding is RotaryEmbedding's); any other type and unknown keys are refused with the key
  // and its value, so a model is never run with a RoPE it does not have. (Llama 3 scaling is the
  // rope_freqs tensor, no key.)
  Status ReadRopeScaling(const GgufFile& file, bool allow_yarn = false);

 private:
  Status ReadYarn(const GgufFile& file);
};

// One flag per layer from metadata key `key`, a bool or an integer array of n entries (llama.cpp's
// get_key_or_arr: Gemma 4's attention.sliding_window_pattern); the error names the key.
Result<std::vector<bool>> ReadLayerFlags(const GgufFile& file, const std::string& key, int n);

}  // namespace kvserve
