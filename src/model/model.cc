#include "model/model.h"

#include <algorithm>

#include "model/architecture.h"
#include "model/hf_folder.h"

namespace kvserve {

Model::Model(GgufFile file, ModelConfig config, const Backend& backend)
    : file_(std::move(file)), config_(std::move(config)), backend_(backend) {}

KvSpec Model::kv_spec() const {
  return KvSpec::Uniform(config_.n_layers, config_.n_kv_heads, config_.head_dim);
}

Status Model::CheckGeneratesText() const {
  if (!encoder_only()) return Status::Ok();
  return Status::InvalidArgument("a " + config_.arch +
                                 " model has no decoder: it computes embeddings (`kvserve embed`, "
                                 "POST /v1/embeddings), not text");
}

Status Model::CheckContextSize(int n_ctx) const {
  const int limit = max_positions();
  if (limit > 0 && n_ctx > limit) {
    return Status::InvalidArgument("context size " + std::to_string(n_ctx) + " exceeds the " +
                                   std::to_string(limit) + " positions of this " + config_.arch +
                                   " model");
  }
  return Status::Ok();
}

void Model::DeclareWeights(const WeightList& weights) {
  owned_matrices_.clear();
  for (WeightMatrix* m : weights.matrices) {
    if (m == nullptr ||
        std::find(owned_matrices_.begin(), owned_matrices_.end(), m) != owned_matrices_.end()) {
      continue;
    }
    owned_matrices_.push_back(m);
  }
  matrices_.assign(owned_matrices_.begin(), owned_matrices_.end());
  vectors_.clear();
  for (WeightVector* v : weights.vectors) {
    if (v == nullptr || v->empty() ||
        std::find(vectors_.begin(), vectors_.end(), v) != vectors_.end()) {
      continue;
    }
    vectors_.push_back(v);
  }
  routed_ = weights.routed;
  backend_.PrepareWeights(owned_matrices_, vectors_, file_, prepared_storage_);
}

double Model::TokenShare(const WeightMatrix* m) const {
  for (const auto& [matrix, share] : routed_) {
    if (matrix == m) return share;
  }
  return 1.0;
}

Result<std::unique_ptr<Model>> LoadModel(const std::string& path, const Backend& backend) {
  auto file = HfFolder::IsFolder(path) ? HfFolder::Open(path) : GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return LoadModel(std::move(file).value(), backend);
}

Result<std::unique_ptr<Model>> LoadModel(GgufFile file, const Backend& backend) {
  auto name = file.GetString("general.architecture");
  if (!name.ok()) return name.status();
  if (const Architecture* arch = FindArchitecture(*name); arch != nullptr) {
    auto config = ModelConfig::FromGguf(file);
    if (!config.ok()) return config.status();
    return arch->load(std::move(file), std::move(config).value(), backend);
  }
  return Status::InvalidArgument(file.path() + ": unsupported architecture '" + std::string(*name) +
                                 "' (supported: " + SupportedArchitectures() + ")");
}

}  // namespace kvserve
