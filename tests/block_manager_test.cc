// BlockManager and Scheduler without a model: random workloads with the invariants checked after
// every operation, LRU order, salts, preemption and resume.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "engine/scheduler.h"
#include "io/gguf_reader.h"
#include "kv/block_manager.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

std::vector<int32_t> Tokens(int n, int32_t start) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = start + i;
  return t;
}

TEST(BlockManager, FreshTableGrowsAndFreesToTheFreeList) {
  BlockManager m(8, 4, /*prefix_caching=*/true);
  BlockTable table;
  EXPECT_EQ(m.BlocksToHold(table, 9), 3);
  ASSERT_TRUE(m.Grow(table, 9));
  EXPECT_EQ(table.group(0), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(m.Stats().used, 3);
  EXPECT_TRUE(m.CheckInvariants().ok());
  m.Free(table);  // nothing was committed: no keys, straight to the free list
  EXPECT_EQ(m.Stats().free, 8);
  EXPECT_EQ(m.Stats().cached, 0);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManager, GrowFailsWithoutChangingAnything) {
  BlockManager m(2, 4, true);
  BlockTable table;
  EXPECT_FALSE(m.Grow(table, 9));
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(m.available(), 2);
}

TEST(BlockManager, CommittedPrefixIsReusedAndTheLastTokenAlwaysComputed) {
  BlockManager m(16, 4, true);
  const std::vector<int32_t> prompt = Tokens(12, 100);  // exactly three blocks
  BlockTable a;
  ASSERT_TRUE(m.Grow(a, 12));
  m.Commit(a, prompt, 12, "");
  EXPECT_EQ(a.keys.size(), 3u);
  // While `a` still runs, a second request shares its first two blocks, not the third: the last
  // prompt token must be computed for its logits.
  EXPECT_EQ(m.CachedPrefixTokens(prompt, ""), 8);
  BlockTable b;
  EXPECT_EQ(m.AllocatePrefix(b, prompt, ""), 8);
  EXPECT_EQ(b.group(0), (std::vector<int32_t>{a.group(0)[0], a.group(0)[1]}));
  EXPECT_EQ(m.Stats().used, 3);
  EXPECT_TRUE(m.CheckInvariants().ok());
  // A longer prompt with the same start reuses all three.
  std::vector<int32_t> longer = prompt;
  longer.push_back(7);
  EXPECT_EQ(m.CachedPrefixTokens(longer, ""), 12);
  // Another salt shares nothing.
  EXPECT_EQ(m.CachedPrefixTokens(longer, "other"), 0);
  m.Free(a);
  m.Free(b);
  const BlockManagerStats s = m.Stats();
  EXPECT_EQ(s.used, 0);
  EXPECT_EQ(s.cached, 3);  // content kept for later requests
  EXPECT_EQ(m.CachedPrefixTokens(longer, ""), 12);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManager, DifferentHistoryGivesDifferentKeys) {
  // The same block of tokens after a different first block must not match.
  const std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<int32_t> b = {9, 2, 3, 4, 5, 6, 7, 8, 9};
  BlockManager m(8, 4, true);
  BlockTable t;
  ASSERT_TRUE(m.Grow(t, 9));
  m.Commit(t, a, 9, "");
  EXPECT_EQ(m.CachedPrefixTokens(a, ""), 8);
  EXPECT_EQ(m.CachedPrefixTokens(b, ""), 0);
  m.Free(t);
}

TEST(BlockManager, EvictsLeastRecentlyFreedFirst) {
  BlockManager m(4, 2, true);
  std::vector<std::vector<int32_t>> prompts = {{1, 1, 0}, {2, 2, 0}, {3, 3, 0}, {4, 4, 0}};
  for (const auto& p : prompts) {  // each leaves one cached block, freed in this order
    BlockTable t;
    ASSERT_TRUE(m.Grow(t, 2));
    m.Commit(t, p, 2, "");
    m.Free(t);
  }
  EXPECT_EQ(m.Stats().cached, 4);
  // Touch prompt 0 again: it becomes the most recently freed.
  BlockTable again;
  EXPECT_EQ(m.AllocatePrefix(again, prompts[0], ""), 2);
  m.Free(again);
  // A fresh block must evict prompt 1's block (now the least recently used).
  BlockTable fresh;
  ASSERT_TRUE(m.Grow(fresh, 1));
  EXPECT_EQ(m.CachedPrefixTokens(prompts[1], ""), 0);
  EXPECT_EQ(m.CachedPrefixTokens(prompts[0], ""), 2);
  EXPECT_EQ(m.CachedPrefixTokens(prompts[2], ""), 2);
  EXPECT_TRUE(m.CheckInvariants().ok());
  m.Free(fresh);
}

TEST(BlockManager, NoPrefixCachingMeansNoSharing) {
  BlockManager m(8, 4, false);
  const std::vector<int32_t> prompt = Tokens(9, 1);
  BlockTable t;
  ASSERT_TRUE(m.Grow(t, 9));
  m.Commit(t, prompt, 9, "");
  m.Free(t);
  EXPECT_EQ(m.Stats().cached, 0);
  EXPECT_EQ(m.CachedPrefixTokens(prompt, ""), 0);
}

TEST(BlockManager, RandomWorkloadKeepsInvariants) {
  std::mt19937 rng(1234);
  BlockManager m(64, 4, true);
  struct Live {
    BlockTable table;
    std::vector<int32_t> tokens;
    std::string salt;
  };
  std::vector<Live> live;
  for (int op = 0; op < 5000; ++op) {
    const int choice = rng() % 10;
    if (choice < 4) {  // a new request, often sharing a prefix
      Live l;
      l.salt = (rng() % 4 == 0) ? "s" : "";
      const int n = 1 + rng() % 30;
      for (int i = 0; i < n; ++i) l.tokens.push_back(i < 8 && rng() % 2 ? i : rng() % 50);
      const int cached = m.AllocatePrefix(l.table, l.tokens, l.salt);
      ASSERT_LE(cached, n - 1);
      if (!m.Grow(l.table, n)) {
        m.Free(l.table);
      } else {
        m.Commit(l.table, l.tokens, n, l.salt);
        live.push_back(std::move(l));
      }
    } else if (choice < 7 && !live.empty()) {  // a decode step
      Live& l = live[rng() % live.size()];
      l.tokens.push_back(rng() % 50);
      if (m.Grow(l.table, static_cast<int>(l.tokens.size()))) {
        m.Commit(l.table, l.tokens, static_cast<int>(l.tokens.size()), l.salt);
      } else {
        l.tokens.pop_back();
      }
    } else if (!live.empty()) {  // a request ends
      const size_t i = rng() % live.size();
      m.Free(live[i].table);
      live.erase(live.begin() + i);
    }
    Status status = m.CheckInvariants();
    ASSERT_TRUE(status.ok()) << "after op " << op << ": " << status.message();
  }
  for (Live& l : live) m.Free(l.table);
  EXPECT_EQ(m.Stats().used, 0);
  EXPECT_TRUE(m.CheckInvariants().ok());
}

TEST(BlockManager, ShareKeepsBlocksAliveAfterTheOwnerFrees) {
  BlockManager m(8, 4, true);
  const std::vector<int32_t> tokens = Tokens(10, 5);
  BlockTable t;
  ASSERT_TRUE(m.Grow(t, 10));
  m.Commit(t, tokens, 10, "");
  BlockTable pinned = m.Share(t, static_cast<int>(t.keys.size()));
  m.Free(t);
  EXPECT_EQ(m.Stats().used, 2);
  EXPECT_TRUE(m.CheckInvariants().ok());
  m.Free(pinned);
  EXPECT_EQ(m.Stats().used, 0);
  EXPECT_EQ(m.Stats().cached, 2);
}

// Scheduler tests use a real tokenizer (a vocabulary file, no model) for the sequences' decoders.
class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto file = GgufFile::Open(testing::ModelPath("ggml-vocab-llama-spm.gguf"));
    ASSERT_TRUE(file.ok()) << file.message();
    auto tokenizer = Tokenizer::FromGguf(*file);
    ASSERT_TRUE(tokenizer.ok());
    tokenizer_ = std::move(tokenizer).value();
  }
  std::unique_ptr<Sequence> MakeSequence(int prompt_length, int max_tokens, int32_t first = 10) {
    Request r;
    r.prompt = Tokens(prompt_length, first);
    r.max_tokens = max_tokens;
    r.id = "r" + std::to_string(next_id_++);
    return std::make_unique<Sequence>(r, std::make_shared<RequestStream>(), *tokenizer_,
                                      tokenizer_->n_vocab(), kContext);
  }
  // Plays the engine: "samples" token 1000 + n_generated for each chunk that samples, lets
  // Postprocess append it, and removes the sequences it finished (at max_tokens). Returns the plan.
  StepPlan Step(Scheduler& s, BlockManager& m) {
    StepPlan plan = s.Schedule();
    StepSamples sampled;
    for (const ScheduledChunk& c : plan.chunks) {
      if (c.sample) sampled.push_back({SampleResult{.token = 1000 + c.seq->n_generated()}});
    }
    for (const SequenceOutput& out : s.Postprocess(plan, sampled)) {
      EXPECT_TRUE(out.outcome.append);
      if (out.outcome.finish != FinishReason::kNone) {
        EXPECT_EQ(out.seq->n_generated(), out.seq->request.max_tokens);
        s.Remove(out.seq);
      }
    }
    EXPECT_TRUE(m.CheckInvariants().ok());
    return plan;
  }
  static constexpr int kContext = 4096;
  std::unique_ptr<Tokenizer> tokenizer_;
  int next_id_ = 0;
};

