// The scheduler on its own, with the in-memory vocabulary of support/fake_model.h for the
// sequences' stop rules: no tokenizer file. Chunked prefill under the token budget, max_num_seqs,
// first-come-first-served admission, preemption of the newest and its resumption (recomputed, or
// from its cached prefix), and the reclaim hook that frees pinned session blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kv/block_manager.h"
#include "support/fake_model.h"

namespace kvserve {
namespace {

using testing::kFakeFirstNormal;
using testing::kFakeNormalTokens;

// One chunk of a step as it was scheduled (before Postprocess moved n_computed on).
struct Chunk {
  std::string id;
  int start;  // n_computed when scheduled
  int n_tokens;
  bool sample;
  int tokens;  // the sequence's length when scheduled
};

class SchedulerWithoutFiles : public ::testing::Test {
 protected:
  std::unique_ptr<Sequence> MakeSequence(int prompt_length, int max_tokens, int32_t first = 0) {
    Request r;
    for (int i = 0; i < prompt_length; ++i) {
      r.prompt.push_back(kFakeFirstNormal + (first + i) % kFakeNormalTokens);
    }
    r.max_tokens = max_tokens;
    r.id = "r" + std::to_string(next_id_++);
    return std::make_unique<Sequence>(r, std::make_shared<RequestStream>(), *tokenizer_,
                                      tokenizer_->n_vocab(), kContext);
  }
  // Plays the engine: "samples" a normal token derived from n_generated for each chunk that
  // samples, lets Postprocess append it, and removes the sequences it finished (at max_tokens).
  std::vector<Chunk> Step(Scheduler& s, BlockManager& m) {
    const StepPlan plan = s.Schedule();
    std::vector<Chunk> chunks;
    int n_tokens = 0;
    StepSamples sampled;
    for (const ScheduledChunk& c : plan.chunks) {
      chunks.push_back({c.seq->request.id, c.seq->n_computed, c.n_tokens, c.sample,
                        static_cast<int>(c.seq->tokens.size())});
      n_tokens += c.n_tokens;
      if (c.sample) {
        sampled.push_back(
            {SampleResult{.token = kFakeFirstNormal + c.seq->n_generated() % kFakeNormalTokens}});
      }
    }
    EXPECT_EQ(plan.n_tokens, n_tokens);
    for (const SequenceOutput& out : s.Postprocess(plan, sampled)) {
      EXPECT_TRUE(out.outcome.append);
      if (out.outcome.finish != FinishReason::kNone) {
        EXPECT_EQ(out.outcome.finish, FinishReason::kLength);
        EXPECT_EQ(out.seq->n_generated(), out.seq->request.max_tokens);
        finished_.push_back(out.seq->request.id);
        s.Remove(out.seq);
      }
    }
    EXPECT_TRUE(m.CheckInvariants().ok()) << m.CheckInvariants().message();
    return chunks;
  }
  bool Done(const Scheduler& s) const { return s.running().empty() && s.waiting().empty(); }

  static constexpr int kContext = 4096;
  std::unique_ptr<Tokenizer> tokenizer_ = testing::FakeTokenizer();
  std::vector<std::string> finished_;
  int next_id_ = 0;
};

TEST_F(SchedulerWithoutFiles, ChunkedPrefillRespectsTheTokenBudgetAndMixesDecode) {
  BlockManager m(64, 4, true);
  Scheduler s(m, {.max_num_seqs = 4, .max_batched_tokens = 8}, nullptr);
  s.Add(MakeSequence(3, 5));
  const std::vector<Chunk> first = Step(s, m);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].n_tokens, 3);
  EXPECT_TRUE(first[0].sample);
  s.Add(MakeSequence(20, 2, 30));
  // One decode token for r0 first, then 7, 7 and finally 6 prompt tokens of r1, which samples
  // only when its prompt is complete.
  int r1_prefilled = 0;
  std::vector<int> r1_chunks;
  for (int steps = 0; !Done(s); ++steps) {
    ASSERT_LT(steps, 50);
    const std::vector<Chunk> chunks = Step(s, m);
    int n = 0;
    for (const Chunk& c : chunks) n += c.n_tokens;
    EXPECT_LE(n, 8);
    for (size_t i = 0; i < chunks.size(); ++i) {
      const Chunk& c = chunks[i];
      if (c.id == "r0") {
        EXPECT_EQ(i, 0u) << "the running sequence decodes first";
        EXPECT_EQ(c.n_tokens, 1);
      } else if (r1_prefilled < 20) {
        EXPECT_EQ(c.start, r1_prefilled);
        r1_prefilled += c.n_tokens;
        r1_chunks.push_back(c.n_tokens);
        EXPECT_EQ(c.sample, r1_prefilled == 20);
      }
    }
  }
  EXPECT_EQ(r1_chunks, (std::vector<int>{7, 7, 6}));
  EXPECT_EQ(finished_, (std::vector<std::string>{"r0", "r1"}));
  EXPECT_EQ(m.Stats().used, 0);
}

