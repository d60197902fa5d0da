#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace kvserve {

namespace {

// Reads a positive integer hyper-parameter no larger than `max`.
Status ReadCount(const GgufFile& file, const std::string& key, int64_t max, int* out) {
  auto value = file.GetUint(key);
  if (!value.ok()) return value.status();
  if (*value == 0 || *value > static_cast<uint64_t>(max)) {
    return Status::InvalidArgument(file.path() + ": metadata key '" + key +
                                   "' = " + std::to_string(*value) + " is out of range (1 to " +
                                   std::to_string(max) + ")");
  }
  *out = static_cast<int>(*value);
  return Status::Ok();
}

// feed_forward_length: one width, or one per layer (Gemma 4's double-wide MLP in its shared-KV
// layers): n_ff is then the widest and n_ff_layers the list. Needs n_layers.
Status ReadFeedForward(const GgufFile& file, const std::string& key, ModelConfig& config) {
  constexpr int64_t kMaxDim = 1 << 20;
  const GgufValue* v = file.Find(key);
  if (v == nullptr || v->type != GgufValueType::kArray) {
    return ReadCount(file, key, kMaxDim, &config.n_ff);
  }
  auto widths = file.GetIntArray(key);
  if (!widths.ok()) return widths.status();
  if (widths->size() != static_cast<size_t>(config.n_layers)) {
    return Status::InvalidArgument(file.path() + ": metadata key '" + key + "' has " +
                                   std::to_string(widths->size()) + " entries, expected " +
                                   std::to_string(config.n_layers) + " (one per layer)");
  }
  for (int64_t w : *widths) {
    if (w < 1 || w > kMaxDim) {
      return Status::InvalidArgument(file.path() + ": metadata key '" + key + "' holds " +
                                     std::to_string(w) + ", out of range (1 to " +
                                     std::to_string(kMaxDim) + ")");
    }
    config.n_ff_layers.push_back(static_cast<int>(w));
    config.n_ff = std::max(config.n_ff, static_cast<int>(w));
  }
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  auto arch_name = file.GetString("general.architecture");
  if (!arch_name.ok()) return arch_name.status();
  ModelConfig config;
  config.arch = std::string(*arch_name);
  if (file.Find("general.name")) {
    auto name = file.GetString("general.name");
    if (!name.ok()) return name.status();
    config.name = std::string(*name);
  }
  const std::string prefix = std::string(*arch_name) + ".";
  constexpr int64_t kMaxDim = 1 << 20;
  KVSERVE_RETURN_IF_ERROR(ReadCount(file, prefix + "embedding_length", kMaxDim, &config.n_embd));
  KVSERVE_RETURN_IF_ERROR(ReadCount(file, prefix + "block_count", 4096, &config.n_layers));
  KVSERVE_RETURN_IF_ERROR(ReadCount(file, prefix + "attention.head_count", 4096, &config.n_heads));
  // A mixture of experts may have no dense feed-forward, and llama.cpp's converter writes its
  // width only from a config's intermediate_size: without the key n_ff stays 0 there.
  if (file.Find(prefix + "feed_forward_length") != nullptr ||
      file.Find(prefix + "expert_feed_forward_length") == nullptr) {
    KVSERVE_RETURN_IF_ERROR(ReadFeedForward(file, prefix + "feed_forward_length", config));
  }
  KVSERVE_RETURN_IF_ERROR(ReadCount(file, prefix + "context_length", 1 << 24, &config.n_ctx_train));
  config.n_kv_heads = config.n_heads;
  if (file.Find(prefix + "attention.head_count_kv")) {
    KVSERVE_RETURN_IF_ERROR(
        ReadCount(file, prefix + "attention.head_count_kv", 4096, &config.n_kv_heads));
  }
  const std::string key_length = prefix + "attention.key_length";
  if (file.Find(key_length)) {
    KVSERVE_RETURN_IF_ERROR(ReadCount(file, key_length, 1 << 16, &config.head_dim));
    const std::string value_length = prefix + "attention.value_length";
    int v_dim = config.head_dim;
    if (file.Find(value_length)) {
      KVSERVE_RETURN_IF_ERROR(ReadCount(file, value_length, 1 << 16, &v_dim));
    }
    if (v_dim != config.head_dim) {
      return Status::InvalidArgument(file.path() + ": metadata key '" + value_length +
                                     "' = " + std::to_string(v_dim) + " differs from key_length " +
                                     std::to_string(config.head_dim) + " (not supported)");
    }
  } else if (config.n_embd % config.n_heads != 0) {
    return Status::InvalidArgument(
        file.path() + ": embedding_length " + std::to_string(config.n_embd) +
        " is not a multiple of head_count " + std::to_string(config.n_heads));
  }
  if (config.n_heads % config.n_kv_heads != 0) {
    return Status::InvalidArgument(file.path() + ": head_count " + std::to_string(config.n_heads) +
                                   " is not a multiple of head_count_kv " +
                                   std::to_string(config.n_kv_heads));
  }
  if (config.head_dim == 0) config.head_dim = config.n_embd / config.n_heads;
  {
    auto base = file.GetFloatOr(prefix + "rope.freq_base", 10000.0);
    if (!base.ok()) return base.status();
    config.rope_freq_base = static_cast<float>(*base);
    auto rope_dims = file.GetUintOr(prefix + "rope.dimension_count", config.head_dim);
    if (!rope_dims.ok()) return rope_dims.status();
    if (*rope_dims == 0 || *rope_dims > static_cast<uint64_t>(config.head_dim) || *rope_dims % 2) {
      return Status::InvalidArgument(file.path() + ": metadata key '" + prefix +
                                     "rope.dimension_count' = " + std::to_string(*rope_dims) +
                                     " must be even and at most head_dim " +
                                     std::to_string(config.head_dim));
    }
    config.rope_dims = static_cast<int>(*rope_dims);
  }
  const TensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) {
    return Status::InvalidArgument(file.path() + ": missing required tensor 'token_embd.weight'");
  }
  if (embd->dims.size() != 2 || embd->dims[1] > std::numeric_limits<int>::max()) {
    return Status::InvalidArgument(file.path() + ": tensor 'token_embd.weight' has shape " +
                                   embd->ShapeString() + ", expected [" +
                                   std::to_string(config.n_embd) + ", n_vocab]");
  }
  config.n_vocab = static_cast<int>(embd->dims[1]);
  config.tied_output = file.FindTensor("output.weight") == nullptr;
  return config;
}

}  // namespace kvserve

