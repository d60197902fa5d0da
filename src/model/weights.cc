#include "model/weights.h"

#include "kernels/quantize.h"

namespace kvserve {

namespace {

class TensorResolver {
 public:
  explicit TensorResolver(const GgufFile& file) : file_(file) {}

  // A 2-D matrix with n_out rows of n_in elements, in a type kvserve can multiply.
  Status Matrix(const std::string& name, int64_t n_out, int64_t n_in, WeightMatrix* out) {
    const TensorInfo* t = Find(name);
    if (t == nullptr) return Missing(name);
    if (t->dims.size() != 2 || t->dims[0] != n_in || t->dims[1] != n_out) {
      return WrongShape(*t, "[" + std::to_string(n_in) + ", " + std::to_string(n_out) + "]");
    }
    if (!TraitsOf(t->type).supported) {
      return Status::InvalidArgument(
          file_.path() + ": tensor '" + name + "' has type " + GgmlTypeName(t->type) +
          ", which kvserve cannot compute with " + "(supported: F32, F16, BF16, Q8_0, Q4_0)");
    }
    *out = WeightMatrix{.type = t->type,
                        .data = t->data,
                        .n_out = n_out,
                        .n_in = n_in,
                        .row_bytes = RowBytes(t->type, n_in)};
    return Status::Ok();
  }

  // A 1-D vector of n elements, decoded to float32.
  Status Vector(const std::string& name, int64_t n, std::vector<float>* out) {
    const TensorInfo* t = Find(name);
    if (t == nullptr) return Missing(name);
    if (t->n_elements != static_cast<uint64_t>(n) || t->dims[0] != n) {
      return WrongShape(*t, "[" + std::to_string(n) + "]");
    }
    if (!TraitsOf(t->type).supported) {
      return Status::InvalidArgument(file_.path() + ": tensor '" + name +
                                     "' has unsupported type " + GgmlTypeName(t->type));
    }
    out->resize(n);
    DequantizeRow(t->type, t->data, n, out->data());
    return Status::Ok();
  }

  bool Has(const std::string& name) const { return file_.FindTensor(name) != nullptr; }

 private:
  const TensorInfo* Find(const std::string& name) const { return file_.FindTensor(name); }
  Status Missing(const std::string& name) const {
    return Status::InvalidArgument(file_.path() + ": missing required tensor '" + name + "'");
  }
  Status WrongShape(const TensorInfo& t, const std::string& expected) const {
    return Status::InvalidArgument(file_.path() + ": tensor '" + t.name + "' has shape " +
                                   t.ShapeString() + ", expected " + expected);
  }
  const GgufFile& file_;
};

Status LoadLlamaLayer(TensorResolver& r, const ModelConfig& c, const std::string& p,
                      LayerWeights* l) {
  const int64_t q_dim = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l->attn_norm));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_q.weight", q_dim, c.n_embd, &l->wq));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_k.weight", kv_dim, c.n_embd, &l->wk));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_v.weight", kv_dim, c.n_embd, &l->wv));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_output.weight", c.n_embd, q_dim, &l->wo));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l->ffn_norm));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd, &l->w_gate));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &l->w_up));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &l->w_down));
  return Status::Ok();
}

Status LoadGpt2Layer(TensorResolver& r, const ModelConfig& c, const std::string& p,
                     LayerWeights* l) {
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.weight", c.n_embd, &l->attn_norm));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_norm.bias", c.n_embd, &l->attn_norm_bias));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_qkv.weight", 3 * c.n_embd, c.n_embd, &l->wqkv));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_qkv.bias", 3 * c.n_embd, &l->bqkv));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "attn_output.weight", c.n_embd, c.n_embd, &l->wo));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "attn_output.bias", c.n_embd, &l->bo));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.weight", c.n_embd, &l->ffn_norm));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_norm.bias", c.n_embd, &l->ffn_norm_bias));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &l->w_up));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_up.bias", c.n_ff, &l->b_up));
  KVSERVE_RETURN_IF_ERROR(r.Matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &l->w_down));
  KVSERVE_RETURN_IF_ERROR(r.Vector(p + "ffn_down.bias", c.n_embd, &l->b_down));
  return Status::Ok();
}

}  // namespace

Result<ModelWeights> ModelWeights::FromGguf(const GgufFile& file, const ModelConfig& c) {
  TensorResolver r(file);
  ModelWeights w;
  KVSERVE_RETURN_IF_ERROR(r.Matrix("token_embd.weight", c.n_vocab, c.n_embd, &w.token_embd));
  const bool gpt2 = c.arch == Architecture::kGpt2;
  if (gpt2) {
    KVSERVE_RETURN_IF_ERROR(
        r.Matrix("position_embd.weight", c.n_ctx_train, c.n_embd, &w.position_embd));
    KVSERVE_RETURN_IF_ERROR(r.Vector("output_norm.bias", c.n_embd, &w.output_norm_bias));
  }
  KVSERVE_RETURN_IF_ERROR(r.Vector("output_norm.weight", c.n_embd, &w.output_norm));
  if (c.tied_output) {
    w.output = w.token_embd;
  } else {
    KVSERVE_RETURN_IF_ERROR(r.Matrix("output.weight", c.n_vocab, c.n_embd, &w.output));
  }
  w.layers.resize(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string prefix = "blk." + std::to_string(i) + ".";
    KVSERVE_RETURN_IF_ERROR(gpt2 ? LoadGpt2Layer(r, c, prefix, &w.layers[i])
                                 : LoadLlamaLayer(r, c, prefix, &w.layers[i]));
  }
  return w;
}

}  // namespace kvserve
