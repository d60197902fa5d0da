#include "kernels/cpu/cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/cpu_probe.h"
#include "kernels/cpu/delta_chunked.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/moe_ops.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/cpu/recurrent_ops.h"
#include "kernels/quantize.h"
#include "util/aligned_allocator.h"
#include "util/large_memory.h"
#include "util/thread_pool.h"

namespace kvserve {

namespace {

// The CPU workspace: named float buffers, the thread pool every operation runs on, and the
// kernels' scratch (quantized activations, per-thread tiles, attention scores, an unpacked row).
class CpuWorkspace final : public Workspace {
 public:
  explicit CpuWorkspace(int n_threads) : pool(n_threads), matmul(pool.size()) {}
  float* Floats(int id, size_t n) override {
    if (static_cast<size_t>(id) >= buffers_.size()) buffers_.resize(id + 1);
    if (buffers_[id].size() < n) buffers_[id].resize(n);
    return buffers_[id].data();
  }
  Counters counters() const override {
    const ThreadPool::Counters c = pool.counters();
    return {.parallel_jobs = c.jobs,
            .wait_seconds = ThreadPool::TicksToSeconds(c.wait_ticks),
            .worker_sleeps = c.worker_sleeps};
  }
  int threads() const override { return pool.size(); }

  ThreadPool pool;
  MatmulScratch matmul;
  AlignedFloats attention;         // [pool size][AttentionScratchFloats]
  std::vector<uint8_t> row_bytes;  // one stored-layout row, unpacked from a packed copy
  // GatedDeltaNet's normalized q and k: [n_rows, 2, n_k_heads, head_dim]
  AlignedFloats delta_net;

 private:
  std::vector<AlignedFloats> buffers_;
};

CpuWorkspace& Cpu(Workspace& ws) { return static_cast<CpuWorkspace&>(ws); }

// Rough work of one row-wise pass, for ThreadPool::ParallelFor's inline threshold.
int64_t RowCost(int n_rows, int width) { return static_cast<int64_t>(n_rows) * width * 8; }

// fn(i) for every row i, split across the pool by rows.
template <typename Fn>
void ForRows(Workspace& ws, int n_rows, int width, Fn&& fn) {
  Cpu(ws).pool.ParallelFor(
      n_rows,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) fn(i);
      },
      RowCost(n_rows, width));
}

}  // namespace

CpuBackendOptions CpuBackendOptions::FromEnvironment() {
  CpuBackendOptions options;
  if (const char* isa = std::getenv("KVSERVE_ISA")) options.isa = isa;
  const char* pack = std::getenv("KVSERVE_PACK");
  options.pack = pack == nullptr || std::string_view(pack) != "0";
  if (const char* tile = std::getenv("KVSERVE_DECODE_TILE")) {
    const std::string_view value = tile;
    if (value == "first" || value == "alt") {
      options.decode_tile = value;
    } else if (!value.empty() && value != "auto") {
      std::fprintf(stderr,
                   "kvserve: KVSERVE_DECODE_TILE=%s is not auto, first or alt; using auto\n", tile);
    }
  }
  if (const char* chunk = std::getenv("KVSERVE_DELTA_CHUNK")) {
    const int value = std::atoi(chunk);
    if (value >= 0 && value <= kMaxDeltaChunk) {
      options.delta_chunk = value;
    } else {
      std::fprintf(stderr, "kvserve: KVSERVE_DELTA_CHUNK=%s is not 0..%d; using 0 (off)\n", chunk,
                   kMaxDeltaChunk);
    }
  }
  return options;
}

CpuBackend::CpuBackend(const CpuBackendOptions& options)
    : kernels_(KernelsFor(options.isa)),
      pack_(options.pack),
      delta_chunk_(options.delta_chunk),
      decode_tiles_(kernels_, options.decode_tile) {}

std::string CpuBackend::name() const { return std::string("cpu-") + kernels_.isa; }

std::string CpuBackend::kernel_set() const { return kernels_.isa; }

std::string CpuBackend::device() const {
  auto yes = [](bool has) { return has ? "yes" : "no"; };
  return std::string("avx2 ") + yes(CpuSupportsAvx2()) + ", avxvnni " + yes(CpuSupportsAvxVnni()) +
         ", avx512 " + yes(CpuSupportsAvx512()) + ", amx " + yes(CpuSupportsAmx());
}

