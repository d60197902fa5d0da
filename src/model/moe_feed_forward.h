// The mixture-of-experts feed-forward of qwen3moe and gpt-oss, as one self-loading block. A router
// (ffn_gate_inp, [n_expert, n_embd], plus ffn_gate_inp.bias with biases) scores the experts; each
// token takes its n_used highest-scoring ones, weighted by the softmax of their scores (the same
// as the softmax over all experts renormalised over the chosen: Backend::RouteTopK), and adds
// their weighted outputs to its residual. An expert is gate/up ([n_ff_exp, n_embd]) and down
// ([n_embd, n_ff_exp]), the 3-D tensors ffn_gate_exps, ffn_up_exps, ffn_down_exps, with their
// 2-D biases ffn_*_exps.bias ([n_expert] rows) where the options ask; the activation is SwiGLU or
// gpt-oss's clamped SwiGLU.
//
// Batching: the tokens are grouped by expert, and each expert's three matrices are multiplied once
// for all the tokens routed to it (a step reads each routed expert once). Each expert output row
// lands in the token's slot for that expert (its place in the token's top-k list), and the slots
// are summed per token in that order: a token's result does not depend on which other tokens
// share the batch (matmul rows are independent).
#pragma once

#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "kernels/backend.h"
#include "kernels/weight_matrix.h"
#include "model/model_config.h"
#include "model/weight_loader.h"
#include "util/status.h"

namespace kvserve {

struct MoeShape {
  int n_expert = 0;  // <arch>.expert_count
  int n_used = 0;    // <arch>.expert_used_count: experts per token
  int n_ff_exp = 0;  // <arch>.expert_feed_forward_length: an expert's hidden width

  // Reads the three keys, each range-checked (the error names the key and its value).
  static Result<MoeShape> Read(const GgufFile& file, const std::string& arch);
};

enum class MoeActivation {
  kSwiGlu,     // silu(gate) * up
  kSwiGluOai,  // gpt-oss: Backend::SwiGluOai with alpha 1.702, limit 7
  kGeGlu,      // Gemma 4: gelu(gate) * up, GELU through GGML's f16 table
};

// Workspace buffer ids the block uses: from decoder_blocks.h's kLogitsIn + 1 up to (not
// including) this one; an architecture's own ids start here.
inline constexpr int kMoeBufferEnd = 100;

struct MoeOptions {
  bool biases = false;  // the router's and every expert matrix's bias (gpt-oss)
  MoeActivation activation = MoeActivation::kSwiGlu;
};

class MoeFeedForward {
 public:
  // Reads <prefix>ffn_gate_inp.weight, the expert tensors (gate and up as two tensors or one
  // fused ffn_gate_up_exps, each expert's gate rows first), the biases the options ask for and
  // the optional per-expert output scale ffn_down_exps.scale ([n_expert]); adds them to
  // `weights`. Must not move afterwards (the model keeps pointers to its weights).
  Status Load(const WeightLoader& r, const ModelConfig& c, const MoeShape& shape,
              const std::string& prefix, const MoeOptions& options, WeightList& weights);

  // x += Σ over each token's chosen experts of weight · expert(xn), the experts chosen from the
  // router's scores of `router_in` (null: of xn).  xn, router_in, x: [n, n_embd]
  void Forward(const Backend& be, int n_embd, const float* xn, int n, float* x, Workspace& ws,
               const float* router_in = nullptr) const;

  const MoeShape& shape() const { return shape_; }

 private:
  // One expert over its m gathered rows `in`: out = down(act(gate(in), up(in))) (+ biases).
  void RunExpert(const Backend& be, int e, const float* in, int m, float* gate, float* up,
                 float* out, Workspace& ws) const;

  MoeShape shape_;
  MoeOptions options_;
  WeightMatrix router_;                            // [n_expert, n_embd]
  WeightVector router_bias_;                       // [n_expert], or empty
  std::vector<WeightMatrix> gate_, up_;            // [n_expert] of [n_ff_exp, n_embd]
  std::vector<WeightMatrix> down_;                 // [n_expert] of [n_embd, n_ff_exp]
  std::vector<WeightVector> gate_bias_, up_bias_;  // [n_expert] of [n_ff_exp], or empty
  std::vector<WeightVector> down_bias_;            // [n_expert] of [n_embd], or empty
  WeightVector down_scale_;  // [n_expert]: each expert's output factor, or empty
};

}  // namespace kvserve
