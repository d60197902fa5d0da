#include "model/moe_feed_forward.h"

#include <algorithm>
#include <cstdint>
#include <span>

#include "model/decoder_blocks.h"

namespace kvserve {

namespace {

// Workspace buffer ids past the shared decoder's (decoder_blocks.h).
enum MoeBuffer : int {
  kRouterLogits = kLogitsIn + 1,  // [n_tokens, n_expert]
  kExpertIn,                      // [tokens of one expert, n_embd]
  kExpertGate,                    // [tokens of one expert, n_ff_exp]
  kExpertUp,                      // [tokens of one expert, n_ff_exp]
  kExpertOut,                     // [tokens of one expert, n_embd]
  kSlots,                         // [n_tokens * n_used, n_embd]: each token's expert outputs
};
static_assert(kSlots < kMoeBufferEnd);

// gpt-oss's activation constants (llama.cpp's LLM_FFN_SWIGLU_OAI_MOE).
constexpr float kOaiAlpha = 1.702f;
constexpr float kOaiLimit = 7.0f;

}  // namespace

Result<MoeShape> MoeShape::Read(const GgufFile& file, const std::string& arch) {
  constexpr uint64_t kMaxExperts = 1024;
  const std::string prefix = arch + ".";
  auto read = [&](const std::string& key, uint64_t max, const std::string& bound, int* out) {
    auto value = file.GetUint(prefix + key);
    if (!value.ok()) return value.status();
    if (*value == 0 || *value > max) {
      return Status::InvalidArgument(file.path() + ": metadata key '" + prefix + key +
                                     "' = " + std::to_string(*value) + " is out of range (1 to " +
                                     bound + ")");
    }
    *out = static_cast<int>(*value);
    return Status::Ok();
  };
  MoeShape s;
  KVSERVE_RETURN_IF_ERROR(
      read("expert_count", kMaxExperts, std::to_string(kMaxExperts), &s.n_expert));
  KVSERVE_RETURN_IF_ERROR(read("expert_used_count", s.n_expert,
                               "expert_count " + std::to_string(s.n_expert), &s.n_used));
  KVSERVE_RETURN_IF_ERROR(
      read("expert_feed_forward_length", 1 << 20, std::to_string(1 << 20), &s.n_ff_exp));
  return s;
}

Status MoeFeedForward::Load(const WeightLoader& r, const ModelConfig& c, const MoeShape& shape,
                            const std::string& prefix, const MoeOptions& options,
                            WeightList& weights) {
  shape_ = shape;
  options_ = options;
  const int n_expert = shape.n_expert;
  const int n_ff = shape.n_ff_exp;
  KVSERVE_RETURN_IF_ERROR(r.Matrix(prefix + "ffn_gate_inp.weight", n_expert, c.n_embd, &router_));
  if (r.Has(prefix + "ffn_gate_up_exps.weight")) {
    // One [2 n_ff, n_embd] matrix per expert: gate and up are views of its two row halves.
    std::vector<WeightMatrix> fused;
    KVSERVE_RETURN_IF_ERROR(
        r.ExpertMatrices(prefix + "ffn_gate_up_exps.weight", n_expert, 2 * n_ff, c.n_embd, &fused));
    for (const WeightMatrix& m : fused) {
      WeightMatrix half = m;
      half.n_out = n_ff;
      gate_.push_back(half);
      half.data = m.data + static_cast<size_t>(n_ff) * m.row_bytes;
      up_.push_back(half);
    }
  } else {
    KVSERVE_RETURN_IF_ERROR(
        r.ExpertMatrices(prefix + "ffn_gate_exps.weight", n_expert, n_ff, c.n_embd, &gate_));
    KVSERVE_RETURN_IF_ERROR(
        r.ExpertMatrices(prefix + "ffn_up_exps.weight", n_expert, n_ff, c.n_embd, &up_));
  }
  KVSERVE_RETURN_IF_ERROR(
      r.ExpertMatrices(prefix + "ffn_down_exps.weight", n_expert, c.n_embd, n_ff, &down_));
  weights.matrices.push_back(&router_);
  const double share = static_cast<double>(shape.n_used) / n_expert;
  for (int e = 0; e < n_expert; ++e) {
    weights.matrices.insert(weights.matrices.end(), {&gate_[e], &up_[e], &down_[e]});
    for (const WeightMatrix* m : {&gate_[e], &up_[e], &down_[e]}) {
      weights.routed.emplace_back(m, share);
    }
  }
  if (r.Has(prefix + "ffn_down_exps.scale")) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(prefix + "ffn_down_exps.scale", n_expert, &down_scale_));
  }
  if (!options.biases) return Status::Ok();
  KVSERVE_RETURN_IF_ERROR(r.Vector(prefix + "ffn_gate_inp.bias", n_expert, &router_bias_));
  KVSERVE_RETURN_IF_ERROR(
      r.ExpertVectors(prefix + "ffn_gate_exps.bias", n_expert, n_ff, &gate_bias_));
  KVSERVE_RETURN_IF_ERROR(r.ExpertVectors(prefix + "ffn_up_exps.bias", n_expert, n_ff, &up_bias_));
  KVSERVE_RETURN_IF_ERROR(
      r.ExpertVectors(prefix + "ffn_down_exps.bias", n_expert, c.n_embd, &down_bias_));
  weights.vectors.push_back(&router_bias_);
  for (int e = 0; e < n_expert; ++e) {
    weights.vectors.insert(weights.vectors.end(), {&gate_bias_[e], &up_bias_[e], &down_bias_[e]});
  }
  return Status::Ok();
}