Measurement CpuBackend::MeasureReadBandwidth(uint64_t bytes, int repeats, Workspace& ws) const {
  return kvserve::MeasureReadBandwidth(kernels_, Cpu(ws).pool, bytes, repeats);
}

Measurement CpuBackend::MeasureMatmulFlops(GgmlType type, int m, int n_out, int n_in, int repeats,
                                           Workspace& ws) const {
  return kvserve::MeasureMatmulFlops(kernels_, type, m, n_out, n_in, Cpu(ws).pool, repeats);
}

std::vector<KernelCheck> CpuBackend::CheckKernels() const {
  return CheckKernelsAgainstScalar(kernels_);
}

std::unique_ptr<Workspace> CpuBackend::NewWorkspace(const WorkspaceOptions& options) const {
  return std::make_unique<CpuWorkspace>(options.n_threads);
}

// Repacks every matrix (the quantized types', F32, F16, BF16) the table has a packed kernel for,
// then drops the stored bytes from resident memory (file mappings only). Loading is mostly page
// faults on the mapping: up to 8 threads, each taking whole matrices. No memory for the copy: the
// stored layout keeps working.
size_t CpuBackend::PrepareWeights(std::span<WeightMatrix* const> all,
                                  std::span<WeightVector* const> /*vectors*/, const GgufFile& file,
                                  std::shared_ptr<uint8_t>& storage) const {
  if (!pack_) return 0;
  std::vector<WeightMatrix*> matrices(all.begin(), all.end());
  std::erase_if(matrices, [&](const WeightMatrix* m) {
    return m->data == nullptr || m->packed != nullptr || !HasPackedLayout(m->type) ||
           PackedMatmulFor(kernels_, m->type) == nullptr;
  });
  size_t total = 0;
  for (const WeightMatrix* m : matrices) total += PackedMatrixBytes(m->type, m->n_out, m->n_in);
  if (total == 0) return 0;
  // Huge pages: the matmuls stream through this every step (16-stream Q6_K decode 299 → 316 t/s,
  // medians of 5 alternating runs).
  uint8_t* base = static_cast<uint8_t*>(AllocateLarge(total));
  if (base == nullptr) return 0;
  storage.reset(base, FreeLarge);
  std::vector<uint8_t*> destinations;
  for (WeightMatrix* m : matrices) {
    destinations.push_back(base);
    base += PackedMatrixBytes(m->type, m->n_out, m->n_in);
  }
  const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  ThreadPool pool(static_cast<int>(std::min<size_t>({cores, 8, matrices.size()})));
  std::atomic<size_t> next{0};
  pool.Run([&](int) {
    for (size_t i = next++; i < matrices.size(); i = next++) {
      WeightMatrix* m = matrices[i];
      const int64_t groups = (m->n_out + kPackRows - 1) / kPackRows;
      PackGroups(m->type, m->data, RowBytes(m->type, m->n_in), m->n_out, m->n_in, 0, groups,
                 destinations[i]);
      m->packed = destinations[i];
      file.ReleasePages(m->data, m->row_bytes * static_cast<size_t>(m->n_out));
    }
  });
  return total;
}

void CpuBackend::Matmul(const WeightMatrix& w, const float* x, int n_rows, float* y,
                        Workspace& ws) const {
  kvserve::Matmul(kernels_, w, x, n_rows, y, Cpu(ws).matmul, Cpu(ws).pool, &decode_tiles_);
}

void CpuBackend::MatmulSameInput(std::span<const WeightMatrix* const> matrices, const float* x,
                                 int n_rows, std::span<float* const> ys, Workspace& ws) const {
  kvserve::MatmulSameInput(kernels_, matrices, x, n_rows, ys, Cpu(ws).matmul, Cpu(ws).pool,
                           &decode_tiles_);
}

// A matrix whose pages were released after packing (a tied embedding) reads its rows back from
// the packed copy.
void CpuBackend::GetRows(const WeightMatrix& table, std::span<const int32_t> rows, float* out,
                         Workspace& ws) const {
  std::vector<uint8_t>& row_bytes = Cpu(ws).row_bytes;
  if (table.packed != nullptr && row_bytes.size() < table.row_bytes) {
    row_bytes.resize(table.row_bytes);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const uint8_t* stored = table.data + table.row_bytes * rows[i];
    if (table.packed != nullptr) {
      UnpackRow(table.type, table.packed, table.n_in, rows[i], row_bytes.data());
      stored = row_bytes.data();
    }
    DequantizeRow(table.type, stored, table.n_in, out + i * table.n_in);
  }
}

