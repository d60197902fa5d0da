#include "kernels/profiling_backend.h"

#include <algorithm>
#include <chrono>

namespace kvserve {

template <typename Fn>
void ProfilingBackend::Timed(const std::string& name, Workspace* ws, uint64_t weight_bytes,
                             Fn&& fn) const {
  using Clock = std::chrono::steady_clock;
  const Workspace::Counters before = ws != nullptr ? ws->counters() : Workspace::Counters{};
  const Clock::time_point start = Clock::now();
  fn();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const Workspace::Counters after = ws != nullptr ? ws->counters() : Workspace::Counters{};
  OpTotals& op = ops_[name];
  op.calls += 1;
  op.seconds += seconds;
  op.wait_seconds += after.wait_seconds - before.wait_seconds;
  op.parallel_jobs += after.parallel_jobs - before.parallel_jobs;
  op.worker_sleeps += after.worker_sleeps - before.worker_sleeps;
  op.device_dispatches += after.device_dispatches - before.device_dispatches;
  op.device_waits += after.device_waits - before.device_waits;
  op.weight_bytes += weight_bytes;
}

std::vector<ProfilingBackend::OpTotals> ProfilingBackend::totals() const {
  std::vector<OpTotals> out;
  for (const auto& [name, op] : ops_) {
    out.push_back(op);
    out.back().name = name;
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const OpTotals& a, const OpTotals& b) { return a.seconds > b.seconds; });
  return out;
}

namespace {

// "Q4_K 2048x2048": a matrix's type and shape (n_out x n_in), as the profile names it.
std::string MatrixName(const WeightMatrix& w) {
  return std::string(GgmlTypeName(w.type)) + " " + std::to_string(w.n_out) + "x" +
         std::to_string(w.n_in);
}

uint64_t WeightBytes(const WeightMatrix& w) { return w.row_bytes * static_cast<uint64_t>(w.n_out); }

}  // namespace

void ProfilingBackend::Matmul(const WeightMatrix& w, const float* x, int n_rows, float* y,
                              Workspace& ws) const {
  Timed("matmul " + MatrixName(w), &ws, WeightBytes(w),
        [&] { inner_.Matmul(w, x, n_rows, y, ws); });
}

void ProfilingBackend::MatmulSameInput(std::span<const WeightMatrix* const> matrices,
                                       const float* x, int n_rows, std::span<float* const> ys,
                                       Workspace& ws) const {
  std::string name = "matmul";
  uint64_t bytes = 0;
  for (const WeightMatrix* w : matrices) {
    name += (w == matrices.front() ? " " : " + ") + MatrixName(*w);
    bytes += WeightBytes(*w);
  }
  Timed(name, &ws, bytes, [&] { inner_.MatmulSameInput(matrices, x, n_rows, ys, ws); });
}

void ProfilingBackend::GetRows(const WeightMatrix& table, std::span<const int32_t> rows, float* out,
                               Workspace& ws) const {
  Timed("get_rows", &ws, 0, [&] { inner_.GetRows(table, rows, out, ws); });
}

void ProfilingBackend::GatherRows(const float* src, size_t src_stride,
                                  std::span<const int32_t> rows, int width, float* dst,
                                  Workspace& ws) const {
  Timed("gather_rows", &ws, 0, [&] { inner_.GatherRows(src, src_stride, rows, width, dst, ws); });
}

void ProfilingBackend::CopyRows(const float* src, size_t src_stride, int n_rows, int width,
                                float* dst, Workspace& ws) const {
  Timed("copy_rows", &ws, 0, [&] { inner_.CopyRows(src, src_stride, n_rows, width, dst, ws); });
}

void ProfilingBackend::Add(float* x, const float* y, int n_rows, int width, Workspace& ws) const {
  Timed("add", &ws, 0, [&] { inner_.Add(x, y, n_rows, width, ws); });
}

void ProfilingBackend::AddBias(float* x, size_t stride, const float* bias, int n_rows, int width,
                               Workspace& ws) const {
  Timed("add_bias", &ws, 0, [&] { inner_.AddBias(x, stride, bias, n_rows, width, ws); });
}

void ProfilingBackend::RmsNorm(const float* x, const float* weight, int n_rows, int width,
                               float eps, float* out, Workspace& ws) const {
  Timed("rms_norm", &ws, 0, [&] { inner_.RmsNorm(x, weight, n_rows, width, eps, out, ws); });
}

void ProfilingBackend::LayerNorm(const float* x, const float* weight, const float* bias, int n_rows,
                                 int width, float eps, float* out, Workspace& ws) const {
  Timed("layer_norm", &ws, 0,
        [&] { inner_.LayerNorm(x, weight, bias, n_rows, width, eps, out, ws); });
}

void ProfilingBackend::Rope(float* x, std::span<const int32_t> positions, int n_heads, int head_dim,
                            const RopeParams& rope, Workspace& ws) const {
  Timed("rope", &ws, 0, [&] { inner_.Rope(x, positions, n_heads, head_dim, rope, ws); });
}

void ProfilingBackend::SwiGlu(float* gate, const float* up, int n_rows, int width,
                              Workspace& ws) const {
  Timed("swiglu", &ws, 0, [&] { inner_.SwiGlu(gate, up, n_rows, width, ws); });
}

