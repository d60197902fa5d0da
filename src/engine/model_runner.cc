#include "engine/model_runner.h"

#include "kv/kv_layer_view.h"

namespace kvserve {

ModelRunner::ModelRunner(const Model& model, KvCache& kv, int n_threads)
    : model_(model),
      kv_(kv),
      workspace_(model.backend().NewWorkspace(WorkspaceOptions{.n_threads = n_threads})) {}

void ModelRunner::AddChunk(std::span<const int32_t> tokens, int first, int n,
                           const std::vector<int32_t>& block_table, bool last_logits,
                           bool all_logits) {
  const int seq_index = static_cast<int>(batch_.block_tables.size());
  batch_.block_tables.push_back(block_table);
  const int block_size = kv_.block_size();
  for (int pos = first; pos < first + n; ++pos) {
    batch_.tokens.push_back(tokens[pos]);
    batch_.positions.push_back(pos);
    batch_.seq_index.push_back(seq_index);
    batch_.slots.push_back(KvSlot(block_table.data(), block_size, pos));
    if (all_logits) batch_.logit_rows.push_back(batch_.n_tokens() - 1);
  }
  if (last_logits && !all_logits) batch_.logit_rows.push_back(batch_.n_tokens() - 1);
}

StepLogits ModelRunner::Forward() {
  const int n_vocab = model_.config().n_vocab;
  logits_.resize(batch_.logit_rows.size() * static_cast<size_t>(n_vocab));
  model_.Forward(batch_, kv_, *workspace_, logits_.data());
  return StepLogits{.data = logits_, .n_vocab = n_vocab};
}

StepLogits ModelRunner::Run(const StepPlan& plan) {
  batch_.Clear();
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Sequence& seq = *chunk.seq;
    AddChunk(seq.tokens, seq.n_computed, chunk.n_tokens, seq.blocks.blocks, chunk.sample, false);
  }
  return Forward();
}

StepLogits ModelRunner::RunSequence(std::span<const int32_t> tokens, int first,
                                    const std::vector<int32_t>& block_table, bool all_logits) {
  batch_.Clear();
  AddChunk(tokens, first, static_cast<int>(tokens.size()) - first, block_table, true, all_logits);
  return Forward();
}

}  // namespace kvserve
