#include "model/hf_families.h"

#include <cmath>
#include <map>
#include <numbers>

namespace kvserve {

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// What the converter leaves out of a text model: vision and audio towers, projectors.
bool IsMultimodal(std::string_view name) {
  for (std::string_view part : {"vision_", "vision.", "projector.", "audio_", "audio."}) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

const HfClass* ClassOf(const HfConfig& c) { return FindHfClass(c.architecture, "").hf_class; }

// hidden_act (or Gemma's hidden_activation) must name the activation the family computes.
Status CheckActivation(const HfConfigReader& r, bool gelu) {
  if (!gelu) return r.OneOf("hidden_act", {"silu"});
  return r.Has("hidden_activation") ? r.OneOf("hidden_activation", {"gelu_pytorch_tanh"})
                                    : r.OneOf("hidden_act", {"gelu_pytorch_tanh"});
}

}  // namespace

namespace {

// The registry's class of `r` reads it.
Result<HfConfig> ReadHfConfig(const HfConfigReader& r) {
  const std::string& source = r.source();
  const HfClassEntry found = FindHfClass(r.architecture(), r.model_type());
  if (found.hf_class == nullptr) {
    return Status::InvalidArgument(source + ": unsupported architecture '" + r.architecture() +
                                   "' (model_type '" + r.model_type() +
                                   "'; supported: " + SupportedHfClasses() + ")");
  }
  HfConfig c;
  c.architecture = found.hf_class->architecture;
  c.gguf_arch = found.architecture->gguf_name;
  KVSERVE_RETURN_IF_ERROR(r.Count({"vocab_size"}, INT32_MAX, &c.n_vocab));
  KVSERVE_RETURN_IF_ERROR(r.TokenId("bos_token_id", &c.bos_token_id));
  KVSERVE_RETURN_IF_ERROR(r.TokenId("eos_token_id", &c.eos_token_id));
  KVSERVE_RETURN_IF_ERROR(found.hf_class->read_config(r, c));
  if (c.n_heads % c.n_kv_heads != 0) {
    return Status::InvalidArgument(source + ": head count " + std::to_string(c.n_heads) +
                                   " is not a multiple of num_key_value_heads " +
                                   std::to_string(c.n_kv_heads));
  }
  return c;
}

}  // namespace

Result<HfConfig> ParseHfConfig(std::string_view json_text, const std::string& source) {
  auto r = HfConfigReader::Parse(json_text, source);
  if (!r.ok()) return r.status();
  return ReadHfConfig(*r);
}

Result<HfConfig> LoadHfConfig(const std::string& path) {
  auto r = HfConfigReader::Load(path);
  if (!r.ok()) return r.status();
  return ReadHfConfig(*r);
}

Result<HfMapping> MapHfTensor(std::string_view hf_name, const HfConfig& c) {
  const HfClass* hf = ClassOf(c);
  if (hf == nullptr) {
    return Status::InvalidArgument("no architecture reads Hugging Face class '" + c.architecture +
                                   "'");
  }
  return hf->map_tensor(hf_name, c);
}

void AddHfHyperParameters(const HfConfig& c, const std::string& model_name, GgufWriter& w) {
  w.SetString("general.architecture", c.gguf_arch);
  w.SetString("general.name", model_name);
  if (const HfClass* hf = ClassOf(c); hf != nullptr) hf->write_metadata(c, w);
}

Status ReadHfDecoderConfig(const HfConfigReader& r, const HfDecoderKeys& keys, HfConfig& c) {
  KVSERVE_RETURN_IF_ERROR(r.Count({"hidden_size"}, kMaxHfDim, &c.n_embd));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_hidden_layers"}, 4096, &c.n_layers));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_attention_heads"}, 4096, &c.n_heads, keys.n_heads));
  KVSERVE_RETURN_IF_ERROR(r.Count({"num_key_value_heads"}, 4096, &c.n_kv_heads,
                                  keys.n_kv_heads != 0 ? keys.n_kv_heads : c.n_heads));
  KVSERVE_RETURN_IF_ERROR(r.Count({"intermediate_size"}, kMaxHfDim, &c.n_ff));
  KVSERVE_RETURN_IF_ERROR(r.Count({"max_position_embeddings"}, 1 << 24, &c.n_ctx, keys.n_ctx));
  c.norm_eps = keys.norm_eps;
  if (keys.rope_theta != 0) c.rope_theta = keys.rope_theta;
  KVSERVE_RETURN_IF_ERROR(r.Float("rms_norm_eps", &c.norm_eps, keys.norm_eps == 0));
  c.rope_theta_given = r.Has("rope_theta");
  KVSERVE_RETURN_IF_ERROR(r.Float("rope_theta", &c.rope_theta, false));
  KVSERVE_RETURN_IF_ERROR(r.ReadRope(keys.rope, c));
  c.tie_word_embeddings = keys.tied;
  KVSERVE_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &c.tie_word_embeddings));
  KVSERVE_RETURN_IF_ERROR(CheckActivation(r, keys.gelu));
  KVSERVE_RETURN_IF_ERROR(ReadHfHeadDim(r, keys.head_dim_always, keys.head_dim, c));
  const std::string why_bias = "kvserve's " + c.gguf_arch + " has no such biases";
  if (!keys.attention_bias) {
    KVSERVE_RETURN_IF_ERROR(r.RequireBool("attention_bias", false, true, why_bias));
  }
  return r.RequireBool("mlp_bias", false, true, why_bias);
}

