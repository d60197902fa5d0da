#include "model/hf_families.h"

#include <cmath>
#include <map>
#include <numbers>

namespace kvserve {

namespace {

// Splits "<prefix>N.<rest>" into N and rest; false when `name` does not have that form.
bool SplitLayer(std::string_view name, std::string_view prefix, int* layer, std::string* rest) {
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

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string Block(int layer, std::string_view rest) {
  return "blk." + std::to_string(layer) + "." + std::string(rest);
}

// The GGUF name and transform of a GPT2LMHeadModel tensor, or an error naming it.
Result<HfMapping> MapGpt2(std::string_view hf_name, const HfConfig& c) {
  std::string_view name = hf_name;
  if (name.substr(0, 12) == "transformer.") name.remove_prefix(12);
  static const std::map<std::string_view, std::string_view> kGlobal = {
      {"wte.weight", "token_embd.weight"},   {"wpe.weight", "position_embd.weight"},
      {"ln_f.weight", "output_norm.weight"}, {"ln_f.bias", "output_norm.bias"},
      {"lm_head.weight", "output.weight"},
  };
  if (auto it = kGlobal.find(name); it != kGlobal.end()) {
    if (name == "lm_head.weight" && c.tie_word_embeddings) return HfMapping{};
    return HfMapping{.name = std::string(it->second)};
  }
  static const std::map<std::string_view, std::pair<std::string_view, HfTransform>> kLayer = {
      {"ln_1.weight", {"attn_norm.weight", HfTransform::kNone}},
      {"ln_1.bias", {"attn_norm.bias", HfTransform::kNone}},
      {"attn.c_attn.weight", {"attn_qkv.weight", HfTransform::kTranspose}},
      {"attn.c_attn.bias", {"attn_qkv.bias", HfTransform::kNone}},
      {"attn.c_proj.weight", {"attn_output.weight", HfTransform::kTranspose}},
      {"attn.c_proj.bias", {"attn_output.bias", HfTransform::kNone}},
      {"ln_2.weight", {"ffn_norm.weight", HfTransform::kNone}},
      {"ln_2.bias", {"ffn_norm.bias", HfTransform::kNone}},
      {"mlp.c_fc.weight", {"ffn_up.weight", HfTransform::kTranspose}},
      {"mlp.c_fc.bias", {"ffn_up.bias", HfTransform::kNone}},
      {"mlp.c_proj.weight", {"ffn_down.weight", HfTransform::kTranspose}},
      {"mlp.c_proj.bias", {"ffn_down.bias", HfTransform::kNone}},
  };
  int layer = 0;
  std::string rest;
  if (SplitLayer(name, "h.", &layer, &rest) && layer < c.n_layers) {
    if (rest == "attn.bias" || rest == "attn.masked_bias") return HfMapping{};  // mask buffers
    if (auto it = kLayer.find(rest); it != kLayer.end()) {
      return HfMapping{.name = Block(layer, it->second.first), .transform = it->second.second};
    }
  }
  return Status::InvalidArgument("tensor '" + std::string(hf_name) + "' is not part of a " +
                                 std::to_string(c.n_layers) + "-layer GPT2LMHeadModel");
}

// The layer tensors of a family, HF name after "model.layers.N." -> GGUF name after "blk.N.".
std::map<std::string_view, std::string_view> LayerNames(HfArchitecture arch) {
  std::map<std::string_view, std::string_view> m = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  if (arch == HfArchitecture::kPhi3) {
    m["self_attn.qkv_proj.weight"] = "attn_qkv.weight";
    m["mlp.gate_up_proj.weight"] = "ffn_up.weight";  // rows: gate, then up
  } else {
    m["self_attn.q_proj.weight"] = "attn_q.weight";
    m["self_attn.k_proj.weight"] = "attn_k.weight";
    m["self_attn.v_proj.weight"] = "attn_v.weight";
    m["mlp.gate_proj.weight"] = "ffn_gate.weight";
    m["mlp.up_proj.weight"] = "ffn_up.weight";
  }
  if (arch == HfArchitecture::kGemma2 || arch == HfArchitecture::kGemma3) {
    m["post_attention_layernorm.weight"] = "post_attention_norm.weight";
    m["pre_feedforward_layernorm.weight"] = "ffn_norm.weight";
    m["post_feedforward_layernorm.weight"] = "post_ffw_norm.weight";
  } else {
    m["post_attention_layernorm.weight"] = "ffn_norm.weight";
  }
  if (arch == HfArchitecture::kQwen2) {
    m["self_attn.q_proj.bias"] = "attn_q.bias";
    m["self_attn.k_proj.bias"] = "attn_k.bias";
    m["self_attn.v_proj.bias"] = "attn_v.bias";
  }
  if (arch == HfArchitecture::kQwen3 || arch == HfArchitecture::kQwen3Moe ||
      arch == HfArchitecture::kGemma3) {
    m["self_attn.q_norm.weight"] = "attn_q_norm.weight";
    m["self_attn.k_norm.weight"] = "attn_k_norm.weight";
  }
  if (arch == HfArchitecture::kQwen3Moe) {
    m.erase("mlp.gate_proj.weight");
    m.erase("mlp.up_proj.weight");
    m.erase("mlp.down_proj.weight");
    m["mlp.gate.weight"] = "ffn_gate_inp.weight";
  }
  return m;
}

// Qwen3 MoE "mlp.experts.E.<w>_proj.weight": expert E of the stacked ffn_<w>_exps tensor.
bool MapExpert(const std::string& rest, const HfConfig& c, int layer, HfMapping* out) {
  int expert = 0;
  std::string w;
  if (!SplitLayer(rest, "mlp.experts.", &expert, &w) || expert >= c.n_experts) return false;
  static const std::map<std::string_view, std::string_view> kExperts = {
      {"gate_proj.weight", "ffn_gate_exps.weight"},
      {"up_proj.weight", "ffn_up_exps.weight"},
      {"down_proj.weight", "ffn_down_exps.weight"},
  };
  auto it = kExperts.find(w);
  if (it == kExperts.end()) return false;
  *out = HfMapping{.name = Block(layer, it->second), .expert = expert};
  return true;
}

// transformers 5's fused experts: "mlp.experts.gate_up_proj" [n_expert, 2 n_ff, n_embd] (gate
// rows, then up rows, per expert) and "mlp.experts.down_proj" [n_expert, n_embd, n_ff], with or
// without ".weight".
bool MapFusedExperts(std::string rest, int layer, HfMapping* out) {
  if (rest.ends_with(".weight")) rest.resize(rest.size() - 7);
  if (rest == "mlp.experts.gate_up_proj") {
    *out = HfMapping{.name = Block(layer, "ffn_gate_exps.weight"),
                     .transform = HfTransform::kSplitGateUp};
    return true;
  }
  if (rest == "mlp.experts.down_proj") {
    *out = HfMapping{.name = Block(layer, "ffn_down_exps.weight")};
    return true;
  }
  return false;
}

// What the converter leaves out of a text model: vision and audio towers, projectors.
bool IsMultimodal(std::string_view name) {
  for (std::string_view part : {"vision_", "vision.", "projector.", "audio_", "audio."}) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

Result<HfMapping> MapDecoder(std::string_view hf_name, const HfConfig& c) {
  // A multimodal checkpoint's text weights: "language_model." is dropped wherever it is (as
  // the converter does: "model.language_model.X" and "language_model.model.X" are "model.X").
  std::string stripped(hf_name);
  if (size_t at = stripped.find("language_model."); at != std::string::npos) {
    stripped.erase(at, 15);
  } else if (IsMultimodal(stripped)) {
    return HfMapping{};
  }
  const std::string_view name = stripped;
  const HfTransform norm = c.is_gemma() ? HfTransform::kPlusOne : HfTransform::kNone;
  if (name == "model.embed_tokens.weight") return HfMapping{.name = "token_embd.weight"};
  if (name == "model.norm.weight")
    return HfMapping{.name = "output_norm.weight", .transform = norm};
  if (name == "lm_head.weight") {
    // Gemma's converter always skips lm_head (its output is the embedding).
    return c.tie_word_embeddings || c.is_gemma() ? HfMapping{} : HfMapping{.name = "output.weight"};
  }
  static const std::map<HfArchitecture, std::map<std::string_view, std::string_view>> kTables = [] {
    std::map<HfArchitecture, std::map<std::string_view, std::string_view>> t;
    for (HfArchitecture a :
         {HfArchitecture::kLlama, HfArchitecture::kMistral, HfArchitecture::kQwen2,
          HfArchitecture::kQwen3, HfArchitecture::kQwen3Moe, HfArchitecture::kPhi3,
          HfArchitecture::kGemma2, HfArchitecture::kGemma3}) {
      t[a] = LayerNames(a);
    }
    return t;
  }();
  int layer = 0;
  std::string rest;
  if (SplitLayer(name, "model.layers.", &layer, &rest) && layer < c.n_layers) {
    if (EndsWith(rest, "rotary_emb.inv_freq")) return HfMapping{};  // recomputed from rope_theta
    HfMapping expert;
    if (c.arch == HfArchitecture::kQwen3Moe &&
        (MapExpert(rest, c, layer, &expert) || MapFusedExperts(rest, layer, &expert))) {
      return expert;
    }
    const auto& table = kTables.at(c.arch);
    if (auto it = table.find(rest); it != table.end()) {
      HfMapping m{.name = Block(layer, it->second)};
      if (EndsWith(rest, "norm.weight")) m.transform = norm;
      if (c.permutes_qk() &&
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

}  // namespace

Result<HfMapping> MapHfTensor(std::string_view hf_name, const HfConfig& c) {
  return c.arch == HfArchitecture::kGpt2 ? MapGpt2(hf_name, c) : MapDecoder(hf_name, c);
}

void AddHfHyperParameters(const HfConfig& c, const std::string& model_name, GgufWriter& w) {
  const std::string arch = c.gguf_arch();
  const std::string a = arch + ".";
  w.SetString("general.architecture", arch);
  w.SetString("general.name", model_name);
  w.SetUint32(a + "context_length", static_cast<uint32_t>(c.n_ctx));
  w.SetUint32(a + "embedding_length", static_cast<uint32_t>(c.n_embd));
  w.SetUint32(a + "block_count", static_cast<uint32_t>(c.n_layers));
  w.SetUint32(a + "feed_forward_length", static_cast<uint32_t>(c.n_ff));
  w.SetUint32(a + "attention.head_count", static_cast<uint32_t>(c.n_heads));
  if (c.arch == HfArchitecture::kGpt2) {
    w.SetFloat32(a + "attention.layer_norm_epsilon", static_cast<float>(c.norm_eps));
    return;
  }
  w.SetUint32(a + "attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  w.SetFloat32(a + "attention.layer_norm_rms_epsilon", static_cast<float>(c.norm_eps));
  w.SetFloat32(a + "rope.freq_base", static_cast<float>(c.rope_theta));
  if (!c.is_gemma()) w.SetUint32(a + "rope.dimension_count", static_cast<uint32_t>(c.head_dim));
  if (c.head_dim_given) {
    w.SetUint32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim));
    w.SetUint32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim));
  }
  if (c.permutes_qk()) w.SetUint32(a + "vocab_size", static_cast<uint32_t>(c.n_vocab));
  if (c.rope_scaling == HfRopeScaling::kLinear) {
    w.SetString(a + "rope.scaling.type", "linear");
    w.SetFloat32(a + "rope.scaling.factor", static_cast<float>(c.rope_factor));
  }
  if (c.sliding_window > 0 || c.arch == HfArchitecture::kPhi3) {
    w.SetUint32(a + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  }
  switch (c.arch) {
    case HfArchitecture::kQwen3Moe:
      w.SetUint32(a + "expert_count", static_cast<uint32_t>(c.n_experts));
      w.SetUint32(a + "expert_used_count", static_cast<uint32_t>(c.n_experts_used));
      w.SetUint32(a + "expert_feed_forward_length", static_cast<uint32_t>(c.n_ff_expert));
      break;
    case HfArchitecture::kPhi3:
      w.SetUint32(a + "rope.scaling.original_context_length",
                  static_cast<uint32_t>(c.original_ctx));
      break;
    case HfArchitecture::kGemma2:
      w.SetFloat32(a + "attn_logit_softcapping", static_cast<float>(c.attn_softcap));
      w.SetFloat32(a + "final_logit_softcapping", static_cast<float>(c.final_softcap));
      break;
    case HfArchitecture::kGemma3:
      if (c.final_softcap > 0) {
        w.SetFloat32(a + "final_logit_softcapping", static_cast<float>(c.final_softcap));
      }
      w.SetFloat32(a + "rope.freq_base_swa", static_cast<float>(c.rope_local_theta));
      w.SetUint32(a + "attention.sliding_window_pattern",
                  static_cast<uint32_t>(c.sliding_window_pattern));
      break;
    default:
      break;
  }
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