void MoeFeedForward::RunExpert(const Backend& be, int e, const float* in, int m, float* gate,
                               float* up, float* out, Workspace& ws) const {
  const int n_ff = shape_.n_ff_exp;
  const int n_embd = static_cast<int>(down_[e].n_out);
  be.Matmul(gate_[e], in, m, gate, ws);
  be.Matmul(up_[e], in, m, up, ws);
  if (options_.biases) {
    be.AddBias(gate, n_ff, gate_bias_[e].data(), m, n_ff, ws);
    be.AddBias(up, n_ff, up_bias_[e].data(), m, n_ff, ws);
  }
  switch (options_.activation) {
    case MoeActivation::kSwiGluOai:
      be.SwiGluOai(gate, up, m, n_ff, kOaiAlpha, kOaiLimit, ws);
      break;
    case MoeActivation::kGeGlu:
      be.GeGlu(gate, up, m, n_ff, ws);
      break;
    case MoeActivation::kSwiGlu:
      be.SwiGlu(gate, up, m, n_ff, ws);
      break;
  }
  be.Matmul(down_[e], gate, m, out, ws);
  if (!down_scale_.empty()) be.Scale(out, m, n_embd, down_scale_.host[e], ws);
  if (options_.biases) be.AddBias(out, n_embd, down_bias_[e].data(), m, n_embd, ws);
}

void MoeFeedForward::Forward(const Backend& be, int n_embd, const float* xn, int n, float* x,
                             Workspace& ws, const float* router_in) const {
  const int n_expert = shape_.n_expert;
  const int n_used = shape_.n_used;
  const size_t rows = static_cast<size_t>(n);
  float* logits = ws.Floats(kRouterLogits, rows * n_expert);
  float* slots = ws.Floats(kSlots, rows * n_used * n_embd);
  std::vector<int32_t> ids(rows * n_used);
  std::vector<float> weights(rows * n_used);
  ExpertGroups groups;
  be.Matmul(router_, router_in != nullptr ? router_in : xn, n, logits, ws);
  if (!router_bias_.empty()) be.AddBias(logits, n_expert, router_bias_.data(), n, n_expert, ws);
  be.RouteTopK(logits, n, n_expert, n_used, ids.data(), weights.data(), ws);
  be.GroupByExpert(ids, n_used, n_expert, groups);
  int most = 0;
  for (int e = 0; e < n_expert; ++e) most = std::max(most, groups.rows_of(e));
  const size_t m_max = static_cast<size_t>(most);
  float* in = ws.Floats(kExpertIn, m_max * n_embd);
  float* gate = ws.Floats(kExpertGate, m_max * shape_.n_ff_exp);
  float* up = ws.Floats(kExpertUp, m_max * shape_.n_ff_exp);
  float* out = ws.Floats(kExpertOut, m_max * n_embd);
  for (int e = 0; e < n_expert; ++e) {
    const int m = groups.rows_of(e);
    if (m == 0) continue;
    const std::span<const int32_t> tokens(groups.rows.data() + groups.begin[e], m);
    const std::span<const int32_t> token_slots(groups.slots.data() + groups.begin[e], m);
    be.GatherRows(xn, n_embd, tokens, n_embd, in, ws);
    RunExpert(be, e, in, m, gate, up, out, ws);
    be.ScatterRows(out, n_embd, token_slots, n_embd, slots, ws);
  }
  be.AddWeightedRows(x, slots, weights.data(), n, n_used, n_embd, ws);
}

}  // namespace kvserve