Status HeadDimFromHiddenSize(const HfConfigReader& r, HfConfig& c) {
  if (c.n_embd % c.n_heads != 0) {
    return Status::InvalidArgument(r.source() + ": hidden size " + std::to_string(c.n_embd) +
                                   " is not a multiple of the head count " +
                                   std::to_string(c.n_heads));
  }
  c.head_dim = c.n_embd / c.n_heads;
  return Status::Ok();
}

Status ReadHfHeadDim(const HfConfigReader& r, bool always, int fallback, HfConfig& c) {
  if (r.Has("head_dim") || always) {
    KVSERVE_RETURN_IF_ERROR(r.Count({"head_dim"}, 1 << 16, &c.head_dim, fallback));
    c.head_dim_given = true;
  } else {
    KVSERVE_RETURN_IF_ERROR(HeadDimFromHiddenSize(r, c));
  }
  if (c.head_dim % 2 != 0) {
    return Status::InvalidArgument(r.source() + ": head dimension " + std::to_string(c.head_dim) +
                                   " is odd; RoPE needs pairs");
  }
  return Status::Ok();
}

HfLayerNames LlamaLayerNames() {
  return {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
}

HfLayerNames GemmaLayerNames() {
  HfLayerNames names = LlamaLayerNames();
  names["post_attention_layernorm.weight"] = "post_attention_norm.weight";
  names["pre_feedforward_layernorm.weight"] = "ffn_norm.weight";
  names["post_feedforward_layernorm.weight"] = "post_ffw_norm.weight";
  return names;
}

bool SplitHfLayer(std::string_view name, std::string_view prefix, int* layer, std::string* rest) {
  if (name.substr(0, prefix.size()) != prefix) return false;
  size_t i = prefix.size();
  int value = 0;
  const size_t digits_begin = i;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && i - digits_begin < 6) {
    value = value * 10 + (name[i++] - '0');
  }
  if (i == digits_begin || i >= name.size() || name[i] != '.') return false;
  *layer = value;
  *rest = std::string(name.substr(i + 1));
  return true;
}

std::string GgufBlockName(int layer, std::string_view rest) {
  return "blk." + std::to_string(layer) + "." + std::string(rest);
}

namespace {

// "mlp.experts.E.<w>_proj.weight": expert E of the stacked ffn_<w>_exps tensor.
bool MapHfExpert(const std::string& rest, const HfConfig& c, int layer, HfMapping* out) {
  int expert = 0;
  std::string w;
  if (!SplitHfLayer(rest, "mlp.experts.", &expert, &w) || expert >= c.n_experts) return false;
  static const std::map<std::string_view, std::string_view> kExperts = {
      {"gate_proj.weight", "ffn_gate_exps.weight"},
      {"up_proj.weight", "ffn_up_exps.weight"},
      {"down_proj.weight", "ffn_down_exps.weight"},
  };
  auto it = kExperts.find(w);
  if (it == kExperts.end()) return false;
  *out = HfMapping{.name = GgufBlockName(layer, it->second), .expert = expert};
  return true;
}

// transformers 5's fused experts: "mlp.experts.gate_up_proj" [n_expert, 2 n_ff, n_embd] (gate
// rows, then up rows, per expert) and "mlp.experts.down_proj" [n_expert, n_embd, n_ff], with or
// without ".weight".
bool MapHfFusedExperts(std::string rest, int layer, HfMapping* out) {
  if (rest.ends_with(".weight")) rest.resize(rest.size() - 7);
  if (rest == "mlp.experts.gate_up_proj") {
    *out = HfMapping{.name = GgufBlockName(layer, "ffn_gate_exps.weight"),
                     .transform = HfTransform::kSplitGateUp};
    return true;
  }
  if (rest == "mlp.experts.down_proj") {
    *out = HfMapping{.name = GgufBlockName(layer, "ffn_down_exps.weight")};
    return true;
  }
  return false;
}

}  // namespace

bool MapHfExperts(const std::string& rest, const HfConfig& c, int layer, HfMapping* out) {
  return MapHfExpert(rest, c, layer, out) || MapHfFusedExperts(rest, layer, out);
}

