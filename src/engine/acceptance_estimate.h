// A decoding sequence's per-token draft acceptance probability as its verifies have shown it:
// accepted drafted tokens against rejections (a verify that stopped before its draft's end), both
// decayed so that recent verifies weigh most, over a prior of one of each (0.5 before any). A
// draft of k tokens is then expected to yield p + p^2 + ... + p^k accepted tokens (DraftPlanner's
// cost gate). Engine thread only.
#pragma once

namespace kvserve {

struct AcceptanceEstimate {
  static constexpr double kDecay = 0.9;       // per verify: about the last ten count
  static constexpr double kIdleDecay = 0.99;  // per step the gate held a proposed draft back

  double accepted = 0;
  double rejected = 0;

  double p() const { return (accepted + 1) / (accepted + rejected + 2); }
  void Verified(int n_draft, int n_accepted) {
    accepted = kDecay * accepted + n_accepted;
    rejected = kDecay * rejected + (n_accepted < n_draft ? 1 : 0);
  }
  // The gate held a draft back: the evidence fades toward the prior, so that the sequence is
  // tried again after a while (what the proposer finds changes as the text goes on).
  void Idle() {
    accepted *= kIdleDecay;
    rejected *= kIdleDecay;
  }
};

}  // namespace kvserve
