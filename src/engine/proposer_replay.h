// A bench-only proposer that knows each request's plain output (prompt + tokens, by request id)
// and drafts it, each drafted token independently right with probability `accept` (else a wrong
// token), so a benchmark can set the acceptance rate and measure the speed-up at that rate.
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

  void Propose(std::span<Sequence* const> seqs, std::span<const int> max_tokens) override;

 private:
  std::map<std::string, std::vector<int32_t>> reference_;
  double accept_;
  int n_vocab_;
  std::mt19937_64 rng_;
};

}  // namespace kvserve
