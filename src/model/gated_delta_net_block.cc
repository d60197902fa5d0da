#include "model/gated_delta_net_block.h"

#include <cassert>
#include <tuple>
#include <utility>

#include "kv/block_manager.h"
#include "kv/recurrent_state_kind.h"
#include "model/decoder_blocks.h"

namespace kvserve {

Result<DeltaNetShape> DeltaNetShape::Read(const GgufFile& file, const std::string& arch) {
  const std::string a = arch + ".ssm.";
  uint64_t values[5] = {};
  const char* keys[5] = {"state_size", "group_count", "time_step_rank", "conv_kernel",
                         "inner_size"};
  for (int i = 0; i < 5; ++i) {
    auto v = file.GetUint(a + keys[i]);
    if (!v.ok()) return v.status();
    if (*v == 0 || *v > (1u << 20)) {
      return Status::InvalidArgument(file.path() + ": " + a + keys[i] + " is " +
                                     std::to_string(*v) + " (expected 1 to 1048576)");
    }
    values[i] = *v;
  }
  DeltaNetShape s{.head_dim = static_cast<int>(values[0]),
                  .n_k_heads = static_cast<int>(values[1]),
                  .n_v_heads = static_cast<int>(values[2]),
                  .conv_kernel = static_cast<int>(values[3])};
  if (values[4] != static_cast<uint64_t>(s.value_dim()) || s.n_v_heads % s.n_k_heads != 0 ||
      s.head_dim > 1024 || s.conv_kernel > 64) {
    return Status::InvalidArgument(
        file.path() + ": " + a + "inner_size " + std::to_string(values[4]) + ", time_step_rank " +
        std::to_string(s.n_v_heads) + ", group_count " + std::to_string(s.n_k_heads) +
        ", state_size " + std::to_string(s.head_dim) + ", conv_kernel " +
        std::to_string(s.conv_kernel) +
        " do not fit (inner_size = time_step_rank * state_size, time_step_rank a multiple of "
        "group_count, state_size <= 1024, conv_kernel <= 64)");
  }
  return s;
}

KvGroupSpec DeltaNetGroup(const DeltaNetShape& shape, std::vector<int> layers,
                          int64_t extra_floats) {
  KvGroupSpec group;
  group.kind = RecurrentStateKind::Make();
  group.layers = std::move(layers);
  group.state_floats = shape.state_floats() + extra_floats;
  return group;
}

Status GatedDeltaNetBlock::Load(const WeightLoader& r, const ModelConfig& c,
                                const DeltaNetShape& shape, const std::string& prefix,
                                WeightList& weights) {
  shape_ = shape;
  const int n_embd = c.n_embd, value_dim = shape.value_dim();
  for (auto [name, m, n_out, n_in] :
       {std::tuple{"attn_qkv.weight", &w_qkv_, shape.conv_channels(), n_embd},
        {"attn_gate.weight", &w_gate_, value_dim, n_embd},
        {"ssm_beta.weight", &w_beta_, shape.n_v_heads, n_embd},
        {"ssm_alpha.weight", &w_alpha_, shape.n_v_heads, n_embd},
        {"ssm_out.weight", &w_out_, n_embd, value_dim}}) {
    KVSERVE_RETURN_IF_ERROR(r.Matrix(prefix + name, n_out, n_in, m));
    weights.matrices.push_back(m);
  }
  KVSERVE_RETURN_IF_ERROR(
      r.Vector2d(prefix + "ssm_conv1d.weight", shape.conv_kernel, shape.conv_channels(), &conv_));
  for (auto [name, v, n] : {std::tuple{"ssm_dt.bias", &dt_bias_, shape.n_v_heads},
                            {"ssm_a", &a_, shape.n_v_heads},
                            {"ssm_norm.weight", &norm_, shape.head_dim}}) {
    KVSERVE_RETURN_IF_ERROR(r.Vector(prefix + name, n, v));
  }
  weights.vectors.insert(weights.vectors.end(), {&conv_, &dt_bias_, &a_, &norm_});
  return Status::Ok();
}

std::vector<RecurrentRun> RecurrentRuns(const ForwardBatch& batch, const KvLayerView& kv,
                                        int64_t offset) {
  std::vector<RecurrentRun> runs;
  const int n = batch.n_tokens(), bs = kv.block_size;
  const auto& tables = batch.kv_groups[kv.group].block_tables;
  for (int r = 0; r < n;) {
    const int seq = batch.seq_index[r];
    const std::vector<int32_t>& table = tables[seq];
    const int p0 = batch.positions[r];
    // The state before the run: the block of the sequence's last computed token.
    const float* from = p0 == 0 ? nullptr : kv.state(table[(p0 - 1) / bs]) + offset;
    while (r < n && batch.seq_index[r] == seq) {
      // The run ends in the next block that holds a state (a chunk's interior blocks between
      // checkpoints are kNoBlock: RecurrentStateKind::HoldsBlock).
      int logical = batch.positions[r] / bs;
      while (table[logical] == kNoBlock) {
        ++logical;
        assert(logical < static_cast<int>(table.size()));
      }
      const int end_position = (logical + 1) * bs;
      int end = r + 1;
      while (end < n && batch.seq_index[end] == seq && batch.positions[end] < end_position) {
        assert(batch.positions[end] == batch.positions[end - 1] + 1);
        ++end;
      }
      float* to = kv.state(table[logical]) + offset;
      runs.push_back({.row_begin = r, .row_end = end, .from = from, .to = to});
      from = to;
      r = end;
    }
  }
  return runs;
}

void GatedDeltaNetBlock::Forward(const Backend& be, const ModelConfig& c, const ForwardBatch& batch,
                                 const KvLayerView& kv, const float* xn, float* out,
                                 Workspace& ws) const {
  const DeltaNetShape& s = shape_;
  const int n = batch.n_tokens();
  const size_t rows = static_cast<size_t>(n);
  const int channels = s.conv_channels(), value_dim = s.value_dim();
  float* qkv = ws.Floats(kDeltaQkv, rows * channels);
  float* conv = ws.Floats(kDeltaConv, rows * channels);
  float* z = ws.Floats(kDeltaZ, rows * value_dim);
  float* alpha = ws.Floats(kDeltaAlpha, rows * s.n_v_heads);
  float* beta_in = ws.Floats(kDeltaBetaIn, rows * s.n_v_heads);
  float* beta = ws.Floats(kDeltaBeta, rows * s.n_v_heads);
  float* g = ws.Floats(kDeltaG, rows * s.n_v_heads);
  float* o = ws.Floats(kDeltaOut, rows * value_dim);
  be.Matmul(w_qkv_, xn, n, qkv, ws);
  be.Matmul(w_gate_, xn, n, z, ws);
  be.Matmul(w_beta_, xn, n, beta_in, ws);
  be.Matmul(w_alpha_, xn, n, alpha, ws);
  be.DeltaNetGates(alpha, beta_in, dt_bias_.data(), a_.data(), n, s.n_v_heads, g, beta, ws);
  const std::vector<RecurrentRun> conv_runs = RecurrentRuns(batch, kv, 0);
  be.ShortConv(qkv, channels, channels, conv_.data(), s.conv_kernel, conv_runs, conv, ws);
  const std::vector<RecurrentRun> delta_runs = RecurrentRuns(batch, kv, s.conv_floats());
  be.GatedDeltaNet(conv, channels, g, beta, s.n_k_heads, s.n_v_heads, s.head_dim, c.norm_eps,
                   delta_runs, o, ws);
  be.RmsNorm(o, norm_.data(), n * s.n_v_heads, s.head_dim, c.norm_eps, o, ws);
  be.SwiGlu(z, o, n, value_dim, ws);  // z = silu(z) * norm(o)
  be.Matmul(w_out_, z, n, out, ws);
}

}  // namespace kvserve
