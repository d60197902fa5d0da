// The rotary position embedding of a decoder whose layers all rotate alike (llama and its
// descendants, Granite, gpt-oss): the mode, the frequency base, the linear position scale or YaRN,
// and Llama 3's per-frequency divisors rope_freqs.weight where the file has them, read once at
// load.
#pragma once

#include "io/gguf_reader.h"
#include "kernels/backend.h"
#include "model/model_config.h"
#include "model/weight_loader.h"

namespace kvserve {

// Sets p's YaRN fields (RopeParams) from c.rope_yarn as llama.cpp's context and ggml's rope do
// (ext_factor 1, correction dims from beta_fast 32 and beta_slow 1, the attention magnitude);
// p's rope_dims, freq_base and position_scale must be set. No-op without YaRN.
void ApplyYarn(const ModelConfig& c, RopeParams& p);

class RotaryEmbedding {
 public:
  // Reads the optional rope_freqs.weight ([rope_dims / 2]) and adds it to `weights`; refuses
  // LongRoPE's rope_factors_long/short tensors. c: its RoPE fields already read
  // (ModelConfig::ReadRopeScaling). Must not move afterwards.
  Status Load(const GgufFile& file, const ModelConfig& c, RopeMode mode, WeightList& weights);

  // What AttentionCall::rope takes; freq_factors points at the prepared divisors, so it is
  // valid only after the model's DeclareWeights.
  RopeParams params() const {
    RopeParams p = params_;
    if (!freqs_.empty()) p.freq_factors = freqs_.data();
    return p;
  }

 private:
  RopeParams params_;
  WeightVector freqs_;  // [rope_dims / 2], Llama 3; empty otherwise
};

}  // namespace kvserve
