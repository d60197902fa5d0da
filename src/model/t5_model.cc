#include "model/t5_model.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "kv/cross_attention_kind.h"
#include "model/architecture.h"
#include "model/decoder_blocks.h"
#include "model/t5_blocks.h"
#include "model/t5_position_bias.h"
#include "model/weight_loader.h"

namespace kvserve {

namespace {

struct T5EncoderLayer {
  WeightVector attn_norm, ffn_norm;  // [n_embd]
  WeightVector rel_b;                // [n_buckets][n_heads], or empty: layer 0's
  T5Projections attention;
  T5FeedForward ffn;
};

struct T5DecoderLayer {
  WeightVector attn_norm, cross_norm, ffn_norm;  // [n_embd]
  WeightVector rel_b;                            // as the encoder's
  T5Projections self, cross;
  T5FeedForward ffn;
};

// Both stacks' sublayers around attention: the start of self-attention (xn = RMSNorm(x) with
// `norm`; q, k, v its projections, k and v in the workspace buffers k_id and v_id) and the
// feed-forward sublayer (x += ffn(RMSNorm(x))).  x, xn: [n, n_embd]
struct QkvRows {
  float *q, *k, *v;  // [n, n_heads * head_dim], [n, n_kv_heads * head_dim] twice
};

QkvRows NormAndProject(const Backend& be, const ModelConfig& c, const WeightVector& norm,
                       const T5Projections& projections, int n, const float* x, float* xn, int k_id,
                       int v_id, Workspace& ws) {
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  const QkvRows rows{.q = ws.Floats(kQ, static_cast<size_t>(n) * c.n_heads * c.head_dim),
                     .k = ws.Floats(k_id, n * kv_dim),
                     .v = ws.Floats(v_id, n * kv_dim)};
  be.RmsNorm(x, norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
  projections.Project(be, xn, n, rows.q, rows.k, rows.v, ws);
  return rows;
}

// out: [n, n_embd] scratch.
void FeedForwardSublayer(const Backend& be, const ModelConfig& c, const WeightVector& norm,
                         const T5FeedForward& ffn, int n, float* x, float* xn, float* out,
                         Workspace& ws) {
  be.RmsNorm(x, norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
  ffn.Forward(be, c, n, xn, out, ws);
  be.Add(x, out, n, c.n_embd, ws);
}

// The self-attention keys of an encode batch: each sequence's K/V rows are its tokens' rows of
// the layer's K and V matrices (a cache of block size 1 over the workspace).
struct EncoderKeys {
  std::vector<int32_t> positions;            // [n_tokens], within the sequence's input
  std::vector<int32_t> seq_index;            // [n_tokens]
  std::vector<std::vector<int32_t>> tables;  // per sequence: its rows
  int max_length = 0;

  explicit EncoderKeys(const EncodeBatch& batch) {
    int row = 0;
    for (int s = 0; s < static_cast<int>(batch.lengths.size()); ++s) {
      std::vector<int32_t>& table = tables.emplace_back();
      for (int p = 0; p < batch.lengths[s]; ++p, ++row) {
        positions.push_back(p);
        seq_index.push_back(s);
        table.push_back(row);
      }
      max_length = std::max(max_length, batch.lengths[s]);
    }
  }
  AttentionBatch attention(const EncodeBatch& batch) const {
    return {.positions = positions,
            .seq_index = seq_index,
            .block_tables = tables,
            .key_counts = batch.lengths};
  }
};

class T5Model final : public Model {
 public:
  // encoder_only: a t5encoder file (no decoder tensors or keys).
  T5Model(GgufFile file, ModelConfig config, const Backend& backend, bool encoder_only)
      : Model(std::move(file), std::move(config), backend), encoder_only_(encoder_only) {}

  Status Load();

  KvSpec kv_spec() const override {
    KvSpec spec;
    if (encoder_only_) return spec;
    for (int g = 0; g < 2; ++g) {
      KvGroupSpec& group = spec.groups.emplace_back();
      if (g == 1) group.kind = CrossAttentionKind::Make();
      group.n_kv_heads = config_.n_kv_heads;
      group.head_dim = config_.head_dim;
      for (int il = 0; il < n_dec_; ++il) group.layers.push_back(g * n_dec_ + il);
    }
    return spec;
  }
  int cross_group() const override { return encoder_only_ ? -1 : 1; }
  int32_t decoder_start_token() const override { return encoder_only_ ? -1 : start_token_; }
  bool computes_embeddings() const override { return true; }
  void Embed(const EncodeBatch& batch, float* hidden, Workspace& ws) const override {
    if (batch.n_tokens() > 0) RunEncoder(batch, hidden, ws);
  }
  bool encoder_only() const override { return encoder_only_; }

  void Encode(const EncodeBatch& batch, KvCache& kv, Workspace& ws) const override;
  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws, float* logits) const override;

 private:
  Status ReadKeys();
  Status LoadLayers(const WeightLoader& r, WeightList& weights);
  // x += encoder layer il's sublayers.
  void EncoderLayer(int il, const EncodeBatch& batch, const EncoderKeys& keys,
                    const AttentionParams& params, float* x, float* xn, float* proj,
                    Workspace& ws) const;
  // encoded = the encoder's output over the batch's tokens (after its final norm): [n_tokens,
  // n_embd].
  void RunEncoder(const EncodeBatch& batch, float* encoded, Workspace& ws) const;
  void DecoderLayer(int il, const ForwardBatch& batch, KvCache& kv, const AttentionParams& params,
                    float* x, float* xn, float* proj, Workspace& ws) const;

  bool encoder_only_ = false;
  int n_dec_ = 0;
  int n_buckets_ = 0;
  int32_t start_token_ = 0;
  WeightMatrix token_embd_, own_output_;
  WeightMatrix* output_ = nullptr;
  WeightVector enc_norm_, dec_norm_;  // [n_embd]
  std::vector<T5EncoderLayer> enc_;
  std::vector<T5DecoderLayer> dec_;
};

Status T5Model::ReadKeys() {
  KVSERVE_RETURN_IF_ERROR(config_.ReadNormEps(file_, "attention.layer_norm_rms_epsilon"));
  const std::string prefix = config_.arch + ".";
  // Key `key` into *out when present (else *out stays), within [0, limit).
  auto read = [&](const std::string& key, bool required, int64_t limit, int* out) -> Status {
    if (file_.Find(prefix + key) == nullptr) {
      if (!required) return Status::Ok();
      return Status::InvalidArgument("t5: missing metadata key '" + prefix + key + "'");
    }
    auto value = file_.GetInt(prefix + key);
    if (!value.ok()) return value.status();
    if (*value < 0 || *value >= limit) {
      return Status::InvalidArgument("t5: '" + prefix + key + "' = " + std::to_string(*value) +
                                     " is outside [0, " + std::to_string(limit) + ")");
    }
    *out = static_cast<int>(*value);
    return Status::Ok();
  };
  KVSERVE_RETURN_IF_ERROR(read("attention.relative_buckets_count", true, 1 << 16, &n_buckets_));
  if (n_buckets_ < 4) {
    return Status::InvalidArgument("t5: '" + prefix + "attention.relative_buckets_count' = " +
                                   std::to_string(n_buckets_) + " (at least 4)");
  }
  if (encoder_only_) return Status::Ok();  // n_dec_ stays 0
  n_dec_ = config_.n_layers;
  KVSERVE_RETURN_IF_ERROR(read("decoder_block_count", false, 4096, &n_dec_));
  if (n_dec_ == 0) return Status::InvalidArgument("t5: '" + prefix + "decoder_block_count' = 0");
  // Without the key, llama.cpp's tools start from BOS (and T5's pad, 0, without one).
  start_token_ = 0;
  if (file_.Find("tokenizer.ggml.bos_token_id") != nullptr) {
    auto bos = file_.GetInt("tokenizer.ggml.bos_token_id");
    if (bos.ok() && *bos >= 0 && *bos < config_.n_vocab) start_token_ = static_cast<int>(*bos);
  }
  return read("decoder_start_token_id", false, config_.n_vocab, &start_token_);
}

Status T5Model::Load() {
  KVSERVE_RETURN_IF_ERROR(ReadKeys());
  const ModelConfig& c = config_;
  const WeightLoader r(file_);
  KVSERVE_RETURN_IF_ERROR(r.Matrix("token_embd.weight", c.n_vocab, c.n_embd, &token_embd_));
  KVSERVE_RETURN_IF_ERROR(r.Vector("enc.output_norm.weight", c.n_embd, &enc_norm_));
  WeightList weights{.matrices = {&token_embd_}, .vectors = {&enc_norm_}};
  if (!encoder_only_) {  // a t5encoder's output.weight, if any, is never read: not loaded
    output_ = &token_embd_;
    if (!c.tied_output) {
      KVSERVE_RETURN_IF_ERROR(r.Matrix("output.weight", c.n_vocab, c.n_embd, &own_output_));
      output_ = &own_output_;
      weights.matrices.push_back(output_);
    }
    KVSERVE_RETURN_IF_ERROR(r.Vector("dec.output_norm.weight", c.n_embd, &dec_norm_));
    weights.vectors.push_back(&dec_norm_);
  }
  KVSERVE_RETURN_IF_ERROR(LoadLayers(r, weights));
  DeclareWeights(weights);
  return Status::Ok();
}

Status T5Model::LoadLayers(const WeightLoader& r, WeightList& weights) {
  const ModelConfig& c = config_;
  auto load_rel_b = [&](const std::string& name, int il, WeightVector* out) -> Status {
    if (!r.Has(name)) {
      if (il == 0)
        return Status::InvalidArgument("t5: missing tensor '" + name + "' (layer 0 needs it)");
      return Status::Ok();
    }
    return r.Vector2d(name, c.n_heads, n_buckets_, out);
  };
  enc_ = std::vector<T5EncoderLayer>(c.n_layers);
  for (int il = 0; il < c.n_layers; ++il) {
    const std::string p = "enc.blk." + std::to_string(il) + ".";
    T5EncoderLayer& l = enc_[il];
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
    KVSERVE_RETURN_IF_ERROR(load_rel_b(p + "attn_rel_b.weight", il, &l.rel_b));
    KVSERVE_RETURN_IF_ERROR(l.attention.Load(r, c, p, "attn", weights));
    KVSERVE_RETURN_IF_ERROR(l.ffn.Load(r, c, p, weights));
    weights.vectors.insert(weights.vectors.end(), {&l.attn_norm, &l.ffn_norm, &l.rel_b});
  }
  dec_ = std::vector<T5DecoderLayer>(n_dec_);
  for (int il = 0; il < n_dec_; ++il) {
    const std::string p = "dec.blk." + std::to_string(il) + ".";
    T5DecoderLayer& l = dec_[il];
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l.attn_norm));
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "cross_attn_norm.weight", c.n_embd, &l.cross_norm));
    KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l.ffn_norm));
    KVSERVE_RETURN_IF_ERROR(load_rel_b(p + "attn_rel_b.weight", il, &l.rel_b));
    KVSERVE_RETURN_IF_ERROR(l.self.Load(r, c, p, "attn", weights));
    KVSERVE_RETURN_IF_ERROR(l.cross.Load(r, c, p, "cross_attn", weights));
    KVSERVE_RETURN_IF_ERROR(l.ffn.Load(r, c, p, weights));
    weights.vectors.insert(weights.vectors.end(),
                           {&l.attn_norm, &l.cross_norm, &l.ffn_norm, &l.rel_b});
  }
  return Status::Ok();
}

