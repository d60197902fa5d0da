#include "engine/grammar_sampling.h"

#include <chrono>

namespace kvserve {

SampleResult SampleNext(Sequence& seq, std::span<const float> logits, GrammarSampleCost& cost) {
  if (!seq.grammar) return seq.sampler.Sample(logits, seq.tokens, seq.dropped);
  TokenMasker& masker = *seq.request.grammar;
  const auto start = std::chrono::steady_clock::now();
  auto add_time = [&] {
    cost.mask_ms +=
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  };
  SampleResult result;
  bool decided = false;
  if (seq.request.sampling.temperature == 0.0f) {
    // Greedy: when the unconstrained choice is allowed it is also the constrained one (the mask
    // only removes candidates), and the reported logprobs are the model's either way.
    result = seq.sampler.Sample(logits, seq.tokens, seq.dropped);
    decided = masker.Allows(*seq.grammar, result.token);
    if (decided) ++cost.checked;
  }
  if (!decided) {
    masker.FillMask(*seq.grammar, seq.grammar_mask);
    if (seq.grammar_mask.Empty()) {
      for (int32_t id : masker.vocab().end_tokens()) seq.grammar_mask.Set(id);
    }
    ++cost.masked;
    result = seq.grammar_mask.Empty()
                 ? seq.sampler.Sample(logits, seq.tokens, seq.dropped)
                 : seq.sampler.Sample(logits, seq.tokens, seq.dropped, &seq.grammar_mask);
  }
  if (!masker.vocab().is_end(result.token)) seq.grammar->Accept(masker.vocab().piece(result.token));
  add_time();
  return result;
}

}  // namespace kvserve
