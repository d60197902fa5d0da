// Speculative decoding's cost gate (engine/draft_planner.h): the decode steps' cost table, the
// per-sequence acceptance estimate, and the choice of which drafted tokens a step verifies.
#include <gtest/gtest.h>

#include <vector>

#include "engine/acceptance_estimate.h"
#include "engine/batch_cost_table.h"
#include "engine/draft_planner.h"

namespace kvserve {
namespace {

TEST(BatchCostTable, TrustedFromTheSecondStepThenInterpolatedAndOptimisticBeyond) {
  BatchCostTable table;
  EXPECT_FALSE(table.Predict(1).has_value());
  table.Observe(2, 10);
  EXPECT_FALSE(table.Predict(2).has_value());  // one step of a size is not trusted yet
  table.Observe(2, 12);
  EXPECT_TRUE(table.seen(2));
  EXPECT_EQ(*table.Predict(2), 10);   // the faster of the first two
  EXPECT_EQ(*table.Predict(1), 10);   // below the smallest trusted: what it costs
  EXPECT_EQ(*table.Predict(40), 10);  // beyond the largest: optimistic, to be tried
  table.Observe(6, 90);               // a cold first step of a new size...
  EXPECT_EQ(*table.Predict(6), 10);   // ...is not trusted alone
  table.Observe(6, 30);
  EXPECT_DOUBLE_EQ(*table.Predict(4), 20);  // linear between 2 and 6
  EXPECT_DOUBLE_EQ(*table.Predict(3), 15);
  // Faster steps pull the estimate down by half the gap, slower ones up by a tenth.
  table.Observe(6, 20);
  EXPECT_DOUBLE_EQ(*table.Predict(6), 25);
  table.Observe(6, 35);
  EXPECT_DOUBLE_EQ(*table.Predict(6), 26);
  EXPECT_FALSE(table.seen(5));
  // Out of range or negative: ignored.
  table.Observe(0, 1);
  table.Observe(BatchCostTable::kMaxTokens + 1, 1);
  table.Observe(3, -1);
  table.Observe(3, -1);
  EXPECT_FALSE(table.seen(3));
  EXPECT_DOUBLE_EQ(*table.Predict(2), 10);
}

TEST(AcceptanceEstimate, FollowsVerifiesAndFadesTowardTheMiddleWhenIdle) {
  AcceptanceEstimate e;
  EXPECT_DOUBLE_EQ(e.p(), 0.5);  // the prior
  for (int i = 0; i < 20; ++i) e.Verified(4, 4);
  EXPECT_GT(e.p(), 0.9);
  // Recent verifies weigh most: forty rejections outweigh twenty full acceptances before them.
  for (int i = 0; i < 40; ++i) e.Verified(1, 0);
  EXPECT_LT(e.p(), 0.2);
  const double low = e.p();
  for (int i = 0; i < 200; ++i) e.Idle();
  EXPECT_GT(e.p(), low);
  EXPECT_LT(e.p(), 0.5);
  EXPECT_GT(e.p(), 0.3);
}

// T(n) = fixed + per_token * n at every count from 1 to 64.
BatchCostTable Linear(double fixed, double per_token) {
  BatchCostTable table;
  for (int i = 0; i < BatchCostTable::kMinSamples; ++i) {
    for (int n = 1; n <= 64; ++n) table.Observe(n, fixed + per_token * n);
  }
  return table;
}

TEST(KeptDraftTokens, EverythingBeforeAnyStepWasTimed) {
  const std::vector<double> p = {0.01, 0.9};
  const std::vector<int> lengths = {5, 3};
  EXPECT_EQ(KeptDraftTokens(p, lengths, 2, BatchCostTable()), lengths);
}

TEST(KeptDraftTokens, FreeRowsKeepEveryDraftTokenCostlyOnesOnlyLikelyOnes) {
  const std::vector<int> lengths = {5};
  // Bandwidth bound: extra rows cost nothing, so any chance of acceptance pays.
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.05}, lengths, 1, Linear(10, 0)),
            (std::vector<int>{5}));
  // Each row costs a fifth of a one-token step (T(1) = 10, T(2) = 12): a token accepted one time
  // in ten does not pay, one accepted half the time does, and deeper tokens (p^j) stop paying.
  const BatchCostTable costs = Linear(8, 2);
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.1}, lengths, 1, costs), (std::vector<int>{0}));
  const std::vector<int> half = KeptDraftTokens(std::vector<double>{0.5}, lengths, 1, costs);
  EXPECT_GE(half[0], 1);
  EXPECT_LT(half[0], 5);
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.99}, lengths, 1, costs), (std::vector<int>{5}));
  // Compute bound (a row costs a whole step): nothing short of certainty pays.
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.9}, lengths, 1, Linear(0, 10)),
            (std::vector<int>{0}));
}

