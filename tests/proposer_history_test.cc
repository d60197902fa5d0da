// The history proposer (engine/proposer_history.h): drafts come from what earlier requests of the
// same tenant read or produced, the most recent occurrence first, never from another tenant's;
// memory stays within its bound, the oldest requests leaving first, and no entry outlives its
// prefix-cache blocks. In the engine on stories260K (`--spec history`), a request repeating an
// earlier one of its tenant drafts and has drafts accepted, one of another tenant drafts nothing
// from it, one whose earlier blocks were evicted drafts nothing either, and every output equals
// plain decoding.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/proposer_history.h"
#include "support/paths.h"
#include "support/real_model.h"
#include "support/stream_output.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

std::vector<int32_t> Range(int32_t first, int32_t last) {
  std::vector<int32_t> out;
  for (int32_t t = first; t <= last; ++t) out.push_back(t);
  return out;
}

TEST(HistoryProposer, DraftsWhatFollowedTheSameTokensForTheSameTenantOnly) {
  HistoryProposer history({.ngram = 3});
  history.Add("alice", Range(1, 20));
  EXPECT_EQ(history.Lookup("alice", std::vector<int32_t>{40, 5, 6, 7}, 4),
            (std::vector<int32_t>{8, 9, 10, 11}));
  EXPECT_EQ(history.Lookup("alice", std::vector<int32_t>{17, 18, 19}, 4),
            (std::vector<int32_t>{20}));  // what is left of the entry
  EXPECT_TRUE(history.Lookup("bob", std::vector<int32_t>{5, 6, 7}, 4).empty());
  EXPECT_TRUE(history.Lookup("", std::vector<int32_t>{5, 6, 7}, 4).empty());
  EXPECT_TRUE(history.Lookup("alice", std::vector<int32_t>{6, 7}, 4).empty());  // shorter than n
  EXPECT_TRUE(history.Lookup("alice", std::vector<int32_t>{7, 6, 5}, 4).empty());
  EXPECT_TRUE(
      history.Lookup("alice", std::vector<int32_t>{18, 19, 20}, 4).empty());  // nothing after
}

TEST(HistoryProposer, TheMostRecentOccurrenceWins) {
  HistoryProposer history({.ngram = 2});
  history.Add("t", std::vector<int32_t>{1, 2, 30, 31});
  history.Add("t", std::vector<int32_t>{1, 2, 40, 41});
  history.Add("u", std::vector<int32_t>{1, 2, 50, 51});  // another tenant's is newer still
  EXPECT_EQ(history.Lookup("t", std::vector<int32_t>{1, 2}, 8), (std::vector<int32_t>{40, 41}));
  EXPECT_EQ(history.Lookup("u", std::vector<int32_t>{1, 2}, 8), (std::vector<int32_t>{50, 51}));
}

