// `kvserve bench --cache-compare` on an encoder-decoder model (Model::cross_group() >= 0): one
// encoder input, `length` tokens generated greedily (end tokens ignored) in three ways, each timed
// over the whole generation, the encode included:
// - kBoth: the encoder runs once and its cross-attention K/V are stored once (the cross cache);
//   the decoder's self-attention K/V are cached, one token per step;
// - kSelfOnly: the encoder's output is kept, but before every step after the first the
//   cross-attention K/V of every decoder layer are recomputed from it (EncodeBatch::cross_only);
//   the decoder's self-attention K/V cached;
// - kNone: every step runs the encoder, the cross K/V and the decoder over all its tokens so far
//   from position 0.
// The model is run by hand on one sequence (as tests/support/t5_run.h does), not through the
// engine: identity block tables over a cache of the needed size.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/backend.h"
#include "kv/kv_format.h"
#include "model/model.h"
#include "util/status.h"

namespace kvserve {

enum class EncDecCacheMode { kBoth, kSelfOnly, kNone };

// The greedy tokens of `mode`: `length` of them after the decoder's start token. ws: borrowed, its
// scratch grows to the run's size.
Result<std::vector<int32_t>> GenerateEncDec(const Model& model, std::span<const int32_t> input,
                                            int length, EncDecCacheMode mode,
                                            const KvFormat& kv_type, Workspace& ws);

struct EncDecCompareRow {
  int length = 0;
  double both_s = 0;       // seconds, kBoth (medians with repeats)
  double self_only_s = 0;  // seconds, kSelfOnly
  double none_s = 0;       // seconds, kNone
  bool same_tokens = false;
  double SelfOnlyRatio() const { return both_s > 0 ? self_only_s / both_s : 0; }
  double NoneRatio() const { return both_s > 0 ? none_s / both_s : 0; }
};

// The three modes at one length, `repeats` times in the order kBoth, kSelfOnly, kNone (so that a
// shared machine's load falls on all three), on one workspace of n_threads threads; each mode's
// median seconds. The KV storage is allocated before each timing. same_tokens: every run of every
// mode gave the same tokens.
Result<EncDecCompareRow> CompareEncDecCache(const Model& model, std::span<const int32_t> input,
                                            int length, const KvFormat& kv_type, int n_threads,
                                            int repeats = 1);

}  // namespace kvserve
