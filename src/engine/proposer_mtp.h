// Drafting with the target model's own multi-token-prediction layer (model/nextn_drafter.h:
// Qwen3.5's nextn layer). Each decoding sequence drafts greedily from its pending token x_P at
// position P and the target's final hidden row that chose it (Sequence::target_hidden, kept
// because wants_target_hidden), then from each draft at the next position and the layer's own
// next hidden row, as llama.cpp's MTP drafting does. The layer's cache is a layer of the
// target's KV cache that the target's forward fills for every token; each drafting step stores
// its row's K/V there at P + j, which the verifying forward then overwrites. So it drafts after
// the scheduler placed the drafts (drafts_after_scheduling): the sequence's blocks then cover
// every position a step writes, and it always writes max_tokens[i] drafts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/proposer.h"
#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/model.h"
#include "model/nextn_drafter.h"

namespace kvserve {

class MtpProposer final : public Proposer {
 public:
  // `target` (whose nextn_drafter() is not null) and its `kv` are borrowed.
  MtpProposer(const Model& target, KvCache& kv, int n_threads);

  void Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) override;
  bool wants_target_hidden() const override { return true; }
  bool drafts_after_scheduling() const override { return true; }

  // Drafting steps run so far (one batched forward of the layer each), for tests.
  int steps() const { return steps_; }

 private:
  // Appends row `row` for `seq`: token and position, its block tables and slots in every group.
  void AddRow(const Sequence& seq, int32_t token, int32_t position, int row);

  const Model& model_;
  const NextnDrafter& drafter_;
  KvCache& kv_;
  std::unique_ptr<Workspace> workspace_;
  ForwardBatch batch_;
  std::vector<float> hidden_, hidden_next_, logits_;
  int steps_ = 0;
};

}  // namespace kvserve
