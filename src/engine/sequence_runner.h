// Runs one sequence through the model with its own KV storage: the simple path used by
// `kvserve run`, `kvserve logits` and `kvserve chat`. Blocks are assigned in order (logical block
// i = physical block i), so the paged attention sees a contiguous table. The serving engine
// replaces this with a BlockManager and a scheduler; the forward pass is the same.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_storage.h"
#include "model/transformer.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace kvserve {

class SequenceRunner {
 public:
  // n_ctx: the most tokens the sequence may hold (KV storage is sized for it).
  SequenceRunner(const Transformer& model, KvType kv_type, int n_ctx, ThreadPool& pool);

  int n_ctx() const { return n_ctx_; }
  uint64_t kv_bytes() const { return storage_.bytes(); }
  int n_past() const { return static_cast<int>(tokens_.size()); }
  const std::vector<int32_t>& tokens() const { return tokens_; }

  // Appends `tokens` in one batched forward pass (prefill, or one decode step) and returns the
  // logits of the last token, or of every new token when all_logits is set:
  // [all_logits ? tokens.size() : 1, n_vocab]. Fails (changing nothing) if the context would
  // overflow or a token id is out of range.
  Result<std::span<const float>> Append(std::span<const int32_t> tokens, bool all_logits = false);

  // No-cache mode: appends `tokens` and recomputes the whole sequence from position 0 in one pass,
  // ignoring what the cache held. Returns the last token's logits.
  Result<std::span<const float>> AppendRecompute(std::span<const int32_t> tokens);

  // Drops tokens after the first n (the cache beyond them is simply overwritten later).
  void Truncate(int n);

 private:
  Status Check(std::span<const int32_t> tokens) const;
  std::span<const float> Run(int first_position, bool all_logits);

  const Transformer& model_;
  ThreadPool& pool_;
  int n_ctx_;
  KvStorage storage_;
  std::vector<int32_t> tokens_;
  ForwardBatch batch_;
  ForwardScratch scratch_;
  std::vector<float> logits_;
};

}  // namespace kvserve