TEST_F(SchedulerWithoutFiles, MaxNumSeqsLimitsAdmissionInArrivalOrder) {
  BlockManager m(64, 4, true);
  Scheduler s(m, {.max_num_seqs = 2, .max_batched_tokens = 100}, nullptr);
  for (int i = 0; i < 5; ++i) s.Add(MakeSequence(3, 3 + i, 10 * i));
  Step(s, m);
  EXPECT_EQ(s.running().size(), 2u);
  EXPECT_EQ(s.waiting().size(), 3u);
  std::vector<std::string> admitted = {"r0", "r1"};
  while (!Done(s)) {
    for (const Chunk& c : Step(s, m)) {
      if (c.start == 0) admitted.push_back(c.id);
    }
    EXPECT_LE(s.running().size(), 2u);
  }
  EXPECT_EQ(admitted, (std::vector<std::string>{"r0", "r1", "r2", "r3", "r4"}));
  EXPECT_EQ(finished_, (std::vector<std::string>{"r0", "r1", "r2", "r3", "r4"}));
  EXPECT_EQ(m.Stats().used, 0);
}

// A waiting sequence that does not fit stops admission: a smaller one behind it waits too.
TEST_F(SchedulerWithoutFiles, AdmissionNeverOvertakes) {
  BlockManager m(5, 4, false);
  Scheduler s(m, {.max_num_seqs = 4, .max_batched_tokens = 64}, nullptr);
  s.Add(MakeSequence(12, 4));  // 3 blocks, then a 4th for its decode tokens
  Step(s, m);
  s.Add(MakeSequence(12, 2, 20));  // needs 3 blocks: does not fit beside r0
  s.Add(MakeSequence(2, 2, 40));   // would fit in the one block left
  Step(s, m);
  ASSERT_EQ(s.running().size(), 1u);
  EXPECT_EQ(s.running()[0]->request.id, "r0");
  ASSERT_EQ(s.waiting().size(), 2u);
  EXPECT_EQ(s.waiting()[0]->request.id, "r1");
  EXPECT_EQ(s.waiting()[1]->request.id, "r2");
  for (int i = 0; i < 20 && !Done(s); ++i) Step(s, m);
  EXPECT_EQ(finished_, (std::vector<std::string>{"r0", "r1", "r2"}));
  EXPECT_EQ(m.Stats().used, 0);
}

// Without a prefix cache the preempted (newest) sequence is recomputed from position 0 on its
// return: prompt and generated tokens in one chunk, which samples its next token.
TEST_F(SchedulerWithoutFiles, PreemptsTheNewestWhenBlocksRunOutAndRecomputesIt) {
  BlockManager m(6, 4, false);  // 24 token slots
  Scheduler s(m, {.max_num_seqs = 4, .max_batched_tokens = 64}, nullptr);
  s.Add(MakeSequence(7, 12, 0));  // grows to 18 stored tokens: 5 blocks
  s.Add(MakeSequence(7, 12, 20));
  bool saw_preemption = false;
  bool saw_resume = false;
  for (int steps = 0; !Done(s); ++steps) {
    ASSERT_LT(steps, 200);
    const std::vector<Chunk> chunks = Step(s, m);
    if (!saw_preemption && s.preemptions() > 0) {
      saw_preemption = true;
      ASSERT_EQ(s.running().size(), 1u);
      EXPECT_EQ(s.running()[0]->request.id, "r0");
      ASSERT_EQ(s.waiting().size(), 1u);
      const Sequence& victim = *s.waiting()[0];
      EXPECT_EQ(victim.request.id, "r1");
      EXPECT_EQ(victim.n_computed, 0);
      EXPECT_TRUE(victim.blocks.empty());
      EXPECT_GT(victim.n_generated(), 0);  // its tokens are kept
    }
    for (const Chunk& c : chunks) {
      if (saw_preemption && !saw_resume && c.id == "r1") {
        saw_resume = true;
        EXPECT_EQ(c.start, 0);
        EXPECT_EQ(c.n_tokens, c.tokens);
        EXPECT_TRUE(c.sample);
      }
    }
  }
  EXPECT_TRUE(saw_preemption);
  EXPECT_TRUE(saw_resume);
  EXPECT_EQ(s.preemptions(), 1u);
  EXPECT_EQ(finished_, (std::vector<std::string>{"r0", "r1"}));
  EXPECT_EQ(m.Stats().used, 0);
}

