#include "engine/sequence_runner.h"

#include <numeric>
#include <string>

namespace kvserve {

namespace {
constexpr int kBlockSize = 16;
}

SequenceRunner::SequenceRunner(const Transformer& model, KvType kv_type, int n_ctx,
                               ThreadPool& pool)
    : model_(model),
      pool_(pool),
      n_ctx_(n_ctx),
      storage_(model.config(), kv_type, kBlockSize, (n_ctx + kBlockSize - 1) / kBlockSize) {
  batch_.block_tables.resize(1);
  batch_.block_tables[0].resize(storage_.n_blocks());
  std::iota(batch_.block_tables[0].begin(), batch_.block_tables[0].end(), 0);
}

Status SequenceRunner::Check(std::span<const int32_t> tokens) const {
  if (tokens.empty()) return Status::InvalidArgument("no tokens to process");
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
  const int n = n_past() - first_position;
  batch_.tokens.assign(tokens_.begin() + first_position, tokens_.end());
  batch_.positions.resize(n);
  batch_.slots.resize(n);
  batch_.seq_index.assign(n, 0);
  batch_.logit_rows.clear();
  for (int i = 0; i < n; ++i) {
    batch_.positions[i] = first_position + i;
    batch_.slots[i] = first_position + i;  // block table is the identity
    if (all_logits) batch_.logit_rows.push_back(i);
  }
  if (!all_logits) batch_.logit_rows.push_back(n - 1);
  const size_t n_vocab = model_.config().n_vocab;
  logits_.resize(batch_.logit_rows.size() * n_vocab);
  model_.Forward(batch_, storage_.views(), scratch_, pool_, logits_.data());
  return std::span<const float>(logits_.data(), logits_.size());
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
