// The seam below the models: every operation a forward pass is built from, on memory the backend
// owns. A model holds the backend it was loaded for and calls only these; today's CPU kernels,
// ISA tables and thread pool live behind it in cpu/, and a CUDA backend can later implement the
// same interface with device memory without touching the models or the engine.
//
// Conventions: activations are row-major float32 rows of `width` elements, `n_rows` rows one after
// another unless a stride is given; they live in a Workspace of this backend. Every operation is
// row-wise deterministic (design.md, batch invariance): a row's result depends only on that row's
// inputs, never on n_rows or the thread split. Logits (Forward's output) are host memory.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/ggml_type.h"
#include "io/gguf_reader.h"
#include "kernels/backend_checks.h"
#include "kernels/weight_matrix.h"
#include "kv/kv_layer_view.h"
#include "util/buffer.h"

namespace kvserve {

// Where attention finds each query's keys: per token its position and sequence, per sequence its
// block table (physical block of each logical block, covering positions 0..max position).
struct AttentionBatch {
  std::span<const int32_t> positions;                  // [n_tokens]
  std::span<const int32_t> seq_index;                  // [n_tokens], index into block_tables
  std::span<const std::vector<int32_t>> block_tables;  // [n_sequences]
  // Non-causal attention (an encoder's self-attention, a decoder's cross-attention): when set,
  // every query of sequence s reads keys 0 .. key_counts[s] - 1 whatever its position (at least
  // one); empty = causal, a query at position p reads keys up to p.
  std::span<const int32_t> key_counts = {};
};

// A forward pass's execution context: buffers that grow to the largest batch seen and are then
// reused (steady decoding allocates nothing), and whatever the backend runs work on (the CPU
// backend: a thread pool and per-thread kernel scratch). One per runner; not shared between
// threads. Made by Backend::NewWorkspace.
class Workspace {
 public:
  virtual ~Workspace() = default;
  // At least n floats for buffer `id` (a small index chosen by the model), 64-byte aligned; the
  // contents survive until the next call with a larger n for that id. They are the backend's
  // memory: the operations read and write them; the host does through the backend's allocator
  // (BufferAllocator::CopyToHost, CopyFromHost), since a device backend may not have run the
  // operations recorded on them yet. KV pools are read and written the same way.
  virtual float* Floats(int id, size_t n) = 0;

