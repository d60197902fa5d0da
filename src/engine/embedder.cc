#include "engine/embedder.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "model/forward_batch.h"

namespace kvserve {

const char* PoolingName(Pooling pooling) {
  switch (pooling) {
    case Pooling::kNone:
      return "none";
    case Pooling::kMean:
      return "mean";
    case Pooling::kCls:
      return "cls";
    case Pooling::kLast:
      return "last";
  }
  return "?";
}

Result<Pooling> ParsePooling(std::string_view name, std::string_view field) {
  for (Pooling p : {Pooling::kNone, Pooling::kMean, Pooling::kCls, Pooling::kLast}) {
    if (name == PoolingName(p)) return p;
  }
  return Status::InvalidArgument(std::string(field) + ": unknown pooling '" + std::string(name) +
                                 "' (none, mean, cls or last)");
}

Result<Pooling> FilePooling(const Model& model) {
  const std::string key = model.config().arch + ".pooling_type";
  if (model.file().Find(key) == nullptr) return Pooling::kMean;
  auto value = model.file().GetInt(key);
  if (!value.ok()) return value.status();
  switch (*value) {
    case 0:
      return Pooling::kNone;
    case 1:
      return Pooling::kMean;
    case 2:
      return Pooling::kCls;
    case 3:
      return Pooling::kLast;
    default:
      return Status::InvalidArgument("'" + key + "' = " + std::to_string(*value) +
                                     " is not a pooling kvserve computes (0 none, 1 mean, 2 cls, "
                                     "3 last; 4 is a reranker's)");
  }
}

void NormalizeEmbedding(std::span<float> v, int norm) {
  double sum = 0;
  if (norm == -1) {
    return;
  } else if (norm == 0) {
    for (float x : v) sum = std::max(sum, static_cast<double>(std::fabs(x)));
    sum /= 32760.0;
  } else if (norm == 2) {
    for (float x : v) sum += static_cast<double>(x) * x;
    sum = std::sqrt(sum);
  } else {
    for (float x : v) sum += std::pow(std::fabs(static_cast<double>(x)), norm);
    sum = std::pow(sum, 1.0 / norm);
  }
  const float scale = sum > 0 ? static_cast<float>(1.0 / sum) : 0.0f;
  for (float& x : v) x *= scale;
}

Status CheckNormalize(int norm, std::string_view field) {
  if (norm >= -1) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + " = " + std::to_string(norm) +
                                 " (-1 none, 0 max-abs, 1 taxicab, 2 euclidean, p > 2 p-norm)");
}

Embedder::Embedder(const Model& model, int n_threads, int max_input_tokens, int max_batch_tokens)
    : model_(model),
      n_threads_(n_threads),
      max_input_tokens_(max_input_tokens),
      max_batch_tokens_(std::max(1, max_batch_tokens)) {}

Status Embedder::Supported() const {
  if (model_.computes_embeddings()) return Status::Ok();
  return Status::InvalidArgument("a " + model_.config().arch +
                                 " model computes no embeddings in kvserve (t5 and t5encoder "
                                 "files do: their encoder's output)");
}

Status Embedder::Check(std::span<const std::vector<int32_t>> inputs) const {
  KVSERVE_RETURN_IF_ERROR(Supported());
  if (inputs.empty()) return Status::InvalidArgument("input: no text to embed");
  const int n_vocab = model_.config().n_vocab;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "input[" + std::to_string(i) + "]";
    if (inputs[i].empty()) return Status::InvalidArgument(name + " is empty (no tokens)");
    if (static_cast<int64_t>(inputs[i].size()) > max_input_tokens_) {
      return Status::InvalidArgument(name + " has " + std::to_string(inputs[i].size()) +
                                     " tokens, more than the context's " +
                                     std::to_string(max_input_tokens_));
    }
    for (int32_t t : inputs[i]) {
      if (t < 0 || t >= n_vocab) {
        return Status::InvalidArgument(name + ": token id " + std::to_string(t) +
                                       " is out of range (vocabulary " + std::to_string(n_vocab) +
                                       ")");
      }
    }
  }
  return Status::Ok();
}

void Embedder::EncodeBatchOf(std::span<const std::vector<int32_t>> inputs, size_t first,
                             size_t count, std::vector<float>& states) {
  EncodeBatch batch;
  for (size_t i = first; i < first + count; ++i) {
    batch.tokens.insert(batch.tokens.end(), inputs[i].begin(), inputs[i].end());
    batch.lengths.push_back(static_cast<int32_t>(inputs[i].size()));
  }
  states.assign(static_cast<size_t>(batch.n_tokens()) * model_.config().n_embd, 0.0f);
  model_.Embed(batch, states.data(), *workspace_);
}

namespace {

// The pooled vector of one input's states ([n, dim], row after row).
std::vector<float> Pool(const float* states, int n, int dim, Pooling pooling) {
  if (pooling == Pooling::kCls) return {states, states + dim};
  if (pooling == Pooling::kLast) {
    const float* last = states + static_cast<size_t>(n - 1) * dim;
    return {last, last + dim};
  }
  std::vector<double> sum(dim, 0.0);  // kMean: in token order, in double
  for (int t = 0; t < n; ++t) {
    for (int d = 0; d < dim; ++d) sum[d] += states[static_cast<size_t>(t) * dim + d];
  }
  std::vector<float> out(dim);
  for (int d = 0; d < dim; ++d) out[d] = static_cast<float>(sum[d] / n);
  return out;
}

}  // namespace

Result<Embeddings> Embedder::Run(std::span<const std::vector<int32_t>> inputs,
                                 const EmbedOptions& options) {
  KVSERVE_RETURN_IF_ERROR(Check(inputs));
  KVSERVE_RETURN_IF_ERROR(CheckNormalize(options.normalize, "normalize"));
  std::lock_guard<std::mutex> lock(mutex_);
  if (workspace_ == nullptr) {
    workspace_ = model_.backend().NewWorkspace(WorkspaceOptions{.n_threads = n_threads_});
  }
  Embeddings out;
  out.dim = model_.config().n_embd;
  std::vector<float> states;
  for (size_t first = 0; first < inputs.size();) {
    // Inputs in order while their tokens fit the batch (at least one).
    size_t count = 0;
    size_t tokens = 0;
    while (first + count < inputs.size() &&
           (count == 0 ||
            tokens + inputs[first + count].size() <= static_cast<size_t>(max_batch_tokens_))) {
      tokens += inputs[first + count].size();
      ++count;
    }
    EncodeBatchOf(inputs, first, count, states);
    const float* at = states.data();
    for (size_t i = first; i < first + count; ++i) {
      const int n = static_cast<int>(inputs[i].size());
      if (options.pooling == Pooling::kNone) {
        for (int t = 0; t < n; ++t, at += out.dim) out.vectors.emplace_back(at, at + out.dim);
      } else {
        out.vectors.push_back(Pool(at, n, out.dim, options.pooling));
        at += static_cast<size_t>(n) * out.dim;
      }
      out.input_tokens.push_back(n);
      out.total_tokens += n;
    }
    first += count;
  }
  for (std::vector<float>& v : out.vectors) NormalizeEmbedding(v, options.normalize);
  return out;
}

}  // namespace kvserve
