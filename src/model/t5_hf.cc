#include "model/t5_hf.h"

#include <map>
#include <string>
#include <string_view>

#include "model/hf_families.h"

namespace kvserve {

namespace {

// The keys T5EncoderModel.set_gguf_parameters reads, and what llama.cpp's t5 graphs compute.
Status ReadT5EncoderConfig(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(r.Count({"n_positions"}, 1 << 24, &c.n_ctx, 512));
  KVSERVE_RETURN_IF_ERROR(r.Count({"d_model"}, kMaxHfDim, &c.n_embd));
  KVSERVE_RETURN_IF_ERROR(r.Count({"d_ff"}, kMaxHfDim, &c.n_ff));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_layers"}, 4096, &c.n_layers));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_heads"}, 4096, &c.n_heads));
  c.n_kv_heads = c.n_heads;
  KVSERVE_RETURN_IF_ERROR(r.Count({"d_kv"}, 4096, &c.head_dim));
  c.head_dim_given = true;
  KVSERVE_RETURN_IF_ERROR(r.Float("layer_norm_epsilon", &c.norm_eps, true));
  KVSERVE_RETURN_IF_ERROR(r.Count({"relative_attention_num_buckets"}, 4096, &c.rel_buckets));
  KVSERVE_RETURN_IF_ERROR(r.OneOf("feed_forward_proj", {"relu", "gated-gelu"}));
  return r.RequireNumber("relative_attention_max_distance", 128,
                         "llama.cpp's t5 graph buckets distances up to 128");
}

// T5Model.set_gguf_parameters's: the encoder's and the decoder's.
Status ReadT5Config(const HfConfigReader& r, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(ReadT5EncoderConfig(r, c));
  if (r.Has("num_decoder_layers")) {
    KVSERVE_RETURN_IF_ERROR(r.Count({"num_decoder_layers"}, 4096, &c.n_decoder_layers));
  }
  KVSERVE_RETURN_IF_ERROR(r.TokenId("decoder_start_token_id", &c.decoder_start_token_id));
  if (c.decoder_start_token_id < 0) {
    return Status::InvalidArgument(r.source() + ": missing required key 'decoder_start_token_id'");
  }
  return Status::Ok();
}

// A block's tensors after "layer.L.", by L (encoder: 0 attention, 1 feed-forward; decoder: 0
// self-attention, 1 cross-attention, 2 feed-forward), -> the GGUF name after "<enc|dec>.blk.N.".
using T5Names = std::map<std::string_view, std::string_view>;

const T5Names& FeedForwardNames() {
  static const T5Names names = {{"layer_norm.weight", "ffn_norm.weight"},
                                {"DenseReluDense.wi.weight", "ffn_up.weight"},
                                {"DenseReluDense.wi_0.weight", "ffn_gate.weight"},
                                {"DenseReluDense.wi_1.weight", "ffn_up.weight"},
                                {"DenseReluDense.wo.weight", "ffn_down.weight"}};
  return names;
}

const T5Names& SelfAttentionNames() {
  static const T5Names names = {
      {"layer_norm.weight", "attn_norm.weight"},
      {"SelfAttention.q.weight", "attn_q.weight"},
      {"SelfAttention.k.weight", "attn_k.weight"},
      {"SelfAttention.v.weight", "attn_v.weight"},
      {"SelfAttention.o.weight", "attn_o.weight"},
      {"SelfAttention.relative_attention_bias.weight", "attn_rel_b.weight"}};
  return names;
}

const T5Names& CrossAttentionNames() {
  static const T5Names names = {
      {"layer_norm.weight", "cross_attn_norm.weight"},
      {"EncDecAttention.q.weight", "cross_attn_q.weight"},
      {"EncDecAttention.k.weight", "cross_attn_k.weight"},
      {"EncDecAttention.v.weight", "cross_attn_v.weight"},
      {"EncDecAttention.o.weight", "cross_attn_o.weight"},
      {"EncDecAttention.relative_attention_bias.weight", "cross_attn_rel_b.weight"}};
  return names;
}

// "<stack>.block.N.layer.L.<rest>" of a stack of `n_layers` blocks -> "<prefix>N.<name>"; false
// when `hf_name` is not one of the stack's tensors.
bool MapT5Block(std::string_view hf_name, std::string_view stack, int n_layers,
                std::string_view prefix, bool decoder, std::string* out) {
  int layer = 0;
  std::string rest;
  if (!SplitHfLayer(hf_name, std::string(stack) + ".block.", &layer, &rest)) return false;
  if (layer >= n_layers || !rest.starts_with("layer.") || rest.size() < 8 || rest[7] != '.') {
    return false;
  }
  const int sub = rest[6] - '0';
  const std::string_view name = std::string_view(rest).substr(8);
  const T5Names* names = nullptr;
  if (sub == 0) {
    names = &SelfAttentionNames();
  } else if (decoder && sub == 1) {
    names = &CrossAttentionNames();
  } else if (sub == (decoder ? 2 : 1)) {
    names = &FeedForwardNames();
  } else {
    return false;
  }
  const auto it = names->find(name);
  if (it == names->end()) return false;
  *out = std::string(prefix) + std::to_string(layer) + "." + std::string(it->second);
  return true;
}

