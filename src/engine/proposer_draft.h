// Drafting with a second, smaller model of the same vocabulary: for each decoding sequence the
// draft model catches up on the tokens it has not seen (the whole prompt the first time; after a
// verify, only what differs from what it computed), then proposes greedily, one batched forward
// of every drafting sequence per drafted position. It has its own paged KV pool and block manager
// (no prefix cache); a sequence whose blocks do not fit gets no draft that step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/model_runner.h"
#include "engine/proposer.h"
#include "kv/block_manager.h"
#include "kv/kv_cache.h"
#include "model/model.h"

namespace kvserve {

class DraftProposer final : public Proposer {
 public:
  // `model` is borrowed. The pool holds n_blocks blocks of block_size tokens of kv_type.
  DraftProposer(const Model& model, KvType kv_type, int block_size, int n_blocks, int n_threads);

  void Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) override;
  void Forget(const Sequence& seq) override;

  // Draft forwards so far (catch-up and drafting), and blocks of its pool in use, for tests.
  int forwards() const { return forwards_; }
  int blocks_used() const { return blocks_.Stats().used; }

 private:
  struct State {
    BlockTable table;
    std::vector<int32_t> computed;  // the tokens whose K/V the draft pool holds, in order
  };
  // Grows the state's table to hold n_tokens; false when blocks ran out.
  bool Reserve(State& state, int n_tokens);
  void FreeOthers(std::span<Sequence* const> keep);

  KvCache kv_;
  BlockManager blocks_;
  ModelRunner runner_;
  std::unordered_map<const Sequence*, State> states_;
  int forwards_ = 0;
};

}  // namespace kvserve
