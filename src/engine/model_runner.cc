#include "engine/model_runner.h"

#include "kv/kv_layer_view.h"

namespace kvserve {

ModelRunner::ModelRunner(const Model& model, KvCache& kv, int n_threads)
    : model_(model),
      kv_(kv),
      workspace_(model.backend().NewWorkspace(WorkspaceOptions{.n_threads = n_threads})),
      cross_group_(model.cross_group()) {}

void ModelRunner::AddPositions(std::span<const int32_t> chunk, int first, int n_logit_rows) {
  const int seq_index = static_cast<int>(batch_.kv_groups[0].block_tables.size()) - 1;
  const int n = static_cast<int>(chunk.size());
  for (int i = 0; i < n; ++i) {
    batch_.tokens.push_back(chunk[i]);
    batch_.positions.push_back(first + i);
    batch_.seq_index.push_back(seq_index);
    if (i >= n - n_logit_rows) batch_.logit_rows.push_back(batch_.n_tokens() - 1);
  }
  const int block_size = kv_.block_size();
  for (size_t g = 0; g < batch_.kv_groups.size(); ++g) {
    KvGroupBatch& group = batch_.kv_groups[g];
    if (static_cast<int>(g) == cross_group_) {  // read only: the decoder stores nothing there
      group.slots.insert(group.slots.end(), n, -1);
      continue;
    }
    const int32_t* table = group.block_tables.back().data();
    for (int i = 0; i < n; ++i) group.slots.push_back(KvSlot(table, block_size, first + i));
  }
}

void ModelRunner::AddCrossTable(const Sequence& seq) {
  if (cross_group_ < 0) return;
  KvGroupBatch& group = batch_.kv_groups[cross_group_];
  group.block_tables.back() = seq.cross_blocks;
  group.key_counts.push_back(static_cast<int32_t>(seq.encoder_input.size()));
}

void ModelRunner::Encode(std::span<Sequence* const> seqs) {
  if (seqs.empty()) return;
  encode_.Clear();
  const int block_size = kv_.block_size();
  for (const Sequence* seq : seqs) {
    const int n = static_cast<int>(seq->encoder_input.size());
    encode_.lengths.push_back(n);
    encode_.tokens.insert(encode_.tokens.end(), seq->encoder_input.begin(),
                          seq->encoder_input.end());
    for (int p = 0; p < n; ++p) {
      encode_.cross_slots.push_back(KvSlot(seq->cross_blocks.data(), block_size, p));
    }
  }
  model_.Encode(encode_, kv_, *workspace_);
  // The rows past each input in its last block: zeros, not what the pool block held before (the
  // disk tier writes the block whole).
  for (const Sequence* seq : seqs) {
    const int rest = static_cast<int>(seq->encoder_input.size()) % block_size;
    if (rest != 0) kv_.ZeroSlots(cross_group_, seq->cross_blocks.back(), rest);
  }
}

void ModelRunner::AddChunk(std::span<const int32_t> chunk, int first, const BlockTable& table,
                           int n_logit_rows, const Sequence* seq) {
  for (size_t g = 0; g < batch_.kv_groups.size(); ++g) {
    batch_.kv_groups[g].block_tables.push_back(table.group(g));
  }
  if (seq != nullptr) AddCrossTable(*seq);
  AddPositions(chunk, first, n_logit_rows);
}

void ModelRunner::AddChunk(std::span<const int32_t> chunk, int first,
                           const std::vector<int32_t>& block_table, int n_logit_rows) {
  for (KvGroupBatch& group : batch_.kv_groups) group.block_tables.push_back(block_table);
  AddPositions(chunk, first, n_logit_rows);
}

StepLogits ModelRunner::Forward() {
  const int n_vocab = model_.config().n_vocab;
  const size_t n_rows = batch_.logit_rows.size();
  logits_.resize(n_rows * static_cast<size_t>(n_vocab));
  if (!keep_hidden_) {
    model_.Forward(batch_, kv_, *workspace_, logits_.data());
    return StepLogits{.data = logits_, .n_vocab = n_vocab};
  }
  const int n_embd = model_.config().n_embd;
  hidden_.resize(n_rows * static_cast<size_t>(n_embd));
  batch_.final_hidden = hidden_.data();
  model_.Forward(batch_, kv_, *workspace_, logits_.data());
  return StepLogits{.data = logits_, .n_vocab = n_vocab, .hidden = hidden_, .n_embd = n_embd};
}

StepLogits ModelRunner::Run(const StepPlan& plan) {
  Encode(plan.encodes);
  batch_.Clear(kv_.n_groups());
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Sequence& seq = *chunk.seq;
    std::span<const int32_t> tokens = std::span<const int32_t>(seq.tokens).subspan(seq.n_computed);
    if (chunk.n_draft == 0) {
      AddChunk(tokens.first(chunk.n_tokens), seq.n_computed, seq.blocks, chunk.sample ? 1 : 0,
               &seq);
      continue;
    }
    const int n_pending = chunk.n_tokens - chunk.n_draft;
    fed_.assign(tokens.begin(), tokens.begin() + n_pending);
    fed_.insert(fed_.end(), seq.draft.begin(), seq.draft.begin() + chunk.n_draft);
    AddChunk(fed_, seq.n_computed, seq.blocks, chunk.n_draft + 1, &seq);
  }
  return Forward();
}

StepLogits ModelRunner::RunChunks(std::span<const RunnerChunk> chunks) {
  batch_.Clear(kv_.n_groups());
  for (const RunnerChunk& c : chunks) AddChunk(c.tokens, c.first, *c.block_table, c.n_logit_rows);
  return Forward();
}

StepLogits ModelRunner::RunSequence(std::span<const int32_t> tokens, int first,
                                    const std::vector<int32_t>& block_table, bool all_logits) {
  batch_.Clear(kv_.n_groups());
  const int n = static_cast<int>(tokens.size()) - first;
  AddChunk(tokens.subspan(first), first, block_table, all_logits ? n : 1);
  return Forward();
}

}  // namespace kvserve
