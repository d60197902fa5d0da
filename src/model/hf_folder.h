// A Hugging Face model folder (config.json, *.safetensors, tokenizer files) seen as a GGUF file:
// the metadata and tensor names llama.cpp's converter would write, so the model loader, the
// tokenizer and `kvserve convert` work on it unchanged.
//
//   auto file = HfFolder::Open("models/gpt2");   // Result<GgufFile>
//   auto model = LoadModel(std::move(file).value(), backend);
//
// Families: GPT-2, Llama (Llama 3 RoPE scaling), Mistral, Qwen 2, Qwen 3, Qwen 3 MoE, Phi-3,
// Gemma 2, Gemma 3, Gemma 4 (text); their names and keys are in hf_families.h and io/hf_config.h.
//
// Tensor data is not copied where the layouts agree: a row-major HF [out, in] matrix is a GGUF
// [in, out] tensor with the same bytes, so TensorInfo::data points into the mapped safetensors.
// Owned buffers hold only what must change, as llama.cpp's converter changes it:
//   - GPT-2 Conv1D weights (c_attn, c_proj, c_fc) are stored [in, out]: transposed;
//   - Llama/Mistral q_proj / k_proj rows are permuted from HF's rotate-half RoPE layout to
//     GGML's interleaved pairs (per head, row j * head_dim/2 + i moves to 2i + j);
//   - Gemma RMSNorm weights get their +1; vectors, norms and the MoE router become F32;
//   - Qwen 3 MoE experts (mlp.experts.E.{gate,up,down}_proj) are stacked into one 3-D tensor;
//   - a llama3 rope_scaling, or Gemma 4's proportional RoPE, becomes the rope_freqs.weight tensor;
//   - a tensor whose data is not aligned to its element size is copied.
// Matrix element types (F32, F16, BF16) are kept. The view owns its mappings and buffers.
#pragma once

#include <string>

#include "io/gguf_reader.h"
#include "util/status.h"

namespace kvserve {

class HfFolder {
 public:
  // True when `path` is a directory (model files are regular files).
  static bool IsFolder(const std::string& path);
  // Errors name the file, the tensor or key, and the bad value.
  static Result<GgufFile> Open(const std::string& folder);
};

}  // namespace kvserve
