#include "io/hf_config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace kvserve {

namespace {

using nlohmann::json;

class ConfigReader {
 public:
  ConfigReader(const json& root, const std::string& source) : root_(root), source_(source) {}

  // The first of `keys` present, as a positive integer up to `max`; missing: `fallback` unless 0.
  Status Count(std::initializer_list<const char*> keys, int64_t max, int* out, int fallback = 0) {
    for (const char* key : keys) {
      auto it = root_.find(key);
      if (it == root_.end() || it->is_null()) continue;
      if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > max) {
        return Status::InvalidArgument(source_ + ": '" + key + "' = " + it->dump() +
                                       " is not an integer from 1 to " + std::to_string(max));
      }
      *out = static_cast<int>(it->get<int64_t>());
      return Status::Ok();
    }
    if (fallback != 0) {
      *out = fallback;
      return Status::Ok();
    }
    return Status::InvalidArgument(source_ + ": missing required key '" + *keys.begin() + "'");
  }

  Status Float(const char* key, double* out, bool required) {
    auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) {
      return required ? Status::InvalidArgument(source_ + ": missing required key '" + key + "'")
                      : Status::Ok();
    }
    if (!it->is_number() || !(it->get<double>() > 0)) {
      return Status::InvalidArgument(source_ + ": '" + key + "' = " + it->dump() +
                                     " is not a positive number");
    }
    *out = it->get<double>();
    return Status::Ok();
  }

  Status Bool(const char* key, bool* out) {
    auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) return Status::Ok();
    if (!it->is_boolean()) {
      return Status::InvalidArgument(source_ + ": '" + key + "' = " + it->dump() +
                                     " is not a boolean");
    }
    *out = it->get<bool>();
    return Status::Ok();
  }

  // A token id; a list (several EOS ids) gives its first element.
  Status TokenId(const char* key, int64_t* out) {
    auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) return Status::Ok();
    const json& value = it->is_array() && !it->empty() ? (*it)[0] : *it;
    if (!value.is_number_integer() || value.get<int64_t>() < 0) {
      return Status::InvalidArgument(source_ + ": '" + key + "' = " + it->dump() +
                                     " is not a token id");
    }
    *out = value.get<int64_t>();
    return Status::Ok();
  }

  // A string key that must be absent or one of `allowed`.
  Status OneOf(const char* key, std::initializer_list<const char*> allowed) {
    auto it = root_.find(key);
    if (it == root_.end() || it->is_null()) return Status::Ok();
    std::string names;
    for (const char* name : allowed) {
      if (it->is_string() && it->get<std::string>() == name) return Status::Ok();
      names += std::string(names.empty() ? "" : ", ") + name;
    }
    return Status::InvalidArgument(source_ + ": '" + key + "' = " + it->dump() +
                                   " is not supported (supported: " + names + ")");
  }

 private:
  const json& root_;
  const std::string& source_;
};

constexpr int64_t kMaxDim = 1 << 20;

struct Family {
  const char* architecture;
  const char* model_type;
  HfArchitecture arch;
};
constexpr Family kFamilies[] = {
    {"GPT2LMHeadModel", "gpt2", HfArchitecture::kGpt2},
    {"LlamaForCausalLM", "llama", HfArchitecture::kLlama},
    {"MistralForCausalLM", "mistral", HfArchitecture::kMistral},
    {"Qwen2ForCausalLM", "qwen2", HfArchitecture::kQwen2},
    {"Qwen3ForCausalLM", "qwen3", HfArchitecture::kQwen3},
    {"Qwen3MoeForCausalLM", "qwen3_moe", HfArchitecture::kQwen3Moe},
    {"Phi3ForCausalLM", "phi3", HfArchitecture::kPhi3},
    {"Gemma2ForCausalLM", "gemma2", HfArchitecture::kGemma2},
    {"Gemma3ForCausalLM", "gemma3_text", HfArchitecture::kGemma3},
    {"Gemma3ForConditionalGeneration", "gemma3", HfArchitecture::kGemma3},  // its text part
};

Status Unsupported(const std::string& source, const std::string& key, const json& value,
                   const std::string& why) {
  return Status::InvalidArgument(source + ": '" + key + "' = " + value.dump() +
                                 " is not supported (" + why + ")");
}

// A boolean key that must be absent, null or `wanted` (or, with `absent_ok` false, present).
Status RequireBool(const json& root, const std::string& source, const char* key, bool wanted,
                   bool absent_ok, const std::string& why) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) {
    if (absent_ok) return Status::Ok();
    return Status::InvalidArgument(source + ": '" + key + "' is absent, which means " +
                                   (wanted ? "false" : "true") + ": not supported (" + why + ")");
  }
  if (it->is_boolean() && it->get<bool>() == wanted) return Status::Ok();
  return Unsupported(source, key, *it, why);
}