void CpuBackend::GatherRows(const float* src, size_t src_stride, std::span<const int32_t> rows,
                            int width, float* dst, Workspace& ws) const {
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(dst + i * width, src + rows[i] * src_stride, sizeof(float) * width);
  }
}

void CpuBackend::CopyRows(const float* src, size_t src_stride, int n_rows, int width, float* dst,
                          Workspace& ws) const {
  for (int i = 0; i < n_rows; ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * width, src + i * src_stride, sizeof(float) * width);
  }
}

void CpuBackend::Add(float* x, const float* y, int n_rows, int width, Workspace& ws) const {
  ForRows(ws, n_rows, width, [&](int64_t i) { AddInPlace(x + i * width, y + i * width, width); });
}

void CpuBackend::AddBias(float* x, size_t stride, const float* bias, int n_rows, int width,
                         Workspace& ws) const {
  ForRows(ws, n_rows, width, [&](int64_t i) { AddInPlace(x + i * stride, bias, width); });
}

void CpuBackend::RmsNorm(const float* x, const float* weight, int n_rows, int width, float eps,
                         float* out, Workspace& ws) const {
  ForRows(ws, n_rows, width,
          [&](int64_t i) { kvserve::RmsNorm(x + i * width, weight, width, eps, out + i * width); });
}

void CpuBackend::LayerNorm(const float* x, const float* weight, const float* bias, int n_rows,
                           int width, float eps, float* out, Workspace& ws) const {
  ForRows(ws, n_rows, width, [&](int64_t i) {
    kvserve::LayerNorm(x + i * width, weight, bias, width, eps, out + i * width);
  });
}

void CpuBackend::Rope(float* x, std::span<const int32_t> positions, int n_heads, int head_dim,
                      const RopeParams& rope, Workspace& ws) const {
  const int width = n_heads * head_dim;
  ForRows(ws, static_cast<int>(positions.size()), width,
          [&](int64_t i) { RopeInPlace(x + i * width, n_heads, head_dim, rope, positions[i]); });
}

void CpuBackend::SwiGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const {
  ForRows(ws, n_rows, width,
          [&](int64_t i) { SwiGluInPlace(kernels_, gate + i * width, up + i * width, width); });
}

void CpuBackend::SwiGluOai(float* gate, const float* up, int n_rows, int width, float alpha,
                           float limit, Workspace& ws) const {
  ForRows(ws, n_rows, width, [&](int64_t i) {
    SwiGluOaiInPlace(gate + i * width, up + i * width, width, alpha, limit);
  });
}

void CpuBackend::Gelu(float* x, int n_rows, int width, Workspace& ws) const {
  ForRows(ws, n_rows, width, [&](int64_t i) { GeluInPlace(kernels_, x + i * width, width); });
}

void CpuBackend::Relu(float* x, int n_rows, int width, Workspace& ws) const {
  ForRows(ws, n_rows, width, [&](int64_t i) {
    float* row = x + i * width;
    for (int j = 0; j < width; ++j) row[j] = row[j] > 0.0f ? row[j] : 0.0f;
  });
}

void CpuBackend::GeGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const {
  ForRows(ws, n_rows, width, [&](int64_t i) {
    float* g = gate + i * width;
    const float* u = up + i * width;
    GeluInPlace(kernels_, g, width);
    for (int j = 0; j < width; ++j) g[j] *= u[j];
  });
}

void CpuBackend::Scale(float* x, int n_rows, int width, float factor, Workspace& ws) const {
  ForRows(ws, n_rows, width, [&](int64_t i) {
    float* row = x + i * width;
    for (int j = 0; j < width; ++j) row[j] *= factor;
  });
}

void CpuBackend::SoftCap(float* x, int n_rows, int width, float cap, Workspace& ws) const {
  const float inv_cap = 1.0f / cap;
  ForRows(ws, n_rows, width, [&](int64_t i) {
    float* row = x + i * width;
    for (int j = 0; j < width; ++j) row[j] = std::tanh(row[j] * inv_cap) * cap;
  });
}

void CpuBackend::StoreKv(const KvLayerView& kv, std::span<const int64_t> slots, const float* k,
                         const float* v, size_t stride, Workspace& ws) const {
  ForRows(ws, static_cast<int>(slots.size()), static_cast<int>(kv.row_elements()),
          [&](int64_t i) { kvserve::StoreKv(kv, slots[i], k + i * stride, v + i * stride); });
}

