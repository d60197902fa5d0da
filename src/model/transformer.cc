#include "model/transformer.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/packed_weights.h"
#include "kernels/quantize.h"
#include "model/hf_folder.h"
#include "model/weight_packing.h"

namespace kvserve {

namespace {
void Grow(AlignedFloats& buffer, size_t n) {
  if (buffer.size() < n) buffer.resize(n);
}

// Rough work of one pass of row-wise operations over n tokens, for ThreadPool::ParallelFor.
int64_t RowCost(int n, const ModelConfig& c) {
  return static_cast<int64_t>(n) * (c.n_embd + c.n_ff) * 8;
}
}  // namespace

Result<std::unique_ptr<Transformer>> Transformer::Load(const std::string& path) {
  auto file = HfFolder::IsFolder(path) ? HfFolder::Open(path) : GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return FromGguf(std::move(file).value());
}

Result<std::unique_ptr<Transformer>> Transformer::FromGguf(GgufFile file) {
  auto config = ModelConfig::FromGguf(file);
  if (!config.ok()) return config.status();
  auto weights = ModelWeights::FromGguf(file, *config);
  if (!weights.ok()) return weights.status();
  std::unique_ptr<Transformer> model(new Transformer());
  model->file_ = std::move(file);
  model->config_ = std::move(config).value();
  model->weights_ = std::move(weights).value();
  model->kernels_ = &ActiveKernels();
  // KVSERVE_PACK=0 keeps the stored layout (to compare; the results are the same bits).
  const char* pack = std::getenv("KVSERVE_PACK");
  if (pack == nullptr || std::string_view(pack) != "0") {
    PackWeights(*model->kernels_, model->file_, model->weights_);
  }
  return model;
}

void Transformer::MatmulInto(const WeightMatrix& w, const float* x, int m, float* y,
                             ForwardScratch& s, ThreadPool& pool) const {
  Matmul(*kernels_, w, x, m, y, s.matmul, pool);
}

// A tied embedding whose output copy was packed reads its rows back from the packed copy: the
// stored pages were released after packing and stay out of memory.
void Transformer::Embed(const ForwardBatch& batch, float* x, float* tmp,
                        std::vector<uint8_t>& row_bytes) const {
  const int n_embd = config_.n_embd;
  const WeightMatrix& tok = weights_.token_embd;
  const WeightMatrix& out = weights_.output;
  const bool from_packed = out.packed != nullptr && out.data == tok.data;
  if (from_packed && row_bytes.size() < tok.row_bytes) row_bytes.resize(tok.row_bytes);
  for (int i = 0; i < batch.n_tokens(); ++i) {
    float* row = x + static_cast<size_t>(i) * n_embd;
    const uint8_t* stored = tok.data + tok.row_bytes * batch.tokens[i];
    if (from_packed) {
      UnpackRow(out.type, out.packed, out.n_in, batch.tokens[i], row_bytes.data());
      stored = row_bytes.data();
    }
    DequantizeRow(tok.type, stored, n_embd, row);
    if (config_.arch == Architecture::kGpt2) {
      const WeightMatrix& pos = weights_.position_embd;
      DequantizeRow(pos.type, pos.data + pos.row_bytes * batch.positions[i], n_embd, tmp);
      AddInPlace(row, tmp, n_embd);
    }
  }
}

// s.q: [n_tokens, n_heads*head_dim] (roped), K/V already stored. Writes s.attn, same shape as q.
// Work is split by (head, token) units; each unit is computed alone, in position order. Units are
// head-major, so one KV head's keys and values stay in cache across the tokens that read them, and
// every thread gets whole heads of the same cost. Within a head, a prompt's later tokens attend
// over more keys, so tokens are dealt in the order 0, n-1, 1, n-2, ...: a head split between two
// threads still splits evenly.
void Transformer::Attention(const ForwardBatch& batch, const KvLayerView& kv, ForwardScratch& s,
                            ThreadPool& pool) const {
  const int n_heads = config_.n_heads;
  const int head_dim = config_.head_dim;
  const int group = n_heads / config_.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  int max_keys = 0;
  int64_t cost = 0;
  for (int32_t pos : batch.positions) {
    max_keys = std::max(max_keys, pos + 1);
    cost += static_cast<int64_t>(pos + 1) * head_dim * n_heads * 2;
  }
  const size_t per_thread = AttentionScratchFloats(max_keys, head_dim);
  Grow(s.attn_tmp, per_thread * pool.size());
  const int64_t n_units = static_cast<int64_t>(batch.n_tokens()) * n_heads;
  pool.ParallelFor(
      n_units,
      [&](int64_t begin, int64_t end, int thread) {
        float* scratch = s.attn_tmp.data() + per_thread * thread;
        for (int64_t unit = begin; unit < end; ++unit) {
          const int h = static_cast<int>(unit / batch.n_tokens());
          const int dealt = static_cast<int>(unit % batch.n_tokens());
          const int i = dealt % 2 == 0 ? dealt / 2 : batch.n_tokens() - 1 - dealt / 2;
          const size_t offset = (static_cast<size_t>(i) * n_heads + h) * head_dim;
          AttendHead(*kernels_, kv, s.q.data() + offset, h / group,
                     batch.block_tables[batch.seq_index[i]].data(), batch.positions[i] + 1, scale,
                     s.attn.data() + offset, scratch);
        }
      },
      cost);
}

void Transformer::LlamaLayer(int il, const ForwardBatch& batch, const KvLayerView& kv,
                             ForwardScratch& s, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[il];
  const int n = batch.n_tokens();
  const int q_dim = c.n_heads * c.head_dim;
  const int kv_dim = c.n_kv_heads * c.head_dim;
  const int64_t row_cost = RowCost(n, c);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          RmsNorm(s.x.data() + i * c.n_embd, w.attn_norm.data(), c.n_embd, c.norm_eps,
                  s.xn.data() + i * c.n_embd);
        }
      },
      row_cost);
  MatmulInto(w.wq, s.xn.data(), n, s.q.data(), s, pool);
  MatmulInto(w.wk, s.xn.data(), n, s.k.data(), s, pool);
  MatmulInto(w.wv, s.xn.data(), n, s.v.data(), s, pool);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          float* q = s.q.data() + i * q_dim;
          float* k = s.k.data() + i * kv_dim;
          RopeInPlace(q, c.n_heads, c.head_dim, c.rope_dims, batch.positions[i], c.rope_freq_base);
          RopeInPlace(k, c.n_kv_heads, c.head_dim, c.rope_dims, batch.positions[i],
                      c.rope_freq_base);
          StoreKv(kv, batch.slots[i], k, s.v.data() + i * kv_dim);
        }
      },
      row_cost);
  Attention(batch, kv, s, pool);
  MatmulInto(w.wo, s.attn.data(), n, s.proj.data(), s, pool);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          float* x = s.x.data() + i * c.n_embd;
          AddInPlace(x, s.proj.data() + i * c.n_embd, c.n_embd);
          RmsNorm(x, w.ffn_norm.data(), c.n_embd, c.norm_eps, s.xn.data() + i * c.n_embd);
        }
      },
      row_cost);
  MatmulInto(w.w_gate, s.xn.data(), n, s.ff_gate.data(), s, pool);
  MatmulInto(w.w_up, s.xn.data(), n, s.ff_up.data(), s, pool);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          SwiGluInPlace(*kernels_, s.ff_gate.data() + i * c.n_ff, s.ff_up.data() + i * c.n_ff,
                        c.n_ff);
        }
      },
      row_cost);
  MatmulInto(w.w_down, s.ff_gate.data(), n, s.proj.data(), s, pool);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          AddInPlace(s.x.data() + i * c.n_embd, s.proj.data() + i * c.n_embd, c.n_embd);
        }
      },
      row_cost);
}

