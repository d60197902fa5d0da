#include "engine/sequence_runner.h"

#include <numeric>
#include <string>

namespace kvserve {

namespace {
constexpr int kBlockSize = 16;
}

SequenceRunner::SequenceRunner(const Model& model, const KvFormat& kv_type, int n_ctx,
                               int n_threads)
    : model_(model),
      n_ctx_(n_ctx),
      kv_(model.kv_spec(), kv_type, kBlockSize, (n_ctx + kBlockSize - 1) / kBlockSize,
          model.backend().allocator()),
      runner_(model, kv_, n_threads),
      // An encoder-only model has no KV groups (and no blocks); Check refuses it.
      block_table_(model.kv_spec().groups.empty() ? 0 : kv_.n_blocks()) {
  std::iota(block_table_.begin(), block_table_.end(), 0);
}

Status SequenceRunner::Check(std::span<const int32_t> tokens) const {
  if (tokens.empty()) return Status::InvalidArgument("no tokens to process");
  KVSERVE_RETURN_IF_ERROR(model_.CheckGeneratesText());
  if (model_.cross_group() >= 0) {
    return Status::InvalidArgument(
        "the model (" + model_.config().arch +
        ") is an encoder-decoder: it runs through the engine, which encodes its input first "
        "(kvserve run, serve, bench --cache-compare)");
  }
  if (tokens_.size() + tokens.size() > static_cast<size_t>(n_ctx_)) {
    return Status::InvalidArgument("context full: " + std::to_string(tokens_.size()) + " + " +
                                   std::to_string(tokens.size()) +
                                   " tokens exceed the context size " + std::to_string(n_ctx_));
  }
  const int n_vocab = model_.config().n_vocab;
  for (int32_t token : tokens) {
    if (token < 0 || token >= n_vocab) {
      return Status::InvalidArgument("token id " + std::to_string(token) +
                                     " is out of range (vocabulary " + std::to_string(n_vocab) +
                                     ")");
    }
  }
  return Status::Ok();
}

std::span<const float> SequenceRunner::Run(int first_position, bool all_logits) {
  return runner_.RunSequence(tokens_, first_position, block_table_, all_logits).data;
}

Result<std::span<const float>> SequenceRunner::Append(std::span<const int32_t> tokens,
                                                      bool all_logits) {
  KVSERVE_RETURN_IF_ERROR(Check(tokens));
  const int first = n_past();
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  return Run(first, all_logits);
}

Result<std::span<const float>> SequenceRunner::AppendRecompute(std::span<const int32_t> tokens) {
  KVSERVE_RETURN_IF_ERROR(Check(tokens));
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  return Run(0, false);
}

void SequenceRunner::Truncate(int n) {
  if (n < n_past()) tokens_.resize(n);
}

}  // namespace kvserve