// Every (query head, token) pair is computed alone, in position order, so the order and grouping
// below change no bits. Decoding (one token per sequence), units are (token, query head),
// token-major, and a thread's consecutive heads of one token go to attend_group together: one pass
// over the token's slots for all of them, not one per KV head over a part of each slot. A prompt's
// units are (KV head, token), head-major, and a unit's query heads (those that share the KV head)
// go to attend_group together, so each key and value row is read once for all of them; one KV
// head's keys and values stay in cache across the tokens that read them, and every thread gets
// whole heads of the same cost; within a head, a prompt's later tokens attend over more keys, so
// tokens are dealt in the order 0, n-1, 1, n-2, ...: a head split between two threads still splits
// evenly.
// Token i reads keys KeysOf(batch, params, i) (backend.h).
void CpuBackend::PagedAttention(const KvLayerView& kv, const AttentionBatch& batch, const float* q,
                                int n_heads, const AttentionParams& params, float* out,
                                Workspace& ws) const {
  CpuWorkspace& cpu = Cpu(ws);
  const int head_dim = kv.head_dim;
  const int group = n_heads / kv.n_kv_heads;
  const int n_tokens = static_cast<int>(batch.positions.size());
  const bool token_major = batch.block_tables.size() == static_cast<size_t>(n_tokens);
  int max_keys = 0;
  int64_t cost = 0;
  for (int i = 0; i < n_tokens; ++i) {
    const AttentionKeys keys = KeysOf(batch, params, i);
    const int n_keys = keys.end - keys.first;
    max_keys = std::max(max_keys, n_keys);
    cost += static_cast<int64_t>(n_keys) * head_dim * n_heads * 2;
  }
  const int max_jobs = std::min<int>(token_major ? n_heads : group, kMaxAttendGroup);
  const size_t per_job = AttentionScratchFloats(max_keys, head_dim);
  const size_t per_thread = per_job * max_jobs;
  if (cpu.attention.size() < per_thread * cpu.pool.size()) {
    cpu.attention.resize(per_thread * cpu.pool.size());
  }
  auto job_of = [&](int i, int h, float* scratch) {
    const AttentionKeys keys = KeysOf(batch, params, i);
    const size_t offset = (static_cast<size_t>(i) * n_heads + h) * head_dim;
    const float* bias = nullptr;
    if (params.position_bias != nullptr) {
      bias = params.position_bias + static_cast<ptrdiff_t>(h) * params.bias_width +
             params.bias_zero + (keys.first - batch.positions[i]);
    }
    return AttentionJob(kv, q + offset, h / group, batch.block_tables[batch.seq_index[i]].data(),
                        keys.end, params.scale, out + offset, scratch,
                        {.first_key = keys.first,
                         .soft_cap = params.soft_cap,
                         .sink = params.sinks != nullptr ? params.sinks[h] : -INFINITY,
                         .bias = bias});
  };
  const int64_t n_units = static_cast<int64_t>(n_tokens) * (token_major ? n_heads : kv.n_kv_heads);
  cpu.pool.ParallelFor(
      n_units,
      [&](int64_t begin, int64_t end, int thread) {
        float* scratch = cpu.attention.data() + per_thread * thread;
        // Query heads [h0, h0 + n_jobs) of token i, in one attend_group call.
        const auto attend = [&](int i, int h0, int n_jobs) {
          AttendJob jobs[kMaxAttendGroup];
          for (int j = 0; j < n_jobs; ++j) jobs[j] = job_of(i, h0 + j, scratch + per_job * j);
          kernels_.attend_group(std::span<const AttendJob>(jobs, n_jobs));
        };
        if (!token_major) {
          for (int64_t unit = begin; unit < end; ++unit) {
            const int kv_head = static_cast<int>(unit / n_tokens);
            const int dealt = static_cast<int>(unit % n_tokens);
            const int i = dealt % 2 == 0 ? dealt / 2 : n_tokens - 1 - dealt / 2;
            for (int h0 = kv_head * group; h0 < (kv_head + 1) * group; h0 += max_jobs) {
              attend(i, h0, std::min(max_jobs, (kv_head + 1) * group - h0));
            }
          }
          return;
        }
        for (int64_t unit = begin; unit < end;) {
          const int h = static_cast<int>(unit % n_heads);
          const int n_jobs =
              static_cast<int>(std::min<int64_t>({end - unit, n_heads - h, max_jobs}));
          attend(static_cast<int>(unit / n_heads), h, n_jobs);
          unit += n_jobs;
        }
      },
      cost);
}

