// Prompt-lookup drafting: the last n tokens of a sequence (n from ngram_max down to ngram_min) are
// looked up in the sequence's own earlier tokens (prompt and output), and on an encoder-decoder
// model in the encoder's input too (what a summary or a translation copies); at the most recent
// earlier match (its own tokens first, for each n), the tokens that followed it are the draft. No
// second model, O(tokens x n) per sequence and step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/proposer.h"

namespace kvserve {

class NgramProposer final : public Proposer {
 public:
  // 1 <= ngram_min <= ngram_max.
  NgramProposer(int ngram_min, int ngram_max);

  void Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) override;

  // The draft for `tokens` (at most max_tokens of them; empty when no n-gram recurs).
  // With `source`: tokens' own earlier tokens first, then `source` (the last occurrence there),
  // for each n.
  static std::vector<int32_t> Lookup(std::span<const int32_t> tokens, int ngram_min, int ngram_max,
                                     int max_tokens, std::span<const int32_t> source = {});

 private:
  int ngram_min_;
  int ngram_max_;
};

}  // namespace kvserve