TEST_F(SchedulerTest, ChunkedPrefillRespectsTheTokenBudgetAndMixesDecode) {
  BlockManager m(64, 4, true);
  Scheduler s(m, {.max_num_seqs = 4, .max_batched_tokens = 8}, nullptr);
  s.Add(MakeSequence(3, 5));
  StepPlan first = Step(s, m);
  ASSERT_EQ(first.chunks.size(), 1u);
  EXPECT_EQ(first.n_tokens, 3);
  EXPECT_TRUE(first.chunks[0].sample);
  s.Add(MakeSequence(20, 2, 500));
  // Next step: one decode token for the first sequence, 7 prompt tokens of the second.
  StepPlan second = Step(s, m);
  ASSERT_EQ(second.chunks.size(), 2u);
  EXPECT_EQ(second.chunks[0].n_tokens, 1);
  EXPECT_EQ(second.chunks[1].n_tokens, 7);
  EXPECT_FALSE(second.chunks[1].sample);
  EXPECT_LE(second.n_tokens, 8);
  for (int i = 0; i < 20 && !(s.running().empty() && s.waiting().empty()); ++i) {
    EXPECT_LE(Step(s, m).n_tokens, 8);
  }
  EXPECT_TRUE(s.running().empty());
  EXPECT_EQ(m.Stats().used, 0);
}

