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
  // Where the runner keeps them (ModelRunner::KeepFinalHidden): [n_rows, n_embd], each row's
  // input to the output matrix (after the final norm); empty otherwise.
  std::span<const float> hidden;
  int n_embd = 0;
  std::span<const float> row(size_t i) const { return data.subspan(i * n_vocab, n_vocab); }
  std::span<const float> hidden_row(size_t i) const { return hidden.subspan(i * n_embd, n_embd); }
  size_t n_rows() const { return n_vocab == 0 ? 0 : data.size() / n_vocab; }
};

// One sequence's tokens for RunChunks: `tokens` at positions first, first + 1, ..., their K/V in
// group g at the slots of block_table->group(g) (borrowed); a logits row for each of the last
// n_logit_rows.
struct RunnerChunk {
  std::span<const int32_t> tokens;
  int first = 0;
  const BlockTable* block_table = nullptr;
  int n_logit_rows = 1;
};

class ModelRunner {
 public:
  ModelRunner(const Model& model, KvCache& kv, int n_threads);

  // One forward over every chunk of `plan`; a row of logits for each chunk that samples (n_draft
  // + 1 rows for a chunk with drafts: after its pending token and after each draft).
  StepLogits Run(const StepPlan& plan);
  // Any sequences' chunks in one forward (the draft model's batches); rows in chunk order.
  StepLogits RunChunks(std::span<const RunnerChunk> chunks);
  // One sequence: tokens[first, tokens.size()) at positions first..., its K/V at the slots of
  // `block_table`; logits of the last token, or of every new token when all_logits is set.
  StepLogits RunSequence(std::span<const int32_t> tokens, int first,
                         const std::vector<int32_t>& block_table, bool all_logits);

  const Model& model() const { return model_; }
  // Whether each run also returns the output rows' final hidden states (StepLogits::hidden), for
  // a drafter that reads them (HiddenStateDrafter).
  void KeepFinalHidden(bool keep) { keep_hidden_ = keep; }

 private:
  // Appends `chunk` (the tokens at positions first, first + 1, ...) of one sequence to the batch,
  // its K/V in group g at the slots of table.group(g); a logits row for each of its last
  // n_logit_rows tokens.
  // `seq`, when given, supplies an encoder-decoder's cross-attention table (AddCrossTable).
  void AddChunk(std::span<const int32_t> chunk, int first, const BlockTable& table,
                int n_logit_rows, const Sequence* seq = nullptr);
  // An encoder-decoder model: the last sequence added reads seq's encoded input (its
  // cross_blocks, all encoder_input.size() keys of them) in the cross-attention group.
  void AddCrossTable(const Sequence& seq);
  // Runs the encoder over each sequence's input into its cross_blocks (Model::Encode).
  void Encode(std::span<Sequence* const> seqs);
  // As AddChunk, with one block table for every group.
  void AddChunk(std::span<const int32_t> chunk, int first, const std::vector<int32_t>& block_table,
                int n_logit_rows);
  void AddPositions(std::span<const int32_t> chunk, int first, int n_logit_rows);
  StepLogits Forward();

  const Model& model_;
  KvCache& kv_;
  std::unique_ptr<Workspace> workspace_;
  ForwardBatch batch_;
  std::vector<float> logits_;
  bool keep_hidden_ = false;
  std::vector<float> hidden_;  // [n_rows, n_embd] when keep_hidden_
  std::vector<int32_t> fed_;   // a chunk's pending tokens followed by its drafts
  int cross_group_ = -1;       // Model::cross_group
  EncodeBatch encode_;
};

}  // namespace kvserve