namespace kvserve {

Status ModelConfig::ReadNormEps(const GgufFile& file, const std::string& key) {
  auto eps = file.GetFloat(arch + "." + key);
  if (!eps.ok()) return eps.status();
  norm_eps = static_cast<float>(*eps);
  if (!(norm_eps > 0.0f) || norm_eps > 1.0f) {
    return Status::InvalidArgument(file.path() + ": metadata key '" + arch + "." + key +
                                   "' = " + std::to_string(norm_eps) + " is out of range (0, 1]");
  }
  return Status::Ok();
}

namespace {

std::string ValueString(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::kString:
      return "'" + std::string(v.str) + "'";
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return std::to_string(v.f);
    case GgufValueType::kInt8:
    case GgufValueType::kInt16:
    case GgufValueType::kInt32:
    case GgufValueType::kInt64:
      return std::to_string(v.i);
    case GgufValueType::kArray:
      return "an array";
    default:
      return std::to_string(v.u);
  }
}

}  // namespace

// YaRN's own keys, as llama.cpp reads them: the original context (default: the training context)
// and rope.scaling.attn_factor (default 1). llama.cpp takes beta_fast 32 and beta_slow 1 from its
// defaults whatever the file says, so yarn_beta_* and yarn_ext_factor keys are refused.
Status ModelConfig::ReadYarn(const GgufFile& file) {
  const std::string prefix = arch + ".rope.scaling.";
  rope_yarn.enabled = true;
  auto orig = file.GetUintOr(prefix + "original_context_length", n_ctx_train);
  if (!orig.ok()) return orig.status();
  if (*orig == 0 || *orig > (1u << 30)) {
    return Status::InvalidArgument(file.path() + ": metadata key '" + prefix +
                                   "original_context_length' = " + std::to_string(*orig) +
                                   " is out of range (1 to 2^30)");
  }
  rope_yarn.original_context = static_cast<int>(*orig);
  auto attn = file.GetFloatOr(prefix + "attn_factor", 1.0);
  if (!attn.ok()) return attn.status();
  if (!(*attn > 0.0) || !std::isfinite(*attn)) {
    return Status::InvalidArgument(file.path() + ": metadata key '" + prefix +
                                   "attn_factor' = " + std::to_string(*attn) + " must be positive");
  }
  rope_yarn.attn_factor = static_cast<float>(*attn);
  return Status::Ok();
}

