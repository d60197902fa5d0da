// The per-family part of reading a Hugging Face folder as llama.cpp's converter writes it: which
// GGUF tensor each safetensors tensor becomes (and how its data must change), and the metadata
// keys of each family. Used by HfFolder (hf_folder.h), which applies the transforms.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_writer.h"
#include "io/hf_config.h"
#include "util/status.h"

namespace kvserve {

enum class HfTransform {
  kNone,
  kTranspose,     // GPT-2 Conv1D [in, out] -> [out, in] rows
  kPermuteHeads,  // llama q/k rows: rotate-half -> interleaved pairs, per head
  kPlusOne,       // Gemma RMSNorm weight w -> 1 + w (in f16 for f16 data, else in f32)
  kSplitGateUp,   // fused experts [n_expert, 2 n_ff, n_embd] -> ffn_gate_exps and ffn_up_exps
};

struct HfMapping {
  std::string name;  // GGUF name; empty: the tensor is skipped
  HfTransform transform = HfTransform::kNone;
  int n_heads = 0;  // kPermuteHeads
  int expert = -1;  // >= 0: this expert's slice of the stacked 3-D tensor `name`
};

// The GGUF name and transform of tensor `hf_name` of a `c.architecture` folder, or an error
// naming the tensor.
Result<HfMapping> MapHfTensor(std::string_view hf_name, const HfConfig& c);

// The converter's metadata keys for the family (general.architecture, general.name = model_name,
// hyper-parameters, RoPE, sliding window, soft-capping, experts). Tokenizer keys are not written.
void AddHfHyperParameters(const HfConfig& c, const std::string& model_name, GgufWriter& w);

// rope_freqs.weight of a llama3-scaled config: [head_dim / 2] frequency divisors, computed as
// llama.cpp's converter does (frequencies in f32, the smoothing in double, stored as f32).
std::vector<float> Llama3RopeFreqs(const HfConfig& c);

}  // namespace kvserve
