// In-batch prefix sharing: requests that arrive together and share full prompt blocks compute
// them once. The first one computes them; the others wait a step for those blocks (others are
// admitted meanwhile), then find them in the prefix cache and report them as cached prompt
// tokens. Their outputs are those they give alone (the fake model of support/fake_model.h: a
// wrongly shared or stale block changes the tokens).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kv/block_manager.h"
#include "support/fake_model.h"
#include "support/stream_output.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using testing::FakeModel;
using testing::kFakeBos;
using testing::kFakeFirstNormal;
using testing::kFakeNormalTokens;

constexpr auto kEventTimeout = std::chrono::seconds(20);

using Output = testing::StreamOutput;

Output Collect(RequestStream& stream) { return testing::CollectStream(stream, kEventTimeout); }

// A shared 40-token "system prompt" (10 blocks of 4) and a different tail per request.
std::vector<Request> SharedPrefixRequests(int n, int shared, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> prefix = {kFakeBos};
  while (static_cast<int>(prefix.size()) < shared) {
    prefix.push_back(kFakeFirstNormal + static_cast<int32_t>(rng() % kFakeNormalTokens));
  }
  std::vector<Request> out;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = "r" + std::to_string(i);
    r.prompt = prefix;
    for (int t = 0; t < 3 + i % 5; ++t) {
      r.prompt.push_back(kFakeFirstNormal + static_cast<int32_t>(rng() % kFakeNormalTokens));
    }
    r.max_tokens = 6 + i % 4;
    r.ignore_eos = true;
    r.logprobs = true;
    r.sampling.temperature = i % 2 ? 0.8f : 0.0f;
    r.sampling.seed = 40 + i;
    out.push_back(r);
  }
  return out;
}

// Holds the first Forward until Open(), so requests submitted meanwhile all wait for one step.
class FirstStepGate {
 public:
  void OnForward() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (calls_++ > 0) return;
    changed_.wait_for(lock, std::chrono::seconds(10), [&] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int calls_ = 0;
  bool open_ = false;
};

TEST(BatchPrefix, SixteenTogetherComputeTheSharedPrefixOnce) {
  constexpr int kShared = 40;
  const std::vector<Request> requests = SharedPrefixRequests(16, kShared, 3);
  const EngineOptions options{
      .n_threads = 1, .n_ctx = 128, .block_size = 4, .max_num_seqs = 16, .max_batched_tokens = 512};
  auto tokenizer = testing::FakeTokenizer();
  // Alone, each on a fresh engine: the expected outputs.
  std::vector<Output> alone;
  auto plain_model = FakeModel::Create(TestBackend());
  for (const Request& r : requests) {
    auto engine = Engine::Create(*plain_model, *tokenizer, options);
    ASSERT_TRUE(engine.ok()) << engine.message();
    auto stream = (*engine)->Submit(r);
    ASSERT_TRUE(stream.ok());
    alone.push_back(Collect(**stream));
  }
  // Together: a blocker holds the first step while the 16 are submitted, so one step sees them
  // all waiting.
  FirstStepGate gate;
  auto model = FakeModel::Create(TestBackend(), {.on_forward = [&] { gate.OnForward(); }});
  auto engine = Engine::Create(*model, *tokenizer, options);
  ASSERT_TRUE(engine.ok()) << engine.message();
  Request blocker{.id = "blocker", .prompt = {kFakeBos, 9}, .max_tokens = 1};
  blocker.sampling.temperature = 0.0f;
  auto blocked = (*engine)->Submit(blocker);
  ASSERT_TRUE(blocked.ok());
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (model->forwards() == 0 && std::chrono::steady_clock::now() < end) {
  }
  ASSERT_EQ(model->forwards(), 1);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) {
    auto stream = (*engine)->Submit(r);
    ASSERT_TRUE(stream.ok()) << stream.message();
    streams.push_back(*stream);
  }
  const int64_t before = model->tokens_forwarded();
  gate.Open();
  Collect(**blocked);
  int prompt_total = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Output out = Collect(*streams[i]);
    EXPECT_EQ(out.tokens, alone[i].tokens) << "request " << i;
    EXPECT_EQ(out.logprobs, alone[i].logprobs) << "request " << i;
    // All but the first find the 40-token prefix (10 full blocks) cached.
    if (i > 0) {
      EXPECT_EQ(out.usage.cached_tokens, kShared) << "request " << i;
    } else {
      EXPECT_EQ(out.usage.cached_tokens, 0);
    }
    prompt_total += static_cast<int>(requests[i].prompt.size());
  }
  // The prefix was computed once: tokens forwarded after the blocker's step are the prompts less
  // 15 shared prefixes, plus the decode tokens (each request's max_tokens - 1 fed back).
  int decode = 0;
  for (const Request& r : requests) decode += r.max_tokens - 1;
  EXPECT_EQ(model->tokens_forwarded() - before, prompt_total - 15 * kShared + decode);
}

// The scheduler alone: of three sequences sharing two full blocks, added together, the first is
// admitted; the second waits (its shared blocks are in flight) while the third, which shares
// nothing, is admitted; next step the second is admitted with the two blocks cached.
TEST(BatchPrefix, SchedulerPassesOverASequenceWaitingForInFlightBlocks) {
  auto tokenizer = testing::FakeTokenizer();
  BlockManager blocks(64, 4, true);
  Scheduler scheduler(blocks, SchedulerOptions{.share_in_batch = true}, nullptr);
  auto make = [&](std::vector<int32_t> prompt, const std::string& id) {
    Request r{.id = id, .prompt = std::move(prompt), .max_tokens = 4};
    return std::make_unique<Sequence>(r, std::make_shared<RequestStream>(), *tokenizer,
                                      tokenizer->n_vocab(), 256);
  };
  const std::vector<int32_t> shared = {1, 5, 6, 7, 8, 9, 10, 11};
  std::vector<int32_t> a = shared, b = shared;
  a.insert(a.end(), {12, 13});
  b.insert(b.end(), {14, 15, 16});
  scheduler.Add(make(a, "a"));
  scheduler.Add(make(b, "b"));
  scheduler.Add(make({1, 20, 21, 22, 23, 24}, "c"));
  const StepPlan first = scheduler.Schedule();
  ASSERT_EQ(first.chunks.size(), 2u);
  EXPECT_EQ(first.chunks[0].seq->request.id, "a");
  EXPECT_EQ(first.chunks[1].seq->request.id, "c");
  ASSERT_EQ(scheduler.waiting().size(), 1u);
  StepSamples sampled(2, {SampleResult{.token = 30}});
  scheduler.Postprocess(first, sampled);
  const StepPlan second = scheduler.Schedule();
  ASSERT_EQ(second.chunks.size(), 3u);
  EXPECT_EQ(second.chunks[2].seq->request.id, "b");
  EXPECT_EQ(second.chunks[2].seq->n_computed, 8);  // the two shared blocks, cached
  EXPECT_EQ(second.chunks[2].n_tokens, 3);
  EXPECT_EQ(second.chunks[2].seq->n_cached_prompt, 8);
  EXPECT_TRUE(blocks.CheckInvariants().ok()) << blocks.CheckInvariants().message();
}

}  // namespace
}  // namespace kvserve
