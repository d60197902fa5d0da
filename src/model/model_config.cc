#include "model/model_config.h"

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

}  // namespace kvserve
