#include "engine/grammar_sampling.h"

#include <chrono>

namespace kvserve {
namespace {

// Adds the time since `start` to *ms on destruction.
class Timed {
 public:
  explicit Timed(double* ms) : ms_(ms), start_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    *ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_)
                .count();
  }

 private:
  double* ms_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

SampleResult SampleNext(Sequence& seq, std::span<const float> logits, GrammarSampleCost& cost) {
  if (!seq.grammar) return seq.sampler.Sample(logits, seq.tokens, seq.dropped);
  TokenMasker& masker = *seq.request.grammar;
  SampleResult result;
  if (seq.request.sampling.temperature == 0.0f) {
    // Greedy: when the unconstrained choice is allowed it is also the constrained one (the mask
    // only removes candidates), and the reported logprobs are the model's either way.
    result = seq.sampler.Sample(logits, seq.tokens, seq.dropped);
    bool allowed = false;
    {
      Timed timed(&cost.mask_ms);
      allowed = masker.Allows(*seq.grammar, result.token);
    }
    if (allowed) {
      ++cost.checked;
      Timed timed(&cost.mask_ms);
      seq.grammar->Accept(masker.vocab().piece(result.token));
      return result;
    }
  }
  {
    Timed timed(&cost.mask_ms);
    masker.FillMask(*seq.grammar, seq.grammar_mask);
    if (seq.grammar_mask.Empty()) {
      for (int32_t id : masker.vocab().end_tokens()) seq.grammar_mask.Set(id);
    }
    ++cost.masked;
  }
  result = seq.grammar_mask.Empty()
               ? seq.sampler.Sample(logits, seq.tokens, seq.dropped)
               : seq.sampler.Sample(logits, seq.tokens, seq.dropped, &seq.grammar_mask);
  if (!masker.vocab().is_end(result.token)) {
    Timed timed(&cost.mask_ms);
    seq.grammar->Accept(masker.vocab().piece(result.token));
  }
  return result;
}

}  // namespace kvserve