void T5Model::EncoderLayer(int il, const EncodeBatch& batch, const EncoderKeys& keys,
                           const AttentionParams& params, float* x, float* xn, float* proj,
                           Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const T5EncoderLayer& l = enc_[il];
  const int n = batch.n_tokens();
  const auto [q, k, v] =
      NormAndProject(be, c, l.attn_norm, l.attention, n, x, xn, kT5KeysK, kT5KeysV, ws);
  const KvLayerView rows{.k = reinterpret_cast<uint8_t*>(k),
                         .v = reinterpret_cast<uint8_t*>(v),
                         .type = KvType::kF32,
                         .block_size = 1,
                         .n_kv_heads = c.n_kv_heads,
                         .head_dim = c.head_dim};
  T5Attend(be, c, rows, keys.attention(batch), params, q, l.attention.wo, proj, ws);
  be.Add(x, proj, n, c.n_embd, ws);
  FeedForwardSublayer(be, c, l.ffn_norm, l.ffn, n, x, xn, proj, ws);
}

void T5Model::Encode(const EncodeBatch& batch, KvCache& kv, Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  if (n == 0) return;
  float* encoded = batch.encoder_output != nullptr
                       ? batch.encoder_output
                       : ws.Floats(kT5Encoded, static_cast<size_t>(n) * c.n_embd);
  if (!batch.cross_only || batch.encoder_output == nullptr) RunEncoder(batch, encoded, ws);
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  float* k = ws.Floats(kK, n * kv_dim);
  float* v = ws.Floats(kV, n * kv_dim);
  for (int il = 0; il < n_dec_; ++il) {
    be.Matmul(dec_[il].cross.wk, encoded, n, k, ws);
    be.Matmul(dec_[il].cross.wv, encoded, n, v, ws);
    be.StoreKv(kv.layer(n_dec_ + il), batch.cross_slots, k, v, kv_dim, ws);
  }
}

