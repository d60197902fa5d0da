// Runs one sequence through the model with its own KV cache, outside the serving engine: the
// simple path used by `kvserve logits` and `kvserve bench`'s single-stream tests (`kvserve run`
// and `kvserve chat` go through the engine). Blocks are assigned in order (logical block i =
// physical block i). The batch is built by the same ModelRunner the serving engine uses; only the
// block table differs.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model_runner.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "util/status.h"

namespace kvserve {

class SequenceRunner {
 public:
  // n_ctx: the most tokens the sequence may hold (KV storage is sized for it).
  SequenceRunner(const Model& model, const KvFormat& kv_type, int n_ctx, int n_threads);

  int n_ctx() const { return n_ctx_; }
  uint64_t kv_bytes() const { return kv_.bytes(); }
  int n_past() const { return static_cast<int>(tokens_.size()); }
  const std::vector<int32_t>& tokens() const { return tokens_; }

  // Appends `tokens` in one batched forward pass (prefill, or one decode step) and returns the
  // logits of the last token, or of every new token when all_logits is set:
  // [all_logits ? tokens.size() : 1, n_vocab]. Fails (changing nothing) if the context would
  // overflow or a token id is out of range, and on an encoder-decoder model (no encoder here).
  Result<std::span<const float>> Append(std::span<const int32_t> tokens, bool all_logits = false);

  // No-cache mode: appends `tokens` and recomputes the whole sequence from position 0 in one pass,
  // ignoring what the cache held. Returns the last token's logits.
  Result<std::span<const float>> AppendRecompute(std::span<const int32_t> tokens);

  // Drops tokens after the first n (the cache beyond them is simply overwritten later).
  void Truncate(int n);

 private:
  Status Check(std::span<const int32_t> tokens) const;
  std::span<const float> Run(int first_position, bool all_logits);

  const Model& model_;
  int n_ctx_;
  KvCache kv_;
  ModelRunner runner_;
  std::vector<int32_t> block_table_;  // the identity
  std::vector<int32_t> tokens_;
};

}  // namespace kvserve
