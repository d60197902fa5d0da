// The quantized KV cache end to end (--kv-type q8_0 / q4_0) on the shared models: the cache
// contract holds as for f32 (prefill, incremental decode and no-cache recompute give the same
// bits, whatever the thread count), every kernel table gives the same bits where the weights'
// kernels do, the serving engine's answers do not depend on batching, prefix hits or preemption,
// and a per-group format stores each group in its own type.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/sequence_runner.h"
#include "kernels/cpu/cpu_backend.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "support/cli.h"
#include "support/kernel_tables.h"
#include "support/paths.h"
#include "support/reference.h"
#include "support/reference_runs.h"
#include "support/stream_output.h"
#include "support/test_backend.h"
#include "tokenizer/tokenizer.h"

namespace kvserve {
namespace {

using testing::LoadArchReferenceCase;
using testing::LoadOrDie;
using testing::Mode;
using testing::ModeName;
using testing::ReferenceCase;

constexpr KvType kQuantTypes[] = {KvType::kQ8_0, KvType::kQ4_0};

// Every position's logits of `tokens` in `mode` with the KV cache in `format`.
std::vector<float> Logits(const Model& model, const std::vector<int32_t>& tokens, Mode mode,
                          const KvFormat& format, int n_threads = 2) {
  SequenceRunner runner(model, format, model.config().n_ctx_train, n_threads);
  std::vector<float> out;
  if (mode == Mode::kBatch) {
    auto logits = runner.Append(tokens, true);
    EXPECT_TRUE(logits.ok()) << logits.message();
    if (logits.ok()) out.assign(logits->begin(), logits->end());
    return out;
  }
  for (int32_t token : tokens) {
    auto logits = mode == Mode::kIncremental ? runner.Append(std::span(&token, 1))
                                             : runner.AppendRecompute(std::span(&token, 1));
    EXPECT_TRUE(logits.ok()) << logits.message();
    if (logits.ok()) out.insert(out.end(), logits->begin(), logits->end());
  }
  return out;
}

// The reference prompt, its greedy tokens and 20 more ids: 47 positions, three blocks of 16.
std::vector<int32_t> Tokens(const ReferenceCase& c) {
  std::vector<int32_t> tokens = c.prompt_tokens;
  tokens.insert(tokens.end(), c.greedy_tokens.begin(), c.greedy_tokens.end());
  for (int i = 0; i < 20; ++i) tokens.push_back(3 + (i * 37) % (c.n_vocab - 3));
  return tokens;
}

ReferenceCase CaseFor(const std::string& name) {
  return name == "stories260K-a" ? testing::LoadReferenceCase(name) : LoadArchReferenceCase(name);
}

class KvQuantModes : public ::testing::TestWithParam<std::string> {};

// stories260K (head_dim 8: one short group per head), llama3 (head_dim 64: two full groups),
// gemma2 (sliding-window layers and attention soft-capping).
TEST_P(KvQuantModes, BatchIncrementalAndNoCacheAgreeBitForBit) {
  const ReferenceCase c = CaseFor(GetParam());
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  const std::vector<int32_t> tokens = Tokens(c);
  const std::vector<float> f32 = Logits(*model, tokens, Mode::kBatch, KvType::kF32);
  for (KvType type : kQuantTypes) {
    const std::vector<float> batch = Logits(*model, tokens, Mode::kBatch, type);
    ASSERT_EQ(batch.size(), tokens.size() * c.n_vocab);
    EXPECT_FALSE(batch == f32) << KvTypeName(type) << " rounds nothing?";
    for (Mode mode : {Mode::kIncremental, Mode::kNoCache}) {
      EXPECT_TRUE(Logits(*model, tokens, mode, type) == batch)
          << KvTypeName(type) << " " << ModeName(mode) << " differs from batch";
    }
    EXPECT_TRUE(Logits(*model, tokens, Mode::kBatch, type, 1) == batch)
        << KvTypeName(type) << ": one thread differs from two";
  }
}

INSTANTIATE_TEST_SUITE_P(Models, KvQuantModes,
                         ::testing::Values("stories260K-a", "llama3-f32", "gemma2-f32"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The K-quant matmuls give the same bits on every kernel table (README), so the whole forward pass
// does, and so must the quantized KV's store and attention: scalar, AVX2, AVX-VNNI, AVX-512.
TEST(KvQuant, EveryKernelTableGivesTheSameBits) {
  std::vector<std::string> isas = {"scalar"};
  for (const KernelTable* t : testing::FastTables()) isas.push_back(t->isa);
  if (isas.size() == 1) GTEST_SKIP() << "no SIMD table for this CPU";
  for (const char* name : {"llama3-q4_k_m", "gemma2-q4_k_m"}) {
    const ReferenceCase c = LoadArchReferenceCase(name);
    const std::vector<int32_t> tokens = Tokens(c);
    for (KvType type : kQuantTypes) {
      std::vector<float> want;
      for (const std::string& isa : isas) {
        SCOPED_TRACE(std::string(name) + " " + KvTypeName(type) + " " + isa);
        const CpuBackend backend({.isa = isa});
        ASSERT_STREQ(backend.kernels().isa, isa.c_str());
        auto model = LoadModel(testing::ModelPath(c.model), backend);
        ASSERT_TRUE(model.ok()) << model.message();
        const std::vector<float> got = Logits(**model, tokens, Mode::kIncremental, type);
        if (want.empty()) {
          want = got;
        } else {
          EXPECT_TRUE(got == want) << "differs from " << isas[0];
        }
      }
    }
  }
}

// ---- Through the serving engine ----------------------------------------------------------------

using Output = testing::StreamOutput;

Output Collect(RequestStream& stream) {
  return testing::CollectStream(stream, std::chrono::seconds(60));
}

std::vector<Output> RunAll(Engine& engine, const std::vector<Request>& requests) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : requests) {
    auto stream = engine.Submit(r);
    EXPECT_TRUE(stream.ok()) << stream.message();
    if (stream.ok()) streams.push_back(*stream);
  }
  std::vector<Output> outputs;
  for (auto& stream : streams) outputs.push_back(Collect(*stream));
  return outputs;
}

// Random prompts (BOS first) that share a 20-token start, so the prefix cache is hit, sampled.
std::vector<Request> Requests(const Tokenizer& tok, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> shared = {tok.bos()};
  for (int j = 0; j < 20; ++j) shared.push_back(3 + static_cast<int>(rng() % (tok.n_vocab() - 3)));
  std::vector<Request> requests;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.prompt = shared;
    const int length = 1 + static_cast<int>(rng() % 30);
    for (int j = 0; j < length; ++j) {
      r.prompt.push_back(3 + static_cast<int>(rng() % (tok.n_vocab() - 3)));
    }
    r.max_tokens = 4 + static_cast<int>(rng() % 24);
    r.ignore_eos = true;
    r.logprobs = true;
    r.sampling.temperature = 0.8f;
    r.sampling.seed = 500 + i;
    requests.push_back(r);
  }
  return requests;
}

// Each request alone on a fresh engine without prefix caching is the reference; 16 at once with
// the prefix cache, and 16 at once in a pool too small for all (preemption), give the same tokens
// and log-probabilities, for both quantized types.
TEST(KvQuant, EngineBatchPrefixHitsAndPreemptionChangeNoBit) {
  auto model = LoadOrDie("stories260K.gguf");
  ASSERT_NE(model, nullptr);
  auto tokenizer = Tokenizer::FromGguf(model->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.message();
  const std::vector<Request> requests = Requests(**tokenizer, 16, 3);
  for (KvType type : kQuantTypes) {
    SCOPED_TRACE(KvTypeName(type));
    const EngineOptions base{.n_threads = 2,
                             .n_ctx = 128,
                             .kv_type = type,
                             .block_size = 4,
                             .max_num_seqs = 16,
                             .max_batched_tokens = 64};
    std::vector<Output> alone;
    {
      EngineOptions cold = base;
      cold.prefix_caching = false;
      auto engine = Engine::Create(*model, **tokenizer, cold);
      ASSERT_TRUE(engine.ok()) << engine.message();
      for (const Request& r : requests) alone.push_back(RunAll(**engine, {r})[0]);
    }
    auto together = Engine::Create(*model, **tokenizer, base);
    ASSERT_TRUE(together.ok()) << together.message();
    RunAll(**together, {requests[0]});  // its blocks stay cached: every later prompt hits them
    const std::vector<Output> batched = RunAll(**together, requests);
    EngineOptions tight = base;
    // 20 blocks of 4 tokens: the longest request (51 + 27 tokens) fits, all 16 do not.
    tight.kv_memory_bytes = KvCache::BytesPerBlock(model->kv_spec(), type, 4) * 20;
    auto squeezed = Engine::Create(*model, **tokenizer, tight);
    ASSERT_TRUE(squeezed.ok()) << squeezed.message();
    const std::vector<Output> preempted = RunAll(**squeezed, requests);
    int cached = 0;
    for (size_t i = 0; i < requests.size(); ++i) {
      ASSERT_EQ(static_cast<int>(alone[i].tokens.size()), requests[i].max_tokens);
      EXPECT_EQ(batched[i].tokens, alone[i].tokens) << "request " << i;
      EXPECT_EQ(batched[i].logprobs, alone[i].logprobs) << "request " << i;
      EXPECT_EQ(preempted[i].tokens, alone[i].tokens) << "request " << i;
      EXPECT_EQ(preempted[i].logprobs, alone[i].logprobs) << "request " << i;
      cached += batched[i].usage.cached_tokens;
    }
    EXPECT_GE(cached, 16 * 20) << "the shared start was not served from the cache";
    EXPECT_GT((*squeezed)->Stats().preemptions, 0u);
  }
}

// The engine's greedy run equals SequenceRunner's with the same KV type.
TEST(KvQuant, EngineGreedyMatchesSequenceRunner) {
  const ReferenceCase c = testing::LoadReferenceCase("stories260K-a");
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  auto tokenizer = Tokenizer::FromGguf(model->file());
  ASSERT_TRUE(tokenizer.ok());
  for (KvType type : kQuantTypes) {
    SCOPED_TRACE(KvTypeName(type));
    SequenceRunner runner(*model, type, 128, 2);
    std::vector<int32_t> expected;
    auto logits = runner.Append(c.prompt_tokens);
    ASSERT_TRUE(logits.ok());
    for (int i = 0; i < 60; ++i) {
      const int32_t next =
          static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
      expected.push_back(next);
      logits = runner.Append(std::span(&next, 1));
      ASSERT_TRUE(logits.ok());
    }
    auto engine =
        Engine::Create(*model, **tokenizer, {.n_threads = 2, .n_ctx = 128, .kv_type = type});
    ASSERT_TRUE(engine.ok());
    Request r{.prompt = c.prompt_tokens, .max_tokens = 60, .ignore_eos = true};
    r.sampling.temperature = 0;
    EXPECT_EQ(RunAll(**engine, {r})[0].tokens, expected);
  }
}

// gemma2 declares two KV groups (the global layer, then the sliding-window one; `kvserve info`
// lists them): "q4_0,f16" stores the first in q4_0 and the second in f16, and the modes still
// agree.
TEST(KvQuant, PerGroupFormat) {
  const ReferenceCase c = LoadArchReferenceCase("gemma2-f32");
  auto model = LoadOrDie(c.model);
  ASSERT_NE(model, nullptr);
  const KvSpec& spec = model->kv_spec();
  ASSERT_EQ(spec.groups.size(), 2u);
  const KvFormat format = *KvFormat::Parse("q4_0,f16");
  ASSERT_TRUE(spec.CheckFormat(format).ok());
  EXPECT_FALSE(spec.CheckFormat(*KvFormat::Parse("q4_0,f16,f32")).ok());
  KvCache cache(spec, format, 16, 4, model->backend().allocator());
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    for (int layer : spec.groups[g].layers) {
      EXPECT_EQ(cache.layer(layer).type, g == 0 ? KvType::kQ4_0 : KvType::kF16) << layer;
    }
  }
  EXPECT_EQ(spec.BytesPerToken(format),
            2 * spec.groups[0].layers.size() * spec.groups[0].n_kv_heads *
                    KvHeadBytes(KvType::kQ4_0, 64) +
                2 * spec.groups[1].layers.size() * spec.groups[1].n_kv_heads *
                    KvHeadBytes(KvType::kF16, 64));
  const std::vector<int32_t> tokens = Tokens(c);
  const std::vector<float> batch = Logits(*model, tokens, Mode::kBatch, format);
  EXPECT_TRUE(Logits(*model, tokens, Mode::kNoCache, format) == batch);
  EXPECT_FALSE(batch == Logits(*model, tokens, Mode::kBatch, KvType::kQ4_0));
  EXPECT_FALSE(batch == Logits(*model, tokens, Mode::kBatch, KvType::kF16));
}

// ---- The command line ---------------------------------------------------------------------------

TEST(KvQuantCli, InfoAndRunTakeTheQuantizedTypes) {
  const std::string stories = " " + testing::ModelPath("stories260K.gguf");
  std::string out, err;
  ASSERT_EQ(testing::RunKvserve("info" + stories, &out, &err), 0) << err;
  // 2 x 5 layers x 4 kv heads x (8 codes + one 2-byte scale) = 400; 4-bit: 4 + 2 bytes a head.
  EXPECT_NE(out.find("KV cache q8_0: 400 bytes/token"), std::string::npos) << out;
  EXPECT_NE(out.find("0.625 x f16"), std::string::npos) << out;
  EXPECT_NE(out.find("KV cache q4_0: 240 bytes/token"), std::string::npos) << out;
  EXPECT_NE(out.find("(lossy)"), std::string::npos) << out;
  EXPECT_NE(out.find("KV group 0:    full causal, layers 0-4, 4 kv heads x 8"), std::string::npos)
      << out;
  std::string cached, uncached;
  ASSERT_EQ(testing::RunKvserve("run -m" + stories + " -p 'Once upon a time' -n 24 --temp 0 " +
                                    "--kv-type q8_0 --output-format json",
                                &cached, &err),
            0)
      << err;
  ASSERT_EQ(testing::RunKvserve("run -m" + stories + " -p 'Once upon a time' -n 24 --temp 0 " +
                                    "--kv-type q8_0 --no-cache --output-format json",
                                &uncached, &err),
            0)
      << err;
  const auto tokens = [](const std::string& json) { return json.substr(json.find("\"tokens\"")); };
  EXPECT_EQ(tokens(cached), tokens(uncached));
  // One type per group: stories260K has one group.
  EXPECT_NE(testing::RunKvserve("run -m" + stories + " -p hi -n 2 --kv-type q8_0,f16", &out, &err),
            0);
  EXPECT_NE(err.find("flag --kv-type: KV type 'q8_0,f16' names 2 types, but the model has 1 KV "
                     "layer group"),
            std::string::npos)
      << err;
  EXPECT_NE(testing::RunKvserve("run -m" + stories + " -p hi -n 2 --kv-type q3_0", &out, &err), 0);
  EXPECT_NE(err.find("'q3_0' is not one of f32, f16, bf16, q8_0, q4_0"), std::string::npos) << err;
}

}  // namespace
}  // namespace kvserve