// Routing is a few exps per expert and row: inline, one probability scratch for all the rows.
void CpuBackend::RouteTopK(const float* logits, int n_rows, int n_expert, int k, int32_t* ids,
                           float* weights, Workspace&) const {
  std::vector<double> probs(n_expert);
  for (int i = 0; i < n_rows; ++i) {
    const size_t row = static_cast<size_t>(i);
    kvserve::RouteTopK(logits + row * n_expert, n_expert, k, probs.data(), ids + row * k,
                       weights + row * k);
  }
}

// A counting sort of the (row, j) entries by expert: stable, so each expert's rows ascend.
void CpuBackend::GroupByExpert(std::span<const int32_t> ids, int k, int n_expert,
                               ExpertGroups& g) const {
  const size_t n = ids.size();
  g.begin.assign(n_expert + 1, 0);
  for (size_t i = 0; i < n; ++i) ++g.begin[ids[i] + 1];
  for (int e = 0; e < n_expert; ++e) g.begin[e + 1] += g.begin[e];
  g.cursor.assign(g.begin.begin(), g.begin.end() - 1);
  g.rows.resize(n);
  g.slots.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int32_t at = g.cursor[ids[i]]++;
    g.rows[at] = static_cast<int32_t>(i / k);
    g.slots[at] = static_cast<int32_t>(i);
  }
}

void CpuBackend::ScatterRows(const float* src, int width, std::span<const int32_t> rows,
                             size_t dst_stride, float* dst, Workspace& ws) const {
  for (size_t i = 0; i < rows.size(); ++i) {
    std::memcpy(dst + rows[i] * dst_stride, src + i * width, sizeof(float) * width);
  }
}

void CpuBackend::AddWeightedRows(float* x, const float* src, const float* weights, int n_rows,
                                 int k, int width, Workspace& ws) const {
  ForRows(ws, n_rows, width * k, [&](int64_t i) {
    AddWeightedSum(x + i * width, src + i * k * width, weights + i * k, k, width);
  });
}

void CpuBackend::ShortConv(const float* x, size_t x_stride, int channels, const float* weight,
                           int kernel, std::span<const RecurrentRun> runs, float* out,
                           Workspace& ws) const {
  ShortConvRuns({.x = x,
                 .x_stride = x_stride,
                 .channels = channels,
                 .weight = weight,
                 .kernel = kernel,
                 .out = out},
                runs, kernels_, Cpu(ws).pool);
}

void CpuBackend::GatedDeltaNet(const float* qkv, size_t qkv_stride, const float* g,
                               const float* beta, int n_k_heads, int n_v_heads, int head_dim,
                               float eps, std::span<const RecurrentRun> runs, float* out,
                               Workspace& ws) const {
  GatedDeltaNetRuns({.qkv = qkv,
                     .qkv_stride = qkv_stride,
                     .g = g,
                     .beta = beta,
                     .n_k_heads = n_k_heads,
                     .n_v_heads = n_v_heads,
                     .head_dim = head_dim,
                     .eps = eps,
                     .out = out,
                     .chunk = delta_chunk_},
                    runs, kernels_, Cpu(ws).delta_net, Cpu(ws).pool);
}

void CpuBackend::DeltaNetGates(const float* alpha, const float* beta_in, const float* dt_bias,
                               const float* a, int n_rows, int n_heads, float* g, float* beta,
                               Workspace& ws) const {
  ForRows(ws, n_rows, n_heads * 4, [&](int64_t i) {
    const size_t at = static_cast<size_t>(i) * n_heads;
    DeltaNetGatesRow(alpha + at, beta_in + at, dt_bias, a, n_heads, g + at, beta + at);
  });
}

void CpuBackend::SigmoidGate(float* x, const float* gate, size_t gate_stride, int n_rows, int width,
                             Workspace& ws) const {
  ForRows(ws, n_rows, width,
          [&](int64_t i) { SigmoidGateRow(x + i * width, gate + i * gate_stride, width); });
}

void CpuBackend::SigmoidScaleRows(float* x, const float* gate, int n_rows, int width,
                                  Workspace& ws) const {
  ForRows(ws, n_rows, width, [&](int64_t i) { SigmoidScaleRow(x + i * width, gate[i], width); });
}

}  // namespace kvserve