// rope_parameters (transformers 5) or rope_scaling: the scaling kind and its factors; a
// rope_theta inside it wins over the top-level one.
Status ReadRope(const json& root, const std::string& source, HfConfig& c) {
  const char* key = "rope_parameters";
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) {
    key = "rope_scaling";
    it = root.find(key);
  }
  if (it == root.end() || it->is_null()) return Status::Ok();
  if (!it->is_object()) return Unsupported(source, key, *it, "not an object");
  std::string k = key;
  const json* chosen = &*it;
  // transformers 5 per layer type: {"full_attention": {...}, "sliding_attention": {...}}; the
  // local layers take only a base (Gemma 3: rope_local_base_freq).
  if (auto local = it->find("sliding_attention"); local != it->end() && local->is_object()) {
    const std::string lk = k + ".sliding_attention";
    if (auto t = local->find("rope_type"); t != local->end() && *t != "default") {
      return Unsupported(source, lk + ".rope_type", *t, "local layers use plain RoPE");
    }
    if (auto theta = local->find("rope_theta"); theta != local->end()) {
      if (!theta->is_number() || !(theta->get<double>() > 0)) {
        return Unsupported(source, lk + ".rope_theta", *theta, "not a positive number");
      }
      c.rope_local_theta = theta->get<double>();
    }
  }
  if (auto full = it->find("full_attention"); full != it->end() && full->is_object()) {
    chosen = &*full;
    k += ".full_attention";
  } else if (it->contains("sliding_attention")) {
    return Status::Ok();  // only local layers described
  }
  const json& rope = *chosen;
  if (auto theta = rope.find("rope_theta"); theta != rope.end() && !theta->is_null()) {
    if (!theta->is_number() || !(theta->get<double>() > 0)) {
      return Unsupported(source, k + ".rope_theta", *theta, "not a positive number");
    }
    c.rope_theta = theta->get<double>();
    c.rope_theta_given = true;
  }
  auto type = rope.find("rope_type");
  std::string type_key = k + ".rope_type";
  if (type == rope.end()) {
    type = rope.find("type");
    type_key = k + ".type";
  }
  if (type == rope.end() || !type->is_string()) {
    return Status::InvalidArgument(source + ": '" + k + "' = " + rope.dump() +
                                   " has no rope_type string");
  }
  const std::string name = type->get<std::string>();
  auto number = [&](const char* field, double fallback, double* out) -> Status {
    auto f = rope.find(field);
    if (f == rope.end() || f->is_null()) {
      *out = fallback;
      return Status::Ok();
    }
    if (!f->is_number() || !(f->get<double>() > 0)) {
      return Unsupported(source, k + "." + field, *f, "not a positive number");
    }
    *out = f->get<double>();
    return Status::Ok();
  };
  const bool llama_like = c.arch == HfArchitecture::kLlama || c.arch == HfArchitecture::kMistral;
  if (name == "default") return Status::Ok();
  if (name == "linear" && c.arch != HfArchitecture::kPhi3) {
    if (rope.find("factor") == rope.end()) {
      return Status::InvalidArgument(source + ": '" + k + "' = " + rope.dump() + " has no factor");
    }
    c.rope_scaling = HfRopeScaling::kLinear;
    return number("factor", 1.0, &c.rope_factor);
  }
  if (name == "llama3" && llama_like) {
    c.rope_scaling = HfRopeScaling::kLlama3;
    double original = 8192;
    KVSERVE_RETURN_IF_ERROR(number("factor", 8.0, &c.rope_factor));
    KVSERVE_RETURN_IF_ERROR(number("low_freq_factor", 1.0, &c.rope_low_freq_factor));
    KVSERVE_RETURN_IF_ERROR(number("high_freq_factor", 4.0, &c.rope_high_freq_factor));
    KVSERVE_RETURN_IF_ERROR(number("original_max_position_embeddings", 8192, &original));
    if (original != static_cast<int>(original) || original > (1 << 24)) {
      return Unsupported(source, k + ".original_max_position_embeddings",
                         rope["original_max_position_embeddings"], "not an integer context");
    }
    c.rope_original_ctx = static_cast<int>(original);
    return Status::Ok();
  }
  return Unsupported(source, type_key, *type,
                     llama_like ? "kvserve implements default, linear and llama3"
                     : c.arch == HfArchitecture::kPhi3
                         ? "kvserve implements default RoPE for Phi-3 (no LongRoPE)"
                         : "kvserve implements default and linear");
}

