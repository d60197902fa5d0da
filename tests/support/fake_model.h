// A tiny, fully specified decoder for tests of the engine, the scheduler and the stop rules: no
// weights file and no vocabulary file. Its GGUF is assembled in memory (metadata only) and carries
// a 64-token SentencePiece vocabulary, so the same file gives the Tokenizer (FakeTokenizer).
//
// The rule. Every token of a batch stores, in every layer, a K row and a V row that spell out
// (token, position, layer) at the token's slot. The logits of a row are then computed from what
// the cache holds, read back through the sequence's block table, at every position 0..p of that
// sequence: a 64-bit hash folds those rows in position order, and
//
//   logits[v] = 3 * unit(hash, v)  (+ 3 for the target)      unit in [0, 1)
//   target    = kFakeEos                            if the token at p is kFakeEosTrigger
//               kFakeFirstNormal + hash % 60         otherwise (a normal token, never the trigger)
//
// so the target is the unique argmax (greedy decoding follows it), and every token keeps a real
// share of the probability at temperature 1. A wrong slot, a stale or wrongly shared block, a
// missing prefix or a token not yet stored changes the hash and so, almost surely, the tokens; a
// position the block table does not cover folds a "missing" marker instead of reading out of
// bounds.
// FakeHistoryHash / FakeLogits compute the same thing from a token list, without any cache: the
// tests' independent expectation.
//
// The fake reads the KV pools directly as host memory, so it works with host backends only (the
// CPU backend); KV types f32, f16 and bf16 all hold its small integers exactly.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "io/gguf_reader.h"
#include "kernels/backend.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace kvserve::testing {

// The vocabulary: 0 <unk>, 1 <s> (BOS), 2 </s> (EOS), 3..28 "a".."z", 29..54 "A".."Z",
// 55..62 "0".."7", 63 "." (the EOS trigger). No prefix space: a token's text is its character.
inline constexpr int kFakeVocab = 64;
inline constexpr int32_t kFakeUnk = 0;
inline constexpr int32_t kFakeBos = 1;
inline constexpr int32_t kFakeEos = 2;
inline constexpr int32_t kFakeFirstNormal = 3;
inline constexpr int32_t kFakeEosTrigger = 63;
inline constexpr int kFakeNormalTokens = kFakeEosTrigger - kFakeFirstNormal;  // 60

// The K/V row of one token: 1 KV head of 4 elements.
inline constexpr int kFakeHeadDim = 4;

// The metadata-only GGUF of the fake: architecture "fake", the vocabulary above.
GgufFile FakeGguf();
// The Tokenizer of that vocabulary.
std::unique_ptr<Tokenizer> FakeTokenizer();
// The text Tokenizer::TokenPiece gives: the character of a normal token, "." for the trigger,
// "\u2585" for <unk>, "" for BOS and EOS.
std::string FakePiece(int32_t token);

// The K and V rows that token `token` at `position` stores in `layer`.  k, v: [kFakeHeadDim]
void FakeKvRows(int32_t token, int32_t position, int layer, float* k, float* v);
// Folds one position's K and V rows (as read back from the cache) into the hash.
uint64_t FakeFoldRows(uint64_t hash, const float* k, const float* v);
// The hash of a sequence's first history.size() positions over n_layers layers, as the model
// computes it from a correct cache.
uint64_t FakeHistoryHash(std::span<const int32_t> history, int n_layers);
// Logits of the row whose positions 0..p hash to `hash` and whose token at p is `last`.
// logits: [kFakeVocab]
void FakeLogitsFromHash(uint64_t hash, int32_t last, float* logits);
// The logits after `history` (non-empty).
std::vector<float> FakeLogits(std::span<const int32_t> history, int n_layers);
// The argmax of FakeLogits(history): the greedy next token.
int32_t FakeGreedyNext(std::span<const int32_t> history, int n_layers);

struct FakeModelOptions {
  int n_layers = 2;
  int n_ctx_train = 512;
  // Called at the start of every Forward, on the caller's (the engine's) thread: lets a test hold
  // a step in flight or make steps slow. Must be thread-safe.
  std::function<void()> on_forward;
  // The one layer group's cache kind; null: full causal.
  KvCacheKindPtr kind;
};

class FakeModel final : public Model {
 public:
  // `backend` must be a host backend (the pools are read as host memory) and outlive the model.
  static std::unique_ptr<FakeModel> Create(const Backend& backend, FakeModelOptions options = {});

  void Forward(const ForwardBatch& batch, KvCache& kv, Workspace& ws, float* logits) const override;
  KvSpec kv_spec() const override;

  int n_layers() const { return config_.n_layers; }
  // Forward calls so far.
  int forwards() const { return forwards_.load(); }
  // Tokens run through Forward so far (prompt chunks and decode tokens).
  int64_t tokens_forwarded() const { return tokens_forwarded_.load(); }

 private:
  FakeModel(GgufFile file, ModelConfig config, const Backend& backend, FakeModelOptions options)
      : Model(std::move(file), std::move(config), backend), options_(std::move(options)) {}

  FakeModelOptions options_;
  mutable std::atomic<int> forwards_{0};
  mutable std::atomic<int64_t> tokens_forwarded_{0};
};

}  // namespace kvserve::testing
