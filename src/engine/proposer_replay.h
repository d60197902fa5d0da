// A bench-only proposer that knows each request's plain output (prompt + tokens, by request id)
// and drafts it, each drafted token independently right with probability `accept` (else a wrong
// token), so a benchmark can set the acceptance rate and measure the speed-up at that rate.
// Or, with a repeat span, the ceiling of drafting from earlier text: only the output tokens that
// end a span already seen earlier (RepeatedPositions) are drafted, always right, up to the first
// one that does not (what an n-gram proposer that always picked the right match could draft).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/proposer.h"

namespace kvserve {

class ReplayProposer final : public Proposer {
 public:
  // reference: request id -> the tokens plain decoding gave (prompt + output).
  ReplayProposer(std::map<std::string, std::vector<int32_t>> reference, double accept, int n_vocab,
                 uint64_t seed);
  // The repeat ceiling: reference as above, prompt_sizes: request id -> its prompt's tokens;
  // span >= 2.
  ReplayProposer(std::map<std::string, std::vector<int32_t>> reference,
                 const std::map<std::string, size_t>& prompt_sizes, int span);

  void Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) override;

 private:
  std::map<std::string, std::vector<int32_t>> reference_;
  // Repeat ceiling only: request id -> which reference positions may be drafted.
  std::map<std::string, std::vector<bool>> draftable_;
  double accept_;
  int n_vocab_;
  std::mt19937_64 rng_;
};

// Which of tokens[from, size) end a `span`-token run that already occurs, as a whole, earlier in
// tokens (positions before `from` are false). span >= 2.
std::vector<bool> RepeatedPositions(std::span<const int32_t> tokens, size_t from, int span);

}  // namespace kvserve