// Gemma 3: every sliding_window_pattern-th layer is global; layer_types (transformers 4.53+)
// must follow such a pattern.
Status ReadGemma3Pattern(const json& root, const std::string& source, HfConfig& c) {
  c.sliding_window_pattern = 6;
  if (auto it = root.find("sliding_window_pattern"); it != root.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > 4096) {
      return Unsupported(source, "sliding_window_pattern", *it, "not an integer from 1 to 4096");
    }
    c.sliding_window_pattern = static_cast<int>(it->get<int64_t>());
  }
  auto it = root.find("layer_types");
  if (it == root.end() || it->is_null()) return Status::Ok();
  if (!it->is_array() || it->size() != static_cast<size_t>(c.n_layers)) {
    return Unsupported(source, "layer_types", *it,
                       "not a list of " + std::to_string(c.n_layers) + " layer types");
  }
  int pattern = 0;  // the first global layer's index + 1
  for (size_t i = 0; i < it->size(); ++i) {
    if ((*it)[i] == "full_attention") {
      pattern = static_cast<int>(i) + 1;
      break;
    }
  }
  if (pattern == 0) pattern = c.n_layers + 1;  // no global layer
  for (size_t i = 0; i < it->size(); ++i) {
    const char* want =
        i % pattern == static_cast<size_t>(pattern - 1) ? "full_attention" : "sliding_attention";
    if ((*it)[i] != want) {
      return Unsupported(source, "layer_types", *it,
                         "layer " + std::to_string(i) + " breaks the every-" +
                             std::to_string(pattern) + "th-layer-global pattern");
    }
  }
  c.sliding_window_pattern = pattern;
  return Status::Ok();
}

}  // namespace

std::string HfConfig::gguf_arch() const {
  switch (arch) {
    case HfArchitecture::kGpt2:
      return "gpt2";
    case HfArchitecture::kLlama:
    case HfArchitecture::kMistral:
      return "llama";
    case HfArchitecture::kQwen2:
      return "qwen2";
    case HfArchitecture::kQwen3:
      return "qwen3";
    case HfArchitecture::kQwen3Moe:
      return "qwen3moe";
    case HfArchitecture::kPhi3:
      return "phi3";
    case HfArchitecture::kGemma2:
      return "gemma2";
    case HfArchitecture::kGemma3:
      return "gemma3";
  }
  return "llama";
}

bool HfConfig::permutes_qk() const {
  return arch == HfArchitecture::kLlama || arch == HfArchitecture::kMistral;
}

