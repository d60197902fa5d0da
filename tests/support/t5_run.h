// A T5 (encoder-decoder) model run by hand, without the engine: inputs encoded into
// cross-attention blocks, then decoder tokens fed with their own self-attention blocks; every
// sequence's blocks laid out by the test (`shuffle` permutes the physical blocks, so layouts can
// differ between runs). An F32 cache of kBlocksPerSequence blocks of kBlockSize per sequence and
// kind.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model.h"

namespace kvserve::testing {

class T5Run {
 public:
  static constexpr int kBlockSize = 4;
  static constexpr int kBlocksPerSequence = 16;  // 64 positions of each kind

  T5Run(const Model& model, int n_sequences, unsigned shuffle = 0);

  // Encodes inputs[s] for sequence s (empty: none); returns the encoder output of each token.
  std::vector<float> Encode(const std::vector<std::vector<int32_t>>& inputs);
  // Feeds tokens[s] to sequence s (after what it was fed before); returns the logits of every
  // token fed, in order.
  std::vector<float> Decode(const std::vector<std::vector<int32_t>>& tokens);
  // Sequence 0 greedy: the start token and `prefix` in one batch, then n tokens each the argmax of
  // the last logits.
  std::vector<int32_t> Greedy(int n, const std::vector<int32_t>& prefix = {});

 private:
  int64_t Slot(int group, int s, int pos) const;

  const Model& model_;
  KvCache kv_;
  std::unique_ptr<Workspace> ws_;
  std::vector<std::vector<int32_t>> tables_[2];
  std::vector<int32_t> lengths_;
  std::vector<int32_t> n_past_;
};

}  // namespace kvserve::testing