  // What the workspace's threads have done since it was made, for profiles (zeros for a backend
  // without worker threads).
  struct Counters {
    uint64_t parallel_jobs = 0;  // jobs handed to worker threads
    double wait_seconds = 0;     // the calling thread's wait for the workers after its own part
    uint64_t worker_sleeps = 0;  // times a worker found no job while it spun and went to sleep
    // A device backend's: operations recorded on the device, and the times the host submitted
    // them and waited (zeros for the CPU backend).
    uint64_t device_dispatches = 0;
    uint64_t device_waits = 0;
  };
  virtual Counters counters() const { return {}; }
  // How many threads the workspace runs work on (1 for a backend without worker threads).
  virtual int threads() const { return 1; }
};

// How RoPE pairs a head's first rope_dims values and how fast each pair turns: pair i turns by
// pos * position_scale * freq_base^(-2i / rope_dims) / freq_factors[i] (YaRN: see RopeYarn).
enum class RopeMode {
  kInterleaved,  // pairs (2i, 2i+1): GGML "normal" (llama)
  kSplitHalves,  // pairs (i, i + rope_dims/2): GGML "neox" (qwen2, qwen3, phi3, gemma)
};
struct RopeParams {
  int rope_dims = 0;
  float freq_base = 10000.0f;
  RopeMode mode = RopeMode::kInterleaved;
  const float* freq_factors = nullptr;  // [rope_dims / 2] divisors (Llama 3 rope_freqs), or none
  float position_scale = 1.0f;          // 1 / rope.scaling.factor for linear and YaRN scaling
  // YaRN (ggml's rope_yarn), when ext_factor != 0: pair i's angle is the interpolated angle
  // (position_scale * theta) mixed with the extrapolated one (theta) by ramp(i) * ext_factor,
  // ramp(i) = 1 - clamp((i - corr_low) / max(0.001, corr_high - corr_low), 0, 1), so the fast
  // pairs (i < corr_low) keep their angle and the slow ones (i > corr_high) are interpolated.
  float ext_factor = 0.0f;
  float corr_low = 0.0f;   // pair index (floor, >= 0)
  float corr_high = 0.0f;  // pair index (ceil, <= rope_dims - 1)
  // cos and sin are multiplied by it (YaRN's attention magnitude); 1 is exact, so plain RoPE is
  // unchanged.
  float mscale = 1.0f;
};

// How a query attends to its keys: scores = scale * q · k, then optionally soft-capped, over the
// last `window` positions (a sliding window) or all of them.
struct AttentionParams {
  float scale = 1.0f;
  int window = 0;         // keys pos - window + 1 .. pos (those >= 0); 0 = keys 0 .. pos
  float soft_cap = 0.0f;  // scores s -> tanh(s / soft_cap) * soft_cap before the softmax; 0 = none
  // Learned attention sinks (gpt-oss): per query head, a logit that joins the softmax's
  // denominator without a value, so a head may attend to nothing. [n_heads]; nullptr = none.
  const float* sinks = nullptr;
  // A bias added to every scaled score by the key's distance from the query (T5's relative
  // position buckets, looked up once per batch): head h's bias for key position k and query
  // position q is position_bias[h * bias_width + bias_zero + (k - q)]; the table covers every
  // distance the batch reads. nullptr = none.
  const float* position_bias = nullptr;
  int bias_width = 0;
  int bias_zero = 0;
};

// The keys token i of a batch reads, [first, end): every backend's rule. Non-causal: the
// sequence's key count; causal: up to its position, from the window's first key.
struct AttentionKeys {
  int first = 0;
  int end = 0;
};
inline AttentionKeys KeysOf(const AttentionBatch& batch, const AttentionParams& params, size_t i) {
  if (!batch.key_counts.empty()) return {0, batch.key_counts[batch.seq_index[i]]};
  const int position = batch.positions[i];
  return {params.window > 0 ? std::max(0, position - params.window + 1) : 0, position + 1};
}

// Which rows each expert of a mixture serves this step (Backend::GroupByExpert): expert e's rows
// are rows[begin[e] .. begin[e+1]) (ascending), and slots[] the same entries' places
// row * k + j among RouteTopK's ids. Host memory; reused from step to step.
struct ExpertGroups {
  std::vector<int32_t> begin;   // [n_expert + 1]
  std::vector<int32_t> rows;    // [n_rows * k]
  std::vector<int32_t> slots;   // [n_rows * k]
  std::vector<int32_t> cursor;  // [n_expert], scratch

