#include "model/model_config.h"

#include <limits>

namespace kvserve {

const char* ArchitectureName(Architecture arch) {
  return arch == Architecture::kLlama ? "llama" : "gpt2";
}

const char* SupportedArchitectures() { return "llama, gpt2"; }

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

}  // namespace

Result<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  auto arch_name = file.GetString("general.architecture");
  if (!arch_name.ok()) return arch_name.status();
  ModelConfig config;
  if (*arch_name == "llama") {
    config.arch = Architecture::kLlama;
  } else if (*arch_name == "gpt2") {
    config.arch = Architecture::kGpt2;
  } else {
    return Status::InvalidArgument(file.path() + ": unsupported architecture '" +
                                   std::string(*arch_name) +
                                   "' (supported: " + SupportedArchitectures() + ")");
  }
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
  KVSERVE_RETURN_IF_ERROR(ReadCount(file, prefix + "feed_forward_length", kMaxDim, &config.n_ff));
  KVSERVE_RETURN_IF_ERROR(ReadCount(file, prefix + "context_length", 1 << 24, &config.n_ctx_train));
  config.n_kv_heads = config.n_heads;
  if (file.Find(prefix + "attention.head_count_kv")) {
    KVSERVE_RETURN_IF_ERROR(
        ReadCount(file, prefix + "attention.head_count_kv", 4096, &config.n_kv_heads));
  }
  if (config.n_embd % config.n_heads != 0) {
    return Status::InvalidArgument(
        file.path() + ": embedding_length " + std::to_string(config.n_embd) +
        " is not a multiple of head_count " + std::to_string(config.n_heads));
  }
  if (config.n_heads % config.n_kv_heads != 0) {
    return Status::InvalidArgument(file.path() + ": head_count " + std::to_string(config.n_heads) +
                                   " is not a multiple of head_count_kv " +
                                   std::to_string(config.n_kv_heads));
  }
  config.head_dim = config.n_embd / config.n_heads;
  if (config.arch == Architecture::kLlama) {
    auto eps = file.GetFloat(prefix + "attention.layer_norm_rms_epsilon");
    if (!eps.ok()) return eps.status();
    config.norm_eps = static_cast<float>(*eps);
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
  } else {
    auto eps = file.GetFloat(prefix + "attention.layer_norm_epsilon");
    if (!eps.ok()) return eps.status();
    config.norm_eps = static_cast<float>(*eps);
  }
  if (!(config.norm_eps > 0.0f) || config.norm_eps > 1.0f) {
    return Status::InvalidArgument(file.path() + ": norm epsilon " +
                                   std::to_string(config.norm_eps) + " is out of range");
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

uint64_t ModelConfig::KvBytesPerToken(uint64_t bytes_per_element) const {
  return 2ull * n_layers * n_kv_heads * head_dim * bytes_per_element;
}

}  // namespace kvserve
