// One request's state inside the engine: its tokens, how many are in the KV cache, its blocks,
// its sampler (own random stream) and its stop rules. Owned by the scheduler.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/acceptance_estimate.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop_checker.h"
#include "grammar/grammar_matcher.h"
#include "grammar/token_mask.h"
#include "kv/block_manager.h"

namespace kvserve {

struct Sequence {
  // n_ctx: the most tokens the sequence may hold (its stop rules end it there).
  Sequence(Request r, std::shared_ptr<RequestStream> s, const Tokenizer& tokenizer, int n_vocab,
           int n_ctx)
      : request(std::move(r)),
        stream(std::move(s)),
        tokens(request.prompt),
        n_prompt(static_cast<int>(request.prompt.size())),
        sampler(request.sampling, n_vocab, request.logprobs),
        stop(request, tokenizer, n_ctx) {
    if (request.grammar) grammar.emplace(request.grammar->grammar());
  }

  Request request;
  std::shared_ptr<RequestStream> stream;
  uint64_t arrival = 0;         // admission order; larger = newer (preempted first)
  std::vector<int32_t> tokens;  // prompt + generated so far
  int n_prompt = 0;
  int n_computed = 0;        // leading tokens whose K/V are in the cache
  int n_cached_prompt = -1;  // prompt tokens served by the prefix cache at first admission
  BlockTable blocks;
  Sampler sampler;
  StopChecker stop;  // stop rules and the emitted text
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Constrained decoding: where the output stands in request.grammar (advanced by every sampled
  // token, drafts included once accepted), and the mask buffer reused at each position.
  std::optional<GrammarMatcher> grammar;
  TokenMask grammar_mask;
  // Speculative decoding: tokens proposed to follow `tokens` this step (cleared by Postprocess),
  // the current depth (most tokens to propose; 0 = not yet set), the acceptance seen so far (the
  // cost gate's), and the running totals.
  std::vector<int32_t> draft;
  int spec_depth = 0;
  AcceptanceEstimate spec_acceptance;
  int n_drafted = 0;
  int n_accepted = 0;
  // Sent back over rejected drafts to a recurrent state's checkpoint (Scheduler::Postprocess):
  // its pending tokens are recomputed by its next chunk, which may carry drafts after them as a
  // decoding sequence's does. Cleared when that chunk samples.
  bool resuming = false;
  // Decoding: one pending token, or the tokens a resuming sequence recomputes before sampling.
  bool decoding() const { return n_pending() == 1 || resuming; }
  // For a drafter that reads the target's state (Proposer::wants_target_hidden): the final
  // hidden row (after the output norm) of the forward row that sampled tokens.back().  [n_embd]
  std::vector<float> target_hidden;
  // Keys of the full prompt blocks (in-batch prefix sharing); filled by the scheduler once.
  std::vector<BlockKey> prompt_keys;
  bool prompt_keys_set = false;
  // Context overflow (engine/context_shift.h): whether the sequence shifts (kShift) instead of
  // ending at the context, the leading tokens no shift drops (sinks and pinned prefix, rounded up
  // to whole blocks), the tokens dropped so far in their order (the penalties still count them,
  // as if the text had just continued), and the cuts made.
  bool shift = false;
  int n_head = 0;
  std::vector<int32_t> dropped;
  int n_shifts = 0;

  // Encoder-decoder models (Model::cross_group): the request's prompt is the encoder's input and
  // `tokens` the decoder's (its start token first); the cross-attention blocks of the input
  // (BlockManager::AllocateInput, apart from `blocks`), the input's key, and whether the blocks
  // hold its encoding (computed by a step's encode, or found in the prefix cache).
  std::vector<int32_t> encoder_input;
  std::vector<int32_t> cross_blocks;
  BlockKey input_key{};
  bool encoded = false;

  bool encoder_decoder() const { return !encoder_input.empty(); }
  // Prompt tokens as the usage reports them: the encoder's input and the decoder's prompt past its
  // start token, or the prompt.
  int n_prompt_tokens() const {
    return encoder_decoder() ? static_cast<int>(encoder_input.size()) + n_prompt - 1 : n_prompt;
  }
  int n_dropped() const { return static_cast<int>(dropped.size()); }
  // Tokens generated so far, the dropped ones included.
  int n_generated() const { return static_cast<int>(tokens.size() + dropped.size()) - n_prompt; }
  // Tokens still to compute before the next sample.
  int n_pending() const { return static_cast<int>(tokens.size()) - n_computed; }
};

}  // namespace kvserve