  int rows_of(int expert) const { return begin[expert + 1] - begin[expert]; }
};

// One run of consecutive tokens of one sequence through a recurrent layer (ShortConv,
// GatedDeltaNet): batch rows [row_begin, row_end), whose state starts as *from (nullptr: zeros;
// from == to: in place) and is left in *to. The runs of one sequence follow each other in the
// list, a later run's `from` being an earlier run's `to`; the backend keeps that order for every
// head and channel (it may split heads/channels between threads, never a sequence's runs).
// `from` may be memory other sequences read too (a cached checkpoint): it is only read, unless
// from == to. States live in memory of the backend (Workspace or allocator()).
struct RecurrentRun {
  int row_begin = 0;
  int row_end = 0;
  const float* from = nullptr;
  float* to = nullptr;
};

struct WorkspaceOptions {
  int n_threads = 0;  // 0 = one per core
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu-avx512", ...: the backend's registry name (backend_registry.h) and its kernel set.
  virtual std::string name() const = 0;
  // The kernels in use within the backend: the CPU's ISA table ("avx2"), a GPU's device.
  virtual std::string kernel_set() const = 0;
  // What the hardware offers the backend, one line: the CPU's vector extensions ("avx2 yes,
  // avxvnni no, avx512 no"), a GPU's name and memory.
  virtual std::string device() const = 0;
  // What the backend chose by timing on this machine so far (the CPU: decode tiles), one line
  // per choice; "" when nothing.
  virtual std::string TuningReport() const { return {}; }
  virtual BufferAllocator& allocator() const = 0;
  virtual std::unique_ptr<Workspace> NewWorkspace(const WorkspaceOptions& options) const = 0;
  // Called once at load with every matrix the model multiplies and every vector its forward reads
  // (norm weights, biases, RoPE divisors), each once; the backend may give each matrix a copy in
  // its own layout (WeightMatrix::packed) and each vector a copy in its own memory
  // (WeightVector::prepared), owned by `storage`. Returns the bytes prepared.
  virtual size_t PrepareWeights(std::span<WeightMatrix* const> matrices,
                                std::span<WeightVector* const> vectors, const GgufFile& file,
                                std::shared_ptr<uint8_t>& storage) const = 0;

  // y[n_rows, n_out] = x[n_rows, n_in] · Wᵀ.
  virtual void Matmul(const WeightMatrix& w, const float* x, int n_rows, float* y,
                      Workspace& ws) const = 0;
  // ys[i][n_rows, n_out of matrix i] = x · matrices[i]ᵀ for matrices that read the same input (the
  // q, k and v projections; gate and up): the bits of one Matmul per matrix, which is what this
  // default does; a backend may run them as one job.
  virtual void MatmulSameInput(std::span<const WeightMatrix* const> matrices, const float* x,
                               int n_rows, std::span<float* const> ys, Workspace& ws) const {
    for (size_t i = 0; i < matrices.size(); ++i) Matmul(*matrices[i], x, n_rows, ys[i], ws);
  }
  // out[i] = row rows[i] of `table` as float32.  out: [rows.size(), table.n_in]
  virtual void GetRows(const WeightMatrix& table, std::span<const int32_t> rows, float* out,
                       Workspace& ws) const = 0;
  // dst row i = src row rows[i].  src rows `src_stride` floats apart; dst contiguous.
  virtual void GatherRows(const float* src, size_t src_stride, std::span<const int32_t> rows,
                          int width, float* dst, Workspace& ws) const = 0;
  // dst row i = src row i, src rows `src_stride` floats apart; dst contiguous.
  virtual void CopyRows(const float* src, size_t src_stride, int n_rows, int width, float* dst,
                        Workspace& ws) const = 0;
  // x row i += y row i.
  virtual void Add(float* x, const float* y, int n_rows, int width, Workspace& ws) const = 0;
  // x row i += bias (x rows `stride` floats apart).
  virtual void AddBias(float* x, size_t stride, const float* bias, int n_rows, int width,
                       Workspace& ws) const = 0;
  // out = x / sqrt(mean(x²) + eps) * weight, per row.
  virtual void RmsNorm(const float* x, const float* weight, int n_rows, int width, float eps,
                       float* out, Workspace& ws) const = 0;
  // out = (x - mean) / sqrt(var + eps) * weight + bias, per row.
  virtual void LayerNorm(const float* x, const float* weight, const float* bias, int n_rows,
                         int width, float eps, float* out, Workspace& ws) const = 0;
  // Rotary embedding of row i at positions[i] (see RopeParams).  x: [n_rows, n_heads, head_dim]
  virtual void Rope(float* x, std::span<const int32_t> positions, int n_heads, int head_dim,
                    const RopeParams& rope, Workspace& ws) const = 0;
  // gate = silu(gate) * up, per row.
  virtual void SwiGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const = 0;
  // gpt-oss's clamped SwiGLU (ggml_swiglu_oai): with g = min(gate, limit) and
  // u = clamp(up, -limit, limit), gate = g / (1 + exp(-alpha * g)) * (u + 1), per row.
  virtual void SwiGluOai(float* gate, const float* up, int n_rows, int width, float alpha,
                         float limit, Workspace& ws) const = 0;
  // GELU (tanh form, through GGML's f16 table), in place.
  virtual void Gelu(float* x, int n_rows, int width, Workspace& ws) const = 0;
  // x = x > 0 ? x : 0 elementwise (T5's feed-forward; -0 and NaN become 0, as in ggml).
  virtual void Relu(float* x, int n_rows, int width, Workspace& ws) const = 0;
  // gate = Gelu(gate) * up, per row (GeGLU, gemma's gated feed-forward).
  virtual void GeGlu(float* gate, const float* up, int n_rows, int width, Workspace& ws) const = 0;
  // x *= factor, per row (gemma's embedding scale).
  virtual void Scale(float* x, int n_rows, int width, float factor, Workspace& ws) const = 0;
  // x = tanh(x * (1 / cap)) * cap, per row (gemma2's final logit soft-capping).
  virtual void SoftCap(float* x, int n_rows, int width, float cap, Workspace& ws) const = 0;
  // Writes token i's K and V rows (n_kv_heads * head_dim floats, rows `stride` floats apart) to
  // slots[i] of `kv`, rounding to the KV type.
  virtual void StoreKv(const KvLayerView& kv, std::span<const int64_t> slots, const float* k,
                       const float* v, size_t stride, Workspace& ws) const = 0;
  // out row i = causal attention of query row i (n_heads heads of head_dim) over positions
  // 0..positions[i] of its sequence in `kv` (the last params.window of them with a window), with
  // KV head h / (n_heads / n_kv_heads). A window reads only the window's keys.
  virtual void PagedAttention(const KvLayerView& kv, const AttentionBatch& batch, const float* q,
                              int n_heads, const AttentionParams& params, float* out,
                              Workspace& ws) const = 0;

