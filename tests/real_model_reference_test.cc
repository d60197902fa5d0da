// kvserve against llama.cpp on the two real models (scripts/get-model.sh smollm2-135m and
// gemma3-270m): the 13 prompts of tests/data/real-models/prompts.json (English, a question, Python,
// C, Chinese, Russian, Hindi, digits, punctuation, a list, JSON, ChatML markers typed as plain
// text, and 1,938-1,943 tokens of the GPL-3) tokenize to llama.cpp's ids, their prompt logits
// agree within a measured bound, and 128 greedy tokens equal llama.cpp's (data: *.llama-cpp.json,
// made by llama.cpp 3f545becc; README there). Then the engine's own guarantees on the same files:
// batch = incremental = no-cache bit for bit, and 16 requests at once equal each alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sequence_runner.h"
#include "model/model.h"
#include "support/forward.h"
#include "support/paths.h"
#include "support/real_model.h"
#include "support/stream_output.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

struct TopRow {
  int row = 0;
  std::vector<std::pair<int32_t, float>> top;  // llama.cpp's 32 largest logits, largest first
};

struct ReferenceCase {
  std::string prompt;
  std::vector<int32_t> prompt_tokens;
  std::vector<TopRow> prompt_top;  // the first and the last 32 prompt rows
  std::vector<int32_t> greedy;     // 128 tokens
  std::vector<TopRow> gen_top2;    // [i]: the 2 largest logits after feeding greedy[i]
};

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

std::vector<ReferenceCase> LoadCases(const std::string& model_name) {
  const nlohmann::json prompts = ReadJson(testing::TestDataPath("real-models/prompts.json"));
  const nlohmann::json ref =
      ReadJson(testing::TestDataPath("real-models/" + model_name + ".llama-cpp.json"));
  std::vector<ReferenceCase> cases;
  for (size_t i = 0; i < ref["cases"].size(); ++i) {
    const nlohmann::json& c = ref["cases"][i];
    ReferenceCase rc;
    rc.prompt = prompts["prompts"][i].get<std::string>();
    rc.prompt_tokens = c["prompt_tokens"].get<std::vector<int32_t>>();
    for (const nlohmann::json& r : c["prompt_top"]) {
      TopRow row{.row = r["row"].get<int>()};
      for (const nlohmann::json& e : r["top"]) row.top.emplace_back(e[0].get<int32_t>(), e[1]);
      rc.prompt_top.push_back(std::move(row));
    }
    rc.greedy = c["greedy"].get<std::vector<int32_t>>();
    for (const nlohmann::json& r : c["gen_top2"]) {
      TopRow row;
      for (const nlohmann::json& e : r) row.top.emplace_back(e[0].get<int32_t>(), e[1]);
      rc.gen_top2.push_back(std::move(row));
    }
    cases.push_back(std::move(rc));
  }
  return cases;
}

int32_t ArgMax(std::span<const float> row) {
  return static_cast<int32_t>(std::max_element(row.begin(), row.end()) - row.begin());
}

// max |ours - llama.cpp| over the row's 32 stored logits / max |llama.cpp| over them.
double TopRowError(std::span<const float> ours, const TopRow& ref) {
  double diff = 0.0, scale = 0.0;
  for (const auto& [id, value] : ref.top) {
    diff = std::max(diff, std::fabs(static_cast<double>(ours[id]) - value));
    scale = std::max(scale, std::fabs(static_cast<double>(value)));
  }
  return diff / scale;
}

// The bound on TopRowError, per model: 1.5 times the largest error measured over the 13 prompts
// (SmolLM2 9.6e-2, Gemma 3 1.7e-1; medians 1.2e-2 and 2.6e-2). Both engines round every
// activation to 8-bit blocks before each quantized matmul (Q8_1 for Q4_1, Q8_K for the K-quants,
// Q8_0 for the Q8_0 output head) and sum in different orders, so they agree to ~1e-7 until one
// activation lands on the other side of a rounding step; from there the rows differ by the
// quantization's own size, which 18-30 layers carry to the logits (docs/benchmarks.md, "Accuracy
// against llama.cpp": even an exact float64 pass that rounds as ggml does lands 2e-2 away).
double LogitBound(const std::string& model_name) {
  return model_name == "smollm2-135m" ? 0.15 : 0.25;
}

