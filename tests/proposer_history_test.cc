// The history proposer (engine/proposer_history.h): drafts come from what earlier requests of the
// same tenant read or produced, the most recent occurrence first, never from another tenant's;
// memory stays within its bound, the oldest requests leaving first. In the engine on stories260K
// (`--spec history`), a request repeating an earlier one of its tenant drafts and has drafts
// accepted, one of another tenant drafts nothing from it, and every output equals plain decoding.
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

}  // namespace
}  // namespace kvserve