  // Mixture of experts. Routing, per row: softmax over its n_expert logits, its k most probable
  // experts by decreasing probability (lowest index first on equal probability), their
  // probabilities divided by their sum. ids and weights are host memory (GroupByExpert reads
  // the ids).  logits: [n_rows, n_expert]; ids, weights: [n_rows, k]
  virtual void RouteTopK(const float* logits, int n_rows, int n_expert, int k, int32_t* ids,
                         float* weights, Workspace& ws) const = 0;
  // The rows each expert serves (ExpertGroups), from RouteTopK's ids.  ids: [n_rows * k]
  virtual void GroupByExpert(std::span<const int32_t> ids, int k, int n_expert,
                             ExpertGroups& groups) const = 0;
  // dst row rows[i] = src row i.  src contiguous; dst rows `dst_stride` floats apart.
  virtual void ScatterRows(const float* src, int width, std::span<const int32_t> rows,
                           size_t dst_stride, float* dst, Workspace& ws) const = 0;
  // x row i += Σ_j weights[i * k + j] · src row (i * k + j), the k products summed in j order,
  // then added (a row's sum never depends on the batch). weights: host memory, [n_rows, k];
  // src: [n_rows * k, width]
  virtual void AddWeightedRows(float* x, const float* src, const float* weights, int n_rows, int k,
                               int width, Workspace& ws) const = 0;

