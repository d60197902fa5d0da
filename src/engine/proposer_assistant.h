// Drafting with a model that reads the target's own state (model/hidden_state_drafter.h: Gemma
// 4's assistant): no cache and no catch-up of its own. Each decoding sequence drafts from its
// pending token and the target's final hidden row that chose it (Sequence::target_hidden, which
// the engine keeps because wants_target_hidden), then from each draft and the drafter's own next
// hidden row; greedy, one batched step of every drafting sequence per drafted token, all at the
// pending token's position, reading the target's cache (which holds the tokens before it).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/proposer.h"
#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/hidden_state_drafter.h"
#include "model/model.h"

namespace kvserve {

class AssistantProposer final : public Proposer {
 public:
  // `drafter` (a loaded model's hidden_state_drafter()) and the target's `kv` are borrowed;
  // `target` is what drafter.Bind returned for the target model.
  AssistantProposer(const Model& drafter_model, const DraftTarget& target, KvCache& kv,
                    int n_threads);

  void Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) override;
  bool wants_target_hidden() const override { return true; }

  // Drafting steps run so far (one batched forward of the drafter each), for tests.
  int steps() const { return steps_; }

 private:
  const Model& model_;
  const HiddenStateDrafter& drafter_;
  DraftTarget target_;
  KvCache& kv_;
  std::unique_ptr<Workspace> workspace_;
  ForwardBatch batch_;
  std::vector<float> hidden_, hidden_next_, logits_;
  int steps_ = 0;
};

}  // namespace kvserve
