#include "support/forward.h"

#include "kv/kv_storage.h"

namespace kvserve::testing {

std::vector<float> AllPositionLogits(const Transformer& model, const std::vector<int32_t>& tokens) {
  constexpr int kBlockSize = 16;
  const ModelConfig& config = model.config();
  const int n = static_cast<int>(tokens.size());
  const int n_blocks = (n + kBlockSize - 1) / kBlockSize;
  KvStorage storage(config, KvType::kF32, kBlockSize, n_blocks);
  ForwardBatch batch;
  batch.tokens = tokens;
  batch.block_tables.emplace_back();
  for (int b = 0; b < n_blocks; ++b) batch.block_tables[0].push_back(b);
  for (int i = 0; i < n; ++i) {
    batch.positions.push_back(i);
    batch.seq_index.push_back(0);
    batch.slots.push_back(i);
    batch.logit_rows.push_back(i);
  }
  ThreadPool pool(1);
  ForwardScratch scratch;
  std::vector<float> logits(static_cast<size_t>(n) * config.n_vocab);
  model.Forward(batch, storage.views(), scratch, pool, logits.data());
  return logits;
}

}  // namespace kvserve::testing
