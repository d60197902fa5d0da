// Turns a step's plan into one forward pass: the batch (tokens, positions, KV slots, block tables,
// logit rows) built in one place, the model run over it, and the logits of the rows that sample.
// Makes no policy (the scheduler decided what runs); owns the workspace and the batch, borrows the
// model and the KV cache. One per engine thread (or per single-sequence runner).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "engine/scheduler.h"
#include "kv/kv_cache.h"
#include "model/forward_batch.h"
#include "model/model.h"

namespace kvserve {

// Logits of one step: one row of n_vocab per output row, in plan (or request) order.
struct StepLogits {
  std::span<const float> data;  // [n_rows, n_vocab]
  int n_vocab = 0;
  std::span<const float> row(size_t i) const { return data.subspan(i * n_vocab, n_vocab); }
  size_t n_rows() const { return n_vocab == 0 ? 0 : data.size() / n_vocab; }
};

class ModelRunner {
 public:
  ModelRunner(const Model& model, KvCache& kv, int n_threads);

  // One forward over every chunk of `plan`; a row of logits for each chunk that samples.
  StepLogits Run(const StepPlan& plan);
  // One sequence: tokens[first, tokens.size()) at positions first..., its K/V at the slots of
  // `block_table`; logits of the last token, or of every new token when all_logits is set.
  StepLogits RunSequence(std::span<const int32_t> tokens, int first,
                         const std::vector<int32_t>& block_table, bool all_logits);

  const Model& model() const { return model_; }

 private:
  // Appends tokens[first, first + n) of one sequence to the batch; a logits row for the last one
  // (or for each one when all_logits).
  void AddChunk(std::span<const int32_t> tokens, int first, int n,
                const std::vector<int32_t>& block_table, bool last_logits, bool all_logits);
  StepLogits Forward();

  const Model& model_;
  KvCache& kv_;
  std::unique_ptr<Workspace> workspace_;
  ForwardBatch batch_;
  std::vector<float> logits_;
};

}  // namespace kvserve
