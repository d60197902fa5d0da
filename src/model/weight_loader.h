// Typed, shape-checked views of a model's tensors inside the mapped GGUF file, for the
// architectures' loaders. Matrices stay in their stored type (no dequantized copy); only the small
// 1-D vectors (norm weights, biases) are decoded to float32 at load. Every error names the file,
// the tensor, its shape or type, and what was expected.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf_reader.h"
#include "kernels/weight_matrix.h"
#include "util/status.h"

namespace kvserve {

// The weights a model's loader found, in its own members, for Model::DeclareWeights (which lets
// the backend prepare them). Blocks that load themselves add theirs.
struct WeightList {
  std::vector<WeightMatrix*> matrices;
  std::vector<WeightVector*> vectors;
  // Those of `matrices` that a token multiplies only when routed to them (a mixture's experts),
  // with the share of tokens each serves on average (expert_used_count / expert_count).
  std::vector<std::pair<const WeightMatrix*, double>> routed;
};

class WeightLoader {
 public:
  explicit WeightLoader(const GgufFile& file) : file_(file) {}

  // A 2-D matrix with n_out rows of n_in elements, in a type kvserve can multiply.
  Status Matrix(const std::string& name, int64_t n_out, int64_t n_in, WeightMatrix* out) const;
  // A tensor of n_in elements, [n_in] or [n_in, 1], as a matrix of one row, in its stored type
  // (qwen35moe's shared-expert gate ffn_gate_inp_shexp, which llama.cpp multiplies as a matrix
  // and its converter writes [n_in, 1], from the checkpoint's [1, n_in]).
  Status RowMatrix(const std::string& name, int64_t n_in, WeightMatrix* out) const;
  // A 1-D vector of n elements, decoded to float32 (into out->host).
  Status Vector(const std::string& name, int64_t n, WeightVector* out) const;
  // A 2-D tensor of n1 rows of n0 elements (GGUF dims [n0, n1]) in F32, F16 or BF16, decoded to
  // one float32 vector of n0 * n1, row after row (a convolution's taps: ssm_conv1d).
  Status Vector2d(const std::string& name, int64_t n0, int64_t n1, WeightVector* out) const;
  bool Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }
  // A 3-D tensor of n_expert matrices of n_out rows of n_in elements (GGUF dims [n_in, n_out,
  // n_expert]; a mixture of experts' ffn_*_exps), as one view per expert into the mapped tensor:
  // expert e starts e * n_out * RowBytes(type, n_in) bytes in.  out: [n_expert]
  Status ExpertMatrices(const std::string& name, int64_t n_expert, int64_t n_out, int64_t n_in,
                        std::vector<WeightMatrix>* out) const;
  // A 2-D tensor of n_expert vectors of n elements (GGUF dims [n, n_expert]; a mixture of experts'
  // ffn_*_exps.bias), decoded to float32, one WeightVector per expert.  out: [n_expert]
  Status ExpertVectors(const std::string& name, int64_t n_expert, int64_t n,
                       std::vector<WeightVector>* out) const;

 private:
  Status Missing(const std::string& name) const;
  Status WrongShape(const TensorInfo& t, const std::string& expected) const;
  const GgufFile& file_;
};

}  // namespace kvserve
