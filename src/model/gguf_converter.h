// Rewrites a GGUF model with its weight matrices in another type (`kvserve convert`).
//
// Rules (as llama.cpp's quantizer applies them):
// - every tensor of 2 or more dimensions (matrices, the token and position embeddings) is stored
//   in the type its recipe gives it (model/quant_recipe.h: the main type, or a higher one for the
//   output and, in the _M mixes, some attention-value and down projections); a row length that is
//   not a multiple of a K type's 256-element super-block takes llama.cpp's fallback type
//   (SuperBlockFallback), and one that is not a multiple of the 32-element block falls back to F16;
// - 1-D tensors (norm weights, biases) are stored as F32;
// - a tensor already in its output type is copied byte for byte, so f32 -> f32 is lossless;
// - all metadata is copied; general.file_type is set to llama.cpp's LLAMA_FTYPE of the target
//   type, and general.quantization_version to 2 (GGML_QNT_VERSION) for q8_0 / q4_0.
// Tensors are streamed in chunks of kChunkElements while the output is written: memory use is a
// few MiB whatever the model size (the source stays memory-mapped).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "io/gguf_reader.h"
#include "io/gguf_writer.h"
#include "model/quant_recipe.h"
#include "util/status.h"

namespace kvserve {

// llama.cpp's LLAMA_FTYPE for a file whose matrices are `type`: F32 0, F16 1, Q4_0 2, Q8_0 7,
// BF16 32. An error for any other type.
Result<uint32_t> LlamaFileType(GgmlType type);

class GgufConverter {
 public:
  // Elements converted per step; a multiple of every block size, 1 MiB of float32.
  static constexpr int64_t kChunkElements = 1 << 18;

  struct TensorPlan {
    const TensorInfo* source;  // borrowed from the GgufFile given to Create
    GgmlType type;             // output type
    bool fallback = false;     // the row length did not fit `wanted`'s block: stored as `type`
    GgmlType wanted = GgmlType::kF32;  // the recipe's type
  };

  // Plans the conversion of every tensor of `source` by `recipe`, or with every matrix in `type`.
  // Errors name an unsupported target type, or a tensor whose stored type cannot be decoded.
  // `source` is borrowed and must outlive the converter and any writer it fills.
  static Result<GgufConverter> Create(const GgufFile& source, const QuantRecipe& recipe);
  static Result<GgufConverter> Create(const GgufFile& source, GgmlType type);

  GgmlType type() const { return type_; }
  const std::vector<TensorPlan>& plan() const { return plan_; }
  // One line per tensor whose row length made it fall back to another type, naming it.
  std::vector<std::string> Notes() const;
  uint64_t OutputTensorBytes() const;

  // Adds all metadata and (streamed) tensors to `writer`, which must use source.alignment().
  void AddTo(GgufWriter& writer) const;
  // Writes the converted model to `path` (through a temporary file; `path` may be the source).
  Status WriteFile(const std::string& path) const;

 private:
  GgufConverter(const GgufFile& source, const QuantRecipe& recipe)
      : source_(&source), type_(recipe.main_type()), file_type_(recipe.file_type()) {}
  // Decodes `plan.source` and re-encodes it in plan.type, kChunkElements at a time, into `sink`.
  static Status Produce(const TensorPlan& plan, const ByteSink& sink);

  const GgufFile* source_;
  GgmlType type_;
  uint32_t file_type_;
  std::vector<TensorPlan> plan_;
};

}  // namespace kvserve
