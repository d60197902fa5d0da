// Sampling under a request's grammar (constrained decoding): the sequence's next token at one
// position, chosen among the tokens its grammar allows, and the grammar advanced by it. Used for
// every sampled position, so drafts are verified through the same masks as plain decoding and the
// tokens are the same alone, batched, preempted, cached and with speculation.
#pragma once

#include <span>

#include "engine/sampler.h"
#include "engine/sequence.h"

namespace kvserve {

// Time spent on masks, for the engine's statistics.
struct GrammarSampleCost {
  double mask_ms = 0;    // filling masks and checking tokens
  uint64_t masked = 0;   // positions that needed a whole mask
  uint64_t checked = 0;  // positions decided by checking the greedy choice alone
};

// The next token of `seq` from `logits` [n_vocab], as seq.sampler would choose it with every token
// outside the grammar's mask at -inf; advances seq.grammar. Without a grammar: seq.sampler's
// choice. When the grammar allows nothing (a stack limit was hit), the end-of-generation tokens
// are allowed, so the sequence ends.
SampleResult SampleNext(Sequence& seq, std::span<const float> logits, GrammarSampleCost& cost);

}  // namespace kvserve