Result<HfMapping> MapHfDecoderTensor(std::string_view hf_name, const HfConfig& c,
                                     const HfDecoderTensors& tensors) {
  // A multimodal checkpoint's text weights: "language_model." is dropped wherever it is (as
  // the converter does: "model.language_model.X" and "language_model.model.X" are "model.X").
  std::string stripped(hf_name);
  if (size_t at = stripped.find("language_model."); at != std::string::npos) {
    stripped.erase(at, 15);
  } else if (IsMultimodal(stripped)) {
    return HfMapping{};
  }
  const std::string_view name = stripped;
  const HfTransform norm = tensors.norm_plus_one ? HfTransform::kPlusOne : HfTransform::kNone;
  if (name == tensors.embedding) return HfMapping{.name = "token_embd.weight"};
  if (name == tensors.final_norm) return HfMapping{.name = "output_norm.weight", .transform = norm};
  if (name == "lm_head.weight") {
    return c.tie_word_embeddings || tensors.lm_head_tied ? HfMapping{}
                                                         : HfMapping{.name = "output.weight"};
  }
  int layer = 0;
  std::string rest;
  if (SplitHfLayer(name, tensors.layer_prefix, &layer, &rest) && layer < c.n_layers) {
    if (EndsWith(rest, "inv_freq")) return HfMapping{};  // recomputed from rope_theta
    HfMapping mapped;
    if (tensors.map_layer != nullptr && tensors.map_layer(rest, c, layer, &mapped)) return mapped;
    if (auto it = tensors.layer.find(rest); it != tensors.layer.end()) {
      HfMapping m{.name = GgufBlockName(layer, it->second)};
      if (EndsWith(rest, "norm.weight")) m.transform = norm;
      if (tensors.permute_qk &&
          (rest == "self_attn.q_proj.weight" || rest == "self_attn.k_proj.weight")) {
        m.transform = HfTransform::kPermuteHeads;
        m.n_heads = rest[10] == 'q' ? c.n_heads : c.n_kv_heads;
      }
      return m;
    }
  }
  return Status::InvalidArgument("tensor '" + std::string(hf_name) + "' is not part of a " +
                                 std::to_string(c.n_layers) + "-layer " + c.architecture);
}

void AddHfDecoderMetadata(const HfConfig& c, const HfDecoderMetadata& options, GgufWriter& w) {
  const std::string a = c.gguf_arch + ".";
  w.SetUint32(a + "context_length", static_cast<uint32_t>(c.n_ctx));
  w.SetUint32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
  w.SetUint32(a + "block_count", static_cast<uint32_t>(c.n_layers));
  w.SetUint32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w.SetUint32(a + "attention.head_count", static_cast<uint32_t>(c.n_heads));
  w.SetUint32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  w.SetFloat32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
  if (options.rope_dimension_count) {
    w.SetUint32(a + "rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  }
  if (c.head_dim_given) {
    w.SetUint32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim));
    w.SetUint32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  if (options.vocab_size) w.SetUint32(a + "vocab_size", static_cast<uint32_t>(c.n_vocab));
  if (c.rope_scaling == HfRopeScaling::kLinear) {
    w.SetString(a + "rope.scaling.type", "linear");
    w.SetFloat32(a + "rope.scaling.factor", static_cast<float>(c.rope_factor));
  }
  if (c.rope_scaling == HfRopeScaling::kYarn) {
    w.SetString(a + "rope.scaling.type", "yarn");
    w.SetFloat32(a + "rope.scaling.factor", static_cast<float>(c.rope_factor));
    w.SetUint32(a + "rope.scaling.original_context_length",
                static_cast<uint32_t>(c.rope_original_ctx));
  }
  if (c.sliding_window > 0 || options.window_always) {
    w.SetUint32(a + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  }
  for (const auto& [key, value] : c.family_floats) w.SetFloat32(a + key, static_cast<float>(value));
}

std::vector<float> Llama3RopeFreqs(const HfConfig& c) {
  const int dim = c.head_dim;
  const double low_wavelen = c.rope_original_ctx / c.rope_low_freq_factor;
  const double high_wavelen = c.rope_original_ctx / c.rope_high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(static_cast<float>(c.rope_theta),
                                       static_cast<float>(i) / static_cast<float>(dim));
    const double wavelen = 2 * std::numbers::pi / static_cast<double>(freq);
    double factor = 1.0;
    if (wavelen < high_wavelen) {
      factor = 1.0;
    } else if (wavelen > low_wavelen) {
      factor = c.rope_factor;
    } else {
      const double smooth = (c.rope_original_ctx / wavelen - c.rope_low_freq_factor) /
                            (c.rope_high_freq_factor - c.rope_low_freq_factor);
      factor = 1 / ((1 - smooth) / c.rope_factor + smooth);
    }
    out.push_back(static_cast<float>(factor));
  }
  return out;
}

}  // namespace kvserve