void T5Model::RunEncoder(const EncodeBatch& batch, float* encoded, Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
  be.GetRows(token_embd_, batch.tokens, x, ws);
  const EncoderKeys keys(batch);
  PositionBiasTable bias;
  AttentionParams params{.scale = 1.0f};
  for (int il = 0; il < c.n_layers; ++il) {
    const WeightVector& rel_b = enc_[il].rel_b.empty() ? enc_[0].rel_b : enc_[il].rel_b;
    if (il == 0 || !enc_[il].rel_b.empty()) {
      bias.Build(rel_b, c.n_heads, n_buckets_, true, keys.max_length - 1, keys.max_length - 1);
      bias.Apply(params);
    }
    EncoderLayer(il, batch, keys, params, x, xn, proj, ws);
  }
  be.RmsNorm(x, enc_norm_.data(), n, c.n_embd, c.norm_eps, encoded, ws);
}

void T5Model::DecoderLayer(int il, const ForwardBatch& batch, KvCache& kv,
                           const AttentionParams& params, float* x, float* xn, float* proj,
                           Workspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const T5DecoderLayer& l = dec_[il];
  const int n = batch.n_tokens();
  const size_t kv_dim = static_cast<size_t>(c.n_kv_heads) * c.head_dim;
  const auto [q, k, v] = NormAndProject(be, c, l.attn_norm, l.self, n, x, xn, kK, kV, ws);
  const KvLayerView& self_kv = kv.layer(il);
  be.StoreKv(self_kv, batch.slots(self_kv.group), k, v, kv_dim, ws);
  T5Attend(be, c, self_kv, batch.attention(self_kv.group), params, q, l.self.wo, proj, ws);
  be.Add(x, proj, n, c.n_embd, ws);
  be.RmsNorm(x, l.cross_norm.data(), n, c.n_embd, c.norm_eps, xn, ws);
  be.Matmul(l.cross.wq, xn, n, q, ws);
  const KvLayerView& cross_kv = kv.layer(n_dec_ + il);
  T5Attend(be, c, cross_kv, batch.attention(cross_kv.group), {.scale = 1.0f}, q, l.cross.wo, proj,
           ws);
  be.Add(x, proj, n, c.n_embd, ws);
  FeedForwardSublayer(be, c, l.ffn_norm, l.ffn, n, x, xn, proj, ws);
}