void ProfilingBackend::SwiGluOai(float* gate, const float* up, int n_rows, int width, float alpha,
                                 float limit, Workspace& ws) const {
  Timed("swiglu", &ws, 0, [&] { inner_.SwiGluOai(gate, up, n_rows, width, alpha, limit, ws); });
}

void ProfilingBackend::Relu(float* x, int n_rows, int width, Workspace& ws) const {
  Timed("relu", &ws, 0, [&] { inner_.Relu(x, n_rows, width, ws); });
}

void ProfilingBackend::Gelu(float* x, int n_rows, int width, Workspace& ws) const {
  Timed("gelu", &ws, 0, [&] { inner_.Gelu(x, n_rows, width, ws); });
}

void ProfilingBackend::GeGlu(float* gate, const float* up, int n_rows, int width,
                             Workspace& ws) const {
  Timed("geglu", &ws, 0, [&] { inner_.GeGlu(gate, up, n_rows, width, ws); });
}

void ProfilingBackend::Scale(float* x, int n_rows, int width, float factor, Workspace& ws) const {
  Timed("scale", &ws, 0, [&] { inner_.Scale(x, n_rows, width, factor, ws); });
}

void ProfilingBackend::SoftCap(float* x, int n_rows, int width, float cap, Workspace& ws) const {
  Timed("soft_cap", &ws, 0, [&] { inner_.SoftCap(x, n_rows, width, cap, ws); });
}

void ProfilingBackend::StoreKv(const KvLayerView& kv, std::span<const int64_t> slots,
                               const float* k, const float* v, size_t stride, Workspace& ws) const {
  Timed("store_kv", &ws, 0, [&] { inner_.StoreKv(kv, slots, k, v, stride, ws); });
}

void ProfilingBackend::PagedAttention(const KvLayerView& kv, const AttentionBatch& batch,
                                      const float* q, int n_heads, const AttentionParams& params,
                                      float* out, Workspace& ws) const {
  Timed("attention", &ws, 0,
        [&] { inner_.PagedAttention(kv, batch, q, n_heads, params, out, ws); });
  uint64_t keys = 0;
  for (size_t i = 0; i < batch.positions.size(); ++i) {
    const AttentionKeys range = KeysOf(batch, params, i);
    keys += static_cast<uint64_t>(range.end - range.first);
  }
  ops_["attention"].kv_bytes += keys * kv.slot_bytes() * 2;
}

void ProfilingBackend::RouteTopK(const float* logits, int n_rows, int n_expert, int k, int32_t* ids,
                                 float* weights, Workspace& ws) const {
  Timed("route_top_k", &ws, 0,
        [&] { inner_.RouteTopK(logits, n_rows, n_expert, k, ids, weights, ws); });
}

void ProfilingBackend::GroupByExpert(std::span<const int32_t> ids, int k, int n_expert,
                                     ExpertGroups& groups) const {
  Timed("group_by_expert", nullptr, 0, [&] { inner_.GroupByExpert(ids, k, n_expert, groups); });
}

void ProfilingBackend::ScatterRows(const float* src, int width, std::span<const int32_t> rows,
                                   size_t dst_stride, float* dst, Workspace& ws) const {
  Timed("scatter_rows", &ws, 0, [&] { inner_.ScatterRows(src, width, rows, dst_stride, dst, ws); });
}

void ProfilingBackend::AddWeightedRows(float* x, const float* src, const float* weights, int n_rows,
                                       int k, int width, Workspace& ws) const {
  Timed("add_weighted_rows", &ws, 0,
        [&] { inner_.AddWeightedRows(x, src, weights, n_rows, k, width, ws); });
}

void ProfilingBackend::ShortConv(const float* x, size_t x_stride, int channels, const float* weight,
                                 int kernel, std::span<const RecurrentRun> runs, float* out,
                                 Workspace& ws) const {
  Timed("short_conv", &ws, 0,
        [&] { inner_.ShortConv(x, x_stride, channels, weight, kernel, runs, out, ws); });
}

void ProfilingBackend::GatedDeltaNet(const float* qkv, size_t qkv_stride, const float* g,
                                     const float* beta, int n_k_heads, int n_v_heads, int head_dim,
                                     float eps, std::span<const RecurrentRun> runs, float* out,
                                     Workspace& ws) const {
  Timed("gated_delta_net", &ws, 0, [&] {
    inner_.GatedDeltaNet(qkv, qkv_stride, g, beta, n_k_heads, n_v_heads, head_dim, eps, runs, out,
                         ws);
  });
}

void ProfilingBackend::DeltaNetGates(const float* alpha, const float* beta_in, const float* dt_bias,
                                     const float* a, int n_rows, int n_heads, float* g, float* beta,
                                     Workspace& ws) const {
  Timed("delta_net_gates", &ws, 0,
        [&] { inner_.DeltaNetGates(alpha, beta_in, dt_bias, a, n_rows, n_heads, g, beta, ws); });
}

void ProfilingBackend::SigmoidGate(float* x, const float* gate, size_t gate_stride, int n_rows,
                                   int width, Workspace& ws) const {
  Timed("sigmoid_gate", &ws, 0,
        [&] { inner_.SigmoidGate(x, gate, gate_stride, n_rows, width, ws); });
}

void ProfilingBackend::SigmoidScaleRows(float* x, const float* gate, int n_rows, int width,
                                        Workspace& ws) const {
  Timed("sigmoid_scale_rows", &ws, 0, [&] { inner_.SigmoidScaleRows(x, gate, n_rows, width, ws); });
}

}  // namespace kvserve
