#include "support/forward.h"

#include <numeric>

#include "kv/kv_cache.h"

namespace kvserve::testing {

std::vector<float> AllPositionLogits(const Model& model, const std::vector<int32_t>& tokens) {
  constexpr int kBlockSize = 16;
  const ModelConfig& config = model.config();
  const int n = static_cast<int>(tokens.size());
  const int n_blocks = (n + kBlockSize - 1) / kBlockSize;
  KvCache kv(model.kv_spec(), KvType::kF32, kBlockSize, n_blocks, model.backend().allocator());
  ForwardBatch batch;
  batch.tokens = tokens;
  batch.block_tables.emplace_back(n_blocks);
  std::iota(batch.block_tables[0].begin(), batch.block_tables[0].end(), 0);
  for (int i = 0; i < n; ++i) {
    batch.positions.push_back(i);
    batch.seq_index.push_back(0);
    batch.slots.push_back(i);
    batch.logit_rows.push_back(i);
  }
  auto workspace = model.backend().NewWorkspace(WorkspaceOptions{.n_threads = 1});
  std::vector<float> logits(static_cast<size_t>(n) * config.n_vocab);
  model.Forward(batch, kv, *workspace, logits.data());
  return logits;
}

}  // namespace kvserve::testing