void T5Model::Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws, float* logits) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const int n = batch.n_tokens();
  const auto [x, xn, proj] = ResidualStream(ws, n, c.n_embd);
  EmbedTokens(be, batch, token_embd_, x, ws);
  const int max_back =
      n > 0 ? *std::max_element(batch.positions.begin(), batch.positions.end()) : 0;
  PositionBiasTable bias;
  AttentionParams params{.scale = 1.0f};
  for (int il = 0; il < n_dec_; ++il) {
    const WeightVector& rel_b = dec_[il].rel_b.empty() ? dec_[0].rel_b : dec_[il].rel_b;
    if (il == 0 || !dec_[il].rel_b.empty()) {
      bias.Build(rel_b, c.n_heads, n_buckets_, false, max_back, 0);
      bias.Apply(params);
    }
    DecoderLayer(il, batch, kv, params, x, xn, proj, ws);
  }
  const RowNorm norm = [&](const float* in, int rows, float* out) {
    be.RmsNorm(in, dec_norm_.data(), rows, c.n_embd, c.norm_eps, out, ws);
  };
  ProjectLogits(be, batch, x, c.n_embd, norm, *output_, logits, ws);
}

}  // namespace

Result<std::unique_ptr<Model>> LoadT5(GgufFile file, ModelConfig config, const Backend& backend) {
  return LoadModelOf<T5Model>(std::move(file), std::move(config), backend, false);
}

Result<std::unique_ptr<Model>> LoadT5Encoder(GgufFile file, ModelConfig config,
                                             const Backend& backend) {
  return LoadModelOf<T5Model>(std::move(file), std::move(config), backend, true);
}

}  // namespace kvserve
