#include "support/t5_run.h"

#include <algorithm>
#include <numeric>

namespace kvserve::testing {

T5Run::T5Run(const Model& model, int n_sequences, unsigned shuffle)
    : model_(model),
      kv_(model.kv_spec(), KvType::kF32, kBlockSize, n_sequences * kBlocksPerSequence,
          model.backend().allocator()),
      ws_(model.backend().NewWorkspace({.n_threads = 2})) {
  std::vector<int32_t> order(n_sequences * kBlocksPerSequence);
  std::iota(order.begin(), order.end(), 0);
  if (shuffle != 0) std::reverse(order.begin() + shuffle % order.size(), order.end());
  for (int g = 0; g < 2; ++g) {
    tables_[g].resize(n_sequences);
    for (int s = 0; s < n_sequences; ++s) {
      tables_[g][s].assign(order.begin() + s * kBlocksPerSequence,
                           order.begin() + (s + 1) * kBlocksPerSequence);
      if (g == 1) std::reverse(tables_[g][s].begin(), tables_[g][s].end());
    }
  }
  lengths_.assign(n_sequences, 0);
  n_past_.assign(n_sequences, 0);
}

std::vector<float> T5Run::Encode(const std::vector<std::vector<int32_t>>& inputs) {
  EncodeBatch batch;
  for (size_t s = 0; s < inputs.size(); ++s) {
    if (inputs[s].empty()) continue;
    lengths_[s] = static_cast<int>(inputs[s].size());
    batch.lengths.push_back(lengths_[s]);
    for (int p = 0; p < lengths_[s]; ++p) {
      batch.tokens.push_back(inputs[s][p]);
      batch.cross_slots.push_back(Slot(1, static_cast<int>(s), p));
    }
  }
  std::vector<float> out(static_cast<size_t>(batch.n_tokens()) * model_.config().n_embd);
  batch.encoder_output = out.data();
  model_.Encode(batch, kv_, *ws_);
  return out;
}

std::vector<float> T5Run::Decode(const std::vector<std::vector<int32_t>>& tokens) {
  ForwardBatch batch;
  batch.Clear(2);
  for (int g = 0; g < 2; ++g) batch.kv_groups[g].block_tables = tables_[g];
  batch.kv_groups[1].key_counts = lengths_;
  for (size_t s = 0; s < tokens.size(); ++s) {
    for (int32_t token : tokens[s]) {
      const int pos = n_past_[s]++;
      batch.logit_rows.push_back(batch.n_tokens());
      batch.tokens.push_back(token);
      batch.positions.push_back(pos);
      batch.seq_index.push_back(static_cast<int32_t>(s));
      batch.kv_groups[0].slots.push_back(Slot(0, static_cast<int>(s), pos));
      batch.kv_groups[1].slots.push_back(-1);
    }
  }
  std::vector<float> logits(static_cast<size_t>(batch.n_tokens()) * model_.config().n_vocab);
  model_.Forward(batch, kv_, *ws_, logits.data());
  return logits;
}

std::vector<int32_t> T5Run::Greedy(int n, const std::vector<int32_t>& prefix) {
  std::vector<int32_t> out;
  std::vector<int32_t> fed = {model_.decoder_start_token()};
  fed.insert(fed.end(), prefix.begin(), prefix.end());
  const size_t n_vocab = model_.config().n_vocab;
  for (int i = 0; i < n; ++i) {
    const std::vector<float> logits = Decode({fed});
    const auto last = logits.end() - static_cast<std::ptrdiff_t>(n_vocab);
    const int32_t token = static_cast<int32_t>(std::max_element(last, logits.end()) - last);
    out.push_back(token);
    fed = {token};
  }
  return out;
}

int64_t T5Run::Slot(int group, int s, int pos) const {
  return static_cast<int64_t>(tables_[group][s][pos / kBlockSize]) * kBlockSize + pos % kBlockSize;
}

}  // namespace kvserve::testing