TEST(HistoryProposer, StaysWithinItsBoundDroppingTheOldestFirst) {
  HistoryProposer history({.ngram = 2, .max_tokens = 10});
  history.Add("t", std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  history.Add("t", std::vector<int32_t>{7, 8, 9, 10});
  EXPECT_EQ(history.n_tokens(), 10u);
  EXPECT_EQ(history.Lookup("t", std::vector<int32_t>{1, 2}, 2), (std::vector<int32_t>{3, 4}));
  history.Add("t", std::vector<int32_t>{11, 12, 13});  // the first entry leaves
  EXPECT_EQ(history.n_tokens(), 7u);
  EXPECT_TRUE(history.Lookup("t", std::vector<int32_t>{1, 2}, 2).empty());
  EXPECT_EQ(history.Lookup("t", std::vector<int32_t>{8, 9}, 2), (std::vector<int32_t>{10}));
  history.Add("t", Range(100, 130));  // longer than the bound: its last 10 tokens are kept
  EXPECT_EQ(history.n_tokens(), 10u);
  EXPECT_TRUE(history.Lookup("t", std::vector<int32_t>{11, 12}, 2).empty());
  EXPECT_TRUE(history.Lookup("t", std::vector<int32_t>{100, 101}, 2).empty());
  EXPECT_EQ(history.Lookup("t", std::vector<int32_t>{121, 122}, 2),
            (std::vector<int32_t>{123, 124}));
  HistoryProposer none({.ngram = 2, .max_tokens = 0});
  none.Add("t", Range(1, 10));
  EXPECT_EQ(none.n_tokens(), 0u);
}

// Tied to the prefix cache's blocks (block_size 4): an entry leaves when the last block holding
// its tokens is evicted; blocks shared by two entries count for both.
TEST(HistoryProposer, EntriesLeaveWithTheirLastBlock) {
  HistoryProposer history({.ngram = 2, .block_size = 4});
  const std::vector<int32_t> a = Range(1, 10);  // blocks [1..4] [5..8]; 9, 10 in no full block
  const std::vector<int32_t> b = {1, 2, 3, 4, 50, 51, 52, 53, 54};  // shares a's first block
  history.Add("t", a);
  history.Add("t", b);
  const BlockKey a0 = BlockManager::KeyOf(nullptr, "t", std::span(a).first(4));
  const BlockKey a1 = BlockManager::KeyOf(&a0, "t", std::span(a).subspan(4, 4));
  const BlockKey b1 = BlockManager::KeyOf(&a0, "t", std::span(b).subspan(4, 4));
  EXPECT_EQ(history.n_entries(), 2u);
  history.BlockEvicted(BlockManager::KeyOf(nullptr, "u", std::span(a).first(4)));  // not theirs
  history.BlockEvicted(a1);
  EXPECT_EQ(history.Lookup("t", std::vector<int32_t>{7, 8}, 2), (std::vector<int32_t>{9, 10}));
  history.BlockEvicted(a0);  // a's last block, and one of b's
  EXPECT_EQ(history.n_entries(), 1u);
  EXPECT_EQ(history.n_tokens(), b.size());
  EXPECT_TRUE(history.Lookup("t", std::vector<int32_t>{7, 8}, 2).empty());
  EXPECT_EQ(history.Lookup("t", std::vector<int32_t>{51, 52}, 2), (std::vector<int32_t>{53, 54}));
  history.BlockEvicted(b1);
  EXPECT_EQ(history.n_entries(), 0u);
  EXPECT_EQ(history.n_tokens(), 0u);
  EXPECT_TRUE(history.Lookup("t", std::vector<int32_t>{51, 52}, 2).empty());
  // Only the computed tokens' blocks count: an entry whose tokens fill no block is kept by the
  // bound alone.
  history.Add("t", a, /*n_cached=*/3);
  history.BlockEvicted(a0);
  EXPECT_EQ(history.n_entries(), 1u);
  // A later entry still drafts after an earlier one went by its blocks.
  history.Add("t", b);
  history.BlockEvicted(a0);
  history.BlockEvicted(b1);
  EXPECT_EQ(history.n_entries(), 1u);
  EXPECT_EQ(history.Lookup("t", std::vector<int32_t>{7, 8}, 2), (std::vector<int32_t>{9, 10}));
}

class HistoryEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::LoadedModel loaded =
        testing::LoadModelWithTokenizer(testing::ModelPath("stories260K.gguf"));
    ASSERT_TRUE(loaded.model && loaded.tokenizer);
    model_ = std::move(loaded.model);
    tokenizer_ = std::move(loaded.tokenizer);
  }
  Request Make(const std::string& id, const std::string& salt, float temperature) const {
    Request r;
    r.id = id;
    r.prompt = tokenizer_->Encode("One day, a little boy named Tim went to", true, false);
    r.max_tokens = 48;
    r.cache_salt = salt;
    r.sampling.temperature = temperature;
    r.sampling.seed = 5;
    return r;
  }
  testing::StreamOutput Run(Engine& engine, const Request& r) const {
    auto stream = engine.Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.message();
    if (!stream.ok()) return {};
    return testing::CollectStream(**stream, std::chrono::seconds(20));
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(HistoryEngineTest, RepeatsDraftFromTheirTenantsHistoryAndChangeNoToken) {
  EngineOptions plain_options{.n_threads = 2, .n_ctx = 256};
  EngineOptions options = plain_options;
  options.spec.method = SpecMethod::kHistory;
  options.spec.batch_tokens = 1 << 16;
  // Every history draft is verified: the test counts them; whether they pay for themselves on
  // this machine is the cost gate's question (tests/spec_gate_test.cc).
  options.spec.cost_gate = false;
  auto plain = Engine::Create(*model_, *tokenizer_, plain_options);
  auto engine = Engine::Create(*model_, *tokenizer_, options);
  ASSERT_TRUE(plain.ok() && engine.ok());
  for (float temperature : {0.0f, 0.8f}) {
    const std::string t = temperature == 0 ? "greedy" : "sampled";
    const testing::StreamOutput want = Run(**plain, Make("p-" + t, "alice", temperature));
    ASSERT_FALSE(want.tokens.empty());
    // The first of its tenant has no history to draft from.
    const testing::StreamOutput first = Run(**engine, Make("a1-" + t, "alice-" + t, temperature));
    EXPECT_EQ(first.tokens, want.tokens) << t;
    EXPECT_EQ(first.usage.drafted_tokens, 0) << t;
    // The same request again: its tenant's history holds the whole answer.
    const testing::StreamOutput again = Run(**engine, Make("a2-" + t, "alice-" + t, temperature));
    EXPECT_EQ(again.tokens, want.tokens) << t;
    EXPECT_GT(again.usage.accepted_tokens, static_cast<int>(want.tokens.size()) / 2) << t;
    // Another tenant asking the same thing drafts nothing from alice's history.
    const testing::StreamOutput other = Run(**engine, Make("b1-" + t, "bob-" + t, temperature));
    EXPECT_EQ(other.tokens, want.tokens) << t;
    EXPECT_EQ(other.usage.drafted_tokens, 0) << t;
  }
}

// A pool too small to keep alice's blocks once bob's requests come: her history goes with them.
TEST_F(HistoryEngineTest, HistoryLeavesWithItsTenantsEvictedBlocks) {
  EngineOptions options{.n_threads = 2, .n_ctx = 128, .kv_memory_bytes = 0, .max_num_seqs = 1};
  options.spec.method = SpecMethod::kHistory;
  options.spec.cost_gate = false;  // every history draft is verified: the test counts them
  const uint64_t per_token = model_->kv_spec().BytesPerToken(options.kv_type);
  options.kv_memory_bytes = per_token * 128;  // one request's context: 8 blocks of 16
  auto engine = Engine::Create(*model_, *tokenizer_, options);
  ASSERT_TRUE(engine.ok()) << engine.message();
  const testing::StreamOutput first = Run(**engine, Make("a1", "alice", 0));
  const testing::StreamOutput again = Run(**engine, Make("a2", "alice", 0));
  EXPECT_GT(again.usage.drafted_tokens, 0);  // the history holds her first answer
  // Bob's requests, other text, take every block.
  for (int i = 0; i < 3; ++i) {
    Request r = Make("b" + std::to_string(i), "bob", 0);
    r.prompt = tokenizer_->Encode("The cat sat on the mat " + std::to_string(i), true, false);
    r.max_tokens = 100;
    Run(**engine, r);
  }
  const testing::StreamOutput late = Run(**engine, Make("a3", "alice", 0));
  EXPECT_EQ(late.tokens, first.tokens);
  EXPECT_EQ(late.usage.cached_tokens, 0);   // her blocks are gone...
  EXPECT_EQ(late.usage.drafted_tokens, 0);  // ...and her history with them
}

}  // namespace
}  // namespace kvserve