// A greedy step where the engines may disagree: kvserve picked llama.cpp's runner-up and
// llama.cpp's top two were within half a logit, about twice the median absolute difference of the
// rows above (median relative error 1.2e-2 / 2.6e-2 of a row scale near 20): a near-tie that
// either engine's rounding breaks its own way. Measured: 21 of 26 cases stop at such a step
// (gaps 0.004-0.34); 5 match all 128 tokens (docs/benchmarks.md, "Real models").
constexpr double kNearTieGap = 0.5;

struct CaseResult {
  std::vector<double> row_errors;
  int greedy_matched = 0;  // leading greedy tokens equal to llama.cpp's
  bool near_tie = false;   // stopped at a token where llama.cpp's top two were within the bound
  std::string divergence;  // why it stopped early, if it did
};

// The prompt in chunks of 64 with every row's logits (the stored rows compared), then greedy
// decoding one token at a time against llama.cpp's 128 tokens. A differing token is accepted only
// where llama.cpp's own top-two gap at that step is within the logit bound (a near-tie, which
// either engine's rounding may break either way); the comparison of that case ends there.
CaseResult RunCase(const Model& model, const ReferenceCase& rc) {
  CaseResult result;
  const int n = static_cast<int>(rc.prompt_tokens.size());
  SequenceRunner runner(model, KvType::kF32, n + 136, 2);
  const int n_vocab = model.config().n_vocab;
  std::vector<float> last_row;
  size_t next_ref = 0;
  for (int start = 0; start < n; start += 64) {
    const int count = std::min(64, n - start);
    auto logits = runner.Append(std::span(rc.prompt_tokens).subspan(start, count), true);
    EXPECT_TRUE(logits.ok()) << logits.message();
    if (!logits.ok()) return result;
    for (; next_ref < rc.prompt_top.size() && rc.prompt_top[next_ref].row < start + count;
         ++next_ref) {
      const int local = rc.prompt_top[next_ref].row - start;
      result.row_errors.push_back(TopRowError(
          logits->subspan(static_cast<size_t>(local) * n_vocab, n_vocab), rc.prompt_top[next_ref]));
    }
    if (start + count == n) {
      const auto row = logits->subspan(static_cast<size_t>(count - 1) * n_vocab, n_vocab);
      last_row.assign(row.begin(), row.end());
    }
  }
  const TopRow* chooser = &rc.prompt_top.back();  // the row that picks greedy[0]
  for (size_t g = 0; g < rc.greedy.size(); ++g) {
    const int32_t ours = ArgMax(last_row);
    if (ours != rc.greedy[g]) {
      const double gap = chooser->top[0].second - chooser->top[1].second;
      result.near_tie = ours == chooser->top[1].first && gap <= kNearTieGap;
      result.divergence = "token " + std::to_string(g) + ": kvserve " + std::to_string(ours) +
                          ", llama.cpp " + std::to_string(rc.greedy[g]) +
                          ", llama.cpp's top-two gap " + std::to_string(gap);
      return result;
    }
    ++result.greedy_matched;
    auto logits = runner.Append(std::span(&rc.greedy[g], 1));
    EXPECT_TRUE(logits.ok()) << logits.message();
    if (!logits.ok()) return result;
    last_row.assign(logits->begin(), logits->end());
    chooser = &rc.gen_top2[g];
  }
  return result;
}

class RealModelReference : public ::testing::TestWithParam<std::string> {};

TEST_P(RealModelReference, TokensLogitsAndGreedyMatchLlamaCpp) {
  const std::string name = GetParam();
  const testing::LoadedModel l = testing::LoadRealModel(name);
  ASSERT_TRUE(l.model && l.tokenizer);
  const std::vector<ReferenceCase> cases = LoadCases(name);
  ASSERT_EQ(cases.size(), 13u);
  const double bound = LogitBound(name);
  std::vector<double> all_errors;
  int near_ties = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const ReferenceCase& rc = cases[i];
    EXPECT_EQ(l.tokenizer->Encode(rc.prompt, /*add_special=*/true, /*parse_special=*/false),
              rc.prompt_tokens)
        << "prompt " << i;
    const CaseResult r = RunCase(*l.model, rc);
    all_errors.insert(all_errors.end(), r.row_errors.begin(), r.row_errors.end());
    const double worst = *std::max_element(r.row_errors.begin(), r.row_errors.end());
    EXPECT_LE(worst, bound) << "prompt " << i;
    if (r.greedy_matched < 128) {
      EXPECT_TRUE(r.near_tie) << "prompt " << i << ": " << r.divergence;
      near_ties += r.near_tie;
    }
    std::printf("%s prompt %2zu: %4zu tokens, logits max %.2e, greedy %3d/128%s%s\n", name.c_str(),
                i, rc.prompt_tokens.size(), worst, r.greedy_matched,
                r.divergence.empty() ? "" : ", stopped at a near-tie: ", r.divergence.c_str());
  }
  std::sort(all_errors.begin(), all_errors.end());
  std::printf("%s: %zu rows, logit error median %.2e, max %.2e (bound %.1e); %d near-ties\n",
              name.c_str(), all_errors.size(), all_errors[all_errors.size() / 2], all_errors.back(),
              bound, near_ties);
}

