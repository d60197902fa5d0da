#include "support/forward.h"

#include <algorithm>
#include <numeric>

#include "engine/sequence_runner.h"
#include "kv/kv_cache.h"

namespace kvserve::testing {

std::vector<float> AllPositionLogits(const Model& model, const std::vector<int32_t>& tokens) {
  constexpr int kBlockSize = 16;
  const ModelConfig& config = model.config();
  const int n = static_cast<int>(tokens.size());
  const int n_blocks = (n + kBlockSize - 1) / kBlockSize;
  KvCache kv(model.kv_spec(), KvType::kF32, kBlockSize, n_blocks, model.backend().allocator());
  ForwardBatch batch;
  batch.Clear(kv.n_groups());
  batch.tokens = tokens;
  for (KvGroupBatch& group : batch.kv_groups) {
    group.block_tables.emplace_back(n_blocks);
    std::iota(group.block_tables[0].begin(), group.block_tables[0].end(), 0);
  }
  for (int i = 0; i < n; ++i) {
    batch.positions.push_back(i);
    batch.seq_index.push_back(0);
    for (KvGroupBatch& group : batch.kv_groups) group.slots.push_back(i);
    batch.logit_rows.push_back(i);
  }
  auto workspace = model.backend().NewWorkspace(WorkspaceOptions{.n_threads = 1});
  std::vector<float> logits(static_cast<size_t>(n) * config.n_vocab);
  model.Forward(batch, kv, *workspace, logits.data());
  return logits;
}

std::vector<float> OneByOneLogits(const Model& model, const std::vector<int32_t>& tokens) {
  constexpr int kBlockSize = 16;
  const int n_vocab = model.config().n_vocab;
  const int n = static_cast<int>(tokens.size());
  const int n_blocks = (n + kBlockSize - 1) / kBlockSize;
  KvCache kv(model.kv_spec(), KvType::kF32, kBlockSize, n_blocks, model.backend().allocator());
  auto workspace = model.backend().NewWorkspace(WorkspaceOptions{.n_threads = 1});
  std::vector<float> logits(static_cast<size_t>(n) * n_vocab);
  for (int i = 0; i < n; ++i) {
    ForwardBatch batch;
    batch.Clear(kv.n_groups());
    batch.tokens = {tokens[i]};
    batch.positions = {i};
    batch.seq_index = {0};
    batch.logit_rows = {0};
    for (KvGroupBatch& group : batch.kv_groups) {
      group.block_tables.emplace_back(n_blocks);
      std::iota(group.block_tables[0].begin(), group.block_tables[0].end(), 0);
      group.slots = {i};
    }
    model.Forward(batch, kv, *workspace, logits.data() + static_cast<size_t>(i) * n_vocab);
  }
  return logits;
}

std::vector<int> ArgmaxPerRow(const std::vector<float>& logits, int n_vocab) {
  std::vector<int> out;
  for (size_t row = 0; row + n_vocab <= logits.size(); row += n_vocab) {
    const auto first = logits.begin() + static_cast<std::ptrdiff_t>(row);
    out.push_back(static_cast<int>(std::max_element(first, first + n_vocab) - first));
  }
  return out;
}

std::vector<int32_t> ReferenceGenerate(const Model& model, const Tokenizer& tokenizer,
                                       const std::vector<int32_t>& prompt, int max_tokens,
                                       const SamplingParams& sampling, bool ignore_eos, int n_ctx) {
  SequenceRunner runner(model, KvType::kF32, n_ctx, 1);
  Sampler sampler(sampling, model.config().n_vocab);
  std::vector<int32_t> generated;
  auto logits = runner.Append(prompt);
  while (logits.ok() && static_cast<int>(generated.size()) < max_tokens) {
    const int32_t token = sampler.Sample(*logits, runner.tokens()).token;
    if (!ignore_eos && tokenizer.IsEndOfGeneration(token)) break;
    generated.push_back(token);
    if (runner.n_past() >= n_ctx) break;  // the context is full: this token is the last
    logits = runner.Append(std::span(&token, 1));
  }
  return generated;
}

}  // namespace kvserve::testing
