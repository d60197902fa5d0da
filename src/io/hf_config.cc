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

  // The first of `keys` present, as a positive integer up to `max`; missing: `fallback` if > 0.
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
    if (fallback > 0) {
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

}  // namespace

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
  if (auto it = root.find("architectures");
      it != root.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    config.architecture = (*it)[0].get<std::string>();
  }
  if (config.architecture == "GPT2LMHeadModel" ||
      (config.architecture.empty() && model_type == "gpt2")) {
    config.arch = HfArchitecture::kGpt2;
  } else if (config.architecture == "LlamaForCausalLM" ||
             (config.architecture.empty() && model_type == "llama")) {
    config.arch = HfArchitecture::kLlama;
  } else {
    return Status::InvalidArgument(source + ": unsupported architecture '" + config.architecture +
                                   "' (model_type '" + model_type +
                                   "'; supported: GPT2LMHeadModel, LlamaForCausalLM)");
  }
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
  } else {
    KVSERVE_RETURN_IF_ERROR(r.Count({"hidden_size"}, kMaxDim, &config.n_embd));
    KVSERVE_RETURN_IF_ERROR(r.Count({"num_hidden_layers"}, 4096, &config.n_layers));
    KVSERVE_RETURN_IF_ERROR(r.Count({"num_attention_heads"}, 4096, &config.n_heads));
    KVSERVE_RETURN_IF_ERROR(
        r.Count({"num_key_value_heads"}, 4096, &config.n_kv_heads, config.n_heads));
    KVSERVE_RETURN_IF_ERROR(r.Count({"intermediate_size"}, kMaxDim, &config.n_ff));
    KVSERVE_RETURN_IF_ERROR(r.Count({"max_position_embeddings"}, 1 << 24, &config.n_ctx));
    KVSERVE_RETURN_IF_ERROR(r.Float("rms_norm_eps", &config.norm_eps, true));
    KVSERVE_RETURN_IF_ERROR(r.Float("rope_theta", &config.rope_theta, false));
    KVSERVE_RETURN_IF_ERROR(r.Bool("tie_word_embeddings", &config.tie_word_embeddings));
    KVSERVE_RETURN_IF_ERROR(r.OneOf("hidden_act", {"silu"}));
    if (auto it = root.find("rope_scaling"); it != root.end() && !it->is_null()) {
      return Status::InvalidArgument(source + ": 'rope_scaling' = " + it->dump() +
                                     " is not supported (only plain RoPE)");
    }
    if (auto it = root.find("head_dim"); it != root.end() && !it->is_null()) {
      if (config.n_embd % config.n_heads != 0 || !it->is_number_integer() ||
          it->get<int64_t>() != config.n_embd / config.n_heads) {
        return Status::InvalidArgument(
            source + ": 'head_dim' = " + it->dump() +
            " differs from hidden_size / num_attention_heads = " + std::to_string(config.n_embd) +
            " / " + std::to_string(config.n_heads));
      }
    }
  }
  if (config.n_embd % config.n_heads != 0) {
    return Status::InvalidArgument(source + ": hidden size " + std::to_string(config.n_embd) +
                                   " is not a multiple of the head count " +
                                   std::to_string(config.n_heads));
  }
  if (config.n_heads % config.n_kv_heads != 0) {
    return Status::InvalidArgument(source + ": head count " + std::to_string(config.n_heads) +
                                   " is not a multiple of num_key_value_heads " +
                                   std::to_string(config.n_kv_heads));
  }
  if ((config.n_embd / config.n_heads) % 2 != 0 && config.arch == HfArchitecture::kLlama) {
    return Status::InvalidArgument(source + ": head dimension " +
                                   std::to_string(config.n_embd / config.n_heads) +
                                   " is odd; RoPE needs pairs");
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
