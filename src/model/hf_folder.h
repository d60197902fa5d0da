// A Hugging Face model folder (config.json, *.safetensors, tokenizer files) seen as a GGUF file:
// the metadata and tensor names llama.cpp's converter would write, so the model loader, the
// tokenizer and `kvserve convert` work on it unchanged.
//
//   auto file = HfFolder::Open("models/gpt2");   // Result<GgufFile>
//   auto model = LoadModel(std::move(file).value(), backend);
//
// Tensor data is not copied where the layouts agree: a row-major HF [out, in] matrix is a GGUF
// [in, out] tensor with the same bytes, so TensorInfo::data points into the mapped safetensors.
// Owned buffers hold only what must change:
//   - GPT-2 Conv1D weights (c_attn, c_proj, c_fc) are stored [in, out]: transposed;
//   - Llama q_proj / k_proj rows are permuted from HF's rotate-half RoPE layout to GGML's
//     interleaved pairs (per head, row j * head_dim/2 + i moves to 2i + j, as llama.cpp's
//     converter does);
//   - a tensor whose data is not aligned to its element size is copied.
// Element types (F32, F16, BF16) are kept. The view owns its mappings and buffers.
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