// With the prefix cache, the preempted sequence's early blocks stay cached (its tail is evicted
// first), so on its return only the rest is computed.
TEST_F(SchedulerWithoutFiles, APreemptedSequenceResumesFromItsCachedPrefix) {
  BlockManager m(8, 4, true);
  Scheduler s(m, {.max_num_seqs = 4, .max_batched_tokens = 64}, nullptr);
  s.Add(MakeSequence(8, 12, 0));  // 19 stored tokens at the end: 5 blocks each, 10 > 8
  s.Add(MakeSequence(8, 12, 30));
  bool saw_resume = false;
  for (int steps = 0; !Done(s); ++steps) {
    ASSERT_LT(steps, 200);
    const uint64_t preemptions = s.preemptions();
    for (const Chunk& c : Step(s, m)) {
      if (preemptions > 0 && !saw_resume && c.id == "r1") {
        saw_resume = true;
        EXPECT_GT(c.start, 0);
        EXPECT_EQ(c.start % 4, 0);
        EXPECT_EQ(c.n_tokens, c.tokens - c.start);
        EXPECT_TRUE(c.sample);
      }
    }
  }
  EXPECT_EQ(s.preemptions(), 1u);
  EXPECT_TRUE(saw_resume);
  EXPECT_EQ(finished_, (std::vector<std::string>{"r0", "r1"}));
  EXPECT_EQ(m.Stats().used, 0);
}

// When a waiting sequence cannot be admitted and nothing runs, the scheduler asks `reclaim` (the
// engine's oldest pinned session) for blocks, until it fits or reclaim has none left.
TEST_F(SchedulerWithoutFiles, ReclaimFreesPinnedBlocksWhenNothingElseCanRun) {
  BlockManager m(4, 4, true);
  BlockTable pinned;
  ASSERT_TRUE(m.Grow(pinned, 12));  // 3 of the 4 blocks, held by a "session"
  int reclaims = 0;
  Scheduler s(m, {.max_num_seqs = 4, .max_batched_tokens = 64}, [&] {
    ++reclaims;
    if (pinned.empty()) return false;
    m.Free(pinned);
    return true;
  });
  s.Add(MakeSequence(6, 2));  // needs 2 blocks
  const std::vector<Chunk> first = Step(s, m);
  EXPECT_EQ(reclaims, 1);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].n_tokens, 6);
  while (!Done(s)) Step(s, m);
  EXPECT_EQ(m.Stats().used, 0);

  // Too big even for the whole pool: reclaim is asked once more, has nothing, and the sequence
  // waits (the engine's Submit refuses such requests up front).
  s.Add(MakeSequence(20, 2));
  EXPECT_TRUE(Step(s, m).empty());
  EXPECT_EQ(reclaims, 2);
  EXPECT_EQ(s.waiting().size(), 1u);
}

TEST_F(SchedulerWithoutFiles, RandomWorkloadCompletesEverythingWithoutLeaks) {
  std::mt19937 rng(99);
  BlockManager m(40, 4, true);
  Scheduler s(m, {.max_num_seqs = 6, .max_batched_tokens = 24}, nullptr);
  int added = 0;
  for (int step = 0; step < 2000; ++step) {
    if (added < 60 && rng() % 3 == 0) {
      s.Add(MakeSequence(1 + rng() % 40, 1 + rng() % 30, rng() % 3 * 7));
      ++added;
    }
    int n = 0;
    for (const Chunk& c : Step(s, m)) n += c.n_tokens;
    EXPECT_LE(n, 24);
    EXPECT_LE(s.running().size(), 6u);
    if (added == 60 && Done(s)) break;
  }
  EXPECT_EQ(added, 60);
  EXPECT_TRUE(Done(s));
  EXPECT_EQ(finished_.size(), 60u);
  EXPECT_EQ(m.Stats().used, 0);
  EXPECT_GT(m.Stats().prefix_hits_tokens, 0u);
  EXPECT_GT(s.preemptions(), 0u);
}

}  // namespace
}  // namespace kvserve