// One prompt's logits computed as one batch, token by token with the cache, and recomputed
// without the cache at every step: the same bits.
TEST_P(RealModelReference, BatchIncrementalAndNoCacheAreTheSameBits) {
  const std::string name = GetParam();
  const testing::LoadedModel l = testing::LoadRealModel(name);
  ASSERT_TRUE(l.model);
  const std::vector<ReferenceCase> cases = LoadCases(name);
  const std::vector<int32_t>& tokens = cases[7].prompt_tokens;  // digits: 69-70 tokens
  const size_t n_vocab = l.model->config().n_vocab;
  SequenceRunner batch(*l.model, KvType::kF32, 128, 2);
  auto all = batch.Append(tokens, true);
  ASSERT_TRUE(all.ok()) << all.message();
  const std::vector<float> batched(all->begin(), all->end());
  SequenceRunner incremental(*l.model, KvType::kF32, 128, 2);
  SequenceRunner no_cache(*l.model, KvType::kF32, 128, 2);
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto step = incremental.Append(std::span(&tokens[i], 1));
    ASSERT_TRUE(step.ok());
    const std::span<const float> expected(batched.data() + i * n_vocab, n_vocab);
    ASSERT_TRUE(std::equal(step->begin(), step->end(), expected.begin()))
        << "incremental, row " << i;
    auto again = no_cache.AppendRecompute(std::span(&tokens[i], 1));
    ASSERT_TRUE(again.ok());
    ASSERT_TRUE(std::equal(again->begin(), again->end(), expected.begin()))
        << "no-cache, row " << i;
  }
}

// Sixteen requests (the twelve short prompts and four of them again) through the serving engine
// at once give, token for token and logprob for logprob, what each gives alone, and that is the
// plain decode loop's output (support/forward.h); greedy, 32 tokens.
TEST_P(RealModelReference, SixteenAtOnceEqualEachAlone) {
  const std::string name = GetParam();
  const testing::LoadedModel l = testing::LoadRealModel(name);
  ASSERT_TRUE(l.model && l.tokenizer);
  const std::vector<ReferenceCase> cases = LoadCases(name);
  std::vector<Request> requests;
  for (int i = 0; i < 16; ++i) {
    Request r;
    r.prompt = cases[i % 12].prompt_tokens;
    r.max_tokens = 32;
    r.ignore_eos = true;
    r.logprobs = true;
    r.sampling.temperature = 0.0f;
    requests.push_back(std::move(r));
  }
  const EngineOptions options{.n_threads = 2,
                              .n_ctx = 256,
                              .max_num_seqs = 16,
                              .max_batched_tokens = 128,
                              .prefix_caching = false};
  auto run = [&](const std::vector<Request>& batch) {
    auto engine = Engine::Create(*l.model, *l.tokenizer, options);
    EXPECT_TRUE(engine.ok()) << engine.message();
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const Request& r : batch) streams.push_back(*(*engine)->Submit(r));
    std::vector<testing::StreamOutput> out;
    for (auto& s : streams) out.push_back(testing::CollectStream(*s, std::chrono::seconds(300)));
    return out;
  };
  const std::vector<testing::StreamOutput> together = run(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const testing::StreamOutput alone = run({requests[i]})[0];
    EXPECT_EQ(together[i].tokens, alone.tokens) << "request " << i;
    EXPECT_EQ(together[i].logprobs, alone.logprobs) << "request " << i;
    ASSERT_EQ(alone.tokens.size(), 32u);
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    EXPECT_EQ(alone.tokens, testing::ReferenceGenerate(*l.model, *l.tokenizer, requests[i].prompt,
                                                       32, greedy, true, 256))
        << "request " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Models, RealModelReference,
                         ::testing::Values("smollm2-135m", "gemma3-270m"));

}  // namespace
}  // namespace kvserve