Result<HfConfig> HfConfig::Parse(std::string_view json_text, const std::string& source) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(source + ": not valid JSON: " + e.what());
  }
  if (!root.is_object()) return Status::InvalidArgument(source + ": not a JSON object");
  HfConfig config;
  std::string model_type;
  if (auto it = root.find("model_type"); it != root.end() && it->is_string()) {
    model_type = it->get<std::string>();
  }
  // A multimodal config's text_config is read as top-level keys (the converter merges it so).
  if (auto it = root.find("text_config"); it != root.end() && it->is_object()) {
    json text = *it;
    root.erase("text_config");
    for (auto& [key, value] : text.items()) {
      if (key != "architectures" && key != "model_type") root[key] = value;
    }
  }
  if (auto it = root.find("architectures");
      it != root.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    config.architecture = (*it)[0].get<std::string>();
  }
  const Family* family = nullptr;
  std::string names;
  for (const Family& f : kFamilies) {
    if (config.architecture == f.architecture ||
        (config.architecture.empty() && model_type == f.model_type)) {
      family = &f;
    }
    names += std::string(names.empty() ? "" : ", ") + f.architecture;
  }
  if (family == nullptr) {
    return Status::InvalidArgument(source + ": unsupported architecture '" + config.architecture +
                                   "' (model_type '" + model_type + "'; supported: " + names + ")");
  }
  config.arch = family->arch;
  ConfigReader r(root, source);
  KVSERVE_RETURN_IF_ERROR(r.Count({"vocab_size"}, INT32_MAX, &config.n_vocab));
  KVSERVE_RETURN_IF_ERROR(r.TokenId("bos_token_id", &config.bos_token_id));
  KVSERVE_RETURN_IF_ERROR(r.TokenId("eos_token_id", &config.eos_token_id));
  if (config.arch == HfArchitecture::kGpt2) {
    KVSERVE_RETURN_IF_ERROR(r.Count({"n_embd", "hidden_size"}, kMaxDim, &config.n_embd));
    KVSERVE_RETURN_IF_ERROR(r.Count({"n_layer", "num_hidden_layers"}, 4096, &config.n_layers));
    KVSERVE_RETURN_IF_ERROR(r.Count({"n_head", "num_attention_heads"}, 4096, &config.n_heads));
    KVSERVE_RETURN_IF_ERROR(r.Count({"n_positions", "n_ctx"}, 1 << 24, &config.n_ctx));
    KVSERVE_RETURN_IF_ERROR(r.Count({"n_inner"}, kMaxDim, &config.n_ff, 4 * config.n_embd));
    config.norm_eps = 1e-5;
    KVSERVE_RETURN_IF_ERROR(r.Float("layer_norm_epsilon", &config.norm_eps, false));
    KVSERVE_RETURN_IF_ERROR(r.OneOf("activation_function", {"gelu_new"}));
    config.n_kv_heads = config.n_heads;
    config.tie_word_embeddings = true;
    KVSERVE_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &config.tie_word_embeddings));
    config.head_dim = config.n_heads > 0 ? config.n_embd / config.n_heads : 0;
  } else {
    const bool gemma3 = config.arch == HfArchitecture::kGemma3;
    KVSERVE_RETURN_IF_ERROR(r.Count({"hidden_size"}, kMaxDim, &config.n_embd));
    KVSERVE_RETURN_IF_ERROR(r.Count({"num_hidden_layers"}, 4096, &config.n_layers));
    KVSERVE_RETURN_IF_ERROR(
        r.Count({"num_attention_heads"}, 4096, &config.n_heads, gemma3 ? 8 : 0));
    KVSERVE_RETURN_IF_ERROR(
        r.Count({"num_key_value_heads"}, 4096, &config.n_kv_heads, gemma3 ? 4 : config.n_heads));
    KVSERVE_RETURN_IF_ERROR(r.Count({"intermediate_size"}, kMaxDim, &config.n_ff));
    KVSERVE_RETURN_IF_ERROR(
        r.Count({"max_position_embeddings"}, 1 << 24, &config.n_ctx, gemma3 ? 131072 : 0));
    if (gemma3) {
      config.norm_eps = 1e-6;
      config.rope_theta = 1000000.0;
    }
    KVSERVE_RETURN_IF_ERROR(r.Float("rms_norm_eps", &config.norm_eps, !gemma3));
    if (root.contains("rope_theta") && !root["rope_theta"].is_null())
      config.rope_theta_given = true;
    KVSERVE_RETURN_IF_ERROR(r.Float("rope_theta", &config.rope_theta, false));
    KVSERVE_RETURN_IF_ERROR(ReadRope(root, source, config));
    config.tie_word_embeddings = config.is_gemma();
    KVSERVE_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &config.tie_word_embeddings));
    if (config.is_gemma()) {
      if (root.contains("hidden_activation") && !root["hidden_activation"].is_null()) {
        KVSERVE_RETURN_IF_ERROR(r.OneOf("hidden_activation", {"gelu_pytorch_tanh"}));
      } else {
        KVSERVE_RETURN_IF_ERROR(r.OneOf("hidden_act", {"gelu_pytorch_tanh"}));
      }
    } else {
      KVSERVE_RETURN_IF_ERROR(r.OneOf("hidden_act", {"silu"}));
    }
    const bool has_head_dim = root.contains("head_dim") && !root["head_dim"].is_null();
    if (has_head_dim || config.is_gemma()) {
      KVSERVE_RETURN_IF_ERROR(r.Count({"head_dim"}, 1 << 16, &config.head_dim, gemma3 ? 256 : 0));
      config.head_dim_given = true;
    } else if (config.n_embd % config.n_heads != 0) {
      return Status::InvalidArgument(source + ": hidden size " + std::to_string(config.n_embd) +
                                     " is not a multiple of the head count " +
                                     std::to_string(config.n_heads));
    } else {
      config.head_dim = config.n_embd / config.n_heads;
    }
    const std::string why_bias = "kvserve's " + config.gguf_arch() + " has no such biases";
    if (config.arch != HfArchitecture::kQwen2) {
      KVSERVE_RETURN_IF_ERROR(RequireBool(root, source, "attention_bias", false, true, why_bias));
    }
    KVSERVE_RETURN_IF_ERROR(RequireBool(root, source, "mlp_bias", false, true, why_bias));
    switch (config.arch) {
      case HfArchitecture::kMistral:
        KVSERVE_RETURN_IF_ERROR(r.Count({"sliding_window"}, 1 << 24, &config.sliding_window, -1));
        if (config.sliding_window < 0) config.sliding_window = 0;
        break;
      case HfArchitecture::kQwen2:
      case HfArchitecture::kQwen3:
      case HfArchitecture::kQwen3Moe:
        KVSERVE_RETURN_IF_ERROR(RequireBool(root, source, "use_sliding_window", false, true,
                                            "llama.cpp's Qwen files attend to the whole context"));
        break;
      case HfArchitecture::kPhi3:
        KVSERVE_RETURN_IF_ERROR(
            r.Count({"original_max_position_embeddings"}, 1 << 24, &config.original_ctx));
        KVSERVE_RETURN_IF_ERROR(r.Count({"sliding_window"}, 1 << 24, &config.sliding_window, -1));
        if (config.sliding_window < 0) config.sliding_window = 0;
        if (auto it = root.find("partial_rotary_factor");
            it != root.end() && !it->is_null() && *it != 1.0) {
          return Unsupported(source, "partial_rotary_factor", *it, "kvserve rotates whole heads");
        }
        break;
      case HfArchitecture::kGemma2:
      case HfArchitecture::kGemma3: {
        KVSERVE_RETURN_IF_ERROR(
            r.Count({"sliding_window"}, 1 << 24, &config.sliding_window, gemma3 ? 4096 : 0));
        if (auto it = root.find("query_pre_attn_scalar");
            it != root.end() && !it->is_null() && *it != config.head_dim) {
          return Unsupported(
              source, "query_pre_attn_scalar", *it,
              "kvserve scales queries by 1/sqrt(head_dim " + std::to_string(config.head_dim) + ")");
        }
        if (gemma3) {
          if (auto it = root.find("attn_logit_softcapping"); it != root.end() && !it->is_null()) {
            return Unsupported(source, "attn_logit_softcapping", *it, "Gemma 3 has none");
          }
          KVSERVE_RETURN_IF_ERROR(r.Float("final_logit_softcapping", &config.final_softcap, false));
          if (config.rope_local_theta == 0) config.rope_local_theta = 10000.0;
          KVSERVE_RETURN_IF_ERROR(r.Float("rope_local_base_freq", &config.rope_local_theta, false));
          KVSERVE_RETURN_IF_ERROR(ReadGemma3Pattern(root, source, config));
        } else {
          KVSERVE_RETURN_IF_ERROR(r.Float("attn_logit_softcapping", &config.attn_softcap, true));
          KVSERVE_RETURN_IF_ERROR(r.Float("final_logit_softcapping", &config.final_softcap, true));
        }
        break;
      }
      default:
        break;
    }
    if (config.arch == HfArchitecture::kQwen3Moe) {
      KVSERVE_RETURN_IF_ERROR(r.Count({"num_experts"}, 4096, &config.n_experts));
      KVSERVE_RETURN_IF_ERROR(
          r.Count({"num_experts_per_tok"}, config.n_experts, &config.n_experts_used));
      KVSERVE_RETURN_IF_ERROR(r.Count({"moe_intermediate_size"}, kMaxDim, &config.n_ff_expert));
      KVSERVE_RETURN_IF_ERROR(RequireBool(root, source, "norm_topk_prob", true, false,
                                          "kvserve renormalises the top-k expert weights"));
      int step = 1;
      KVSERVE_RETURN_IF_ERROR(r.Count({"decoder_sparse_step"}, 4096, &step, 1));
      if (step != 1) {
        return Unsupported(source, "decoder_sparse_step", root["decoder_sparse_step"],
                           "every layer must be a mixture of experts");
      }
      if (auto it = root.find("mlp_only_layers");
          it != root.end() && !it->is_null() && !(it->is_array() && it->empty())) {
        return Unsupported(source, "mlp_only_layers", *it,
                           "every layer must be a mixture of experts");
      }
    }
  }
  if (config.n_heads % config.n_kv_heads != 0) {
    return Status::InvalidArgument(source + ": head count " + std::to_string(config.n_heads) +
                                   " is not a multiple of num_key_value_heads " +
                                   std::to_string(config.n_kv_heads));
  }
  if (config.arch != HfArchitecture::kGpt2 && config.head_dim % 2 != 0) {
    return Status::InvalidArgument(source + ": head dimension " + std::to_string(config.head_dim) +
                                   " is odd; RoPE needs pairs");
  }
  if (config.arch == HfArchitecture::kGpt2 && config.n_embd % config.n_heads != 0) {
    return Status::InvalidArgument(source + ": hidden size " + std::to_string(config.n_embd) +
                                   " is not a multiple of the head count " +
                                   std::to_string(config.n_heads));
  }
  return config;
}

Result<HfConfig> HfConfig::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

}  // namespace kvserve
