// Quantization recipes: which type each tensor of a model gets when `kvserve convert --type NAME`
// writes it. The llama.cpp file types (llama_ftype) are mixes: most matrices in the main type, the
// ones that hurt most in a higher one: the output matrix (or the tied token embedding) in Q6_K,
// and for the _S/_M/_L recipes, Q2_K and IQ4_NL the attention value (or fused QKV), attention
// output and feed-forward down projections of some layers, by layer, grouped-query ratio and expert
// count as llama.cpp's llama_tensor_get_type decides (without an importance matrix). kvserve
// applies the same rules, so a q4_k_m file has the tensor types llama.cpp's `llama-quantize ...
// Q4_K_M` gives it (tested against ../shared/models/arch). The plain names of types that are no
// llama.cpp recipe (q3_k, q4_k, q5_k) and f32/f16/bf16/q8_0/q4_0 (as kvserve always wrote them) put
// every matrix in that one type. In every recipe the tensors llama.cpp never quantizes stay F32:
// mixture-of-experts routers (ffn_gate_inp), norms, recurrent convolutions (ssm_conv1d), RWKV's
// small time_mix matrices and the others its tensor_allows_quantization names. mxfp4_moe is
// llama.cpp's MXFP4_MOE (gpt-oss's own mix): the 3-D expert tensors in MXFP4, every other matrix
// (the output and the token embedding included) in Q8_0; mxfp4 puts every matrix in MXFP4.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "io/ggml_type.h"
#include "util/status.h"

namespace kvserve {

// What the recipes look at besides a tensor's name: the model's layers, its grouped-query ratio
// (attention heads per key/value head) and its experts per layer (0: dense).
struct QuantModelShape {
  int n_layers = 0;
  int n_gqa = 1;
  int n_expert = 0;
};

class QuantRecipe {
 public:
  // "q4_k_m", "q8_0", ... (QuantRecipeNames lists them); an error names the value and the choices.
  static Result<QuantRecipe> Find(const std::string& name);
  // Every matrix in `type` (f32, f16, bf16 or a block type kvserve can encode).
  static QuantRecipe Uniform(GgmlType type);

  const std::string& name() const { return name_; }
  GgmlType main_type() const { return main_; }
  uint32_t file_type() const { return file_type_; }  // general.file_type (LLAMA_FTYPE)
  // The type of the 2-D or 3-D tensor `tensor` of a model of `shape`; `is_output` says it computes
  // the logits (output.weight, or token_embd.weight when there is no output.weight); `experts` is
  // the tensor's third dimension (the experts of a 3-D expert tensor; 1 for a matrix).
  GgmlType TypeOf(std::string_view tensor, const QuantModelShape& shape, bool is_output,
                  int64_t experts = 1) const;

 private:
  enum class Mix : uint8_t {
    kUniform,
    kOutputQ6K,
    kIQ4NL,
    kQ2K,
    kQ3KS,
    kQ3KM,
    kQ3KL,
    kQ4KS,
    kQ4KM,
    kQ5KS,
    kQ5KM,
    kQ6K,
    kMxfp4Moe
  };
  // The type of an attention value projection (attn_v or a fused attn_qkv) of `layer`.
  GgmlType ValueType(int layer, const QuantModelShape& shape) const;
  // The type of a feed-forward down projection (dense, the experts' or a shared expert's) of
  // `layer`.
  GgmlType DownType(int layer, const QuantModelShape& shape) const;
  GgmlType AttentionOutputType(const QuantModelShape& shape) const;
  QuantRecipe(std::string name, GgmlType main, uint32_t file_type, Mix mix)
      : name_(std::move(name)), main_(main), file_type_(file_type), mix_(mix) {}
  std::string name_;
  GgmlType main_;
  uint32_t file_type_;
  Mix mix_;
};

// "f32, f16, bf16, q8_0, q4_0, q4_1, ...": the names QuantRecipe::Find accepts.
std::string QuantRecipeNames();
// The type llama.cpp falls back to when a row length is not a multiple of `type`'s 256-element
// super-block (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K -> Q4_0, as llama.cpp
// 3f545becc's tensor_type_fallback); `type` otherwise.
GgmlType SuperBlockFallback(GgmlType type);

}  // namespace kvserve