Status ModelConfig::ReadRopeScaling(const GgufFile& file, bool allow_yarn) {
  const std::string prefix = arch + ".rope.scaling.";
  const std::string implemented = allow_yarn ? "none, linear and yarn" : "none and linear";
  auto unsupported = [&](const std::string& key, const GgufValue& value) {
    return Status::InvalidArgument(
        file.path() + ": RoPE scaling '" + key + "' = " + ValueString(value) +
        " is not supported (kvserve implements " + implemented + " for " + arch + ")");
  };
  std::string type;  // "" when the file has no type key
  rope_yarn = RopeYarn{};
  if (const GgufValue* value = file.Find(prefix + "type")) {
    auto name = file.GetString(prefix + "type");
    if (!name.ok()) return name.status();
    type = std::string(*name);
    const bool yarn = allow_yarn && type == "yarn";
    if (type != "none" && type != "linear" && !yarn) return unsupported(prefix + "type", *value);
    if (yarn) KVSERVE_RETURN_IF_ERROR(ReadYarn(file));
  }
  // The factor, or the older "<arch>.rope.scale_linear" that llama.cpp still reads in its place.
  rope_position_scale = 1.0f;
  std::string factor_key = prefix + "factor";
  if (!file.Find(factor_key) && file.Find(arch + ".rope.scale_linear")) {
    factor_key = arch + ".rope.scale_linear";
  }
  if (const GgufValue* value = file.Find(factor_key)) {
    auto factor = file.GetFloat(factor_key);
    if (!factor.ok()) return factor.status();
    if (!(*factor > 0.0)) {
      return Status::InvalidArgument(file.path() + ": metadata key '" + factor_key +
                                     "' = " + std::to_string(*factor) + " must be positive");
    }
    if (type == "none" && *factor != 1.0) {
      return Status::InvalidArgument(file.path() + ": RoPE scaling '" + factor_key +
                                     "' = " + ValueString(*value) + " contradicts '" + prefix +
                                     "type' = 'none'");
    }
    // As llama.cpp: a factor without a type is linear scaling, in float.
    rope_position_scale = 1.0f / static_cast<float>(*factor);
  }
  // What only YaRN (or another method) reads; original_context_length and finetuned are
  // informational without such a type (phi3 files carry original_context_length).
  for (const auto& [key, value] : file.metadata()) {
    if (key.rfind(prefix, 0) != 0) continue;
    const std::string_view rest = std::string_view(key).substr(prefix.size());
    if (rest == "type" || rest == "factor" || rest == "original_context_length" ||
        rest == "finetuned") {
      continue;
    }
    if (rest == "attn_factor" && value.type == GgufValueType::kFloat32 &&
        (value.f == 1.0 || rope_yarn.enabled)) {
      continue;
    }
    return unsupported(key, value);
  }
  return Status::Ok();
}

Result<std::vector<bool>> ReadLayerFlags(const GgufFile& file, const std::string& key, int n) {
  const GgufValue* v = file.Find(key);
  if (v == nullptr) return Status::InvalidArgument(file.path() + ": missing key '" + key + "'");
  std::vector<bool> flags;
  if (v->type == GgufValueType::kArray && v->array_type == GgufValueType::kBool) {
    for (uint64_t i = 0; i < v->array_size; ++i) flags.push_back(v->array_data[i] != 0);
  } else {
    auto ints = file.GetIntArray(key);
    if (!ints.ok()) return ints.status();
    for (int64_t x : *ints) flags.push_back(x != 0);
  }
  if (static_cast<int>(flags.size()) != n) {
    return Status::InvalidArgument(file.path() + ": metadata key '" + key + "' has " +
                                   std::to_string(flags.size()) + " entries, expected " +
                                   std::to_string(n) + " (one per layer)");
  }
  return flags;
}

}  // namespace kvserve