void Transformer::Gpt2Layer(int il, const ForwardBatch& batch, const KvLayerView& kv,
                            ForwardScratch& s, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[il];
  const int n = batch.n_tokens();
  const int e = c.n_embd;
  const int64_t row_cost = RowCost(n, c);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          LayerNorm(s.x.data() + i * e, w.attn_norm.data(), w.attn_norm_bias.data(), e, c.norm_eps,
                    s.xn.data() + i * e);
        }
      },
      row_cost);
  MatmulInto(w.wqkv, s.xn.data(), n, s.qkv.data(), s, pool);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          float* qkv = s.qkv.data() + i * 3 * e;
          AddInPlace(qkv, w.bqkv.data(), 3 * e);
          std::memcpy(s.q.data() + i * e, qkv, sizeof(float) * e);
          StoreKv(kv, batch.slots[i], qkv + e, qkv + 2 * e);
        }
      },
      row_cost);
  Attention(batch, kv, s, pool);
  MatmulInto(w.wo, s.attn.data(), n, s.proj.data(), s, pool);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          float* x = s.x.data() + i * e;
          AddInPlace(s.proj.data() + i * e, w.bo.data(), e);
          AddInPlace(x, s.proj.data() + i * e, e);
          LayerNorm(x, w.ffn_norm.data(), w.ffn_norm_bias.data(), e, c.norm_eps,
                    s.xn.data() + i * e);
        }
      },
      row_cost);
  MatmulInto(w.w_up, s.xn.data(), n, s.ff_up.data(), s, pool);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          float* ff = s.ff_up.data() + i * c.n_ff;
          AddInPlace(ff, w.b_up.data(), c.n_ff);
          GeluInPlace(*kernels_, ff, c.n_ff);
        }
      },
      row_cost);
  MatmulInto(w.w_down, s.ff_up.data(), n, s.proj.data(), s, pool);
  pool.ParallelFor(
      n,
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          AddInPlace(s.proj.data() + i * e, w.b_down.data(), e);
          AddInPlace(s.x.data() + i * e, s.proj.data() + i * e, e);
        }
      },
      row_cost);
}