TEST_F(SchedulerTest, MaxNumSeqsLimitsAdmission) {
  BlockManager m(64, 4, true);
  Scheduler s(m, {.max_num_seqs = 2, .max_batched_tokens = 100}, nullptr);
  for (int i = 0; i < 5; ++i) s.Add(MakeSequence(3, 3, 100 * i));
  Step(s, m);
  EXPECT_EQ(s.running().size(), 2u);
  EXPECT_EQ(s.waiting().size(), 3u);
}

TEST_F(SchedulerTest, PreemptsTheNewestWhenBlocksRunOutAndResumes) {
  BlockManager m(6, 4, false);  // 24 token slots
  Scheduler s(m, {.max_num_seqs = 4, .max_batched_tokens = 64}, nullptr);
  s.Add(MakeSequence(7, 12, 100));  // grows to 19 tokens: 5 blocks
  s.Add(MakeSequence(7, 12, 200));
  int steps = 0;
  while (!(s.running().empty() && s.waiting().empty()) && steps < 200) {
    Step(s, m);
    ++steps;
  }
  EXPECT_LT(steps, 200);
  EXPECT_GT(s.preemptions(), 0u);
  EXPECT_EQ(m.Stats().used, 0);
}

TEST_F(SchedulerTest, RandomWorkloadCompletesEverythingWithoutLeaks) {
  std::mt19937 rng(99);
  BlockManager m(40, 4, true);
  Scheduler s(m, {.max_num_seqs = 6, .max_batched_tokens = 24}, nullptr);
  int added = 0;
  for (int step = 0; step < 2000; ++step) {
    if (added < 60 && rng() % 3 == 0) {
      s.Add(MakeSequence(1 + rng() % 40, 1 + rng() % 30, rng() % 3 * 1000));
      ++added;
    }
    const StepPlan plan = Step(s, m);
    EXPECT_LE(plan.n_tokens, 24);
    EXPECT_LE(s.running().size(), 6u);
    if (added == 60 && s.running().empty() && s.waiting().empty()) break;
  }
  EXPECT_EQ(added, 60);
  EXPECT_TRUE(s.running().empty());
  EXPECT_TRUE(s.waiting().empty());
  EXPECT_EQ(m.Stats().used, 0);
  EXPECT_GT(m.Stats().prefix_hits_tokens, 0u);
}

}  // namespace
}  // namespace kvserve