Result<HfMapping> MapT5Tensor(std::string_view hf_name, const HfConfig& c) {
  static const std::map<std::string_view, std::string_view> kGlobals = {
      {"shared.weight", "token_embd.weight"},
      {"encoder.embed_tokens.weight", ""},
      {"decoder.embed_tokens.weight", ""},
      {"lm_head.weight", "output.weight"},
      {"encoder.final_layer_norm.weight", "enc.output_norm.weight"},
      {"decoder.final_layer_norm.weight", "dec.output_norm.weight"}};
  if (const auto it = kGlobals.find(hf_name); it != kGlobals.end()) {
    return HfMapping{.name = std::string(it->second)};
  }
  const int n_decoder = c.n_decoder_layers > 0 ? c.n_decoder_layers : c.n_layers;
  HfMapping m;
  if (MapT5Block(hf_name, "encoder", c.n_layers, "enc.blk.", false, &m.name) ||
      MapT5Block(hf_name, "decoder", n_decoder, "dec.blk.", true, &m.name)) {
    return m;
  }
  return Status::InvalidArgument("tensor '" + std::string(hf_name) + "' is not part of a " +
                                 std::to_string(c.n_layers) + "+" + std::to_string(n_decoder) +
                                 "-layer " + c.architecture);
}

// T5EncoderModel: shared (encoder.embed_tokens skipped, as for T5ForConditionalGeneration), the
// encoder's blocks and final norm; a decoder's or lm_head's tensor is not part of it.
Result<HfMapping> MapT5EncoderTensor(std::string_view hf_name, const HfConfig& c) {
  if (hf_name == "shared.weight") return HfMapping{.name = "token_embd.weight"};
  if (hf_name == "encoder.embed_tokens.weight") return HfMapping{.name = ""};
  if (hf_name == "encoder.final_layer_norm.weight") {
    return HfMapping{.name = "enc.output_norm.weight"};
  }
  HfMapping m;
  if (MapT5Block(hf_name, "encoder", c.n_layers, "enc.blk.", false, &m.name)) return m;
  return Status::InvalidArgument("tensor '" + std::string(hf_name) + "' is not part of a " +
                                 std::to_string(c.n_layers) + "-layer " + c.architecture);
}

// T5Model.set_gguf_parameters's keys in its order (ReadT5Config's comment in t5_hf.h); without the
// decoder's for T5EncoderModel.
void WriteT5Keys(const HfConfig& c, bool decoder, GgufWriter& w) {
  const std::string a = c.gguf_arch + ".";
  auto u32 = [&](const char* key, int64_t value) {
    w.SetUint32(a + key, static_cast<uint32_t>(value));
  };
  u32("context_length", c.n_ctx);
  u32("embedding_length", c.n_embd);
  u32("feed_forward_length", c.n_ff);
  u32("block_count", c.n_layers);
  if (decoder && c.n_decoder_layers > 0) u32("decoder_block_count", c.n_decoder_layers);
  u32("attention.head_count", c.n_heads);
  u32("attention.key_length", c.head_dim);
  u32("attention.value_length", c.head_dim);
  w.SetFloat32(a + "attention.layer_norm_epsilon", static_cast<float>(c.norm_eps));
  u32("attention.relative_buckets_count", c.rel_buckets);
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  if (decoder) u32("decoder_start_token_id", c.decoder_start_token_id);
}

void WriteT5Metadata(const HfConfig& c, GgufWriter& w) { WriteT5Keys(c, true, w); }
void WriteT5EncoderMetadata(const HfConfig& c, GgufWriter& w) { WriteT5Keys(c, false, w); }

}  // namespace

std::vector<HfClass> T5HfClasses() {
  return {{"T5ForConditionalGeneration", "t5", &ReadT5Config, &MapT5Tensor, &WriteT5Metadata}};
}

std::vector<HfClass> T5EncoderHfClasses() {
  // model_type t5 too: a config without "architectures" finds T5ForConditionalGeneration first.
  return {
      {"T5EncoderModel", "t5", &ReadT5EncoderConfig, &MapT5EncoderTensor, &WriteT5EncoderMetadata}};
}

}  // namespace kvserve