void Transformer::Forward(const ForwardBatch& batch, std::span<const KvLayerView> kv,
                          ForwardScratch& s, ThreadPool& pool, float* logits) const {
  const ModelConfig& c = config_;
  const size_t n = batch.n_tokens();
  assert(kv.size() == static_cast<size_t>(c.n_layers));
  const size_t q_dim = static_cast<size_t>(c.n_heads) * c.head_dim;
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  Grow(s.x, n * c.n_embd);
  Grow(s.xn, n * c.n_embd);
  Grow(s.proj, n * c.n_embd);
  Grow(s.q, n * q_dim);
  Grow(s.attn, n * q_dim);
  Grow(s.k, n * kv_dim);
  Grow(s.v, n * kv_dim);
  Grow(s.ff_up, n * c.n_ff);
  if (c.arch == Architecture::kLlama) Grow(s.ff_gate, n * c.n_ff);
  if (c.arch == Architecture::kGpt2) Grow(s.qkv, n * 3 * c.n_embd);

  Embed(batch, s.x.data(), s.xn.data(), s.embd_row);
  for (int il = 0; il < c.n_layers; ++il) {
    if (c.arch == Architecture::kLlama) {
      LlamaLayer(il, batch, kv[il], s, pool);
    } else {
      Gpt2Layer(il, batch, kv[il], s, pool);
    }
  }
  const size_t n_out = batch.logit_rows.size();
  if (n_out == 0) return;
  Grow(s.logits_in, n_out * c.n_embd);
  for (size_t r = 0; r < n_out; ++r) {
    const float* x = s.x.data() + static_cast<size_t>(batch.logit_rows[r]) * c.n_embd;
    float* out = s.logits_in.data() + r * c.n_embd;
    if (c.arch == Architecture::kLlama) {
      RmsNorm(x, weights_.output_norm.data(), c.n_embd, c.norm_eps, out);
    } else {
      LayerNorm(x, weights_.output_norm.data(), weights_.output_norm_bias.data(), c.n_embd,
                c.norm_eps, out);
    }
  }
  MatmulInto(weights_.output, s.logits_in.data(), static_cast<int>(n_out), logits, s, pool);
}

}  // namespace kvserve