  // Recurrent layers (Qwen3.5's Gated DeltaNet), over the runs of a batch (RecurrentRun).
  // Short causal depthwise convolution then SiLU (ggml_ssm_conv, then ggml_silu): for row t of a
  // run, out[t][c] = silu(Σ_{j<kernel} weight[c * kernel + j] * x'[t + j][c]), summed in j order
  // from 0, where x' is the run's kernel-1 state rows followed by its rows of x. State of a run:
  // [kernel - 1, channels] floats, oldest row first; the run leaves in `to` the last kernel-1 rows
  // of x'. x: rows x_stride floats apart; out: [n_rows, channels] contiguous (row r of the batch
  // at out + r * channels); weight: [channels, kernel] (GGUF ssm_conv1d, dims {kernel, channels}).
  virtual void ShortConv(const float* x, size_t x_stride, int channels, const float* weight,
                         int kernel, std::span<const RecurrentRun> runs, float* out,
                         Workspace& ws) const = 0;
  // Gated delta rule (ggml_gated_delta_net, one snapshot), per run and value head h (key head
  // h % n_k_heads, as ggml's tiled repeat), per row t in order: q and k of the key head are
  // L2-normalized (x * (1 / max(sqrtf(Σ x²), eps)), Σ of the float squares in double in index
  // order, as ggml_l2_norm), then
  //   M *= expf(g[t][h]);  d[j] = (v[j] - M[j]·k) * beta[t][h];  M[j] += d[j] * k;
  //   out[t][h][j] = (M[j]·q) / sqrt(head_dim)   (as ggml: times 1 / sqrtf(head_dim))
  // M is the head's state, head_dim rows j (value index) of head_dim floats (key index,
  // contiguous); a run's state is [n_v_heads, head_dim, head_dim] floats. The dot products M[j]·k
  // and M[j]·q are summed in a fixed order (a row's result never depends on the batch or the
  // threads). qkv row r (qkv_stride floats apart): q [n_k_heads * head_dim], then k
  // [n_k_heads * head_dim], then v [n_v_heads * head_dim]. g, beta: [n_rows, n_v_heads];
  // out: [n_rows, n_v_heads * head_dim].
  virtual void GatedDeltaNet(const float* qkv, size_t qkv_stride, const float* g, const float* beta,
                             int n_k_heads, int n_v_heads, int head_dim, float eps,
                             std::span<const RecurrentRun> runs, float* out,
                             Workspace& ws) const = 0;
  // The delta rule's gates from their projections, per row and head h:
  // g = softplus(alpha + dt_bias[h]) * a[h] (softplus(x) = x > 20 ? x : logf(1 + expf(x)), as
  // ggml), beta = 1 / (1 + expf(-beta_in)). alpha, beta_in, g, beta: [n_rows, n_heads];
  // dt_bias, a: [n_heads].
  virtual void DeltaNetGates(const float* alpha, const float* beta_in, const float* dt_bias,
                             const float* a, int n_rows, int n_heads, float* g, float* beta,
                             Workspace& ws) const = 0;
  // x[r][i] *= 1 / (1 + expf(-gate[r * gate_stride + i])), per row (Qwen3.5's attention output
  // gate). x: [n_rows, width] contiguous.
  virtual void SigmoidGate(float* x, const float* gate, size_t gate_stride, int n_rows, int width,
                           Workspace& ws) const = 0;
  // x[r][i] *= 1 / (1 + expf(-gate[r])): one factor per row (Qwen3.5 MoE's shared-expert gate).
  // x: [n_rows, width] contiguous; gate: [n_rows].
  virtual void SigmoidScaleRows(float* x, const float* gate, int n_rows, int width,
                                Workspace& ws) const = 0;

  // Self-measurement and self-check (backend_checks.h), for `kvserve doctor` and `bench`.
  // Reads a buffer of `bytes` with every thread of ws: bytes per second.
  virtual Measurement MeasureReadBandwidth(uint64_t bytes, int repeats, Workspace& ws) const = 0;
  // Matmul of m rows against an n_out x n_in matrix of random `type` weights (not prepared):
  // FLOP per second, counting 2 * m * n_out * n_in.
  virtual Measurement MeasureMatmulFlops(GgmlType type, int m, int n_out, int n_in, int repeats,
                                         Workspace& ws) const = 0;
  // Each kernel the backend runs against its reference on small random inputs.
  virtual std::vector<KernelCheck> CheckKernels() const = 0;
};

}  // namespace kvserve