TEST(KeptDraftTokens, TheLikelierSequenceKeepsItsTokensFirst) {
  // Four decoding sequences, two drafting: each row costs a tenth of the four-token step.
  const BatchCostTable costs = Linear(30, 5);
  const std::vector<int> kept =
      KeptDraftTokens(std::vector<double>{0.2, 0.8}, std::vector<int>{4, 4}, 4, costs);
  EXPECT_EQ(kept[0], 0);
  EXPECT_GE(kept[1], 2);
  // The same sequences with the likelier one second in line: the same choice.
  const std::vector<int> swapped =
      KeptDraftTokens(std::vector<double>{0.8, 0.2}, std::vector<int>{4, 4}, 4, costs);
  EXPECT_EQ(swapped[0], kept[1]);
  EXPECT_EQ(swapped[1], kept[0]);
}

// What verifying does not show: drafting's own time and, on a model whose recurrent state cannot
// be taken back, the tokens a rejection recomputes.
TEST(KeptDraftTokens, DraftingTimeAndRecomputeCountAgainstADraft) {
  const std::vector<int> lengths = {3};
  const BatchCostTable free_rows = Linear(10, 0);  // bandwidth bound: rows cost nothing
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.3}, lengths, 1, free_rows), lengths);
  // Drafting a token costs 5 ms of a 10 ms step: a token accepted 3 times in 10 does not pay,
  // one accepted 9 times in 10 does.
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.3}, lengths, 1, free_rows, {}, 5.0),
            (std::vector<int>{0}));
  EXPECT_GE(KeptDraftTokens(std::vector<double>{0.9}, lengths, 1, free_rows, {}, 5.0)[0], 1);
  // Rows cost 1 ms each (T(1) = 11): recomputing 15 tokens after a rejection costs 15 ms, so a
  // draft accepted half the time pays without the recompute and not with it.
  const BatchCostTable costs = Linear(10, 1);
  EXPECT_GE(KeptDraftTokens(std::vector<double>{0.5}, lengths, 1, costs)[0], 1);
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.5}, lengths, 1, costs, std::vector<int>{15}),
            (std::vector<int>{0}));
  // The recompute measured at 3 ms a token (prefill's pace on a hybrid, not decode's 1 ms): a
  // draft accepted half the time no longer pays for a 4-token recompute.
  EXPECT_GE(KeptDraftTokens(std::vector<double>{0.5}, lengths, 1, costs, std::vector<int>{4})[0],
            1);
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.5}, lengths, 1, costs, std::vector<int>{4}, 0,
                            StepCost{.fixed_ms = 10, .ms_per_token = 3}),
            (std::vector<int>{0}));
  // A recompute of one token (the pending one, at a block boundary) changes nothing.
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.5}, lengths, 1, costs, std::vector<int>{1}),
            KeptDraftTokens(std::vector<double>{0.5}, lengths, 1, costs));
}

// A noisy table that timed 2-token steps under 1-token ones does not make a draft free.
TEST(KeptDraftTokens, ALargerStepIsNeverCheaper) {
  BatchCostTable costs;
  for (int i = 0; i < BatchCostTable::kMinSamples; ++i) {
    costs.Observe(1, 30);
    costs.Observe(2, 27);
  }
  EXPECT_EQ(KeptDraftTokens(std::vector<double>{0.1}, std::vector<int>{1}, 1, costs, {}, 5.0),
            (std::vector<int>{0}));
}

}  // namespace
}  // namespace kvserve
